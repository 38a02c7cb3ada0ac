"""Execute the notebooks headless with papermill: ``biaslab reproduce`` (docs/reliability.md).

Per notebook (and variant, :data:`.profiles.NOTEBOOKS`): validate the parameters (:mod:`.parameters`) and settings
(:mod:`.preflight`) before any work; take the folder's lock and run into a fresh staging folder; on success make the
executed notebook portable, render HTML, write ``MANIFEST.json`` (:mod:`biaslab.files.integrity`) and only then swap it
in (:mod:`.publish`); on failure keep the last good outputs and write ``MANIFEST.failed.json`` and
``<notebook>.failed.ipynb`` beside them. SIGINT/SIGTERM stop every lane and kernel (:mod:`.stopping`; exit code 128 +
the signal). Warnings that change what a run means are MANIFEST notes.

Runs go to :data:`biaslab.paths.SCRATCH_DIR` unless given a folder or ``publish=True`` (``outputs/``, also the catalogue
and ``outputs/index.html``); ``served=True`` runs notebooks 3 and 4 against the embedded SmolLM2 served by llama.cpp
(:mod:`biaslab.models.local_server`) into ``<outputs>/served/``. At the end every regenerated run is compared with the
committed one (:mod:`.regenerated`); ``check=True`` exits 3 when a verdict changed, appeared or disappeared, or a run
could not be compared (no committed run, another profile).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from .. import benchmarks, paths, plan as plan_file
from ..files import integrity, storage
from . import parameters, preflight, profiles, publish, regenerated, stopping
from .publish import last_good, staging_folder, swap_in, sweep_stale
from ..report.outputs import atomic_write_text, package_versions
from ..files.redact import redact

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
    if only is None:
        return pairs
    if not only or any(not str(o).strip() for o in only):
        raise ValueError(f"--only got an empty name ({only!r}); name notebooks such as 03 or 01_multifactor/bbq, or "
                         "leave --only out to run them all")
    def matches(o, nb, v):                      # the name, a prefix of the notebook or of notebook/variant
        return (f"{nb}/{v}" if v else nb).startswith(o)
    for o in only:
        if not any(matches(o, nb, v) for nb, v in pairs):
            nb, _, v = str(o).partition("/")
            raise KeyError(f"no notebook matches {o!r}; " + (
                f"no registered benchmark {v!r} has a notebook-1 plan (registered: {', '.join(profiles.NOTEBOOKS[nb])}"
                "). A benchmark from outside the library: pass --benchmark-module PATH_OR_MODULE, or install it with "
                "an entry point of group biaslab.benchmarks" if nb in profiles.NOTEBOOKS else
                f"pass --only one of {sorted(profiles.NOTEBOOKS)} (or a prefix such as 01, or 01_multifactor/bbq)"))
    return [(nb, v) for nb, v in pairs if any(matches(o, nb, v) for o in only)]


def _sweep_others(outputs_dir: Path, chosen: list[tuple[str, str]]) -> None:
    """Restore what interrupted publishes left in the run folders this run does *not* rerun (a chosen folder is
    swept by its own run, which records it in its MANIFEST): a reader of notebook 5, or a run ``--only 05``, must
    find the last good outputs of notebooks 1-4, not a missing folder beside a ``.old-<id>`` one."""
    for nb, v in select(None):
        final = outputs_dir / nb / v                # v "": the notebook's own folder
        if (nb, v) not in chosen and final.parent.is_dir():
            for msg in sweep_stale(final):
                print(f"note: {msg}", flush=True)


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


#: where this runner imports biaslab from (the folder holding the package)
_LIB = Path(__file__).resolve().parents[2]


class KernelManager(stopping.TrackedKernelManager):
    """The kernel every notebook runs in: this runner's own interpreter, importing this runner's ``biaslab`` (its
    folder first on ``PYTHONPATH``), whatever kernelspec named ``python3`` the user's Jupyter folders hold (one
    pointing at another checkout would otherwise compute every table with that library under this commit's name).
    ``record`` (a class attribute, one dict per run) keeps the kernel's process, for its exit status."""

    record: dict = {}

    @property
    def kernel_spec(self):
        from jupyter_client.kernelspec import KernelSpec
        if self._kernel_spec is None:
            roots = [p["root"] for p in benchmarks.PLUGINS.values()        # where --benchmark-module ones import
                     if p["how"] == "--benchmark-module"]                  # from (entry points: installed)
            path = os.pathsep.join(dict.fromkeys(p for p in (str(_LIB), *roots, os.environ.get("PYTHONPATH", ""))
                                                 if p))
            self._kernel_spec = KernelSpec(
                argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], language="python",
                display_name=f"Python 3 ({sys.executable})", env={"PYTHONPATH": path}, resource_dir="")
        return self._kernel_spec

    async def start_kernel(self, **kw):
        await super().start_kernel(**kw)
        self.record["process"] = getattr(self.provisioner, "process", None)


