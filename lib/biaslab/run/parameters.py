"""Notebook parameters: read each notebook's ``parameters`` cell and check values against it before any work.

The runner (``biaslab reproduce``) calls :func:`validate` before a notebook starts: an unknown name is refused with
the valid names and the closest match, a value of the wrong type is refused (the type is that of the cell's default;
``None`` is always allowed, a ``None`` default accepts anything), sizes are checked against :data:`MINIMUM` (a size
may be given per dataset, ``{dataset: n}``), floats
must be finite and bounded parameters (alpha, seed, ...) lie in their :data:`BOUNDS`, and every
model spec is resolved (:func:`biaslab.models.check_spec`). Notebooks call :func:`as_list` on list parameters, so
papermill's ``-p models '["a", "b"]'`` (which passes a string) works as well as ``-y 'models: [a, b]'``.
"""

from __future__ import annotations

import ast
import difflib
import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import paths

#: Smallest meaningful value of size parameters (``None`` always means "all"). Other integer parameters whose names
#: say they are counts (``max_*``, ``n_*``, ``*_prompts``, ``*_pairs``, ...) must not be negative.
MINIMUM = {"max_prompts": 2, "max_pairs": 2, "max_preference_pairs": 1, "names_per_group": 1,
           "templates_per_task": 1, "bayes_chains": 1, "max_new_tokens": 1, "cot_max_new_tokens": 1,
           "calibration_replications": 1}
_COUNT_HINTS = ("max_", "n_", "k_")
_COUNT_SUFFIXES = ("_prompts", "_pairs", "_seeds", "_runs", "_draws", "_tune", "_chains", "_tokens", "_shots",
                   "_templates", "_per_group", "_per_task", "_threads")


class ParameterError(ValueError):
    """A parameter that the notebook does not have, or a value it cannot use."""


def as_list(value: Any) -> list | None:
    """A list parameter as a list: lists and tuples as they are, a JSON list in a string parsed (papermill's ``-p``
    passes strings), a single other string as a one-element list, None as None."""
    if value is None or isinstance(value, list):
        return value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except ValueError as exc:
                raise ParameterError(f"{value!r} looks like a list but is not valid JSON ({exc}); write it as "
                                     "'[\"a\", \"b\"]' (double quotes) or use papermill's -y 'name: [a, b]'") from exc
            if not isinstance(parsed, list):
                raise ParameterError(f"{value!r} is not a JSON list")
            return parsed
        return [value]
    raise ParameterError(f"expected a list, got {type(value).__name__} {value!r}")


@lru_cache(maxsize=32)
def _defaults(path: str, mtime: float) -> dict[str, Any]:
    import papermill as pm
    out = {}
    try:
        found = pm.inspect_notebook(path)
    except ValueError as exc:
        raise ParameterError(f"papermill cannot read the parameters of {path}: {exc}") from exc
    for name, info in found.items():
        try:
            out[name] = ast.literal_eval(info["default"])
        except (ValueError, SyntaxError):
            out[name] = None            # a non-literal default: any type accepted
    return out


def defaults(notebook: str | Path) -> dict[str, Any]:
    """name -> default value of a notebook's parameters cell (``notebook``: a name in ``notebooks/`` or a path)."""
    path = Path(notebook)
    if not path.suffix:
        path = paths.NOTEBOOKS_DIR / f"{notebook}.ipynb"
    if not path.exists():
        raise ParameterError(f"notebook {path} does not exist")
    return dict(_defaults(str(path), path.stat().st_mtime))


def _is_count(name: str) -> bool:
    return name in MINIMUM or name.startswith(_COUNT_HINTS) or name.endswith(_COUNT_SUFFIXES)


