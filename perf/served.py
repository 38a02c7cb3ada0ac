"""Served backend speed (not a test): biaslab against lm-eval's ``local-completions`` on the same server, and one
replica against two. ``make bench BENCH_PROFILE=served`` (llama.cpp) or ``BENCH_PROFILE=served_vllm`` (vLLM), or
``python perf/served.py --server llamacpp|vllm``.

Servers (started here on 127.0.0.1, each pinned to one core with ``taskset``, stopped by their process ids):

- ``llamacpp``: llama-cpp-python on the embedded SmolLM2 GGUF file, one thread (the project's ``served-test`` extra).
  It rejects a list of prompts and computes one request at a time (results/served.md says why both clients are
  server-bound there).
- ``vllm``: vLLM's CPU build (``perf/.venv-vllm``, requirements-vllm.txt) on the converted SmolLM2 folder in float32,
  ``--no-enable-prefix-caching --enforce-eager --max-model-len 2048``, 2 GiB KV cache. It takes a list of prompts per
  request and batches everything in flight: the client's job is to keep that batch full.

On the same CrowS-Pairs sentences (both of ``--pairs`` random pairs, seed 0) the methods run interleaved, round after
round (harness.py), after one untimed warm-up each:

- ``biaslab``: ``Scorer.sequence_logprob`` against replica 1 (``--concurrency`` POSTs in flight; lists of prompts
  where the server takes them), a fresh in-memory score cache every run (every sentence is sent); the capability
  probe (and on llama.cpp the one-off first-token request) are made before the clock starts;
- ``lmeval``: lm-evaluation-harness 0.4.13 ``LocalCompletionsAPI.loglikelihood`` with an empty context (what its
  ``crows_pairs_english`` task sends) against replica 1, in its own venv (served_lmeval.py), ``num_concurrent`` =
  ``--concurrency``, at its default ``batch_size`` 1 (one prompt per POST);
- ``lmeval_lists`` (servers that take lists): the same with ``batch_size`` = biaslab's largest list on these
  sentences, so both send lists of the same size, the same number of POSTs, as many in flight;
- ``biaslab_2rep``: biaslab against both replicas.

Ratios are taken within a round (lm-eval seconds / biaslab seconds; one replica / two) and reported as min / median /
max over the rounds, with the 1-minute load average before and after every run. Scores: preference agreement per
pair and mean |difference| of the sentence log-probs, as each reports them and on the same tokens (on llama.cpp,
which gives the first echoed token no log-prob, lm-eval's sums lack each sentence's first token, so biaslab's sum
without it is compared; on vLLM both cover every token). Each run also records the CPU seconds the servers'
processes spent (read from /proc), which the machine's other load inflates far less than wall time. Writes
``served.json``, ``served_runs.csv`` and ``results.md`` into the output folder.

Two checks on vLLM: ``--pin-check`` times biaslab on one pinned server against one unpinned (vLLM's own CPU binding:
the engine on one core, its front-end processes free), interleaved; ``--ramp`` sends the sentences as raw requests,
L prompts per POST with k POSTs in flight, and reports the server's CPU per sentence (ramp.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "lib"), str(HERE), str(ROOT / "tests")]

import harness  # noqa: E402
from served_helpers import ALIAS, PREFIX, LlamaServer, free_port  # noqa: E402

VLLM_PYTHON = HERE / ".venv-vllm" / "bin" / "python"
LMEVAL_PYTHON = HERE / ".venv-lmeval" / "bin" / "python"
#: the model id the vLLM server reports (``--served-model-name``)
VLLM_MODEL_ID = "smollm2-135m-instruct"
#: seconds a request may take before it is retried (both clients), and retries (both clients)
REQUEST_TIMEOUT_S, MAX_RETRIES = 300, 3


class PinnedServer(LlamaServer):
    """The test server, pinned to one core (``taskset``), one thread."""

    kind = "llamacpp"
    model_id = ALIAS
    lists = False

    def __init__(self, core: int):
        super().__init__(threads=1)
        self.core = core

    def command(self) -> list[str]:
        return ["taskset", "-c", str(self.core)] + super().command()

    def start(self, timeout: float = 180):
        return super().start(timeout)

    def peak_rss_mb(self) -> float:
        return _hwm_mb(self.proc.pid)


def _hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _stat(pid) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, ppid, pgrp, session, ...), None when the
    process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _live() -> dict[int, list[str]]:
    """pid -> :func:`_stat` of every process."""
    return {int(d.name): f for d in Path("/proc").iterdir() if d.name.isdigit() and (f := _stat(d.name))}


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (those that have ended count 0)."""
    return sum(int(f[11]) + int(f[12]) for f in map(_stat, pids) if f) / os.sysconf("SC_CLK_TCK")


