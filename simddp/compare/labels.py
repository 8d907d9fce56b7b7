"""Where a plot's legend goes, so it stays inside the figure (a legend wider than its figure
cut "forward" off), and plain labels on log axes. The scatter tells bucket sizes apart by
marker, since point labels of a cluster piled up::

    legend_below(fig, handles)                                   # under the panels
"""
from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter


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
