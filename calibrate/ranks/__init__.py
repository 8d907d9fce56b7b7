"""What runs on the ranks of a calibration (torch, one process per rank).

:mod:`~calibrate.ranks.run` (the rank entry point), :mod:`~calibrate.ranks.allreduce` (the
size sweep), :mod:`~calibrate.rig.sequence` (α as a step sees it: all-reduces back to
back) and :mod:`~calibrate.ranks.mlp_contention` (compute and communication slowing each other).
Each measuring module also holds the pure function that combines its ranks' numbers.
"""