class Metered:
    """A runner whose records also carry ``server_cpu_s``: the CPU seconds all servers' processes spent during the
    run (one method runs at a time), which the machine's other load does not inflate as it does wall time."""

    def __init__(self, runner, servers: list):
        self.runner, self.servers = runner, servers

    def _pids(self) -> list[int]:
        return [p for s in self.servers if s.proc is not None for p in [s.proc.pid] + descendants(s.proc.pid)]

    def __call__(self, limit: int | None = None) -> dict:
        pids = self._pids()
        c0 = cpu_seconds(pids)
        rec = dict(self.runner(limit))
        rec["server_cpu_s"] = round(cpu_seconds(pids) - c0, 2)
        return rec


def descendants(pid: int) -> list[int]:
    """The process ids below ``pid`` (children, their children, ...), read from /proc."""
    children: dict[int, list[int]] = {}
    for p, f in _live().items():
        children.setdefault(int(f[1]), []).append(p)
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


class VllmServer:
    """vLLM's OpenAI-compatible server (CPU build, ``python`` from perf/.venv-vllm) on the converted SmolLM2 folder,
    on 127.0.0.1. ``core``: pinned to that core (``taskset``; vLLM's API server, engine core and worker processes
    all inherit it, and the engine's OpenMP thread is bound to it); None: vLLM's own binding (``auto``: on this
    2-core machine one core computes and one is reserved for the front-end processes). Started in its own session;
    stopped by its process id (SIGTERM, SIGKILL after 30 s), then any process of that session still alive 15 s
    later is killed by its pid."""

    kind = "vllm"
    model_id = VLLM_MODEL_ID
    lists = True

    def __init__(self, python: str, core: int | None, port: int | None = None, kv_cache_gib: int = 2,
                 log_dir: Path | None = None):
        from biaslab import models
        self.python, self.core, self.kv_cache_gib = python, core, kv_cache_gib
        self.port = port or free_port()
        self.folder = str(models.cache_folder("smollm2-135m-instruct"))
        self.log_path = Path(log_dir or tempfile.mkdtemp(prefix="vllm-")) / f"vllm-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        cmd = [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.folder,
               "--served-model-name", VLLM_MODEL_ID, "--host", "127.0.0.1", "--port", str(self.port),
               "--dtype", "float32", "--no-enable-prefix-caching", "--max-model-len", "2048", "--enforce-eager",
               "--disable-uvicorn-access-log"]
        return (["taskset", "-c", str(self.core)] if self.core is not None else []) + cmd

    def env(self) -> dict:
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=str(self.kv_cache_gib), HF_HUB_OFFLINE="1",
                   TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
                   TOKENIZERS_PARALLELISM="false")
        if self.core is not None:
            env.update(VLLM_CPU_OMP_THREADS_BIND=str(self.core), VLLM_CPU_NUM_OF_RESERVED_CPU="0")
        else:
            env.update(VLLM_CPU_OMP_THREADS_BIND="auto")
        return env

    def start(self, timeout: float = 420) -> "VllmServer":
        return self.launch().wait_ready(timeout)

    def launch(self) -> "VllmServer":
        """Start the server process (not waiting for it: :meth:`wait_ready`)."""
        if not Path(self.python).exists():
            raise RuntimeError(f"no vLLM environment at {self.python}: `make bench BENCH_PROFILE=served_vllm` "
                               "creates it (perf/requirements-vllm.txt)")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.command(), stdout=self.log, stderr=subprocess.STDOUT, env=self.env(),
                                     start_new_session=True)
        self._t0 = time.time()
        return self

    def wait_ready(self, timeout: float = 420) -> "VllmServer":
        import httpx
        t0 = self._t0
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.proc.returncode}; its log {self.log_path} ends:\n"
                                   + self.log_path.read_text()[-3000:])
            try:
                if httpx.get(self.url + "/models", timeout=2).status_code == 200:
                    self.started_s = time.time() - t0
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"vLLM not ready on port {self.port} after {timeout} s (log {self.log_path})")

    def peak_rss_mb(self) -> float:
        """Peak resident memory, summed over the server's processes (API server, engine core, worker)."""
        if self.proc is None:
            return 0.0
        return sum(_hwm_mb(p) for p in [self.proc.pid] + descendants(self.proc.pid))

    def stop(self) -> None:
        """SIGTERM to the server's pid (vLLM then stops its engine processes), SIGKILL after 30 s; then any process
        of its session still alive after 15 s, by its pid."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        deadline = time.time() + 15          # its processes (engine core, worker, resource tracker) end by themselves
        while in_session(self.proc.pid) and time.time() < deadline:
            time.sleep(0.2)
        for pid in in_session(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()


def in_session(sid: int) -> list[int]:
    """The live processes of session ``sid`` (a server started with start_new_session: its pid is the session id,
    and every process it starts stays in it, even once its parent has ended)."""
    return [p for p, f in _live().items() if len(f) > 3 and f[3] == str(sid) and f[0] != "Z"]


class BiaslabRunner:
    """biaslab's served backend on ``urls``: a fresh in-memory cache per run, probe and first-token request untimed."""

    def __init__(self, urls: list[str], model: str, texts: list[str], concurrency: int, first_token: bool):
        from biaslab import models, scoring
        self.spec = {"base_url": urls, "model": model, "prefix": PREFIX, "max_concurrency": concurrency,
                     "name": "bench", "timeout_s": REQUEST_TIMEOUT_S, "max_retries": MAX_RETRIES}
        self.texts, self.first_token = texts, first_token
        self._models, self._scoring = models, scoring
        sc = scoring.Scorer(models.load(self.spec), cache_dir=False, progress=False)
        sc.require("prompt_logprobs")
        sc.backend.prompt_lists()
        self.probe = dict(sc.backend.probe())

    def scorer(self):
        sc = self._scoring.Scorer(self._models.load(self.spec), cache_dir=False, progress=False)
        sc.backend._probe = dict(self.probe)
        return sc

    def list_sizes(self, texts: list[str] | None = None) -> list[int]:
        """How many prompts each POST carries for ``texts`` (the backend's own split, without sending anything)."""
        be = self.scorer().backend
        work = [be._completion(PREFIX + t, max_tokens=1, echo=True, logprobs=0) for t in texts or self.texts]
        posts, members = be._posts(work, [r.cost for r in work])
        return [len(members[id(p)]) for p in posts]

    def __call__(self, limit: int | None = None) -> dict:
        sc = self.scorer()
        if self.first_token:
            sc.backend._opening(sc)                  # the one-off request for the first token, outside the clock
        sent = sc.stats["requests"]
        usage0 = dict(sc.backend.usage)
        texts = self.texts[:limit] if limit else self.texts
        t0 = time.perf_counter()
        df = sc.sequence_logprob(texts, per_token=True)
        seconds = time.perf_counter() - t0
        first_less = [float(s - (lp[0] or 0.0)) if lp else 0.0 for s, lp in zip(df.sum_logprob, df.token_logprobs)]
        u = sc.backend.usage
        return {"seconds": seconds, "scores": df.sum_logprob.tolist(), "scores_without_first": first_less,
                "requests": sc.stats["requests"] - sent,
                "prompt_tokens": u["prompt_tokens"] - usage0.get("prompt_tokens", 0)}


