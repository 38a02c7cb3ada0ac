"""Command line: ``biaslab data fetch|status``, ``biaslab models prepare|list``, ``biaslab reproduce``,
``biaslab report render|check|screenshot|pdf``, ``biaslab verify``, ``biaslab catalogue``, ``biaslab import
lm-eval|inspect|eee PATH``, ``biaslab export eee [FOLDER]``, ``biaslab check-benchmark MODULE``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from pathlib import Path

from . import paths, plan
from .files import integrity
from .plan.schema import PlanError


def _data(args) -> int:
    from . import benchmarks, sources
    try:
        benchmarks.load_plugins(args.benchmark_module or ())      # their own sources tables (Spec.sources_table)
        if args.action == "status":
            rows = sources.status()
        else:
            res = sources.fetch(benchmarks=args.only, mirror=args.mirror)
    except sources.DataError as exc:
        print(f"biaslab data: error: {exc}", file=sys.stderr)
        return 2
    if args.action == "status":
        width = max(len(r["file"]) for r in rows)
        for r in rows:
            print(f"{r['state']:9s} {r['benchmark']:15s} {r['file']:<{width}s}")
        bad = [r for r in rows if r["state"] != "verified"]
        print(f"\n{len(rows) - len(bad)} of {len(rows)} files present and verified.")
        return 0 if not bad else 1
    counts = Counter(res.values())
    print("data: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + " (all sha256-verified)")
    return 0


def _models(args) -> int:
    from . import models
    if args.action == "list":
        print("\n".join(models.EMBEDDED))
        return 0
    for name in args.names or list(models.EMBEDDED):
        print(f"{name}: ready ({models.prepare(name)})")
    return 0


def _reproduce(args) -> int:
    from .run import execute
    overrides = execute.parse_overrides(args.param or [])
    if args.plan:                 # a user's own plan: validated by reproduce before any work, passed to every notebook
        overrides["analysis_plan"] = args.plan
    return execute.reproduce(profile=args.profile, only=args.only, overrides=overrides, outputs_dir=args.out,
                             publish=args.publish, html=not args.no_html, dry_run=args.dry_run, jobs=args.jobs,
                             served=args.served, check=args.check, benchmark_modules=args.benchmark_module or ())


def plan_note(folder) -> str:
    """"plan changed since these results (…)" when the analysis plan a run folder's MANIFEST recorded no longer
    hashes the same ("" when it does, or when the folder has no readable MANIFEST)."""
    path = Path(folder) / integrity.MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    return plan.changed_since(manifest) if "analysis_plan" in manifest else ""


def _verify(args) -> int:
    """Check run folders against their MANIFEST.json: exit 1 naming every edited, missing and extra file, and every
    folder whose recorded plan was issued after its results."""
    root = Path(args.dir) if args.dir else paths.OUTPUTS_DIR
    if not root.is_dir():
        print(f"biaslab verify: error: {root} is not a folder", file=sys.stderr)
        return 2
    checks = [integrity.verify(f) for f in integrity.run_folders(root)]
    if not checks:
        print(f"biaslab verify: error: no MANIFEST.json under {root}", file=sys.stderr)
        return 2
    bad = 0
    for c in checks:
        note = plan_note(Path(c.folder))
        failed = not c.ok or note.startswith(plan.ISSUED_AFTER)
        bad += failed
        if not failed:
            print(f"verified   {c.folder}")
        for line in c.lines():
            print(line)
        if note:
            print(f"{'problem' if note.startswith(plan.ISSUED_AFTER) else 'note':<10} {c.folder}: {note}")
    print(f"{len(checks) - bad} of {len(checks)} run folder(s) verified")
    return 1 if bad else 0


def _report(args) -> int:
    from .report import browser, front_page, gallery
    from .report.html import render_all
    root = Path(args.folder) if args.folder else paths.OUTPUTS_DIR
    if args.action == "render":
        done = render_all(root)
        print(f"wrote {len(done)} report{'s' if len(done) != 1 else ''} and {front_page.write(root)}")
        return 0
    if args.action == "screenshot":
        for p in gallery.take(root, Path(args.dest) if args.dest else root / "screenshots"):
            print(f"wrote {p} ({p.stat().st_size // 1024} KB)")
        return 0
    runs = front_page.manifests(root)
    pages = [f / f"{m.get('notebook') or f.name}.html" for f, m in runs]
    missing = [p for p in pages if not p.exists()]
    if missing:
        raise FileNotFoundError(f"no report at {missing[0]}{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}"
                                f": run `biaslab report render {args.folder or ''}`".strip())
    bad = 0
    with browser.chromium() as driver:
        if args.action == "pdf":
            for p in pages:
                print(f"wrote {browser.pdf(p, p.with_suffix('.pdf'), driver)}")
            return 0
        pages += [root / "index.html"] if (root / "index.html").exists() else []
        for p in pages:
            found = browser.check(p, driver)
            bad += bool(found.problems)
            print(found)
    print(f"{len(pages) - bad} of {len(pages)} pages display offline without a problem")
    return 1 if bad else 0


def _usage_errors():
    """Errors a user can fix from the command line (reported in one line, exit code 2)."""
    from .benchmarks import PluginError
    from .files.storage import StorageError
    from .models import ModelNotFoundError
    from .run.parameters import ParameterError
    from .sources import DataError
    return (ParameterError, ModelNotFoundError, KeyError, ValueError, FileNotFoundError, StorageError, PluginError,
            DataError)


def _catalogue(args) -> int:
    from .report import catalogue
    print(f"wrote {catalogue.write()}")
    return 0


def _summary(args) -> int:
    from .report import headline
    if args.check:
        stale = headline.stale_pages()
        print("the generated blocks of README.md and docs/ are up to date" if not stale else
              f"generated blocks of {', '.join(stale)} differ from what outputs/ renders to: run `biaslab summary`")
        return 1 if stale else 0
    for p in headline.write():
        print(f"wrote {p}")
    return 0


def _calibrate(args) -> int:
    """The familywise error of the run folders under ``--dir``, written beside them; the committed ``outputs/``
    are read, and their table written to ``scratch/`` (``reproduce --publish`` writes ``outputs/fwer.csv``)."""
    from .plan import calibration
    root = Path(args.dir) if args.dir else paths.OUTPUTS_DIR
    if not root.is_dir():
        raise ValueError(f"--dir {root} is not a folder: pass the outputs folder of a run (default outputs/)")
    insts = calibration.all_instances(root)
    if not insts:
        raise ValueError(f"--dir {root} holds no decided claim (no run folder of {', '.join(calibration.NOTEBOOKS)} "
                         "with a tested claim): nothing to calibrate; pass the outputs folder of a run")
    table = calibration.fwer(root, args.replications, args.seed, insts=insts)
    committed = root.resolve() == paths.OUTPUTS_DIR.resolve()
    path = (paths.SCRATCH_DIR if committed else root) / "fwer.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    for r in table.itertuples():
        print(f"{r.rule}: familywise error {r.fwer:.4f} (MC SE {r.fwer_mc_se:.4f}) over {r.instances} claim instances "
              f"in {r.families} families, {r.replications} replications")
    print(f"wrote {path}" + (" (the committed outputs/fwer.csv is written by `biaslab reproduce --publish`)"
                             if committed else ""))
    return 0


def _int_arg(check):
    """An argparse type: an integer that ``check`` accepts (it raises ValueError naming the bound), so that argparse
    names the flag in its one-line error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        try:
            check(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value
    return parse


def _replications(value: int) -> None:
    from .plan import calibration
    calibration.check_replications(value)


def _seed(value: int) -> None:
    if not 0 <= value <= 2**32 - 1:
        raise ValueError(f"{value} is out of range: pass a seed from 0 to {2**32 - 1}")


def _plugin_option(p) -> None:
    p.add_argument("--benchmark-module", action="append", metavar="PATH_OR_MODULE",
                   help="a benchmark module from outside the library (a .py file, a package folder or a module "
                        "name; repeatable); installed entry points of group biaslab.benchmarks load anyway")


def _check_benchmark(args) -> int:
    from .run import check_benchmark
    if args.items < 1:
        raise ValueError(f"--items {args.items}: dry-run at least 1 item (default 8)")
    return check_benchmark.main(args.module, items=args.items)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="biaslab", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)

    d = sub.add_parser("data", help="fetch and verify benchmark files")
    d.add_argument("action", choices=["fetch", "status"])
    d.add_argument("--mirror", help="folder laid out as <owner>/<repo>/<path> to copy from instead of downloading "
                                    "(or set BIASLAB_DATA_MIRROR)")
    d.add_argument("--only", nargs="+", metavar="BENCHMARK", help="only these benchmarks (see data/sources.tsv)")
    _plugin_option(d)
    d.set_defaults(func=_data)

    m = sub.add_parser("models", help="prepare the embedded models (convert GGUF once into a safetensors cache)")
    m.add_argument("action", choices=["prepare", "list"])
    m.add_argument("names", nargs="*")
    m.set_defaults(func=_models)

    r = sub.add_parser("reproduce", help="execute the notebooks with papermill (into scratch/ unless --publish)")
    r.add_argument("--profile", default="default", choices=["smoke", "default", "paper"])
    r.add_argument("--only", nargs="+", metavar="NAME", help="notebook names (or prefixes such as 01)")
    r.add_argument("-p", "--param", action="append", metavar="KEY=VALUE",
                   help="override a notebook parameter (value parsed as JSON when it can be)")
    r.add_argument("--plan", metavar="PATH", help="the analysis plan (YAML) whose claims the notebooks decide "
                   "(default: analysis_plan.yaml); its sha256 and version go into every MANIFEST")
    r.add_argument("--publish", action="store_true",
                   help="write into outputs/ (the committed results) and rewrite outputs/CATALOGUE.md, "
                        "outputs/SUMMARY.md and the generated blocks of README.md and docs/")
    r.add_argument("--out", metavar="DIR", help="write into DIR instead (default: scratch/, or BIASLAB_SCRATCH)")
    r.add_argument("--dry-run", action="store_true", help="validate parameters and models, print the plan, run nothing")
    r.add_argument("--no-html", action="store_true", help="skip the HTML renders")
    r.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="notebooks run at a time (each kernel gets cores/N torch threads; `make reproduce` uses 2)")
    r.add_argument("--served", action="store_true",
                   help="run notebooks 3 and 4 on the embedded SmolLM2 served by llama.cpp on 127.0.0.1 (started and "
                        "stopped here; needs `make served-test`), into <out>/served/ (`make reproduce-served`)")
    r.add_argument("--check", action="store_true",
                   help="exit 3 when a regenerated verdict differs from the committed outputs' (the comparison with "
                        "them is printed at the end of every run)")
    _plugin_option(r)
    r.set_defaults(func=_reproduce)

    rp = sub.add_parser("report", help="HTML reports of executed notebooks: render them (and index.html), check them in "
                                       "Chromium offline, take docs/reports.md's screenshots, print them to PDF")
    rp.add_argument("action", choices=["render", "check", "screenshot", "pdf"])
    rp.add_argument("folder", nargs="?", help="a folder of runs laid out as outputs/ (default: outputs/)")
    rp.add_argument("--dest", help="screenshot: folder for the PNGs (default: FOLDER/screenshots)")
    rp.set_defaults(func=_report)
    v = sub.add_parser("verify", help="check run folders against their MANIFEST.json (exit 1 naming edited, missing "
                                      "and extra files)")
    v.add_argument("dir", nargs="?", help="a run folder or a folder of them (default: outputs/)")
    v.set_defaults(func=_verify)

    c = sub.add_parser("catalogue", help="write outputs/CATALOGUE.md")
    c.set_defaults(func=_catalogue)

    s = sub.add_parser("summary", help="render the headline results, the multiverse section and the run times from "
                                       "outputs/ (and perf/results/) into outputs/SUMMARY.md, README.md and docs/ "
                                       "(between their markers)")
    s.add_argument("--check", action="store_true", help="only compare; exit 1 naming each page whose block is stale")
    s.set_defaults(func=_summary)

    cal = sub.add_parser("calibrate", help="familywise error of the headline table under the global null (each "
                                         "claim's test on sign-flipped / relabelled committed data, the plan's error "
                                         "budget applied) -> fwer.csv")
    cal.add_argument("what", choices=["fwer"])
    cal.add_argument("--replications", type=_int_arg(_replications), default=2000,
                     help="null replications, 1 to 100,000 (default 2,000; ~19 ms each on 2 cores)")
    cal.add_argument("--seed", type=_int_arg(_seed), default=0)
    cal.add_argument("--dir", help="outputs folder to read; fwer.csv is written there (default: outputs/ is read "
                                   "and the table written to scratch/fwer.csv)")
    cal.set_defaults(func=_calibrate)

    cb = sub.add_parser("check-benchmark", help="dry-run a benchmark module's spec on a few items with a fake scorer "
                                                "through every hook notebooks 1, 5 and 6 call; exit 1 naming each "
                                                "problem and its fix")
    cb.add_argument("module", help="a .py file, a package folder or a module name")
    cb.add_argument("--items", type=int, default=8, help="items to dry-run (default 8)")
    cb.set_defaults(func=_check_benchmark)

    _add_import_export(sub)
    return ap