def _kernel_mismatch(kernel: dict | None) -> str | None:
    """The kernel's interpreter and biaslab folder (recorded by :class:`biaslab.report.outputs.OutputDir`) against this
    runner's; a sentence when they differ."""
    if not kernel:
        return None
    ours = {"python": os.path.realpath(sys.executable), "biaslab": str(_LIB / "biaslab")}
    theirs = {k: os.path.realpath(str(kernel.get(k, ""))) for k in ours}
    if theirs == ours:
        return None
    return (f"the notebook's kernel ran {theirs['python']} with biaslab from {theirs['biaslab']}, but this runner is "
            f"{ours['python']} with biaslab from {ours['biaslab']}: its tables are not this checkout's. Fix: run "
            "the kernel from this checkout's environment (PYTHONPATH, a .pth file or sitecustomize may point "
            "elsewhere)")


#: cgroup v1 writes "no limit" as a page-rounded 2**63 - 1; any value this large means no limit
_NO_LIMIT = 2 ** 62


def memory_limit(proc: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> str | None:
    """This process's memory limit (which a kernel it starts shares), or None: cgroup v2 ``memory.max``, or cgroup
    v1 ``memory.limit_in_bytes`` of the ``memory`` controller, in the process's own cgroup or (inside a container,
    whose cgroup path is not mounted) at the root of the controller's mount."""
    try:
        lines = [ln.split(":", 2) for ln in proc.read_text().splitlines() if ln.count(":") >= 2]
    except OSError:
        return None
    places = []
    for _, controllers, rel in lines:
        if controllers == "":                                      # v2: "0::/path"
            places += [root / rel.lstrip("/") / "memory.max", root / "memory.max"]
        elif "memory" in controllers.split(","):                   # v1: "4:memory:/path"
            mount = root / controllers
            places += [mount / rel.lstrip("/") / "memory.limit_in_bytes", mount / "memory.limit_in_bytes"]
    for f in places:
        try:
            value = f.read_text().strip()
        except OSError:
            continue
        if value == "max" or (value.isdigit() and int(value) >= _NO_LIMIT):
            return None
        if value.isdigit():
            return f"{storage.human_size(int(value))} (cgroup {f.name}, {f})"
    return None


def _kernel_death(executed: Path, record: dict) -> str:
    """"the kernel died while running cell N (`first line`): killed by SIGKILL ..." with the memory limit when the
    kernel was killed the way the out-of-memory killer kills."""
    import nbformat
    cell = "before running any cell"
    try:
        nb = nbformat.read(executed, as_version=4)
        ran = [(i, c) for i, c in enumerate(nb.cells)
               if c.cell_type == "code" and c.metadata.get("papermill", {}).get("start_time")]
        if ran:
            i, c = ran[-1]
            first = (c.source.strip().splitlines() or [""])[0][:80]
            cell = f"while running cell {i} (`{first}`)"
    except (OSError, ValueError):
        pass
    proc = record.get("process")
    rc = proc.poll() if proc is not None else None
    how = (f": killed by {signal.Signals(-rc).name} (signal {-rc})" if rc is not None and rc < 0
           else f": exit status {rc}" if rc is not None else "")
    text = f"the notebook's kernel died {cell}{how}."
    if rc == -signal.SIGKILL:
        limit = memory_limit()
        text += (" SIGKILL is what the out-of-memory killer sends: "
                 + (f"the memory limit here is {limit}." if limit else "no memory limit was found for this process "
                    "(the machine's memory may have run out).")
                 + " Fix: smaller sizes (-p max_pairs=..., max_prompts=...), fewer --jobs, or more memory.")
    return text


#: the file name ipykernel gives a cell's code (``/tmp/ipykernel_9430/1302693127.py``), seen in warnings' locations
_CELL_FILE = re.compile(r"ipykernel_\d+[/\\]\d+\.py")
#: a character of the folder path before it (the path ends at white space, a quote or a backslash)
_PATH_CHARS = frozenset(" \t\n\r\f\v\"'\\")


def _replace_cell_files(text: str) -> str:
    """``text`` with every ipykernel cell file, and the folder path in front of it, replaced by ``<cell>``.

    Linear in ``len(text)``: the regex finds the file name alone, and the folder is found by walking back from it
    (a regex with the folder as an optional prefix retries at every character of a long base64 image: quadratic)."""
    parts, last = [], 0
    for m in _CELL_FILE.finditer(text):
        start = m.start()
        if start > last and text[start - 1] in "/\\":
            start -= 1
            while start > last and text[start - 1] not in _PATH_CHARS:
                start -= 1
        parts += [text[last:start], "<cell>"]
        last = m.end()
    parts.append(text[last:])
    return "".join(parts)


def _portable(text: str, staging: Path, final: Path) -> str:
    """Replace machine-specific paths: the staging folder by the final one (relative to ``notebooks/``, as the
    notebooks' own defaults are), the cache folder by ``$BIASLAB_CACHE``, the repository root by repository-relative
    paths, the home folder by ``~`` (the most specific first), and ipykernel's temporary cell files by ``<cell>``."""
    root = str(paths.ROOT)
    shown = os.path.relpath(final, paths.NOTEBOOKS_DIR) if final.is_relative_to(paths.ROOT) else str(final)
    text = text.replace(str(staging), shown)
    swaps = [(str(paths.CACHE_DIR), "$BIASLAB_CACHE"), (root + os.sep, ""), (root, "."), (str(Path.home()), "~")]
    for old, new in sorted(swaps, key=lambda s: -len(s[0])):
        if len(old) > 1:
            text = text.replace(old, new)
    return _replace_cell_files(text)


#: output files besides the executed notebook whose text is made portable before they are hashed
_TEXT_OUTPUTS = (".csv", ".md", ".txt", ".tsv", ".json", ".tex")


def _portable_tables(staging: Path, final: Path) -> None:
    """Tables and text files a notebook wrote: machine paths made portable as in the executed notebook."""
    for f in staging.rglob("*"):
        if f.suffix in _TEXT_OUTPUTS and f.is_file() and f.name != integrity.MANIFEST:
            try:
                text = f.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            new = _portable(text, staging, final)
            if new != text:
                atomic_write_text(f, new)


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
    text = redact(_portable(nbformat.writes(nb), staging, final))
    atomic_write_text(path, text if text.endswith("\n") else text + "\n")
    return slow


def resolve_params(notebook: str, variant: str, profile: str, overrides: dict, check_models: bool = True,
                   served: bool = False) -> dict:
    """The profile's parameters with ``overrides`` applied, validated against the notebook (raises ParameterError)."""
    params = profiles.params(profile, notebook, variant, served=served)
    label = f"{notebook}/{variant}" if variant else notebook
    for k, v in profiles.NOTEBOOKS[notebook][variant].items():      # what names the variant's folder
        if k in overrides and overrides[k] != v:
            raise parameters.ParameterError(
                f"-p {k}={overrides[k]} would run {label} on {overrides[k]!r} and file it under {label}, with "
                f"{v}'s sizes; drop -p {k}=... and run --only {notebook}/{overrides[k]}")
    params.update(overrides)
    if benchmarks.PLUGINS and "benchmark_modules" in parameters.defaults(notebook):     # the kernel loads them too
        mods = [m for m, p in benchmarks.PLUGINS.items() if p["how"] == "--benchmark-module"]
        given = parameters.as_list(params.get("benchmark_modules")) or []
        params["benchmark_modules"] = list(dict.fromkeys(given + mods))
    if params.get("analysis_plan") is not None:     # resolved here, relative to where the command ran: the kernel
        params["analysis_plan"] = str(plan_file.resolve(params["analysis_plan"]))      # runs in notebooks/
    parameters.validate(notebook, params, resolve_models=check_models)
    return params


#: ANSI colour codes (IPython's tracebacks carry them)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _error_line(exc: BaseException) -> str:
    """The exception's own last line, ``KeyError: 'x'`` (a notebook's error by the name and value papermill reports),
    on one line: what the terminal's ``error:`` line shows."""
    name, value = getattr(exc, "ename", None), getattr(exc, "evalue", None)
    if not name:
        name, value = type(exc).__name__, str(exc)
    line = " ".join(_ANSI.sub("", f"{name}: {value}" if value else str(name)).split())
    return redact(line if len(line) <= 500 else line[:500] + "...")


def _error_text(exc: BaseException) -> str:
    """The error line, then the end of the full text (a traceback for a notebook's error), cut at a line start."""
    text = redact("".join(traceback.format_exception_only(type(exc), exc))).strip()
    if len(text) > 4000:
        text = text[-4000:].split("\n", 1)[-1]
    return _error_line(exc) + "\n" + text


def run_one(notebook: str, variant: str, profile: str, overrides: dict, outputs_dir: Path,
            html: bool = True, progress: bool = False, served: bool = False) -> dict:
    """Run one notebook into a staging folder and publish it (see the module docstring); returns its manifest."""
    import papermill as pm

    src = paths.NOTEBOOKS_DIR / f"{notebook}.ipynb"
    if not src.exists():
        raise FileNotFoundError(f"notebook {src} does not exist")
    final = ((outputs_dir / notebook / variant) if variant else (outputs_dir / notebook)).resolve()
    params = resolve_params(notebook, variant, profile, overrides, check_models=False, served=served)
    label = f"{notebook}/{variant}" if variant else notebook
    manifest = {
        "notebook": notebook, "variant": variant or None, "profile": profile, "parameters": params,
        "git": git_state(), "python": sys.version.split()[0], "platform": platform.platform(),
        "packages": package_versions(),
        "analysis_plan": plan_file.load(params.get("analysis_plan")).entry(),   # replaced by the kernel's own
    }
    if "benchmark_modules" in params and benchmarks.PLUGINS:      # the plugins' code: path (never absolute), sha256
        manifest["benchmark_modules"] = [{k: p[k] for k in ("module", "path", "sha256", "benchmarks")}
                                         for p in benchmarks.PLUGINS.values()]
    run_id = publish.new_run_id()       # names this run's folders: unique across hosts and pid namespaces
    staging, lock = staging_folder(final, run_id), publish.RunLock(final, run_id)
    held = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()                  # one run per folder; a live run's folders are never touched
        swept = sweep_stale(final)
        staging.mkdir()
        # held open, the folder's inode cannot be reused: a staging folder deleted and re-created (a notebook's
        # OutputDir makes its folder) is another inode (_staging_gone)
        held = os.open(staging, os.O_RDONLY)
        made = os.fstat(held)
    except (OSError, publish.FolderBusy) as exc:  # disk full, read-only, another live run: nothing ran, say why
        manifest.update(status="failed", wall_time_s=0.0, models={}, data={}, notes=[],
                        error=(isinstance(exc, OSError) and storage.storage_problem(exc, final.parent)) or str(exc))
        log.error("%s could not start: %s", label, manifest["error"])
        shutil.rmtree(staging, ignore_errors=True)      # only ever this run's (its name carries the run id)
        if held is not None:
            os.close(held)
        lock.release()
        return manifest
    params["output_dir"] = str(staging)
    executed = staging / f"{notebook}.ipynb"
    t0 = time.perf_counter()
    log.info("running %s (profile %s) -> %s", label, profile, final)
    interrupted: BaseException | None = None
    kernel = type("KernelManager", (KernelManager,), {"record": {}})       # this run's kernel, for its exit status
    try:
        pm.execute_notebook(str(src), str(executed), parameters=params, cwd=str(paths.NOTEBOOKS_DIR),
                            kernel_name="python3", language="python", progress_bar=progress, report_mode=False,
                            log_output=False, extra_arguments=_KERNEL_ARGS, kernel_manager_class=kernel)
        manifest["status"] = "ok"
    except BaseException as exc:  # recorded; the caller decides the exit code; an interrupt is re-raised
        _record_error(manifest, exc, staging, final, made)
        if type(exc).__name__ == "DeadKernelError" and manifest["status"] == "failed":
            manifest["error"] = _kernel_death(executed, kernel.record) + "\n" + manifest["error"]
        log.error("%s %s: %s", label, manifest["status"], manifest["error"].strip().splitlines()[0]
                  if manifest["error"].strip() else exc)
        if not isinstance(exc, Exception):
            interrupted = exc
    manifest["wall_time_s"] = round(time.perf_counter() - t0, 1)
    if manifest["status"] == "ok" and _staging_gone(staging, made):      # what the kernel re-made is partial
        manifest.update(status="failed", error=_staging_gone_text(staging))
        log.error("%s failed: %s", label, manifest["error"])
    prov = staging / "provenance.json"       # this run's own record only
    try:
        p = json.loads(prov.read_text()) if prov.exists() else {}
    except (OSError, ValueError) as exc:     # half-written (disk full, killed kernel)
        p = {"notes": [f"this run's provenance record could not be read ({type(exc).__name__}: {exc})"]}
    manifest["models"], manifest["data"] = p.get("models", {}), p.get("data", {})
    manifest["notes"] = swept + p.get("notes", [])
    manifest["written"] = datetime.now(timezone.utc).date().isoformat()    # UTC; against the plan's `issued`
    read = p.get("analysis_plan")           # the plan bytes the kernel decided with (hash what is read)
    if read and read.get("sha256") != manifest["analysis_plan"]["sha256"]:
        manifest["notes"].append(f"the analysis plan changed while this run ran: it decided with v{read.get('version')}"
                                 f" (sha256 {read.get('sha256', '')[:12]}), recorded here")
    if read:
        manifest["analysis_plan"] = read
    prov.unlink(missing_ok=True)
    mismatch = _kernel_mismatch(p.get("kernel"))
    if mismatch and manifest["status"] == "ok":
        manifest.update(status="failed", error=mismatch)
        log.error("%s failed: %s", label, mismatch)
    try:
        if manifest["status"] == "ok":
            slow = clean_executed(executed, staging, final)
            if slow:
                log.info("%s: slowest cells: %s", label, slow)
            _portable_tables(staging, final)
            # the report's provenance footer reads the manifest beside the notebook; the manifest then vouches for
            # every file but the report (integrity.NOT_VOUCHED: HTML and PDF are rebuilt, not committed)
            atomic_write_text(staging / integrity.MANIFEST, _manifest_text(manifest, staging, final))
            if html:        # the reader's report (biaslab.report)
                try:
                    from ..report import html as report
                    report.render(executed)
                except Exception as exc:  # a report is a convenience; never fail a run for it
                    log.warning("HTML report of %s failed: %s", executed, exc)
            manifest["files"] = integrity.file_hashes(staging)
            atomic_write_text(staging / integrity.MANIFEST, _manifest_text(manifest, staging, final))
            if stopping.requested():     # asked to stop after the kernel finished: the last good outputs stay
                raise stopping.Stopped("a stop was requested before the run was published")
            swap_in(staging, final, run_id)
        else:
            _record_failure(manifest, notebook, executed, staging, final)
    except (OSError, RuntimeError, ValueError) as exc:   # publishing failed (disk full, read-only, did not verify)
        manifest.pop("files", None)
        _record_error(manifest, exc, staging, final, made)
        log.error("%s: %s", label, manifest["error"].strip().splitlines()[0])
        _record_failure(manifest, notebook, executed, staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        os.close(held)
        lock.release()
    log.info("%s: %s in %.0f s", label, manifest["status"], manifest["wall_time_s"])
    if interrupted is not None:
        raise interrupted
    return manifest


def _manifest_text(manifest: dict, staging: Path, final: Path) -> str:
    return redact(_portable(json.dumps(manifest, indent=2, default=str), staging, final)) + "\n"


def _staging_gone(staging: Path, made: os.stat_result) -> bool:
    """This run's staging folder was deleted while it ran: it is missing, or another folder (another inode: the
    runner holds the first one open, so its number cannot be reused) stands in its place."""
    try:
        return not os.path.samestat(os.stat(staging), made)
    except OSError:
        return True


def _staging_gone_text(staging: Path) -> str:
    return (f"this run's staging folder {staging.name} (in {staging.parent}) was deleted while the run was going on "
            "(by a cleanup or another process); nothing was published and the last good outputs are kept. Fix: "
            "rerun, and leave .*.staging-* folders of a live run alone")


def _record_error(manifest: dict, exc: BaseException, staging: Path, final: Path, made: os.stat_result) -> None:
    """Status and error of a run that did not succeed: ``interrupted`` when a stop was requested, else ``failed``,
    naming first a staging folder deleted while the run went on (:func:`_staging_gone`: whatever error followed),
    then a full disk, a read-only file system or a permission error as such (path, space, fix)."""
    sig = stopping.requested()
    if sig:
        manifest["status"] = "interrupted"
        manifest["error"] = f"interrupted by {signal.Signals(sig).name}: " + (
            "the notebook had finished, its outputs were not published" if isinstance(exc, stopping.Stopped)
            else f"the notebook's kernel was stopped ({type(exc).__name__})")
        return
    manifest["status"] = "failed"
    raw = _error_text(exc)
    if _staging_gone(staging, made):
        manifest["error"] = f"{_staging_gone_text(staging)}\n{raw}"
        return
    named = storage.storage_problem(exc, final, last_good_bytes=storage.folder_size(final),
                                    written_bytes=storage.folder_size(staging))
    manifest["error"] = f"{named}\n{raw}" if named else raw


def _record_failure(manifest: dict, notebook: str, executed: Path, staging: Path, final: Path) -> None:
    """Write ``MANIFEST.failed.json`` and ``<notebook>.failed.ipynb`` beside the last good outputs (best effort:
    when even that cannot be written, the error is logged with the reason)."""
    try:
        final.mkdir(parents=True, exist_ok=True)
        if executed.exists():
            try:
                clean_executed(executed, staging, final)
                os.replace(executed, final / f"{notebook}.failed.ipynb")
            except Exception as exc:  # noqa: BLE001 - a half-written notebook (disk full, killed) is not kept
                executed.unlink(missing_ok=True)
                manifest["notes"].append(f"the executed notebook could not be kept ({type(exc).__name__}: "
                                         f"{str(exc)[:200]})")
        manifest["last_good_outputs"] = last_good(final)
        try:
            atomic_write_text(final / "MANIFEST.failed.json", _manifest_text(manifest, staging, final))
        except OSError:     # e.g. the disk is full: drop this run's own files, then the record may fit
            shutil.rmtree(staging, ignore_errors=True)
            atomic_write_text(final / "MANIFEST.failed.json", _manifest_text(manifest, staging, final))
    except OSError as exc:
        manifest["record"] = "not written: " + (storage.storage_problem(exc, final) or str(exc))
        log.error("could not write the failed-run record in %s: %s", final, manifest["record"])


def lanes(chosen: list[tuple[str, str]]) -> tuple[list[list[tuple[str, str]]], list[tuple[str, str]]]:
    """Split the selected runs into lanes that may run side by side, and the runs that must wait for all of them.

    A notebook-1 variant that scores what another notebook scores (``FactorPlan.shares_scores_with``) runs in that
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
        share = nb == "01_multifactor" and profiles.SPECS[v].factor_plan.shares_scores_with     # its variants: SPECS
        groups.setdefault(share or label, []).append((nb, v))
    rank = {k: i for i, k in enumerate(profiles.LANE_ORDER)}
    order = sorted(groups, key=lambda k: rank.get(k, len(rank)))       # stable: the others keep their order
    return [groups[k] for k in order], last


def reproduce(profile: str = "default", only: list[str] | None = None, overrides: dict | None = None,
              outputs_dir: Path | None = None, html: bool = True, publish: bool = False, dry_run: bool = False,
              jobs: int = 1, served: bool = False, check: bool = False, benchmark_modules=()) -> int:
    """Run the selected notebooks; returns a process exit code (0 when all succeeded, 1 when one failed, 3 with
    ``check`` when a regenerated verdict differs from the committed one or a run was not compared, 128 + the signal
    when stopped by SIGINT or SIGTERM).

    Every selected notebook's parameters are validated (and model specs, device and dtype resolved) and the run's
    settings checked (:mod:`.preflight`) before the first one starts. ``outputs_dir``: where to write (default:
    ``outputs/`` when ``publish``, else the scratch folder; with ``served``, its ``served/`` sub-folder).
    ``dry_run``: validate and print the plan, run nothing. ``jobs > 1`` runs that many notebooks at a time
    (:func:`lanes`), each kernel with ``cpu_count // jobs`` torch threads unless ``OMP_NUM_THREADS`` is set: on two
    cores two single-threaded kernels do more than one with two threads, and the statistics of a cached rerun are
    single-threaded Python. ``served``: start llama.cpp's server on the embedded SmolLM2 GGUF (127.0.0.1), run
    :data:`profiles.SERVED_NOTEBOOKS` against it with :data:`profiles.SERVED_SIZES`, stop it by its pid.
    ``benchmark_modules``: plugin benchmarks to load (``--benchmark-module``; installed entry points load anyway),
    here and in the kernels of the notebooks that take them (1, 5, 6).
    """
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}")
    overrides = dict(overrides or {})
    benchmarks.load_plugins([*benchmark_modules, *(parameters.as_list(overrides.pop("benchmark_modules", [])) or [])])
    if overrides.get("analysis_plan") is not None:     # resolved once, relative to where the command ran
        overrides["analysis_plan"] = str(plan_file.resolve(overrides["analysis_plan"]))
    plan_file.load(overrides.get("analysis_plan"))      # validated before any work (--dry-run too)
    preflight.check_profile(profile, overrides)
    for note in preflight.absolute_env_paths():     # before any kernel starts (they run in notebooks/)
        print(f"note: {note}", flush=True)
    preflight.check_env_paths()
    preflight.check_cache()
    if outputs_dir is None:
        outputs_dir = paths.OUTPUTS_DIR if publish else paths.SCRATCH_DIR
        outputs_dir = outputs_dir / "served" if served else outputs_dir
    outputs_dir = Path(outputs_dir)
    chosen = select(only)
    port = None
    if served:
        from ..models import local_server
        chosen = [(nb, v) for nb, v in chosen if nb in profiles.SERVED_NOTEBOOKS]
        if not chosen:
            raise ValueError(f"--served runs {', '.join(profiles.SERVED_NOTEBOOKS)}; --only selected none of them")
        if "models" in overrides:
            raise ValueError("--served runs the embedded SmolLM2 on a local llama.cpp server; drop -p models=...")
        port = local_server.free_port(local_server.DEFAULT_PORT)
        overrides["models"] = [local_server.spec(f"http://127.0.0.1:{port}/v1")]
    preflight.check_pairs(nb for nb, _ in chosen)
    for nb, v in chosen:
        resolve_params(nb, v, profile, overrides, served=served)
    preflight.check_not_published(outputs_dir, publish)
    preflight.check_out(outputs_dir, "--out" if not publish else "--publish")
    if dry_run:
        for nb, v in chosen:
            print(f"would run {nb + (f'/{v}' if v else ''):32s} -> {outputs_dir / nb / v}")
        return 0
    _sweep_others(outputs_dir, chosen)
    committed = tempfile.TemporaryDirectory(prefix="biaslab-committed-")     # the committed tables, copied aside
    reference = paths.OUTPUTS_DIR / "served" if served else paths.OUTPUTS_DIR
    regenerated.snapshot(reference, [nb + (f"/{v}" if v else "") for nb, v in chosen], Path(committed.name))
    finished: dict[tuple[str, str], dict] = {}
    skipped: list[str] = []
    started = itertools.count(1)
    say = threading.Lock()

    def run(nb: str, v: str) -> None:
        label = nb + (f"/{v}" if v else "")
        if stopping.STOP.is_set():
            skipped.append(label)
            return
        with say:
            i = next(started)
            print(f"[{i}/{len(chosen)}] {label} (profile {profile}) ...", flush=True)
        r = run_one(nb, v, profile, overrides, outputs_dir, html=html, progress=sys.stderr.isatty() and jobs == 1,
                    served=served)
        with say:
            print(f"[{i}/{len(chosen)}] {label}: {r['status']} in {r['wall_time_s']:.0f} s", flush=True)
            if r["status"] != "ok" and r.get("error"):
                print(f"    error: {r['error'].strip().splitlines()[0]}", flush=True)
            for note in r.get("notes", []):
                print(f"    note: {note}", flush=True)
        finished[(nb, v)] = r

    parallel, last = lanes(chosen) if jobs > 1 else ([chosen], [])
    threads = os.environ.get("OMP_NUM_THREADS")
    if jobs > 1 and threads is None:
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // jobs))   # read by each new kernel
    server = None
    try:
        with stopping.handle_signals():
            if served:
                try:
                    server = local_server.LlamaServer(port=port, threads=max(1, os.cpu_count() or 1)).start()
                except RuntimeError as exc:
                    raise preflight.PreflightError(f"--served: {exc}") from exc
                stopping.track_group(server.proc.pid)       # its own session: killed on a second signal
                print(f"llama.cpp server on {server.url} (pid {server.proc.pid})", flush=True)
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                for f in [pool.submit(lambda lane=lane: [run(nb, v) for nb, v in lane]) for lane in parallel]:
                    f.result()
            for nb, v in last:
                run(nb, v)
            sig = stopping.requested()
    finally:
        if server is not None:
            server.stop()
            stopping.track_group(server.proc.pid, on=False)
        if jobs > 1 and threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
    results = [finished[k] for k in chosen if k in finished]
    published = outputs_dir.resolve() == paths.OUTPUTS_DIR.resolve()
    if published and publish and not sig:
        from ..plan import calibration
        from ..report import catalogue, headline
        catalogue.write()
        calibration.write_fwer(outputs_dir, calibration.FWER_REPLICATIONS,      # outputs/fwer.csv
                               plan_path=overrides.get("analysis_plan"))
        # outputs/SUMMARY.md and the generated blocks of README.md and docs/, under the plan the runs decided with
        headline.write(outputs_dir, plan=plan_file.load(overrides.get("analysis_plan")))
    elif publish and served and not sig and outputs_dir.resolve() == (paths.OUTPUTS_DIR / "served").resolve():
        from ..report import headline   # the served runs' rows of docs/performance.md (their MANIFESTs just changed)
        headline.write(paths.OUTPUTS_DIR, plan=plan_file.load(overrides.get("analysis_plan")))
    if html and (publish or not published) and not sig:     # the front page over every run in that folder (scratch/ too)
        from ..report import front_page
        print(f"reports: {front_page.write(outputs_dir)}")
    failed = [r for r in results if r["status"] != "ok"]
    for r in results:
        label = r["notebook"] + (f"/{r['variant']}" if r["variant"] else "")
        print(f"{r['status']:11s} {label:32s} {r['wall_time_s']:8.1f} s")
    if sig:
        name = signal.Signals(sig).name
        print(f"stopped by {name}: {sum(r['status'] == 'interrupted' for r in results)} run(s) interrupted (their "
              f"last good outputs kept, MANIFEST.failed.json written), {len(skipped)} not started"
              + (f" ({', '.join(skipped)})" if skipped else ""))
        committed.cleanup()
        return 128 + sig
    if not publish:
        print(f"outputs in {outputs_dir} (pass --publish to write into {paths.OUTPUTS_DIR})")
    with committed:
        ok = [r["notebook"] + (f"/{r['variant']}" if r["variant"] else "") for r in results if r["status"] == "ok"]
        compared = regenerated.compare_all(Path(committed.name), outputs_dir, ok)
    if compared:
        print(f"compared with the committed outputs ({reference}):")
        for rc in compared:
            print("  " + regenerated.summary_line(rc))
    changed = sum(rc.verdict_changes for rc in compared)
    unchecked = [f"{rc.label} ({rc.not_compared})" for rc in compared if rc.not_compared]
    if check and changed:
        print(f"--check: {changed} verdict(s) differ from the committed outputs")
    if check and (unchecked or not compared):
        print(f"--check: not compared with the committed outputs ({reference}): "
              f"{'; '.join(unchecked) or 'no run finished'}; their verdicts are unchecked. Fix: check runs of the "
              "profile the committed runs have, of notebooks with a committed run")
    return 1 if failed else (3 if check and (changed or unchecked or not compared) else 0)
