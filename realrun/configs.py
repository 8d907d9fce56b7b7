"""What realrun runs: configurations ``{"strategy": name, "bucket_mb": MB or None}``.

:func:`bench_configs` builds the one grid (compute-only first, then simddp's own sweep
configurations), so a benchmark measures exactly what a sweep predicts. No torch here: the
commands check flags with it before anything heavy is imported::

    >>> [label(c) for c in bench_configs(["naive", "ddp"], [10, 1])]
    ['compute-only', 'naive', 'ddp-1MB', 'ddp-10MB']
    >>> [label(c) for c in bench_configs(["ddp", "fsdp"], [10], comm_hooks=["fp16"])]
    ['compute-only', 'ddp-10MB', 'ddp+fp16-10MB', 'fsdp']
"""
from __future__ import annotations

from simddp.errors import InputError
from simddp.result import COMPUTE_ONLY
from simddp.sweeps import sweep_strategies

# What realrun runs for real (no_sync is a training-loop pattern, not a wrapper of its own).
# fsdp and zero2 are torch FSDP2 (realrun/sharded.py); --comm-hook adds hooked ddp/bucketed.
BENCH_STRATEGIES = ("naive", "flat", "overlap", "bucketed", "ddp", "fsdp", "zero2")
# The default grid (bench, validate): the replicated strategies; "all" adds fsdp and zero2.
DEFAULT_STRATEGIES = BENCH_STRATEGIES[:5]
PER_BUCKET = ("bucketed", "ddp")
PRECISIONS = ("fp32", "tf32", "bf16")  # realrun/precision.py says what each means
# What a profile's compute total is scaled to (realrun/profile_world.py): the slowest rank's
# plain step, per step, as realrun bench times a step; or rank 0's.
COMPUTE_BASES = ("slowest", "rank0")


def bench_configs(strategies, bucket_mbs, comm_hooks=(), shard_unit_mb=None) -> list[dict]:
    """compute-only, then every configuration a sweep of ``strategies`` covers, in its order
    and under its names (``ddp+fp16``), so ``simddp compare`` pairs them row by row."""
    bad = [s for s in strategies if s not in BENCH_STRATEGIES]
    if bad:
        raise InputError(f"--strategies: {bad[0]!r} does not run for real; choose from "
                         f"{', '.join(BENCH_STRATEGIES)}")
    mbs = sorted({float(mb) for mb in bucket_mbs})  # as typed: 0.01, not 10485 B / 2**20
    configs = [{"strategy": COMPUTE_ONLY, "bucket_mb": None}]
    for s in sweep_strategies(strategies, mbs, accum_steps=1, comm_hooks=comm_hooks,
                              shard_unit_mb=shard_unit_mb):  # the sweep's own checks and order
        mb = None
        if s.granularity == "bucket":
            mb = min(mbs, key=lambda typed: abs(typed - s.bucket_mb))
        config = {"strategy": s.name, "bucket_mb": mb}
        if s.shard_unit_bytes is not None:
            config["shard_unit_mb"] = shard_unit_mb
        configs.append(config)
    return configs


def label(config: dict) -> str:
    """'naive', 'bucketed-25MB', 'compute-only': a config's name in tables and file names."""
    mb = config["bucket_mb"]
    return config["strategy"] if mb is None else f"{config['strategy']}-{mb:g}MB"
