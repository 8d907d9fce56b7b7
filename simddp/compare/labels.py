"""Where a plot's point labels and legend go, so they stay inside the figure and off each
other (issue 23: a legend wider than its figure cut "forward" off; point labels of a cluster
printed on top of each other). Both draw the canvas and measure what they placed::

    place_labels(fig, ax, [("4", 56.3, 59.1, "#55A868"), ...])   # (text, x, y, colour)
    legend_below(fig, handles)                                   # under the panels
"""
from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter


# Where a point's label may go, in points from the point, tried in this order.
LABEL_SPOTS = ((5, -11, "left"), (5, 3, "left"), (-5, 3, "right"), (-5, -11, "right"),
               (5, 11, "left"), (-5, 11, "right"), (5, -19, "left"), (-5, -19, "right"))


def place_labels(fig: Figure, ax, tags: list) -> None:
    """Label each point at the first spot that overlaps no other label and no point; a point
    with no free spot stays unlabelled (a cluster of 8 points once had labels on top of each
    other). ``tags``: (text, x, y, colour) in data units."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    ax.apply_aspect()
    points = [ax.transData.transform((x, y)) for _, x, y, _ in tags]
    taken = [(px - 4, py - 4, px + 4, py + 4) for px, py in points]   # the markers
    for (text, x, y, colour) in tags:
        for dx, dy, ha in LABEL_SPOTS:
            label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy),
                                ha=ha, fontsize=7, color=colour)
            box = label.get_window_extent(renderer)
            inside = ax.bbox.x0 <= box.x0 and box.x1 <= ax.bbox.x1 and \
                ax.bbox.y0 <= box.y0 and box.y1 <= ax.bbox.y1
            if inside and not any(box.x0 < b[2] and b[0] < box.x1 and box.y0 < b[3]
                                  and b[1] < box.y1 for b in taken):
                taken.append((box.x0, box.y0, box.x1, box.y1))
                break
            label.remove()


def legend_below(fig: Figure, handles: list) -> None:
    """One legend under the panels, in as many columns as fit the figure's width: with one
    column per entry it ran wider than a one-panel figure and cut "forward" off."""
    canvas = FigureCanvasAgg(fig)
    for ncol in range(len(handles), 0, -1):
        legend = fig.legend(handles=handles, loc="outside lower center", ncol=ncol, fontsize=8,
                            frameon=False)
        canvas.draw()
        if legend.get_window_extent().width <= 0.98 * fig.bbox.width or ncol == 1:
            return
        legend.remove()


class _PlainLog(LogFormatter):
    """LogFormatter's choice of which ticks to label, printed plainly: '0.6', not '6e-01'."""

    def __call__(self, x, pos=None):
        return f"{x:g}" if super().__call__(x, pos) else ""


def plain_log_labels(axis) -> None:
    """'100' and '200' on a log axis rather than 10^2 and 2x10^2."""
    axis.set_major_formatter(_PlainLog(labelOnlyBase=False))
    axis.set_minor_formatter(_PlainLog(labelOnlyBase=False, minor_thresholds=(1, 0.5)))
