"""Every command the README and the pages under docs/ show is a valid command of this checkout (parsed, validated,
dry-run; nothing runs)."""

import re
import shlex
import subprocess

import pytest

from biaslab import cli, models, paths
from biaslab.run import parameters
from helpers import registry_restored

PAGES = {p.relative_to(paths.ROOT).as_posix(): p.read_text()
         for p in [paths.ROOT / "README.md", *sorted((paths.ROOT / "docs").glob("*.md"))]}
BLOCK_LINES = [ln.strip() for text in PAGES.values() for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)
               for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]
INLINE = sorted({m for text in PAGES.values()
                 for m in re.findall(r"`((?:\.venv/bin/)?(?:biaslab|make) [^`]+)`", text)})


def _commands(line):
    """The separate commands of a shell line (``a && b``), comments dropped, as argument lists."""
    line = line.split("  #")[0]
    return [shlex.split(part) for part in line.split("&&")]


def _named_in_prose(args):
    """Whether ``args`` name a command without its arguments ("`biaslab import eee` reads ..."): an existing command
    followed only by valid choices of its leading positionals, fewer than it needs."""
    sub = next(a for a in cli.build_parser()._actions if a.dest == "command")
    assert args[0] in sub.choices, f"no command biaslab {args[0]}"
    positionals = [a for a in sub.choices[args[0]]._actions if not a.option_strings]
    needed = [a for a in positionals if a.nargs not in ("?", "*")]
    if len(args) - 1 >= len(needed) or any(t.startswith("-") for t in args[1:]):
        return False
    for tok, a in zip(args[1:], positionals):
        assert a.choices is None or tok in a.choices, f"biaslab {args[0]}: {tok!r} is not one of {a.choices}"
    return True


@pytest.fixture(autouse=True)
def registry(monkeypatch):
    """A command's --benchmark-module registers its benchmark in this process: unregistered after the test. The
    pages' commands are run from the checkout's root (their relative paths), whatever folder this worker is in."""
    monkeypatch.chdir(paths.ROOT)
    with registry_restored():
        yield


@pytest.fixture
def models_seen(monkeypatch):
    seen = []
    monkeypatch.setattr(models, "check_spec", lambda name: seen.append(name) or "hub")
    # commands meant for a GPU machine (-p device=cuda) are checked for their form, not against this machine
    monkeypatch.setattr(models, "check_device", lambda device: None)
    return seen


def _check(argv, models_seen, capsys):
    prog, args = argv[0].rsplit("/", 1)[-1], argv[1:]
    if prog == "cd":
        assert (paths.ROOT / args[0]).is_dir()
    elif prog == "make":
        targets = [a for a in args if "=" not in a]
        r = subprocess.run(["make", "-n", *args], cwd=paths.ROOT, capture_output=True, text=True)
        assert r.returncode == 0, f"make {' '.join(args)}: {r.stderr}"
        assert "No rule" not in r.stderr and targets
    elif prog == "biaslab":
        ns = cli.build_parser().parse_args(args)          # SystemExit (a failed test) on a bad form
        if ns.command == "reproduce":
            assert cli.main(args + ["--dry-run"]) == 0, capsys.readouterr().err
    elif prog == "papermill":
        nb, _out, rest = args[0], args[1], args[2:]
        from papermill.cli import _resolve_type
        given = {}
        while rest:
            flag, *rest = rest
            assert flag == "-p", f"unexpected papermill option {flag}"
            name, value, *rest = rest
            given[name] = _resolve_type(value)
        source = (paths.NOTEBOOKS_DIR / nb.replace(".ipynb", ".py")).read_text()
        for name in list(given):                          # what the notebook's as_list cell makes of it
            if isinstance(parameters.defaults(nb.removesuffix(".ipynb")).get(name), list):
                assert f"{name} = as_list({name})" in source, f"{nb} does not accept {name} as a JSON string"
                given[name] = parameters.as_list(given[name])
        parameters.validate(nb.removesuffix(".ipynb"), given)
    elif prog == "lm_eval":                               # another harness, not installed here: its form only
        assert {"--model", "--tasks", "--log_samples"} <= set(args), f"lm_eval needs --model, --tasks, --log_samples"
    elif prog in ("jupyter", "jupytext"):
        assert (paths.ROOT / ".venv/bin" / prog).exists() or pytest.skip(f"{prog} not installed")
    else:
        pytest.fail(f"README.md or docs/ shows a command this test does not know: {argv}")


@pytest.mark.parametrize("line", BLOCK_LINES)
def test_readme_code_block_commands(line, models_seen, capsys):
    for argv in _commands(line):
        _check(argv, models_seen, capsys)


@pytest.mark.parametrize("line", INLINE)
def test_readme_inline_commands(line, models_seen, capsys):
    line = line.replace("DIR", "/tmp/mirror").replace("/path/to/mirror", "/tmp/mirror")
    for argv in _commands(line):
        if argv[0].endswith("biaslab") and argv[1:2] != ["reproduce"]:
            if not _named_in_prose(argv[1:]):
                cli.build_parser().parse_args(argv[1:])
        else:
            _check(argv, models_seen, capsys)


def test_docs_pages_are_read():
    """The pages under docs/ are checked too: the commands moved there from the README are among the lines."""
    assert "docs/served.md" in PAGES and any("gpu1:8000" in ln for ln in BLOCK_LINES)


def test_readme_model_examples_are_the_ones_resolved(models_seen, capsys):
    for line in BLOCK_LINES:
        for argv in _commands(line):
            if argv[0].endswith("biaslab") and "reproduce" in argv:
                _check(argv, models_seen, capsys)
    assert "meta-llama/Llama-3.1-8B-Instruct" in models_seen and "/path/to/local/model" in models_seen
