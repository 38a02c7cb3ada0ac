"""Every command the README shows is a valid command of this checkout (parsed, validated, dry-run; nothing runs)."""

import re
import shlex
import subprocess

import pytest

from biaslab import cli, models, parameters, paths

README = (paths.ROOT / "README.md").read_text()
BLOCK_LINES = [ln.strip() for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S)
               for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]
INLINE = sorted({m for m in re.findall(r"`((?:\.venv/bin/)?(?:biaslab|make) [^`]+)`", README)})


def _commands(line):
    """The separate commands of a shell line (``a && b``), comments dropped, as argument lists."""
    line = line.split("  #")[0]
    return [shlex.split(part) for part in line.split("&&")]


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
    elif prog in ("jupyter", "jupytext"):
        assert (paths.ROOT / ".venv/bin" / prog).exists() or pytest.skip(f"{prog} not installed")
    else:
        pytest.fail(f"the README shows a command this test does not know: {argv}")


@pytest.mark.parametrize("line", BLOCK_LINES)
def test_readme_code_block_commands(line, models_seen, capsys):
    for argv in _commands(line):
        _check(argv, models_seen, capsys)


@pytest.mark.parametrize("line", INLINE)
def test_readme_inline_commands(line, models_seen, capsys):
    line = line.replace("DIR", "/tmp/mirror").replace("/path/to/mirror", "/tmp/mirror")
    for argv in _commands(line):
        if argv[0].endswith("biaslab") and argv[1:2] != ["reproduce"]:
            cli.build_parser().parse_args(argv[1:])
        else:
            _check(argv, models_seen, capsys)


def test_readme_model_examples_are_the_ones_resolved(models_seen, capsys):
    for line in BLOCK_LINES:
        for argv in _commands(line):
            if argv[0].endswith("biaslab") and "reproduce" in argv:
                _check(argv, models_seen, capsys)
    assert "meta-llama/Llama-3.1-8B-Instruct" in models_seen and "/path/to/local/model" in models_seen
