"""The papermill runner: parameters, selection, manifests, failures recorded."""

import json
import os
from pathlib import Path

import nbformat
import pytest

from biaslab.report import catalogue
from biaslab import paths
from biaslab.run import profiles, execute


def test_parse_overrides_parses_json_and_strings():
    assert execute.parse_overrides(['models=["a","b"]', "max_prompts=5", "device=cuda"]) == {
        "models": ["a", "b"], "max_prompts": 5, "device": "cuda"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        execute.parse_overrides(["oops"])


def test_select_by_prefix_and_variant():
    from biaslab.benchmarks import SPECS
    planned = [n for n, s in SPECS.items() if s.factor_plan is not None]       # one notebook-1 run per plan
    assert {"ssqa", "bbq", "calm", "crows_pairs", "agentic", "winogender"} <= set(planned)
    assert execute.select(["01"]) == [("01_multifactor", v) for v in planned]
    assert execute.select(["01_multifactor/bbq"]) == [("01_multifactor", "bbq")]
    with pytest.raises(KeyError):
        execute.select(["99"])


def test_every_profile_has_every_notebook():
    for profile in profiles.PROFILE_NAMES:
        for nb, variants in profiles.NOTEBOOKS.items():
            for v in variants:
                p = profiles.params(profile, nb, v)
                # notebook 5 scores nothing: models=None there means every model found in the outputs
                assert p["profile"] == profile and (p["models"] or nb == "05_compare")


def _toy_notebook(path, body):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('output_dir = "x"\nprofile = "default"\nmodels = []\nvalue = 1')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nbformat.write(nb, path)


def toy_script(nbdir, body: str, notebooks=("00_toy",)) -> str:
    """Python source that points biaslab at the toy notebooks in ``nbdir`` (as the ``toy`` fixture does in-process),
    then runs ``body``: for runs in a subprocess (killed, signalled, in a private mount namespace)."""
    import textwrap
    return (f"import json, os, sys\nfrom pathlib import Path\nfrom biaslab import paths\n"
            f"from biaslab.run import execute, profiles, publish\n"
            f"paths.NOTEBOOKS_DIR = Path({str(nbdir)!r}); paths.ROOT = Path({str(nbdir.parent)!r})\n"
            f"profiles.NOTEBOOKS = {{nb: {{'': {{}}}} for nb in {list(notebooks)!r}}}\n"
            "profiles.PROFILES = {'smoke': {'*': {'models': ['smollm2-135m-instruct']}}}\n" + textwrap.dedent(body))


@pytest.fixture
def toy(tmp_path, monkeypatch):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    monkeypatch.setattr(paths, "NOTEBOOKS_DIR", nbdir)
    monkeypatch.setattr(profiles, "NOTEBOOKS", {"00_toy": {"": {}}})
    monkeypatch.setattr(profiles, "PROFILES", {p: {"*": {"models": ["smollm2-135m-instruct"]}}
                                               for p in profiles.PROFILE_NAMES})
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    monkeypatch.setattr(paths, "SCRATCH_DIR", tmp_path / "scratch")
    monkeypatch.setattr(paths, "OUTPUTS_DIR", tmp_path / "published")
    return nbdir, tmp_path / "outputs"


def test_run_writes_executed_notebook_and_manifest(toy):
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb",
                  "from biaslab.report.outputs import OutputDir\nimport pandas as pd\nout = OutputDir(output_dir)\n"
                  "out.table(pd.DataFrame({'v': [value]}), 'v')\nout.record_model({'name': 'm', 'weights_sha256': 'abc'})")
    assert execute.reproduce("smoke", overrides={"value": 7}, outputs_dir=outdir, html=False) == 0
    m = json.loads((outdir / "00_toy/MANIFEST.json").read_text())
    assert m["status"] == "ok" and m["parameters"]["value"] == 7 and m["profile"] == "smoke"
    assert m["models"]["m"]["weights_sha256"] == "abc"
    assert (outdir / "00_toy/tables/v.csv").read_text().splitlines() == ["v", "7"]
    assert (outdir / "00_toy/00_toy.ipynb").exists()


