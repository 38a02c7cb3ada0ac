"""environment.yml, pyproject.toml and requirements.lock pin the same versions."""

import re
import tomllib

from biaslab import paths


def _pins(lines):
    return {m.group(1).lower(): m.group(2) for m in (re.match(r"^\s*-?\s*([A-Za-z0-9_.\-]+)==([^\s#]+)", l)
                                                      for l in lines) if m}


def test_environment_yml_lists_the_same_pins_as_pyproject():
    deps = tomllib.loads((paths.ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert _pins(deps) == _pins((paths.ROOT / "environment.yml").read_text().splitlines())


def test_lock_agrees_with_pyproject():
    deps = _pins(tomllib.loads((paths.ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    lock = {k.replace("_", "-"): v for k, v in _pins((paths.ROOT / "requirements.lock").read_text().splitlines()).items()}
    for name, version in deps.items():
        assert lock.get(name.replace("_", "-")) == version, name


def test_optional_extras_are_pinned_and_locked():
    extras = tomllib.loads((paths.ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    lock = {k.replace("_", "-"): v for k, v in _pins((paths.ROOT / "requirements.lock").read_text().splitlines()).items()}
    for req in extras["served-test"]:
        pin = _pins([req])
        assert pin, f"{req} is not an exact pin"
        (name, version), = pin.items()
        assert lock.get(name.replace("_", "-")) == version, name


def test_matplotlib_is_below_3_11():
    import matplotlib
    major, minor = map(int, matplotlib.__version__.split(".")[:2])
    assert (major, minor) < (3, 11), "matplotlib 3.11 breaks arviz (and bambi) at import"
