"""One wording for intervals on every axis: "95 % CI (Wald)", "95 % HDI", "95 % CI (bootstrap)"; the sentence a
figure states as its result (:func:`state_result`, the start of its alternative text); one legend below the panels
(:func:`legend_below`)."""

from __future__ import annotations


def interval_label(kind: str = "CI", prob: float = 0.95, method: str | None = None) -> str:
    """``kind`` "CI" (confidence interval) or "HDI" (highest-density interval of a posterior)."""
    if kind not in ("CI", "HDI"):
        raise ValueError(f"interval kind {kind!r} is not 'CI' or 'HDI'")
    return f"{100 * prob:.0f} % {kind}" + (f" ({method})" if method else "")


def hdi_prob(lo_col: str, hi_col: str) -> float:
    """The probability of an HDI from ArviZ's column names (``hdi_2.5%``, ``hdi_97.5%`` -> 0.95)."""
    return round((float(hi_col[4:].rstrip("%")) - float(lo_col[4:].rstrip("%"))) / 100, 4)


def state_result(fig, sentence: str) -> None:
    """Attach the sentence stating what ``fig`` shows, with numbers from the data it drew, in plain words; it opens
    the figure's alternative text (:func:`biaslab.report.display.figure_alt`)."""
    fig.biaslab_result = sentence


def legend_below(fig, ax, title: str, ncol: int = 2):
    """One legend for ``fig`` (``ax``'s handles), below its panels (never over a data point), and the title."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=9, loc="lower center", ncol=ncol, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.07 * -(-len(labels) // ncol), 1, 1))
    return fig