def test_scratch_run_writes_its_report_and_index(toy):
    """``biaslab reproduce --only …`` without --publish: the HTML report beside the executed notebook and
    index.html in the scratch folder, linking it; nothing published."""
    nbdir, _ = toy
    _toy_notebook(nbdir / "00_toy.ipynb", "print('hello', value)")
    assert execute.reproduce("smoke", overrides={"value": 3}) == 0
    report = paths.SCRATCH_DIR / "00_toy/00_toy.html"
    assert "hello 3" in report.read_text()
    assert 'href="00_toy/00_toy.html"' in (paths.SCRATCH_DIR / "index.html").read_text()
    assert not paths.OUTPUTS_DIR.exists()


def test_failing_notebook_is_recorded_and_returns_nonzero(toy):
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", "raise RuntimeError('boom')")
    assert execute.reproduce("smoke", outputs_dir=outdir, html=False) == 1
    m = json.loads((outdir / "00_toy/MANIFEST.failed.json").read_text())
    assert m["status"] == "failed" and "boom" in m["error"]
    assert not (outdir / "00_toy/MANIFEST.json").exists()
    assert m["last_good_outputs"].startswith("none")


def test_catalogue_rejects_bad_status(tmp_path):
    d = tmp_path / "catalogue"
    d.mkdir()
    (d / "x.tsv").write_text("\t".join(catalogue.COLUMNS) + "\nP\tTable 1\td\tout.csv\tdone\t\n")
    with pytest.raises(ValueError, match="status"):
        catalogue.read(d)


def test_catalogue_marks_missing_outputs(tmp_path):
    rows = [{"paper": "P", "item": "Fig 1", "description": "d", "output": "a/b.png", "status": "regenerated",
             "note": "", "notebook": "x"}]
    assert "*(missing)*" in catalogue.render(rows, tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "a/b.png").write_bytes(b"")
    assert "*(missing)*" not in catalogue.render(rows, tmp_path)
    assert "a later run failed" not in catalogue.render(rows, tmp_path)
    (tmp_path / "a/MANIFEST.failed.json").write_text("{}")
    assert "a later run failed" in catalogue.render(rows, tmp_path)


GOOD = ("from biaslab.report.outputs import OutputDir\nimport pandas as pd\nout = OutputDir(output_dir)\n"
        "out.table(pd.DataFrame({'v': [value]}), 'v')\nout.record_model({'name': 'm', 'weights_sha256': 'abc'})\n"
        "print('wrote', output_dir)")


def _snapshot(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("when", ["before_any_record", "after_writing"])
def test_failed_rerun_keeps_last_good_outputs_and_writes_an_honest_record(toy, when):
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    assert execute.reproduce("smoke", overrides={"value": 7}, outputs_dir=outdir, html=False) == 0
    good = _snapshot(outdir / "00_toy")
    body = ("raise RuntimeError('boom')" if when == "before_any_record" else
            "from biaslab.report.outputs import OutputDir\nimport pandas as pd\nout = OutputDir(output_dir)\n"
            "out.table(pd.DataFrame({'v': [-1]}), 'v')\nout.record_model({'name': 'new', 'weights_sha256': 'n'})\n"
            "raise RuntimeError('boom')")
    _toy_notebook(nbdir / "00_toy.ipynb", body)
    assert execute.reproduce("smoke", overrides={"value": 8}, outputs_dir=outdir, html=False) == 1
    after = _snapshot(outdir / "00_toy")
    failed = json.loads(after.pop(Path("MANIFEST.failed.json")))
    after.pop(Path("00_toy.failed.ipynb"), None)
    assert after == good                                          # last good outputs byte for byte
    assert failed["status"] == "failed" and failed["parameters"]["value"] == 8 and "boom" in failed["error"]
    assert failed["last_good_outputs"] == "kept untouched"
    assert failed["models"] == ({} if when == "before_any_record" else {"new": {"name": "new", "weights_sha256": "n"}})
    assert not list(outdir.glob("**/.*staging*"))
    # a later good run replaces everything, the failure record included
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    assert execute.reproduce("smoke", overrides={"value": 9}, outputs_dir=outdir, html=False) == 0
    assert not (outdir / "00_toy/MANIFEST.failed.json").exists()
    assert (outdir / "00_toy/tables/v.csv").read_text().splitlines() == ["v", "9"]


def test_killed_run_leaves_last_good_outputs_untouched(toy):
    import os
    import signal
    import subprocess
    import sys
    import time
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    assert execute.reproduce("smoke", overrides={"value": 7}, outputs_dir=outdir, html=False) == 0
    good = _snapshot(outdir / "00_toy")
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD + "\nimport time\ntime.sleep(120)")
    script = toy_script(nbdir, f"execute.reproduce('smoke', overrides={{'value': 8}}, "
                                 f"outputs_dir=Path({str(outdir)!r}), html=False)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not list(outdir.glob(".00_toy.staging-*/tables/v.csv")) and time.time() < deadline:
            time.sleep(0.5)
        assert list(outdir.glob(".00_toy.staging-*/tables/v.csv")), "the killed run never started writing"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert _snapshot(outdir / "00_toy") == good
    json.loads((outdir / "00_toy/MANIFEST.json").read_text())["parameters"]["value"] == 7
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    assert execute.reproduce("smoke", overrides={"value": 9}, outputs_dir=outdir, html=False) == 0
    assert not list(outdir.glob(".*staging*"))                   # the dead run's staging folder is swept


@pytest.mark.parametrize("override,message", [
    ({"valeu": 3}, "no parameter 'valeu'; did you mean 'value'"),
    ({"value": "abc"}, "expected int"),
    ({"value": -1}, None),
    ({"models": ["no-such-model-anywhere"]}, "cannot find model 'no-such-model-anywhere'"),
    ({"models": "smollm2-135m-instruct"}, "expected list"),
])
def test_bad_parameters_are_refused_before_any_work(toy, override, message, monkeypatch):
    import huggingface_hub.constants as hc
    from biaslab.run.parameters import MINIMUM, ParameterError
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True)
    monkeypatch.setitem(MINIMUM, "value", 0)
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    with pytest.raises(ParameterError, match=message or "out of range"):
        execute.reproduce("smoke", overrides=override, outputs_dir=outdir, html=False)
    assert not outdir.exists()                                    # nothing started, nothing written


