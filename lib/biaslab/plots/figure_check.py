"""What a reviewer checks first in a figure, checked before saving (:meth:`biaslab.report.outputs.OutputDir.figure`).

* every visible axes shows something: data (lines in data coordinates — not axhline/axvline reference lines —,
  markers, bars of non-zero size, collections, images) or a text that says why there is nothing to draw;
* a title that promises marks keeps the promise: words that refer to a colour or mark key ("grey", "colour",
  "legend", …) need a legend, and "*:" needs at least one "*" drawn.

* what the plotting code can report of its layout (:func:`layout_counts`): data points under a legend, markers cut
  at the axes' edge (a marker is clipped to its axes unless drawn with ``clip_on=False``).
"""

from __future__ import annotations

import re

import numpy as np

LEGEND_WORDS = re.compile(r"\b(gr[ae]y|colou?r(s|ed)?|legend)\b", re.I)


class FigureCheckError(ValueError):
    pass


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
    titles = "\n".join([fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else "",
                        *(ax.get_title() for ax in fig.axes)])
    has_legend = bool(fig.legends) or any(ax.get_legend() is not None for ax in fig.axes)
    if LEGEND_WORDS.search(titles) and not has_legend:
        problems.append(f"the title promises a key ({LEGEND_WORDS.search(titles).group(0)!r}) but there is no legend")
    if "*:" in titles and not any(t.get_text().strip() == "*" for ax in fig.axes for t in ax.texts):
        problems.append("the title explains '*' marks but none is drawn")
    counts = layout_counts(fig)
    if counts["legend_over_data"]:
        problems.append(f"the legend covers {counts['legend_over_data']} data point(s): put it outside the data")
    if counts["clipped_markers"]:
        problems.append(f"{counts['clipped_markers']} marker(s) cut at the axes' edge: widen the limits")
    return problems


def _points(ax):
    """``(display xy of every data point, marker radius in display px or 0)`` of the lines and collections of
    ``ax`` drawn in data coordinates (reference lines in axes coordinates excluded)."""
    px = ax.figure.dpi / 72
    for line in ax.lines:
        if not line.get_visible() or not line.get_transform().contains_branch(ax.transData):
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), float).reshape(-1, 2))
        has_marker = line.get_marker() not in (None, "", "None", " ")
        yield xy, (line.get_markersize() / 2 * px if has_marker else 0.0), line.get_clip_on()
    for c in ax.collections:
        if not c.get_visible():
            continue
        offsets = np.asarray(c.get_offsets(), float).reshape(-1, 2)
        if len(offsets) and c.get_offset_transform().contains_branch(ax.transData):
            sizes = c.get_sizes() if hasattr(c, "get_sizes") else []
            r = (np.sqrt(max(sizes)) / 2 * px) if len(sizes) and len(c.get_paths()) else 0.0
            yield c.get_offset_transform().transform(offsets), r, c.get_clip_on()
        elif hasattr(c, "get_segments") and c.get_transform().contains_branch(ax.transData):
            segs = [np.asarray(s, float) for s in c.get_segments() if len(s)]
            if segs:
                yield c.get_transform().transform(np.concatenate(segs)), 0.0, c.get_clip_on()


def layout_counts(fig) -> dict[str, int]:
    """``{"legend_over_data": n, "clipped_markers": m}``: data points (line vertices, markers, interval ends) that lie
    inside a legend's box drawn over their axes, and markers whose disc reaches past their axes' edge (drawn cut)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [lg for lg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if lg is not None
               and lg.get_visible()]
    boxes = [lg.get_window_extent(renderer) for lg in legends]
    over = clipped = 0
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        box = ax.get_window_extent(renderer)
        for xy, r, clip in _points(ax):
            xy = xy[np.isfinite(xy).all(axis=1)]
            inside = ((xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1) & (xy[:, 1] >= box.y0) & (xy[:, 1] <= box.y1))
            for lb in boxes:
                if lb.overlaps(box):
                    over += int((inside & (xy[:, 0] >= lb.x0) & (xy[:, 0] <= lb.x1) & (xy[:, 1] >= lb.y0)
                                 & (xy[:, 1] <= lb.y1)).sum())
            if r and clip:
                cut = ((xy[:, 0] - r < box.x0 - 0.5) | (xy[:, 0] + r > box.x1 + 0.5) | (xy[:, 1] - r < box.y0 - 0.5)
                       | (xy[:, 1] + r > box.y1 + 0.5))
                clipped += int(cut.sum())
    return {"legend_over_data": over, "clipped_markers": clipped}