def _type_error(name: str, value: Any, default: Any) -> str | None:
    if value is None:
        return None
    if default is None:     # a size whose default is None ("all") still takes only whole numbers
        if not _is_count(name) or (isinstance(value, int) and not isinstance(value, bool)):
            return None
        return f"parameter {name}={value!r} has type {type(value).__name__}, expected int (or None for all)"
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(default, (list, tuple)):
        ok = isinstance(value, (list, tuple))
        if ok and default and all(isinstance(d, str) for d in default):
            # model lists also take served-model mappings (biaslab.models.resolve_spec)
            ok = all(isinstance(v, str) or (name == "models" and isinstance(v, dict)) for v in value)
    else:
        ok = isinstance(value, type(default))
    if ok:
        return None
    want = type(default).__name__ + (" of str" if isinstance(default, list) and default and
                                     isinstance(default[0], str) else "")
    return f"parameter {name}={value!r} has type {type(value).__name__}, expected {want} (like the default {default!r})"


#: Parameters with a bounded range: name -> (low, high, low included, high included). Every float must also be
#: finite (NaN compares false with everything, so a NaN alpha would silently decide nothing).
BOUNDS = {"alpha": (0, 1, False, False), "min_label_mass": (0, 1, True, True),
          "bf_prior_scale": (0, math.inf, False, False), "cot_temperature": (0, math.inf, True, False),
          "seed": (0, 2**32 - 1, True, True)}


def _bounds_error(name: str, value: Any) -> str | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"parameter {name}={value} is not a finite number"
    if name not in BOUNDS:
        return None
    low, high, low_in, high_in = BOUNDS[name]
    if (value < low or (value == low and not low_in)) or (value > high or (value == high and not high_in)):
        shown = f"{'[' if low_in else '('}{low}, {high if high != math.inf else 'inf'}{']' if high_in else ')'}"
        return f"parameter {name}={value} is out of range: it must lie in {shown}"
    return None


def _range_error(name: str, value: Any) -> str | None:
    bad = _bounds_error(name, value)
    if bad or not isinstance(value, int) or isinstance(value, bool):
        return bad
    low = MINIMUM.get(name)
    if low is None and _is_count(name):
        low = 0
    if low is not None and value < low:
        return f"parameter {name}={value} is out of range: it must be at least {low} (or None for all, where allowed)"
    return None


def _value_error(name: str, value: Any) -> str | None:
    """Values that type-check but cannot work: no model, a device this machine lacks, a dtype torch has not, MBBQ
    languages without English and another language."""
    if value is None:
        return None
    if name == "models" and isinstance(value, (list, tuple)) and not value:
        return ("parameter models=[] names no model; name at least one (e.g. -p 'models=[\"smollm2-135m-instruct\"]'"
                "), or leave it out for the profile's models")
    if name == "languages":                 # notebook 7's MBBQ languages
        from ..benchmarks import mbbq
        problem = mbbq.languages_problem(as_list(value))
        return problem and f"parameter {problem}"
    if name in ("device", "dtype"):
        from .. import models
        try:
            (models.check_device if name == "device" else models.check_dtype)(value)
        except ValueError as exc:
            return f"parameter {exc}"
    return None


def validate(notebook: str | Path, params: dict, resolve_models: bool = True) -> None:
    """Refuse (:class:`ParameterError`) unknown names, wrong types, out-of-range sizes, an empty model list, a device
    this machine does not have, a dtype torch has not, unusable MBBQ languages, and unknown models."""
    known = defaults(notebook)
    label = Path(str(notebook)).stem
    for name, value in params.items():
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ParameterError(f"{label} has no parameter {name!r}; {hint}its parameters are: {', '.join(known)}")
        default = known[name]
        if _is_count(name) and isinstance(default, dict):  # a size per dataset (notebook 3's max_pairs), or one for all
            default = None
        if isinstance(value, dict) and _is_count(name):
            problem = next((p for v in value.values() for p in (_type_error(name, v, None) or _range_error(name, v),)
                            if p), None)
        else:
            problem = _type_error(name, value, default) or _range_error(name, value) or _value_error(name, value)
        if problem:
            raise ParameterError(f"{label}: {problem}")
    if resolve_models and params.get("models") is not None:
        from .. import models
        for spec in params["models"]:
            try:
                models.check_spec(spec)
            except (models.ModelNotFoundError, ValueError) as exc:
                raise ParameterError(f"{label}: {exc}") from exc