def test_reruns_are_stable_portable_and_readable(toy):
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    runs = []
    for _ in range(2):
        assert execute.reproduce("smoke", overrides={"value": 7}, outputs_dir=outdir, html=False) == 0
        runs.append(_snapshot(outdir / "00_toy"))
    for run in runs:
        m = json.loads(run[Path("MANIFEST.json")])
        m.pop("wall_time_s"), m.pop("written")                     # when it ran (a date) and how long
        run[Path("MANIFEST.json")] = json.dumps(m).encode()
    assert runs[0] == runs[1]                                    # identical reruns, byte for byte
    text = b"".join(runs[0].values()).decode()
    assert str(outdir.parent) not in text and "staging" not in text and "start_time" not in text
    assert json.loads(runs[0][Path("MANIFEST.json")])["parameters"]["output_dir"] == "../outputs/00_toy"
    assert "wrote ../outputs/00_toy" in runs[0][Path("00_toy.ipynb")].decode()
    import os
    mask = os.umask(0)
    os.umask(mask)
    for p in (outdir / "00_toy").rglob("*"):
        if p.is_file():
            assert p.stat().st_mode & 0o777 == 0o666 & ~mask, p


def test_runs_go_to_scratch_unless_published(toy, monkeypatch):
    from biaslab.report import catalogue
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    written = []
    monkeypatch.setattr(catalogue, "write", lambda *a, **k: written.append(1))
    assert execute.reproduce("smoke", html=False) == 0
    assert (paths.SCRATCH_DIR / "00_toy/MANIFEST.json").exists() and not paths.OUTPUTS_DIR.exists()
    assert written == []
    assert execute.reproduce("smoke", html=False, publish=True) == 0
    assert (paths.OUTPUTS_DIR / "00_toy/MANIFEST.json").exists() and written == [1]