# ------------------------------------------------------------- results from elsewhere: import / export ---
def _import(args) -> int:
    from . import importers
    from .run import preflight, publish
    from .run.log_import import import_run
    out = Path(args.out) if args.out else paths.SCRATCH_DIR / "imported" / Path(args.path).stem
    try:
        preflight.check_not_published(out, False)      # imports never write into the committed outputs/
        preflight.check_out(out)
        written = import_run(args.format, args.path, out, tokenizer=args.tokenizer, name=args.name,
                             benchmark=args.benchmark)
    except (importers.ImportError_, ValueError, KeyError, OSError, preflight.PreflightError,
            publish.FolderBusy) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"biaslab import {args.format}: error: {' '.join(str(msg).split())}", file=sys.stderr)
        return 2
    for res in written:
        for task, kind, n in res["tasks"]:
            print(f"{task}: not imported: {res['not_imported'][task]}" if task in res["not_imported"] else
                  f"{task}: {kind}, {n} items")
        print(f"{res['model']}: {', '.join(f'{k} ({n} rows)' for k, n in res['tables'].items())} -> {res['out']}")
        if res["excluded"]:
            print(f"{res['excluded']} row(s) excluded, each with its reason: {res['out']}/tables/excluded.csv")
    return 0


def _export(args) -> int:
    from .run import preflight
    from .importers import ImportError_, eee
    from .models.embedded import hub_id
    root = Path(args.dir) if args.dir else paths.OUTPUTS_DIR
    folders = sorted({p.parent for p in root.rglob(integrity.MANIFEST)})
    if not folders:
        print(f"biaslab export eee: error: no run folder (MANIFEST.json) under {root}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else paths.SCRATCH_DIR / "eee"
    try:
        preflight.check_not_published(out, False)
        inside = [f for f in folders if out.resolve() == f.resolve() or out.resolve().is_relative_to(f.resolve())]
        if inside:
            raise ValueError(f"--out {out} is inside the run folder {inside[0]}, which would then no longer verify "
                             "against its MANIFEST; name a folder outside it")
        preflight.check_out(out)
        for f in folders:
            name = f.relative_to(root).as_posix().replace("/", "__") if f != root else f.name
            res = eee.export_run(f, out, name=name, model_ids=hub_id)
            for model, r in res.items():
                print(f"{f}: {model}: {len(r['aggregate']['evaluation_results'])} results, "
                      f"{len(r['instances'])} instances (valid, schema {eee.SCHEMA_VERSION}) -> {out}/data/{name}")
    except (ImportError_, ValueError, OSError, preflight.PreflightError) as exc:
        print(f"biaslab export eee: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return 0


def _add_import_export(sub) -> None:
    im = sub.add_parser("import", help="another harness's per-sample log (lm-eval --log_samples, an inspect log, "
                                       "Every Eval Ever records) -> biaslab's tables")
    im.add_argument("format", choices=["lm-eval", "inspect", "eee"])
    im.add_argument("path", help="lm-eval output folder or samples_*.jsonl; inspect .eval log; EEE *.jsonl")
    im.add_argument("--out", help="run folder to write (default: scratch/imported/<name>; never the committed "
                                  "outputs/)")
    im.add_argument("--tokenizer", help="model name or folder whose tokenizer counts tokens (default: the log's "
                                        "pretrained=)")
    im.add_argument("--name", help="the model's name in the tables (default: the log's)")
    im.add_argument("--benchmark", choices=["bbq", "mbbq"], help="what a BBQ-shaped lm-eval task is, where its "
                    "texts cannot tell (default: found from the texts)")
    im.set_defaults(func=_import)
    ex = sub.add_parser("export", help="run folders -> Every Eval Ever records (aggregate + instance level), "
                                       "validated against the pinned schema")
    ex.add_argument("format", choices=["eee"])
    ex.add_argument("dir", nargs="?", help="a run folder or a folder of them (default: outputs/)")
    ex.add_argument("--out", help="where to write (default: scratch/eee; never inside a run folder or the "
                                  "committed outputs/)")
    ex.set_defaults(func=_export)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    _quiet_noise()
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"biaslab {args.command}: aborted", file=sys.stderr)
        return 130
    except PlanError as exc:          # one line per problem of the plan file
        for line in exc.problems:
            print(f"biaslab {args.command}: error: {line}", file=sys.stderr)
        return 2
    except _usage_errors() as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"biaslab {args.command}: error: {' '.join(str(msg).split())}", file=sys.stderr)
        return 2


def _quiet_noise() -> None:
    """Keep the terminal for progress and errors: kernel start-up chatter and traitlets deprecation warnings."""
    import warnings
    for name in ("traitlets", "papermill", "nbclient", "jupyter_client", "asyncio"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="(traitlets|jupyter_client|nbclient|zmq)")


if __name__ == "__main__":
    sys.exit(main())