class LmevalRun:
    """One lm-eval setting (``batch_size``) on the shared lm-eval worker."""

    def __init__(self, worker: harness.LineWorker, batch_size: int):
        self.worker, self.batch_size = worker, batch_size
        self.ready = worker.ready

    def __call__(self, limit: int | None = None) -> dict:
        return self.worker.send({"limit": limit, "batch_size": self.batch_size})


def start_lmeval(python: str, url: str, model: str, texts: list[str], concurrency: int, tokenized: bool,
                 work: Path) -> harness.LineWorker:
    from biaslab import models
    cfg = work / "lmeval_served.json"
    cfg.write_text(json.dumps({"url": url + "/completions", "model": model, "texts": texts,
                               "tokenizer": str(models.cache_folder("smollm2-135m-instruct")),
                               "prefix_token_id": 1, "num_concurrent": concurrency,
                               "tokenized_requests": tokenized, "timeout": REQUEST_TIMEOUT_S,
                               "max_retries": MAX_RETRIES}))
    env = os.environ | {"TOKENIZERS_PARALLELISM": "false"}
    return harness.LineWorker([python, str(HERE / "served_lmeval.py"), str(cfg)], "lmeval", work / "lmeval.log",
                              env)


def sentences(pairs: int, seed: int = 0) -> tuple[list[str], int]:
    """Both sentences of ``pairs`` random CrowS-Pairs pairs (sent_more first, then sent_less); a sentence that occurs
    twice is kept once only when the whole list has no duplicates (checked: pairs are then compared by position)."""
    from biaslab.benchmarks import crows_pairs as cp
    p = cp.subsample(cp.load_original(), pairs, seed=seed).prompts
    texts = list(p.sent_more) + list(p.sent_less)
    if len(set(texts)) != len(texts):
        raise SystemExit(f"{pairs} pairs (seed {seed}) repeat a sentence; choose another --pairs or --seed")
    return texts, len(p)