@pytest.mark.parametrize("argv,needle", [
    (["reproduce", "--only", "99"], "no notebook matches"),
    (["reproduce", "-p", "oops"], "KEY=VALUE"),
    (["reproduce", "--only", "03", "-p", "max_pair=3"], "did you mean 'max_pairs'"),
    (["reproduce", "--only", "03", "-p", "max_pairs=abc"], "expected int"),
    (["reproduce", "--only", "04", "-p", "max_prompts=1"], "at least 2"),
])
def test_cli_errors_are_one_line_with_exit_code_2(argv, needle, capsys):
    from biaslab import cli
    assert cli.main(argv + ["--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_clean_executed_drops_timestamps_widgets_and_machine_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    monkeypatch.setattr(paths, "NOTEBOOKS_DIR", tmp_path / "notebooks")
    staging, final = tmp_path / "outputs/.x.staging-1", tmp_path / "outputs/x"
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print(1)")
    cell.metadata["papermill"] = {"start_time": "t0", "end_time": "t1", "duration": 1.0, "status": "completed"}
    cell.metadata["execution"] = {"iopub.status.busy": "t"}
    cell.outputs = [nbformat.v4.new_output("display_data", data={
                        "application/vnd.jupyter.widget-view+json": {"model_id": "abc"}, "text/plain": "0%|"}),
                    nbformat.v4.new_output("stream", text=f"wrote {staging}/tables and {tmp_path}/data/raw\n")]
    nb.cells = [cell]
    nb.metadata["papermill"] = {"start_time": "t0", "end_time": "t1", "duration": 1.0, "parameters": {}}
    nb.metadata["widgets"] = {"state": {}}
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    execute.clean_executed(path, staging, final)
    out = nbformat.read(path, as_version=4)
    assert "start_time" not in out.metadata.papermill and "widgets" not in out.metadata
    assert set(out.cells[0].metadata.papermill) == {"status"} and "execution" not in out.cells[0].metadata
    assert [o.output_type for o in out.cells[0].outputs] == ["stream"]
    assert out.cells[0].outputs[0].text == "wrote ../outputs/x/tables and data/raw\n"


@pytest.mark.parametrize("text, expected", [
    ("/tmp/ipykernel_9430/1302693127.py:3: UserWarning", "<cell>:3: UserWarning"),
    ('File "C:\\Users\\me\\AppData\\ipykernel_1\\2.py"', 'File "C:\\Users\\me\\<cell>"'),   # a backslash ends the folder, as before
    ("see ipykernel_12/34.py and /a/b/ipykernel_5/6.py.", "see <cell> and <cell>."),
    ("ipykernel_/3.py stays; so does ipykernel_1/x.py", "ipykernel_/3.py stays; so does ipykernel_1/x.py"),
])
def test_cell_files_are_replaced_with_their_folder(text, expected):
    assert execute._replace_cell_files(text) == expected


def test_cell_file_replacement_equals_the_prefix_regex_it_replaces():
    """Same result as the old one-regex form (a folder path as an optional prefix), which took quadratic time on a
    long base64 image, on random strings made of its pieces (a cell file named inside another's folder excepted)."""
    import random
    import re
    old = re.compile(r"(?:[^\s\"'\\]*[/\\])?ipykernel_\d+[/\\]\d+\.py")
    nested = re.compile(r"ipykernel_\d+[/\\]\d+\.py[^\s\"'\\]*[/\\]ipykernel_")
    pieces = ["a", "/", "\\", " ", '"', "'", "ipykernel_12/34.py", "ipykernel_1\\2.py", "\n", "ipykernel_", "3", ".py"]
    rng = random.Random(0)
    checked = 0
    for _ in range(20000):
        t = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 15)))
        if not nested.search(t):
            assert execute._replace_cell_files(t) == old.sub("<cell>", t), t
            checked += 1
    assert checked > 15000


def test_slowest_cells_reads_papermill_durations():
    import nbformat
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"),
                                         nbformat.v4.new_code_cell("fast = 1"),
                                         nbformat.v4.new_code_cell("slow = fit()\nmore"),
                                         nbformat.v4.new_code_cell("mid = 2")])
    for i, d in ((1, 0.2), (2, 31.4), (3, 5.0)):
        nb.cells[i].metadata["papermill"] = {"duration": d}
    assert execute.slowest_cells(nb) == "cell 2 (31 s: slow = fit()), cell 3 (5 s: mid = 2)"


def test_lanes_keep_score_sharing_runs_together_and_compare_last():
    chosen = execute.select(None)
    par, last = execute.lanes(chosen)
    assert last == [("05_compare", "")]
    assert par[0] == [("01_multifactor", "crows_pairs"), ("03_crows_pairs_bayes", "")]      # longest first
    assert par[1] == [("01_multifactor", "mbbq"), ("07_mbbq", "")]         # before 6, which asks 7's requests
    assert par[2] == [("01_multifactor", "bbq"), ("06_multiverse", "")]     # 6 reads 01/bbq's scores
    assert par[3] == [("01_multifactor", "calm"), ("02_calm", "")]
    assert par[4] == [("01_multifactor", "agentic"), ("04_agentic_entropy", "")]
    assert sorted([r for lane in par for r in lane] + last) == sorted(chosen)


