"""The decision panel that opens every report: what the analysis plan decided in this run, in one small table.

For notebooks 1–5, one row per instance of a confirmatory claim (:mod:`biaslab.plan`): who, the claim's estimate,
its interval (:func:`interval`: at the claim's adjusted level where the verdict layer gives one, else the 95 %
interval), the adjusted p and the verdict (:mod:`biaslab.stats.verdict`), derived from the run's tables by each
paper's ``decisions`` module exactly as the README's headline table is (:data:`biaslab.report.headline.SECTIONS`). For
notebook 6, the robustness verdict per model × metric (its ``robustness.csv``), with the direction (how many
universes keep the sign) beside it, since "not robust" there is a statement about magnitude.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from . import display
from .. import plan as P
from .wording import level_pct, present, verdict_words

_LOG = logging.getLogger(__name__)


def interval(row: Mapping) -> tuple[float, float, str] | None:
    """``(low, high, label)`` of a claim row's interval at the level at which the plan tested it
    (``ci_adj_low``/``ci_adj_high`` at ``ci_level``, from the verdict layer); None where the verdict layer has none
    (the claim's test has no dual interval at that level): an unadjusted interval beside a verdict could disagree
    with it, so none is shown, as in the README's headline table."""
    if present(row.get("ci_adj_low")) and present(row.get("ci_adj_high")):
        label = f"{level_pct(row['ci_level'])} CI" if present(row.get("ci_level")) else "adjusted CI"
        return float(row["ci_adj_low"]), float(row["ci_adj_high"]), label
    return None


def _root_and_variant(folder: Path, notebook: str) -> tuple[Path, str | None]:
    """The outputs root above a run folder, and the variant (notebook 1's benchmark) the folder is."""
    folder = Path(folder)
    if folder.name == notebook:
        return folder.parent, None
    return folder.parent.parent, folder.name


def claim_rows(folder: Path, notebook: str, plan) -> pd.DataFrame:
    """One row per confirmatory claim instance of the run in ``folder``: claim, label, who, estimate, low, high,
    interval, p_adjusted, verdict (empty when the notebook has no claim in ``plan``; one row with the verdict alone
    when its tables are missing). The rows are :func:`biaslab.report.headline.claim_rows`'."""
    from .headline import claim_rows as rows
    root, variant = _root_and_variant(folder, notebook)
    t = rows(root, plan, notebook, variant)
    if t.empty or not t["claim"].any():
        return t[["verdict"]]
    out = []
    for r in t.to_dict("records"):
        ci = interval(r)
        out.append({"claim": r["claim"], "label": r["label"], "who": r["who"], "estimate": r["estimate"],
                    "low": ci[0] if ci else None, "high": ci[1] if ci else None, "interval": ci[2] if ci else "",
                    "p_adjusted": r["p_adjusted"], "why": str(r["verdict"]),
                    "verdict": verdict_words(str(r["verdict"])).removesuffix(" from the null")})
    return pd.DataFrame(out)


def _collapsed(t: pd.DataFrame) -> pd.DataFrame:
    """A claim's descriptive instances in one row (how many, their verdicts' powers), its decided ones each in their
    own: a panel of many undecided instances (notebook 4's 20) still fits the report's first screen."""
    rows = []
    for claim, g in t.groupby("claim", sort=False):
        desc = g["verdict"].str.startswith("descriptive (")
        rows += g[~desc].to_dict("records")
        if desc.sum() > 2:
            powers = sorted(float(x) for x in g.loc[desc, "verdict"].str.extract(r"power ([\d.]+)")[0].dropna())
            span = f"{powers[0]:.2f}–{powers[-1]:.2f}" if powers and powers[0] != powers[-1] else (
                f"{powers[0]:.2f}" if powers else "")
            rows.append({**g[desc].iloc[0].to_dict(), "who": f"{int(desc.sum())} instances", "estimate": None,
                         "low": None, "high": None, "interval": "", "p_adjusted": None,
                         "why": "; ".join(g.loc[desc, "why"]), "verdict": f"descriptive (power {span})"})
        else:
            rows += g[desc].to_dict("records")
    return pd.DataFrame(rows, columns=t.columns)


def _short(verdict: str) -> str:
    """A panel cell: a descriptive verdict's power and level, without the n that would power it (the cell's
    title and the tables carry the whole verdict), so that a notebook's panel fits the report's first screen."""
    head, sep, _ = verdict.partition("; ")
    return head + ")" if sep and verdict.startswith("descriptive (") else verdict


def robustness_rows(folder: Path) -> pd.DataFrame:
    """Notebook 6: model, metric, margin, direction (universes keeping the sign) and the robustness verdict."""
    p = Path(folder) / "tables" / "robustness.csv"
    if not p.exists() or p.stat().st_size < 2:
        return pd.DataFrame()
    rob = pd.read_csv(p)
    out = []
    for r in rob.to_dict("records"):
        same, compared = r.get("n_same_sign"), r.get("n_sign_compared")
        direction = (f"{int(same)} of {int(compared)} keep the sign" if present(same) and present(compared)
                     and compared > 0 else "not compared")
        out.append({"model": r["model"], "metric": r["metric"], "margin": r.get("margin"),
                    "direction": direction, "verdict": str(r.get("robustness", "")).split(":")[0],
                    "why": str(r.get("robustness", "")).partition(":")[2].strip()})
    return pd.DataFrame(out)


def panel_html(folder: Path, notebook: str, manifest: Mapping) -> str:
    """The decision panel of the run in ``folder`` (``notebook``'s tables, decided under the plan its ``manifest``
    records: :func:`biaslab.plan.recorded`), or a line saying there is nothing to decide; formatted like every other
    table (one format per column, the interval like its estimate)."""
    e = html.escape
    head = '<section class="bl-decision" id="bl-decision"><h2 id="bl-decision-title">Decision</h2>'
    try:
        if notebook.startswith("06"):
            t = robustness_rows(folder)
            if t.empty:
                return head + '<p class="bl-note">No robustness table in this run.</p></section>'
            dm = display.column_decimals(t["margin"])
            body = "".join(
                f'<tr><td>{e(r["model"])}</td><td>{e(r["metric"])}</td>'
                f'<td class="bl-num">±{e(m)}</td><td>{e(r["direction"])}</td>'
                f'<td title="{e(r["why"])}"><b>{e(r["verdict"])}</b></td></tr>'
                for r, m in zip(t.to_dict("records"), (display.format_value(v, "estimate", dm) for v in t["margin"])))
            note = ("Robustness of each metric across the universes of evaluation choices: <i>robust</i> when every "
                    "judged universe is equivalent to the reference within the margin; <i>direction</i> counts the "
                    "universes whose estimate keeps the reference's sign (the verdict is about magnitude).")
            return (head + f'<p class="bl-note">{note}</p><table class="bl-decision-table"><thead><tr><th>model</th>'
                    '<th>metric</th><th>margin</th><th>direction</th><th>robustness</th></tr></thead>'
                    f"<tbody>{body}</tbody></table></section>")
        t = claim_rows(folder, notebook, P.recorded(manifest))
    except Exception as exc:        # a report is always written: the panel says what went wrong
        _LOG.warning("decision panel of %s failed: %s", folder, exc)
        return head + f'<p class="bl-note">Not available: {e(type(exc).__name__)}: {e(str(exc))}</p></section>'
    if t.empty:
        return (head + '<p class="bl-note">The analysis plan has no confirmatory claim for this notebook: every '
                "result below is exploratory (estimated with an interval, not decided).</p></section>")
    if "claim" not in t:
        return head + f'<p class="bl-note">{e(t["verdict"].iloc[0])}</p></section>'
    t = _collapsed(t.assign(verdict=t["verdict"].map(_short)))
    d = display.column_decimals(pd.concat([t["estimate"], t["low"], t["high"]]).astype(float))
    est, lo, hi = ([display.format_value(v, "estimate", d) for v in t[c]] for c in ("estimate", "low", "high"))
    p = [display.format_value(x, "p") for x in t["p_adjusted"]]
    levels = sorted({x for x in t["interval"] if x})
    rows = []
    for i, r in enumerate(t.to_dict("records")):
        ci = (f"[{lo[i]}, {hi[i]}]" + (f" {r['interval']}" if len(levels) > 1 else "")) if present(r["low"]) else "–"
        rows.append(f'<tr><td title="{e(r["label"])}"><code>{e(r["claim"])}</code></td><td>{e(r["who"])}</td>'
                    f'<td class="bl-num">{e(est[i])}</td><td class="bl-num">{e(ci)}</td>'
                    f'<td class="bl-num">{e(p[i])}</td><td title="{e(r["why"])}"><b>{e(r["verdict"])}</b></td></tr>')
    note = ("The analysis plan's confirmatory claims, decided in this run (p adjusted by the plan's multiplicity "
            + (f"procedure; interval at the level at which the claim was tested: {e(', '.join(levels))}; – where "
               "the claim's test has no interval at that level)" if levels else
               "procedure; no interval: this claim's test has none at the level at which it was tested)")
            + ". A verdict is about the null. Everything else in this report is exploratory.")
    return (head + f'<p class="bl-note">{note}</p><table class="bl-decision-table"><thead><tr><th>claim</th>'
            "<th>model(s)</th><th>estimate</th><th>interval</th><th>adjusted p</th><th>verdict</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")