def compare(a: list[float], b: list[float], n_pairs: int) -> dict:
    a, b = np.asarray(a), np.asarray(b)
    pa = a[:n_pairs] > a[n_pairs:2 * n_pairs]
    pb = b[:n_pairs] > b[n_pairs:2 * n_pairs]
    return {"preference_agreement": float((pa == pb).mean()), "mean_abs_diff": float(np.abs(a - b).mean()),
            "max_abs_diff": float(np.abs(a - b).max()), "pearson_r": float(np.corrcoef(a, b)[0, 1])}


RATIO_LABELS = {
    "biaslab_vs_lmeval": "biaslab vs lm-eval local-completions (batch_size 1), one replica",
    "biaslab_vs_lmeval_lists": "biaslab vs lm-eval local-completions (batch_size = biaslab's list size), one replica",
    "two_vs_one": "biaslab two replicas vs one",
    "two_vs_lmeval": "biaslab two replicas vs lm-eval (batch_size 1) one replica",
    "two_vs_lmeval_lists": "biaslab two replicas vs lm-eval (batch_size = list size) one replica",
    "pinned_vs_unpinned": "biaslab on a pinned server vs an unpinned one (> 1: pinning is faster)",
}


def markdown(res: dict) -> str:
    def f(x):
        return f"{x['median']:.2f} ({x['min']:.2f}-{x['max']:.2f})"
    srv = (f"llama-cpp-python {res['versions'].get('llama_cpp_python')} servers pinned to one core each"
           if res["server"] == "llamacpp" else
           f"vLLM (vllm-cpu {res['versions'].get('vllm')}, float32, eager, no prefix cache) servers "
           + ("pinned to one core each" if not res.get("pin_check") else "one pinned to core 0, one unpinned"))
    lists = ""
    if res.get("list_sizes"):
        ls = res["list_sizes"]
        lists = (f" biaslab's POSTs carry {ls['one_replica']} prompts (one replica) and {ls['two_replicas']} (two); "
                 f"lm-eval's lists: batch_size {res['lmeval_batch_size']}.")
    lines = [f"Served comparison on {res['server']}: {res['texts']} CrowS-Pairs sentences ({res['pairs']} pairs, seed "
             f"{res['seed']}), {res['rounds']} interleaved rounds, {res['concurrency']} requests in flight per "
             f"replica (both clients), {srv}; load average {res['load']['median']:.1f} "
             f"({res['load']['min']:.1f}-{res['load']['max']:.1f}) on {res['cores']} cores.{lists}", "",
             "| method | seconds median (min-max) | sentences/s (median) | server CPU s median (min-max) "
             "| POSTs per run |",
             "|---|---|---|---|---|"]
    for m, s in res["seconds"].items():
        c = res["server_cpu_s"][m]
        lines.append(f"| {m} | {s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f}) | "
                     f"{res['texts'] / s['median']:.1f} | {c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f}) | "
                     f"{res['requests_per_run'].get(m, '')} |")
    lines += ["", "| ratio (per round) | median (min-max) |", "|---|---|"]
    lines += [f"| {RATIO_LABELS[k]} | {f(v)} |" for k, v in res["ratios"].items()]
    lines += ["", "| scores compared | preference agreement | mean abs diff | max abs diff | Pearson r |",
              "|---|---|---|---|---|"]
    for k, v in res["agreement"].items():
        lines.append(f"| {k} | {v['preference_agreement']:.3f} | {v['mean_abs_diff']:.2e} | {v['max_abs_diff']:.2e} "
                     f"| {v['pearson_r']:.6f} |")
    return "\n".join(lines) + "\n"


