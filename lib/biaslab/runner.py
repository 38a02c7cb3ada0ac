"""Execute the notebooks headless with papermill: ``biaslab reproduce``.

For each notebook (and variant, see :data:`biaslab.profiles.NOTEBOOKS`) the runner

1. validates the parameters against the notebook's ``parameters`` cell (:mod:`biaslab.parameters`: unknown names,
   types, sizes, model specs) before any work;
2. runs it into a fresh staging folder ``<out>/<notebook>/.<name>.staging-<pid>/``;
3. on success makes the executed notebook portable (repository-relative paths, no papermill timestamps), renders HTML
   (not committed), writes ``MANIFEST.json`` (git commit, parameters, data sha256s, model fingerprints, package
   versions, wall time) and only then replaces ``<out>/<notebook>[/<variant>]/`` with the staging folder;
4. on failure leaves the last good outputs untouched and writes ``MANIFEST.failed.json`` (this run's parameters,
   error and whatever provenance *this* run recorded) and ``<notebook>.failed.ipynb`` beside them.

A killed run leaves only its staging folder, removed by the next run. ``reproduce`` writes into a scratch folder
(:data:`biaslab.paths.SCRATCH_DIR`) unless given another folder or ``publish=True`` (``outputs/``, which also rewrites
``outputs/CATALOGUE.md`` and the report's front page ``outputs/index.html``, :mod:`biaslab.report_index`).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import parameters, paths, profiles
from .outputs import atomic_write_text, package_versions

log = logging.getLogger(__name__)

#: Notebook and cell metadata papermill and nbclient fill with wall-clock times (stripped for stable reruns).
_VOLATILE = ("start_time", "end_time", "duration")


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
        raise KeyError(f"no notebook matches {only}; pass --only one of {sorted(profiles.NOTEBOOKS)} "
                       "(or a prefix such as 01, or 01_multifactor/bbq)")
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


#: The kernel logs only errors: its start-up warning about unencrypted localhost TCP (the kernel only listens on
#: 127.0.0.1) otherwise precedes every notebook.
_KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]


def _portable(text: str, staging: Path, final: Path) -> str:
    """Replace machine-specific paths: the staging folder by the final one (relative to ``notebooks/``, as the
    notebooks' own defaults are), the repository root by repository-relative paths, the home folder by ``~``."""
    root = str(paths.ROOT)
    if final.is_relative_to(paths.ROOT):
        text = text.replace(str(staging), os.path.relpath(final, paths.NOTEBOOKS_DIR))
    else:
        text = text.replace(str(staging), str(final))
    text = text.replace(root + os.sep, "").replace(root, ".")
    return text.replace(str(Path.home()), "~")


def slowest_cells(nb, n: int = 3) -> str:
    """``"cell 12 (31 s: scored = ...), ..."``: the ``n`` code cells that took longest, from papermill's durations (read
    before :func:`clean_executed` strips them), so a reader of the log sees where a run spends its time."""
    timed = [(c.metadata.get("papermill", {}).get("duration") or 0.0, i, c.source.strip().splitlines()[0][:40])
             for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()]
    return ", ".join(f"cell {i} ({d:.0f} s: {first})" for d, i, first in sorted(timed, reverse=True)[:n] if d >= 1)


def clean_executed(path: Path, staging: Path, final: Path) -> str:
    """Make an executed notebook stable across identical reruns: no timestamps, no widget state, portable paths.
    Returns :func:`slowest_cells` of the run."""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    slow = slowest_cells(nb)
    for k in _VOLATILE:
        nb.metadata.get("papermill", {}).pop(k, None)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if "injected-parameters" in cell.metadata.get("tags", ()):
            cell.id = "injected-parameters"          # papermill gives it a random id
        cell.metadata.pop("execution", None)
        for k in _VOLATILE:
            cell.metadata.get("papermill", {}).pop(k, None)
        if "outputs" in cell:           # progress-bar widgets (e.g. transformers' "Loading weights") say nothing
            cell.outputs = [o for o in cell.outputs
                            if "application/vnd.jupyter.widget-view+json" not in o.get("data", {})]
    text = _portable(nbformat.writes(nb), staging, final)
    atomic_write_text(path, text if text.endswith("\n") else text + "\n")
    return slow


def _sweep_stale(final: Path) -> None:
    """Remove staging (and swapped-out) folders of runs that are no longer alive (killed runs)."""
    for old in [*final.parent.glob(f".{final.name}.staging-*"), *final.parent.glob(f".{final.name}.old-*")]:
        try:
            pid = int(old.name.rsplit("-", 1)[1])
            os.kill(pid, 0)
            alive = pid != os.getpid()
        except (ValueError, ProcessLookupError):
            alive = False
        except PermissionError:
            alive = True
        if not alive:
            shutil.rmtree(old, ignore_errors=True)


def _swap_in(staging: Path, final: Path) -> None:
    """Replace ``final`` by ``staging`` with two renames (the old folder is removed afterwards)."""
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        os.replace(final, old)
    os.replace(staging, final)
    shutil.rmtree(old, ignore_errors=True)


def resolve_params(notebook: str, variant: str, profile: str, overrides: dict, check_models: bool = True) -> dict:
    """The profile's parameters with ``overrides`` applied, validated against the notebook (raises ParameterError)."""
    params = profiles.params(profile, notebook, variant)
    params.update(overrides)
    parameters.validate(notebook, params, resolve_models=check_models)
    return params


def run_one(notebook: str, variant: str, profile: str, overrides: dict, outputs_dir: Path,
            html: bool = True, progress: bool = False) -> dict:
    import papermill as pm

    src = paths.NOTEBOOKS_DIR / f"{notebook}.ipynb"
    if not src.exists():
        raise FileNotFoundError(f"notebook {src} does not exist")
    final = ((outputs_dir / notebook / variant) if variant else (outputs_dir / notebook)).resolve()
    params = resolve_params(notebook, variant, profile, overrides, check_models=False)
    final.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(final)
    staging = final.parent / f".{final.name}.staging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    params["output_dir"] = str(staging)
    executed = staging / f"{notebook}.ipynb"
    manifest = {
        "notebook": notebook, "variant": variant or None, "profile": profile, "parameters": params,
        "git": git_state(), "python": sys.version.split()[0], "platform": platform.platform(),
        "packages": package_versions(),
    }
    t0 = time.perf_counter()
    label = f"{notebook}/{variant}" if variant else notebook
    log.info("running %s (profile %s) -> %s", label, profile, final)
    interrupted: BaseException | None = None
    try:
        pm.execute_notebook(str(src), str(executed), parameters=params, cwd=str(paths.NOTEBOOKS_DIR),
                            kernel_name="python3", language="python", progress_bar=progress, report_mode=False,
                            log_output=False, extra_arguments=_KERNEL_ARGS)
        manifest["status"] = "ok"
    except BaseException as exc:  # recorded; the caller decides the exit code; an interrupt is re-raised
        manifest["status"] = "failed"
        manifest["error"] = "".join(traceback.format_exception_only(type(exc), exc))[-4000:]
        log.error("%s failed: %s", label, manifest["error"].strip().splitlines()[-1] if manifest["error"] else exc)
        if not isinstance(exc, Exception):
            interrupted = exc
    manifest["wall_time_s"] = round(time.perf_counter() - t0, 1)
    prov = staging / "provenance.json"       # this run's own record only
    p = json.loads(prov.read_text()) if prov.exists() else {}
    manifest["models"], manifest["data"], manifest["notes"] = p.get("models", {}), p.get("data", {}), p.get("notes", [])
    prov.unlink(missing_ok=True)
    text = lambda m: _portable(json.dumps(m, indent=2, default=str), staging, final) + "\n"   # noqa: E731
    try:
        if manifest["status"] == "ok":
            slow = clean_executed(executed, staging, final)
            if slow:
                log.info("%s: slowest cells: %s", label, slow)
            atomic_write_text(staging / "MANIFEST.json", text(manifest))
            if html:        # the reader's report (biaslab.report), with the manifest's provenance in its footer
                try:
                    from . import report
                    report.render(executed)
                except Exception as exc:  # a report is a convenience; never fail a run for it
                    log.warning("HTML report of %s failed: %s", executed, exc)
            _swap_in(staging, final)
        else:
            final.mkdir(parents=True, exist_ok=True)
            if executed.exists():
                clean_executed(executed, staging, final)
                os.replace(executed, final / f"{notebook}.failed.ipynb")
            manifest["last_good_outputs"] = ("kept untouched" if (final / "MANIFEST.json").exists()
                                             else "none (no earlier successful run here)")
            atomic_write_text(final / "MANIFEST.failed.json", text(manifest))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("%s: %s in %.0f s", label, manifest["status"], manifest["wall_time_s"])
    if interrupted is not None:
        raise interrupted
    return manifest


def lanes(chosen: list[tuple[str, str]]) -> tuple[list[list[tuple[str, str]]], list[tuple[str, str]]]:
    """Split the selected runs into lanes that may run side by side, and the runs that must wait for all of them.

    A notebook-1 variant that shares its scores with another notebook (``profiles.SHARES_SCORES_WITH``) runs in that
    notebook's lane, before it, so the second reads the cached scores instead of computing them at the same time;
    the heaviest lanes (``profiles.LANE_ORDER``) come first; notebooks that read the others' tables
    (``profiles.READS_OUTPUTS_ONLY``) are returned separately, to run last."""
    groups: dict[str, list[tuple[str, str]]] = {}
    last = []
    for nb, v in chosen:
        if nb in profiles.READS_OUTPUTS_ONLY:
            last.append((nb, v))
            continue
        label = nb + (f"/{v}" if v else "")
        groups.setdefault(profiles.SHARES_SCORES_WITH.get(label, label), []).append((nb, v))
    rank = {k: i for i, k in enumerate(profiles.LANE_ORDER)}
    order = sorted(groups, key=lambda k: rank.get(k, len(rank)))       # stable: the others keep their order
    return [groups[k] for k in order], last


def reproduce(profile: str = "default", only: list[str] | None = None, overrides: dict | None = None,
              outputs_dir: Path | None = None, html: bool = True, publish: bool = False,
              progress: bool | None = None, dry_run: bool = False, jobs: int = 1) -> int:
    """Run the selected notebooks; returns a process exit code (0 when all succeeded).

    Every selected notebook's parameters are validated (and model specs resolved) before the first one starts
    (:class:`biaslab.parameters.ParameterError`). ``outputs_dir``: where to write (default: ``outputs/`` when
    ``publish``, else the scratch folder). ``dry_run``: validate and print the plan, run nothing. ``jobs > 1`` runs
    that many notebooks at a time (:func:`lanes`), each kernel with ``cpu_count // jobs`` torch threads unless
    ``OMP_NUM_THREADS`` is set: on two cores two single-threaded kernels do more than one with two threads, and the
    statistics of a cached rerun are single-threaded Python.
    """
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    if outputs_dir is None:
        outputs_dir = paths.OUTPUTS_DIR if publish else paths.SCRATCH_DIR
    outputs_dir = Path(outputs_dir)
    overrides = overrides or {}
    chosen = select(only)
    for nb, v in chosen:
        resolve_params(nb, v, profile, overrides)
    if dry_run:
        for nb, v in chosen:
            print(f"would run {nb + (f'/{v}' if v else ''):32s} -> {outputs_dir / nb / v}")
        return 0
    if progress is None:
        progress = sys.stderr.isatty()
    finished: dict[tuple[str, str], dict] = {}
    started = itertools.count(1)
    say = threading.Lock()

    def run(nb: str, v: str) -> None:
        label = nb + (f"/{v}" if v else "")
        with say:
            i = next(started)
            print(f"[{i}/{len(chosen)}] {label} (profile {profile}) ...", flush=True)
        r = run_one(nb, v, profile, overrides, outputs_dir, html=html, progress=progress and jobs == 1)
        with say:
            print(f"[{i}/{len(chosen)}] {label}: {r['status']} in {r['wall_time_s']:.0f} s", flush=True)
        finished[(nb, v)] = r

    parallel, last = lanes(chosen) if jobs > 1 else ([chosen], [])
    threads = os.environ.get("OMP_NUM_THREADS")
    if jobs > 1 and threads is None:
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // jobs))   # read by each new kernel
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for f in [pool.submit(lambda lane=lane: [run(nb, v) for nb, v in lane]) for lane in parallel]:
                f.result()
        for nb, v in last:
            run(nb, v)
    finally:
        if jobs > 1 and threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
    results = [finished[k] for k in chosen if k in finished]
    published = outputs_dir.resolve() == paths.OUTPUTS_DIR.resolve()
    if published and publish:
        from . import catalogue, summary
        catalogue.write()
        summary.write(outputs_dir)          # outputs/SUMMARY.md and the README's headline block (issue 18)
    if html and (publish or not published):      # the front page over every run in that folder (scratch/ too)
        from . import report_index
        print(f"reports: {report_index.write(outputs_dir)}")
    failed = [r for r in results if r["status"] != "ok"]
    for r in results:
        label = r["notebook"] + (f"/{r['variant']}" if r["variant"] else "")
        print(f"{r['status']:6s} {label:32s} {r['wall_time_s']:8.1f} s")
    if not publish:
        print(f"outputs in {outputs_dir} (pass --publish to write into {paths.OUTPUTS_DIR})")
    return 1 if failed else 0