def test_jobs_run_lanes_side_by_side_with_fewer_threads_each(monkeypatch, tmp_path):
    import threading
    import time as _time
    seen, lock = [], threading.Lock()

    def fake_run_one(nb, v, profile, overrides, outputs_dir, html=True, progress=False, served=False):
        with lock:
            seen.append(("start", nb, v, os.environ.get("OMP_NUM_THREADS")))
        _time.sleep(0.05)
        with lock:
            seen.append(("end", nb, v, None))
        return {"notebook": nb, "variant": v, "status": "ok", "wall_time_s": 0.05}

    monkeypatch.setattr(execute, "run_one", fake_run_one)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(execute.os, "cpu_count", lambda: 4)
    assert execute.reproduce("smoke", outputs_dir=tmp_path, jobs=2) == 0
    starts = [s for s in seen if s[0] == "start"]
    assert len(starts) == len(execute.select(None)) and {s[3] for s in starts} == {"2"}

    # a variant sharing scores finishes before its partner starts; notebook 5 starts after everything else ended
    for a, b in (("crows_pairs", "03_crows_pairs_bayes"), ("calm", "02_calm")):
        assert seen.index(("end", "01_multifactor", a, None)) < seen.index(("start", b, "", "2"))
    assert seen.index(("start", "05_compare", "", "2")) > max(i for i, s in enumerate(seen) if s[0] == "end"
                                                                and s[1] != "05_compare")
    # two at a time: some run started before the previous one ended
    assert any(seen[i][0] == "start" and seen[i + 1][0] == "start" for i in range(len(seen) - 1))
    assert "OMP_NUM_THREADS" not in os.environ


def test_served_reproduction_plans_notebooks_3_and_4_on_a_local_server(capsys):
    """`biaslab reproduce --served` (make reproduce-served): notebooks 3 and 4, the local llama.cpp spec, into
    <out>/served/, the documented subset in the default profile (the run itself: tests/test_served.py's server)."""
    from biaslab import cli
    from biaslab.models import local_server
    assert cli.main(["reproduce", "--served", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split()[2] for ln in out] == ["03_crows_pairs_bayes", "04_agentic_entropy"]
    assert all(ln.split()[-1].startswith(str(paths.SCRATCH_DIR / "served")) for ln in out)
    p = profiles.params("default", "04_agentic_entropy", served=True)
    assert (p["max_prompts"], p["cyclic_prompts"]) == (120, 10)
    assert local_server.spec("http://127.0.0.1:1/v1")["model"] == local_server.ALIAS
    assert cli.main(["reproduce", "--served", "--only", "02", "--dry-run"]) == 2
    assert cli.main(["reproduce", "--served", "-p", 'models=["x"]', "--dry-run"]) == 2


def test_relative_biaslab_paths_are_resolved_once_before_the_kernel_starts(toy, tmp_path, monkeypatch):
    """A relative BIASLAB_CACHE built a second cache under notebooks/ (the kernel's working folder) and a relative
    BIASLAB_RAW_DIR failed although `data status` (run from the repository) said verified. Now the runner makes
    them absolute, relative to where it was started, before any kernel starts, and says so."""
    nbdir, outdir = toy
    seen = tmp_path / "seen.json"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BIASLAB_RAW_DIR", "rel/raw")
    monkeypatch.setenv("BIASLAB_CACHE", "rel/cache")
    _toy_notebook(nbdir / "00_toy.ipynb",
                  "import json, os\nfrom pathlib import Path\nfrom biaslab import paths\n"
                  f"Path({str(seen)!r}).write_text(json.dumps({{'raw': str(paths.RAW_DIR), "
                  "'cache': str(paths.CACHE_DIR), 'env': os.environ['BIASLAB_CACHE']}))")
    assert execute.reproduce("smoke", outputs_dir=outdir, html=False) == 0
    got = json.loads(seen.read_text())
    assert got == {"raw": str(tmp_path / "rel/raw"), "cache": str(tmp_path / "rel/cache"),
                   "env": str(tmp_path / "rel/cache")}


def test_out_naming_the_committed_outputs_needs_publish(toy):
    """`--out outputs` without --publish overwrote the committed outputs with a smoke run."""
    from biaslab.run import preflight
    nbdir, _ = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    for out in (paths.OUTPUTS_DIR, paths.OUTPUTS_DIR / "served"):
        with pytest.raises(preflight.PreflightError, match="is the committed results folder.*pass --publish"):
            execute.reproduce("smoke", outputs_dir=out, html=False, dry_run=True)
    assert execute.reproduce("smoke", outputs_dir=paths.OUTPUTS_DIR, html=False, dry_run=True, publish=True) == 0


def test_the_kernel_is_the_runners_interpreter_and_library_whatever_kernelspec_the_user_has(toy, tmp_path, monkeypatch):
    """A user-level `python3` kernelspec pointing at another checkout: every table came from that library while the
    MANIFEST named this commit. The runner now starts its own interpreter with its own biaslab first."""
    import sys
    import biaslab
    nbdir, outdir = toy
    other = tmp_path / "other-checkout/lib/biaslab"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    spec = tmp_path / "jupyter/kernels/python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"], "language": "python",
        "display_name": "Python 3", "env": {"PYTHONPATH": str(other.parent)}}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    seen = tmp_path / "seen.json"
    _toy_notebook(nbdir / "00_toy.ipynb", "import json, sys\nfrom pathlib import Path\nimport biaslab\n"
                  f"Path({str(seen)!r}).write_text(json.dumps([sys.executable, biaslab.__file__]))")
    assert execute.reproduce("smoke", outputs_dir=outdir, html=False) == 0
    assert json.loads(seen.read_text()) == [sys.executable, biaslab.__file__]


