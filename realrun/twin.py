"""A second compute-only model, timed beside the first: how far apart two identical rows read.

Identical compute-only models timed in turns can read apart by more than some strategies
differ (docs/FINDINGS.md#measurement-noise), so the bench times a twin of compute-only as an
extra, in the same rounds, and reports how far apart the two read::

    >>> gap = instance_gap({"median_s": 0.050}, {"median_s": 0.052})
    >>> gap["apart_pct"], gap_text(gap).split(":")[0]
    (4.0, 'two identical compute-only models, timed alike, read 50.00 and 52.00 ms (4.0 % apart)')
"""
from __future__ import annotations

from realrun.configs import config_of

TWIN = "compute-only twin"
FACTORY = "realrun.twin:make_twin"


def make_twin(name: str, workload, ctx, payload: dict, shared: dict):
    """realrun bench's ``extras_factory``: a compute-only Trainer of its own (same seed)."""
    from realrun.steps import Trainer
    if name != TWIN:
        raise ValueError(f"realrun.twin makes {TWIN!r} only, not {name!r}")
    return Trainer(config_of(None), workload, ctx, payload)


def instance_gap(compute_only: dict, twin: dict) -> dict:
    """The two medians (ms) and how far apart, in % of the smaller."""
    a_s, b_s = compute_only["median_s"], twin["median_s"]
    return {"compute_only_ms": a_s * 1e3, "twin_ms": b_s * 1e3,
            "apart_pct": round(100 * abs(a_s - b_s) / min(a_s, b_s), 2)}


def gap_text(gap: dict) -> str:
    """One line for the bench's and compare's reports."""
    return (f"two identical compute-only models, timed alike, read {gap['compute_only_ms']:.2f} "
            f"and {gap['twin_ms']:.2f} ms ({gap['apart_pct']:.1f} % apart): rows closer than "
            "that may differ by their model instance, not their strategy")
