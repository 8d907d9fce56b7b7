"""Predicted versus measured: pair the configurations, score them, draw them.

    from simddp.compare import compare_results, format_table
    comparison = compare_results(load_results("sweep.json"), load_results("bench.json"))
    print(format_table(comparison))

:mod:`~simddp.compare.match` pairs results (:class:`Comparison`; the files' checks in
:mod:`~simddp.compare.inputs`), :mod:`~simddp.compare.metrics`
scores them (APE, Spearman ρ, regret), :mod:`~simddp.compare.text` prints them and
:mod:`~simddp.compare.plots` draws the scatter, bucket curves and timelines (matplotlib).
"""
from simddp.compare.inputs import find_result, same_bucket
from simddp.compare.match import Comparison, Row, compare_results, pick_timeline
from simddp.compare.metrics import Summary, spearman, summarize
from simddp.compare.text import config_label, format_table

__all__ = ["Comparison", "Row", "Summary", "compare_results", "config_label", "find_result",
           "format_table", "pick_timeline", "same_bucket", "spearman", "summarize"]
