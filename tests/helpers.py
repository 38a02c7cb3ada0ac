"""Helpers shared by test files: a benchmark's data (or a skip), a tiny random model, a quiet Scorer, a page's text
without its generated blocks.

``biaslab.models`` and ``biaslab.scoring`` are imported on use, so the data-only tests do not import torch.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from biaslab.sources import DataError


#: the analysis plan the committed outputs/ were decided with (their MANIFESTs record its sha256): tests that
#: re-derive the committed verdicts and findings read it
COMMITTED_PLAN = Path(__file__).resolve().parents[1] / "analysis_plan.yaml"
#: plan v4 (Holm within notebook x model families, no power rule): unit tests whose made-up models ("x", "m") must be
#: decided read it, since a v5 plan decides only the families it lists
V4_PLAN = Path(__file__).parent / "fixtures" / "analysis_plan_v4.yaml"


def load_or_skip(load, name: str):
    """``load()``, or skip the tests that need it when the benchmark's data is not fetched."""
    try:
        return load()
    except DataError as exc:
        pytest.skip(f"{name} data not fetched: {exc}")


@contextlib.contextmanager
def registry_restored():
    """The benchmark registry, the loaded plugins and the sources tables as they were (a test that loads a plugin)."""
    from biaslab import benchmarks, sources
    saved = dict(benchmarks.SPECS), dict(benchmarks.PLUGINS), list(sources.TABLES)
    try:
        yield
    finally:
        for live, old in zip((benchmarks.SPECS, benchmarks.PLUGINS), saved[:2]):
            live.clear()
            live.update(old)
        sources.TABLES[:] = saved[2]


def tiny_model(tmp_path_factory, name: str, kind: str, seed: int):
    """:func:`biaslab.models.save_tiny_model` in a fresh temporary folder, loaded in float32 on the CPU."""
    from biaslab import models

    folder = models.save_tiny_model(tmp_path_factory.mktemp("tiny") / name, kind, seed=seed)
    return models.load(folder, device="cpu", dtype="float32")


def scorer(lm, **kw):
    """A Scorer without a progress bar, and without a cache unless ``cache_dir`` is given."""
    from biaslab import scoring

    kw.setdefault("cache_dir", False)
    return scoring.Scorer(lm, progress=False, **kw)


def outside_blocks(text: str) -> str:
    """``text`` without its generated blocks (every block :func:`biaslab.report.headline.blocks` renders)."""
    from biaslab.report import headline
    for _page, begin, end, _render in headline.blocks():
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text = head + rest.split(end, 1)[1]
    return text


def forget_file_hashes() -> None:
    """Drop this process's copy of :mod:`biaslab.files.hashing`'s memo, as a new process starts (it reads the disk memo
    again on next use)."""
    from biaslab.files import hashing
    hashing._MEMO = None


#: Width of a report's column in CSS pixels (report.css: a 1060 px page less its padding); a wider figure is scaled
#: down to it.
REPORT_COLUMN_PX = 980


def smallest_text_px(fig, dpi: float = 110, column_px: float = REPORT_COLUMN_PX) -> float:
    """CSS pixels of the smallest visible text of ``fig`` saved at ``dpi`` and shown at its own size, or scaled down
    to fit a column ``column_px`` wide (what a reader of the report sees; 9 pt = 12 px)."""
    from matplotlib.text import Text

    fig.canvas.draw()
    bbox = fig.get_tightbbox(fig.canvas.get_renderer())
    scale = min(1.0, column_px / (bbox.width * dpi))
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
             and t.get_figure() is not None]
    return min(sizes) * dpi / 72 * scale


#: Width of an A4 page between Chromium's default print margins, in CSS pixels.
A4_WIDTH = 718

_OVERFLOW = r"""
const main = document.querySelector('main') || document.body;
const limit = main.getBoundingClientRect().right + 0.5;
return [...document.querySelectorAll('table')].filter(t => t.offsetParent !== null).map(t => {
  const r = t.getBoundingClientRect();
  const head = [...t.querySelectorAll('th')].slice(0, 4).map(h => h.textContent.trim()).join(' | ');
  return {right: r.right, width: r.width, scroll: t.scrollWidth, client: t.clientWidth, head: head.slice(0, 80)};
}).filter(t => t.right > limit || t.scroll > t.client + 1).map(t => `${Math.round(t.width)} px wide (${t.head})`);
"""


def print_overflow(path, driver, width: int = A4_WIDTH) -> list[str]:
    """Tables of ``path`` wider than the report's column in the print view ``width`` CSS pixels wide (A4), in the
    Chromium of :func:`biaslab.report.browser.chromium`."""
    from pathlib import Path

    from biaslab.report import browser
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        driver.get(Path(path).resolve().as_uri())
        browser._settle(driver)
        return driver.execute_script(_OVERFLOW)
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


#: the p-value columns of the tables (a test's p: ``p_value``, ``wilcoxon_p``, ``p_adjusted``, ...; not ``p_first``)
_P_EXTRA = {"p", "lead_p", "p_adjusted", "p_naive", "p_swap", "p_boot", "p_cluster", "p_holm"}


def _p_columns(t) -> list[str]:
    return [c for c in t.columns if c in _P_EXTRA or c.startswith("p_value") or c.endswith("_p")]


def certainty_without_variance(tables) -> list[str]:
    """What no table may hold (zero variance read as certainty): a p of exactly 0, an interval of zero width on a
    row that carries a p or a ``significant`` flag, and a row marked significant without a test that has a size (no
    p, an adjusted p of 0, or a verdict that says it was not tested). ``tables``: {name: DataFrame}; returns one line
    per table and kind of finding, with its count."""
    import pandas as pd
    bad = []
    for name, t in tables.items():
        ps = _p_columns(t)
        num = {c: pd.to_numeric(t[c], errors="coerce") for c in ps}
        for c, v in num.items():
            if (v == 0).any():
                bad.append(f"{name}: {int((v == 0).sum())} rows with {c} = 0")
        has_p = pd.concat(num.values(), axis=1).notna().any(axis=1) if num else pd.Series(False, index=t.index)
        sig = (t["significant"].astype(str).str.lower() == "true") if "significant" in t else has_p & False
        for lo in (c for c in t.columns if "low" in c and c.replace("low", "high") in t.columns):
            a, b = (pd.to_numeric(t[x], errors="coerce") for x in (lo, lo.replace("low", "high")))
            flat = a.notna() & (a == b) & (has_p | sig)
            if flat.any():
                bad.append(f"{name}: {int(flat.sum())} zero-width intervals ({lo}) on rows with a p or a flag")
        if sig.any():
            adj = pd.to_numeric(t["p_adjusted"], errors="coerce") if "p_adjusted" in t else pd.Series(float("nan"),
                                                                                                     index=t.index)
            untested = (t["verdict"].astype(str).str.startswith(("not tested", "undefined", "not estimable"))
                        if "verdict" in t else adj.isna())
            sizeless = sig & (~has_p | adj.isna() | (adj == 0) | untested)
            if sizeless.any():
                bad.append(f"{name}: {int(sizeless.sum())} rows marked significant without a test that has a size")
    return bad
