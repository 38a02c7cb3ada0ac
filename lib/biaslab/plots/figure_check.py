"""What a reviewer checks first in a figure, checked before it is saved (:meth:`biaslab.outputs.OutputDir.figure`).

* every visible axes shows something: data (lines in data coordinates — not axhline/axvline reference lines —,
  markers, bars of non-zero size, collections, images) or a text that says why there is nothing to draw;
* a title that promises marks keeps the promise: words that refer to a colour or mark key ("grey", "colour",
  "legend", …) need a legend, and "*:" needs at least one "*" drawn.

:func:`smallest_text_px` says how tall a figure's smallest text is in a report (9 pt is 12 CSS px).
"""

from __future__ import annotations

import re

LEGEND_WORDS = re.compile(r"\b(gr[ae]y|colou?r(s|ed)?|legend)\b", re.I)


class FigureCheckError(ValueError):
    pass


def _titles(fig) -> str:
    parts = [fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""]
    parts += [ax.get_title() for ax in fig.axes]
    return "\n".join(parts)


def _has_data(ax) -> bool:
    if ax.texts or ax.images:
        return True
    for line in ax.lines:
        if not line.get_visible() or not line.get_transform().contains_branch(ax.transData):
            continue            # axhline / axvline: a reference line in axes coordinates, not data
        if len(line.get_xdata()) >= 2 or line.get_marker() not in (None, "", "None", " "):
            return True
    for p in ax.patches:
        bb = p.get_extents()
        if p.get_visible() and (bb.width > 0.5 and bb.height > 0.5):
            return True
    return any(len(c.get_offsets()) or len(c.get_paths()) for c in ax.collections)


def check_figure(fig) -> list[str]:
    """Problems of ``fig`` as sentences (empty when it passes)."""
    fig.canvas.draw()  # artists get their final extents
    problems = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or (not ax.axison and not ax.has_data() and not ax.texts):
            continue
        if not _has_data(ax):
            problems.append(f"axes {i} ({ax.get_title() or 'untitled'!r}) shows no data and says nothing about why")
    titles = _titles(fig)
    has_legend = bool(fig.legends) or any(ax.get_legend() is not None for ax in fig.axes)
    if LEGEND_WORDS.search(titles) and not has_legend:
        problems.append(f"the title promises a key ({LEGEND_WORDS.search(titles).group(0)!r}) but there is no legend")
    if "*:" in titles and not any(t.get_text().strip() == "*" for ax in fig.axes for t in ax.texts):
        problems.append("the title explains '*' marks but none is drawn")
    return problems


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
