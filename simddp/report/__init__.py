"""What users read and look at: tables, the recommendation, progress, Chrome traces, plots.

:mod:`~simddp.report.table` (plain-text tables), :mod:`~simddp.report.recommendation` (the
sentences after a sweep), :mod:`~simddp.report.frameworks` (its size in Trainer, Accelerate and
Lightning), :mod:`~simddp.report.progress` (the one progress bar),
:mod:`~simddp.report.trace` (Chrome traces for Perfetto), :mod:`~simddp.report.gantt` (the one
timeline drawer), :mod:`~simddp.report.sweep_plot` (sweep curves, Gantt figures) and
:mod:`~simddp.report.style` (the one colour map). matplotlib is imported only by the plotting
modules, so tables and traces stay fast.
"""
