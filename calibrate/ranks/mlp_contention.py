"""calibrate's contention step: a backward-like workload (an MLP forward + backward, as
calibrate has no model) against a stream of its gradients' all-reduces; the method is
realrun/launch/contention_timing.py, the arithmetic simddp/inputs/contention.py.

The default workload is eight 1024-wide bias-free Linear layers with ReLU on 16 rows (the
mlp-8x1024 preset at batch 2 x seq 8): its backward on one core and the stream of its eight
4 MiB gradients on loopback take about as long, so the two overlap.
"""
from __future__ import annotations

from calibrate.ranks.allreduce import zeros
from realrun.launch.contention_timing import median_overlap, mlp_step


def measure_contention(cfg: dict, ctx) -> dict:
    """Rank side. ``cfg``: widths and rows of the MLP, stream_bytes (one all-reduce each),
    dtype, repeats. Returns each quantity's median over repeats, in seconds."""
    compute = mlp_step(cfg["widths"], cfg["rows"], ctx.device)
    stream = [zeros(n, cfg["dtype"], ctx.device) for n in cfg["stream_bytes"]]
    return median_overlap(compute, stream, ctx, cfg["repeats"])