def test_a_kernel_with_another_biaslab_is_refused(toy):
    """Whatever put it there (a .pth file, sitecustomize): tables computed by another biaslab are not published."""
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD + "\nout.provenance['kernel']['biaslab'] = '/elsewhere/lib/biaslab'"
                                                 "\nout._save()")
    assert execute.reproduce("smoke", outputs_dir=outdir, html=False) == 1
    m = json.loads((outdir / "00_toy/MANIFEST.failed.json").read_text())
    assert "with biaslab from /elsewhere/lib/biaslab, but this runner is" in m["error"]
    assert not (outdir / "00_toy/MANIFEST.json").exists()


def test_a_dead_kernel_names_its_last_cell_and_the_memory_limit(toy, monkeypatch):
    """"Kernel died" said nothing of where or why; a kernel SIGKILLed (what the out-of-memory killer does) now names
    the cell it was running and the memory limit."""
    nbdir, outdir = toy
    monkeypatch.setattr(execute, "memory_limit", lambda: "2.1 GB (cgroup memory.max, /sys/fs/cgroup/x/memory.max)")
    _toy_notebook(nbdir / "00_toy.ipynb", "import os, signal\nx = 1\nos.kill(os.getpid(), signal.SIGKILL)")
    assert execute.reproduce("smoke", outputs_dir=outdir, html=False) == 1
    error = json.loads((outdir / "00_toy/MANIFEST.failed.json").read_text())["error"]
    assert error.startswith("the notebook's kernel died while running cell 2 (`import os, signal`): killed by "
                            "SIGKILL (signal 9). SIGKILL is what the out-of-memory killer sends: the memory limit "
                            "here is 2.1 GB (cgroup memory.max"), error


@pytest.mark.parametrize("proc, files, says", [
    ("12:memory:/job/7\n0::/\n", {"memory/job/7/memory.limit_in_bytes": "2147483648\n"},
     "2.1 GB (cgroup memory.limit_in_bytes"),                                # cgroup v1, the process's own cgroup
    ("4:memory:/not/mounted\n", {"memory/memory.limit_in_bytes": "1073741824\n"},
     "1.1 GB (cgroup memory.limit_in_bytes"),                                # v1 in a container: the mount's root
    ("0::/user.slice/x\n", {"user.slice/x/memory.max": "536870912\n"}, "536.9 MB (cgroup memory.max"),    # v2
    ("4:memory:/\n", {"memory/memory.limit_in_bytes": "9223372036854771712\n"}, None),   # v1 "no limit"
    ("0::/\n", {"memory.max": "max\n"}, None),
])
def test_the_memory_limit_is_read_from_cgroup_v1_and_v2(tmp_path, proc, files, says):
    """Under a cgroup-v1 limit the out-of-memory message said "no memory limit was found": both versions are read."""
    (tmp_path / "cgroup").write_text(proc)
    for rel, text in files.items():
        (tmp_path / "fs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fs" / rel).write_text(text)
    got = execute.memory_limit(tmp_path / "cgroup", tmp_path / "fs")
    assert (got is None) if says is None else got.startswith(says), got