def run(pairs: int, rounds: int, concurrency: int, lmeval_python: str, out: Path, warmup: int = 2,
        seed: int = 0, server: str = "llamacpp", vllm_python: str = str(VLLM_PYTHON), pin_check: bool = False,
        methods: list[str] | None = None, lmeval_batch: int | None = None) -> dict:
    from importlib import metadata
    texts, n_pairs = sentences(pairs, seed)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="served-bench-"))
    if not pin_check and not Path(lmeval_python).exists():
        raise SystemExit(f"no lm-eval environment at {lmeval_python}: `make bench` creates it")
    if server == "vllm":
        cores = [0, None] if pin_check else [0, 1]
        make = lambda core: VllmServer(vllm_python, core, log_dir=work)   # noqa: E731
    else:
        if pin_check:
            raise SystemExit("--pin-check is for --server vllm (llama.cpp servers run one thread on their core)")
        cores = [0, 1]
        make = PinnedServer
    t_start = time.perf_counter()
    servers, runners, records, lm_worker = [], {}, [], None
    try:
        if server == "vllm":                         # both start at once (25-60 s each), each on its own core
            for c in cores:
                servers.append(make(c).launch())
            for s in servers:
                s.wait_ready()
        else:
            for c in cores:
                servers.append(make(c).start())
        for s, c in zip(servers, cores):
            print(f"{server} server on {s.url} (core {c}) ready", flush=True)
        model = servers[0].model_id
        first_token = server == "llamacpp"
        if pin_check:
            runners["biaslab_pinned"] = BiaslabRunner([servers[0].url], model, texts, concurrency, first_token)
            runners["biaslab_unpinned"] = BiaslabRunner([servers[1].url], model, texts, concurrency, first_token)
        else:
            runners["biaslab"] = BiaslabRunner([servers[0].url], model, texts, concurrency, first_token)
            lists = runners["biaslab"].probe.get("prompt_lists")
            sizes = {"one_replica": sorted(set(runners["biaslab"].list_sizes()))}
            lm_worker = start_lmeval(lmeval_python, servers[0].url, model, texts, concurrency,
                                     tokenized=server == "vllm", work=work)
            runners["lmeval"] = LmevalRun(lm_worker, 1)
            batch = lmeval_batch or max(sizes["one_replica"])
            if lists and batch > 1:
                runners["lmeval_lists"] = LmevalRun(lm_worker, batch)
            runners["biaslab_2rep"] = BiaslabRunner([s.url for s in servers], model, texts, concurrency,
                                                    first_token)
            sizes["two_replicas"] = sorted(set(runners["biaslab_2rep"].list_sizes()))
            if methods:
                runners = {m: r for m, r in runners.items() if m in methods}
        runners = {m: Metered(r, servers) for m, r in runners.items()}
        records = harness.run_interleaved(runners, rounds, warmup=warmup, log=lambda s: print(s, flush=True))
        rss = [round(s.peak_rss_mb(), 1) for s in servers]
        ready = [r.runner.ready for r in runners.values() if isinstance(r.runner, LmevalRun)]
        lmeval_version = ready[0].get("versions", {}).get("lm_eval") if ready else None
        started = [round(getattr(s, "started_s", float("nan")), 1) for s in servers]
    finally:
        if lm_worker is not None:
            lm_worker.close()
        for s in servers:
            s.stop()
    first = {}
    for rec in sorted(records, key=lambda x: x["round"]):
        first.setdefault(rec["method"], rec)
    versions = {"lm_eval": lmeval_version}
    if server == "llamacpp":
        versions["llama_cpp_python"] = metadata.version("llama_cpp_python")
    else:
        versions["vllm"] = subprocess.run([vllm_python, "-c", "from importlib.metadata import version as v; "
                                           "print(v('vllm-cpu'))"], capture_output=True, text=True).stdout.strip()
    pr = lambda m, b: harness.spread(harness.paired_ratios(records, m, b))   # noqa: E731
    have = set(first)
    if pin_check:
        ratios = {"pinned_vs_unpinned": pr("biaslab_pinned", "biaslab_unpinned")}
    else:
        ratios = {k: pr(m, b) for k, m, b in [("biaslab_vs_lmeval", "biaslab", "lmeval"),
                                              ("biaslab_vs_lmeval_lists", "biaslab", "lmeval_lists"),
                                              ("two_vs_one", "biaslab_2rep", "biaslab"),
                                              ("two_vs_lmeval", "biaslab_2rep", "lmeval"),
                                              ("two_vs_lmeval_lists", "biaslab_2rep", "lmeval_lists")]
                  if m in have and b in have}
    pairs_compared = [("biaslab vs lm-eval, as reported", "biaslab", "scores", "lmeval"),
                      ("lm-eval lists vs lm-eval one prompt per POST", "lmeval_lists", "scores", "lmeval"),
                      ("biaslab one replica vs two", "biaslab", "scores", "biaslab_2rep"),
                      ("biaslab pinned vs unpinned server", "biaslab_pinned", "scores", "biaslab_unpinned")]
    if server == "llamacpp":                    # on vLLM both cover every token: the same as "as reported"
        pairs_compared.insert(1, ("biaslab vs lm-eval, same tokens (biaslab without the first token)", "biaslab",
                                  "scores_without_first", "lmeval"))
    agreement = {name: compare(first[a][key], first[b]["scores"], n_pairs)
                 for name, a, key, b in pairs_compared if a in have and b in have}
    res = {"server": server, "pin_check": pin_check, "pairs": n_pairs, "texts": len(texts), "seed": seed,
           "rounds": rounds, "concurrency": concurrency, "cores": os.cpu_count(), "load": harness.load_spread(records),
           "server_peak_rss_mb": rss, "server_start_s": started, "versions": versions,
           "list_sizes": None if pin_check else sizes,
           "lmeval_batch_size": runners["lmeval_lists"].runner.batch_size if "lmeval_lists" in runners else 1,
           "seconds": {m: harness.spread(v) for m, v in harness.seconds_by_method(records).items()},
           "server_cpu_s": {m: harness.spread([r["server_cpu_s"] for r in records if r["method"] == m])
                            for m in first},
           "ratios": ratios, "requests_per_run": {m: first[m].get("requests") for m in first},
           "agreement": agreement, "wall_seconds": round(time.perf_counter() - t_start)}
    (out / "served.json").write_text(json.dumps(res, indent=2) + "\n")
    import pandas as pd
    pd.DataFrame([{k: v for k, v in rec.items() if not k.startswith("scores")} for rec in records]).to_csv(
        out / "served_runs.csv", index=False)
    (out / "results.md").write_text(markdown(res))
    print(markdown(res))
    return res


