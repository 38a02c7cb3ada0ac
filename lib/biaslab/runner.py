"""Execute the notebooks headless with papermill: ``biaslab reproduce``.

For each notebook (and variant, see :data:`biaslab.profiles.NOTEBOOKS`) the runner writes into
``outputs/<notebook>[/<variant>]/``: the executed notebook, an HTML render (not committed) and ``MANIFEST.json``
(git commit, parameters, data sha256s, model fingerprints, package versions, wall time); writing into ``outputs/``
it also refreshes the catalogue and the front page ``outputs/index.html`` (:mod:`biaslab.report_index`). The
notebook itself writes its ``tables/`` and ``figures/`` there through :class:`biaslab.outputs.OutputDir`.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

from . import paths, profiles
from .outputs import atomic_write_text, package_versions

log = logging.getLogger(__name__)


def parse_overrides(items: list[str]) -> dict:
    """``["models=[\"gpt2\"]", "max_prompts=50", "device=cuda"]`` -> dict; values parsed as JSON when possible."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"parameter {item!r} is not KEY=VALUE (e.g. -p max_prompts=100)")
        key, value = item.split("=", 1)
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def select(only: list[str] | None) -> list[tuple[str, str]]:
    """(notebook, variant) pairs matching ``only`` (full names, prefixes such as ``01``, or ``01_multifactor/bbq``)."""
    pairs = [(nb, v) for nb, variants in profiles.NOTEBOOKS.items() for v in variants]
    if not only:
        return pairs
    chosen = []
    for nb, v in pairs:
        label = f"{nb}/{v}" if v else nb
        if any(label == o or nb == o or nb.startswith(o) or label.startswith(o) for o in only):
            chosen.append((nb, v))
    if not chosen:
        raise KeyError(f"no notebook matches {only}; notebooks are {sorted(profiles.NOTEBOOKS)}")
    return chosen


def git_state() -> dict:
    def run(*args):
        try:
            return subprocess.run(["git", *args], cwd=paths.ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    return {"commit": run("rev-parse", "HEAD") or None,
            "dirty": bool(run("status", "--porcelain", "--", "lib", "notebooks", "data"))}


def _html(executed: Path) -> None:
    import nbconvert
    import nbformat
    exporter = nbconvert.HTMLExporter()
    body, _ = exporter.from_notebook_node(nbformat.read(executed, as_version=4))
    atomic_write_text(executed.with_suffix(".html"), body)


def run_one(notebook: str, variant: str, profile: str, overrides: dict, outputs_dir: Path,
            html: bool = True) -> dict:
    import papermill as pm

    src = paths.NOTEBOOKS_DIR / f"{notebook}.ipynb"
    if not src.exists():
        raise FileNotFoundError(f"notebook {src} does not exist")
    out_dir = (outputs_dir / notebook / variant) if variant else (outputs_dir / notebook)
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    params = profiles.params(profile, notebook, variant)
    params.update(overrides)
    params["output_dir"] = str(out_dir)
    executed = out_dir / f"{notebook}.ipynb"
    manifest = {
        "notebook": notebook, "variant": variant or None, "profile": profile, "parameters": params,
        "git": git_state(), "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0], "platform": platform.platform(), "packages": package_versions(),
    }
    t0 = time.perf_counter()
    label = f"{notebook}/{variant}" if variant else notebook
    log.info("running %s (profile %s) -> %s", label, profile, out_dir)
    try:
        pm.execute_notebook(str(src), str(executed), parameters=params, cwd=str(paths.NOTEBOOKS_DIR),
                            kernel_name="python3", language="python", progress_bar=False, report_mode=False)
        manifest["status"] = "ok"
    except Exception as exc:  # the manifest records the failure; the caller decides the exit code
        manifest["status"] = "failed"
        manifest["error"] = "".join(traceback.format_exception_only(type(exc), exc))[-4000:]
        log.error("%s failed: %s", label, manifest["error"])
    manifest["wall_time_s"] = round(time.perf_counter() - t0, 1)
    prov = out_dir / "provenance.json"
    if prov.exists():
        p = json.loads(prov.read_text())
        manifest["models"], manifest["data"], manifest["notes"] = p.get("models"), p.get("data"), p.get("notes")
    if html and executed.exists():
        try:
            _html(executed)
        except Exception as exc:  # an HTML render is a convenience; never fail a run for it
            log.warning("HTML render of %s failed: %s", executed, exc)
    atomic_write_text(out_dir / "MANIFEST.json", json.dumps(manifest, indent=2, default=str) + "\n")
    log.info("%s: %s in %.0f s", label, manifest["status"], manifest["wall_time_s"])
    return manifest


def reproduce(profile: str = "default", only: list[str] | None = None, overrides: dict | None = None,
              outputs_dir: Path | None = None, html: bool = True) -> int:
    """Run the selected notebooks; returns a process exit code (0 when all succeeded)."""
    outputs_dir = Path(outputs_dir or paths.OUTPUTS_DIR)
    results = [run_one(nb, v, profile, overrides or {}, outputs_dir, html=html) for nb, v in select(only)]
    if outputs_dir.resolve() == paths.OUTPUTS_DIR.resolve():
        from . import catalogue, report_index
        catalogue.write()
        report_index.write(outputs_dir)
    failed = [r for r in results if r["status"] != "ok"]
    for r in results:
        label = r["notebook"] + (f"/{r['variant']}" if r["variant"] else "")
        print(f"{r['status']:6s} {label:32s} {r['wall_time_s']:8.1f} s")
    return 1 if failed else 0