def test_a_failed_run_shows_the_exceptions_own_last_line(toy, capsys):
    """The `error:` line was the first line of the traceback's last 4,000 characters ("error: tyError):")."""
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", 'def f(n):\n    if n == 0:\n        raise KeyError("the key " + "k" * 50 + '
                  '" is missing")\n    return f(n - 1)\nf(150)')
    assert execute.reproduce("smoke", outputs_dir=outdir, html=False) == 1
    line = f"KeyError: 'the key {'k' * 50} is missing'"
    assert f"    error: {line}\n" in capsys.readouterr().out
    error = json.loads((outdir / "00_toy/MANIFEST.failed.json").read_text())["error"]
    assert error.splitlines()[0] == line and len(error) > 3000          # the traceback's end follows it


def test_a_replaced_data_file_is_named_on_the_terminal_with_its_fix(toy, tmp_path, capsys):
    """A data file replaced by /etc/passwd showed only "Fix: delete it" on the terminal."""
    nbdir, outdir = toy
    bad = tmp_path / "raw/nyu-mll/crows-pairs/data/crows_pairs_anonymized.csv"
    bad.parent.mkdir(parents=True)
    bad.write_text("root:x:0:0:root:/root:/bin/bash\n")
    _toy_notebook(nbdir / "00_toy.ipynb", "from biaslab import sources\nsources.raw_path('nyu-mll/crows-pairs', "
                  f"'data/crows_pairs_anonymized.csv', raw_dir={str(tmp_path / 'raw')!r})")
    assert execute.reproduce("smoke", outputs_dir=outdir, html=False) == 1
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("    error: ")]
    assert line.startswith(f"    error: DataError: {bad} is not the file data/sources.tsv pins"), line
    assert "sha256" in line and line.endswith("Fix: `biaslab data fetch --only crows_pairs` (replaces it with the "
                                              "pinned copy)")


@pytest.mark.parametrize("body", [
    "import shutil\nshutil.rmtree(output_dir)",
    # the notebook's OutputDir re-creates the folder: the run then failed with a bare FileNotFoundError, or published
    # a partial folder as ok
    GOOD + "\nimport shutil\nshutil.rmtree(output_dir)\nout = OutputDir(output_dir)\n"
           "open(out.tables / 'v.csv').read()",
    GOOD + "\nimport shutil\nshutil.rmtree(output_dir)\nout = OutputDir(output_dir)\n"
           "out.table(pd.DataFrame({'w': [1]}), 'w')",
])
def test_a_deleted_staging_folder_is_one_line_naming_it(toy, capsys, body):
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", body)
    assert execute.reproduce("smoke", outputs_dir=outdir, html=False) == 1
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("    error: ")]
    assert line.startswith("    error: this run's staging folder .00_toy.staging-") and "was deleted while the run" \
        in line and "Fix: rerun" in line
    assert "Traceback" not in out and not (outdir / "00_toy" / "MANIFEST.json").exists()
    assert json.loads((outdir / "00_toy" / "MANIFEST.failed.json").read_text())["status"] == "failed"


def test_a_jupytext_pair_out_of_sync_is_refused(toy):
    """A `.py` edited without its `.ipynb`: the edit silently did not run (the runner executes the `.ipynb`)."""
    import jupytext
    from biaslab.run import preflight
    nbdir, outdir = toy
    _toy_notebook(nbdir / "00_toy.ipynb", GOOD)
    script = nbdir / "00_toy.py"
    jupytext.write(nbformat.read(nbdir / "00_toy.ipynb", as_version=4), script, fmt="py:percent")
    assert execute.reproduce("smoke", outputs_dir=outdir, html=False, dry_run=True) == 0      # in sync: runs
    script.write_text(script.read_text().replace("out.table(", "out.table_edited("))
    with pytest.raises(preflight.PreflightError, match=r"cell 1 of notebooks/00_toy.py differs from "
                                                       r"notebooks/00_toy.ipynb.*jupytext --sync notebooks/00_toy.py"):
        execute.reproduce("smoke", outputs_dir=outdir, html=False)
    assert not outdir.exists()