def ramp(pairs: int, out: Path, vllm_python: str = str(VLLM_PYTHON), seed: int = 0, rounds: int = 2,
         settings: tuple = ((1, 1), (1, 2), (1, 8), (5, 2), (25, 2), (100, 2), (0, 1))) -> list[dict]:
    """How the vLLM server's work per sentence depends on what the client keeps in flight: the sentences sent as
    lists of L prompts (0: all in one) with k POSTs in flight, raw HTTP (no client logic), on one pinned server.
    Reports wall seconds and the server's CPU seconds per sentence (which the machine's other load inflates far less
    than wall time); ``--ramp``."""
    import asyncio
    import httpx
    texts, _ = sentences(pairs, seed)
    prompts = [PREFIX + t for t in sorted(texts)]
    work = Path(tempfile.mkdtemp(prefix="served-ramp-"))
    srv = VllmServer(vllm_python, 0, log_dir=work)
    rows = []

    async def send(size: int, inflight: int):
        size = size or len(prompts)
        bodies = [prompts[i:i + size] if size > 1 else prompts[i] for i in range(0, len(prompts), size)]
        sem = asyncio.Semaphore(inflight)
        async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S) as client:
            async def one(p):
                async with sem:
                    r = await client.post(srv.url + "/completions", json={
                        "model": VLLM_MODEL_ID, "prompt": p, "max_tokens": 1, "echo": True, "logprobs": 0,
                        "temperature": 0})
                    r.raise_for_status()
            await asyncio.gather(*[one(p) for p in bodies])
    try:
        srv.start()
        asyncio.run(send(4, 1))                                            # warm-up
        for r in range(rounds):
            for size, inflight in settings:
                pids = [srv.proc.pid] + descendants(srv.proc.pid)
                c0, t0, load = cpu_seconds(pids), time.perf_counter(), os.getloadavg()[0]
                asyncio.run(send(size, inflight))
                wall, cpu = time.perf_counter() - t0, cpu_seconds(pids) - c0
                posts = -(-len(prompts) // (size or len(prompts)))
                rows.append({"round": r, "prompts_per_post": size or len(prompts), "posts": posts,
                             "posts_in_flight": min(inflight, posts),
                             "seconds": round(wall, 2),
                             "server_cpu_ms_per_sentence": round(1000 * cpu / len(prompts), 1),
                             "load_before": round(load, 1), "load_after": round(os.getloadavg()[0], 1)})
                print(rows[-1], flush=True)
    finally:
        srv.stop()
    import pandas as pd
    df = pd.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "ramp.csv", index=False)
    summary = df.groupby(["prompts_per_post", "posts", "posts_in_flight"], sort=False).agg(
        seconds=("seconds", "median"), server_cpu_ms_per_sentence=("server_cpu_ms_per_sentence", "median"),
        load=("load_before", "median")).reset_index()
    text = (f"vLLM ramp: {len(prompts)} CrowS-Pairs sentences, one server pinned to one core, medians over {rounds} "
            "rounds\n\n" + summary.to_markdown(index=False) + "\n")
    (out / "ramp.md").write_text(text)
    print(text)
    return rows


