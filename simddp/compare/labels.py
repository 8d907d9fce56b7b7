"""Plain labels on log axes: '100' and '200', not 10^2 and 2x10^2 (the bucket axis of
compare_buckets.png)::

    plain_log_labels(ax.xaxis)
"""
from __future__ import annotations

from matplotlib.ticker import LogFormatter


class _PlainLog(LogFormatter):
    """LogFormatter's choice of which ticks to label, printed plainly: '0.6', not '6e-01'."""

    def __call__(self, x, pos=None):
        return f"{x:g}" if super().__call__(x, pos) else ""


def plain_log_labels(axis) -> None:
    """'100' and '200' on a log axis rather than 10^2 and 2x10^2."""
    axis.set_major_formatter(_PlainLog(labelOnlyBase=False))
    axis.set_minor_formatter(_PlainLog(labelOnlyBase=False, minor_thresholds=(1, 0.5)))
