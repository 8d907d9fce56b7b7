"""What realrun runs: configurations ``{"strategy": name, "bucket_mb": MB or None}``.

:func:`bench_configs` builds the one grid (compute-only first, then simddp's own sweep
configurations), so a benchmark measures exactly what a sweep predicts. No torch here: the
commands check flags with it before anything heavy is imported::

    >>> [label(c) for c in bench_configs(["naive", "ddp"], [10, 1])]
    ['compute-only', 'naive', 'ddp-1MB', 'ddp-10MB']
"""
from __future__ import annotations

from simddp.errors import InputError
from simddp.result import COMPUTE_ONLY
from simddp.sweeps import sweep_strategies

# What realrun runs for real (no_sync is a training-loop pattern, not a wrapper of its own).
BENCH_STRATEGIES = ("naive", "flat", "overlap", "bucketed", "ddp")
PER_BUCKET = ("bucketed", "ddp")
PRECISIONS = ("fp32", "tf32", "bf16")  # realrun/precision.py says what each means
# What a profile's compute total is scaled to (realrun/profile_world.py): the slowest rank's
# plain step, per step, as realrun bench times a step; or rank 0's.
COMPUTE_BASES = ("slowest", "rank0")


def bench_configs(strategies, bucket_mbs) -> list[dict]:
    """compute-only, then every (strategy, bucket) a sweep of ``strategies`` covers."""
    bad = [s for s in strategies if s not in BENCH_STRATEGIES]
    if bad:
        raise InputError(f"--strategies: {bad[0]!r} does not run for real; choose from "
                         f"{', '.join(BENCH_STRATEGIES)}")
    sweep_strategies(strategies, bucket_mbs, accum_steps=1)  # the sweep's own checks
    mbs = sorted({float(mb) for mb in bucket_mbs})  # as typed: 0.01, not 10485 B / 2**20
    configs = [{"strategy": COMPUTE_ONLY, "bucket_mb": None}]
    for name in (s for s in BENCH_STRATEGIES if s in strategies):  # the sweep's order
        configs += ([{"strategy": name, "bucket_mb": mb} for mb in mbs] if name in PER_BUCKET
                    else [{"strategy": name, "bucket_mb": None}])
    return configs


def label(config: dict) -> str:
    """'naive', 'bucketed-25MB', 'compute-only': a config's name in tables and file names."""
    mb = config["bucket_mb"]
    return config["strategy"] if mb is None else f"{config['strategy']}-{mb:g}MB"