def parser():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=["llamacpp", "vllm"], default="llamacpp")
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=2, help="requests in flight per replica, both clients")
    ap.add_argument("--lmeval-batch", type=int, help="lm-eval's batch_size for lmeval_lists (default: biaslab's "
                    "largest list on these sentences)")
    ap.add_argument("--methods", nargs="+", choices=["biaslab", "lmeval", "lmeval_lists", "biaslab_2rep"],
                    help="a subset of the methods (default: all the server allows)")
    ap.add_argument("--pin-check", action="store_true", help="vLLM: biaslab on a pinned vs an unpinned server")
    ap.add_argument("--ramp", action="store_true", help="vLLM: server CPU per sentence against prompts per POST and "
                    "POSTs in flight (raw requests, one pinned server)")
    ap.add_argument("--warmup", type=int, default=2, help="sentences of each method's untimed warm-up")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lmeval-python", default=str(LMEVAL_PYTHON))
    ap.add_argument("--vllm-python", default=str(VLLM_PYTHON))
    ap.add_argument("--out", default=str(HERE / "results" / "_scratch" / "served"))
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.ramp:
        ramp(args.pairs, Path(args.out), args.vllm_python, args.seed, args.rounds)
        return 0
    run(args.pairs, args.rounds, args.concurrency, args.lmeval_python, Path(args.out), warmup=args.warmup,
        seed=args.seed, server=args.server, vllm_python=args.vllm_python, pin_check=args.pin_check,
        methods=args.methods, lmeval_batch=args.lmeval_batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
