"""What realrun runs: configurations ``{"strategy": name, "bucket_mb": MB, "spec": dict}``.

``strategy`` and ``bucket_mb`` name the row (the MB as typed); ``spec`` is the simddp Strategy
itself (``Strategy.to_dict``, None for compute-only), which a rank runs: no rank parses a name.
:func:`bench_configs` builds the one grid from simddp's sweep, so a benchmark measures exactly
what a sweep predicts. No torch here::

    >>> [label(c) for c in bench_configs(["naive", "ddp"], [10, 1])]
    ['compute-only', 'naive', 'ddp-1MB', 'ddp-10MB']
    >>> [label(c) for c in bench_configs(["ddp", "fsdp"], [10], comm_hooks=["fp16"])]
    ['compute-only', 'ddp-10MB', 'ddp+fp16-10MB', 'fsdp']

``precision`` bf16 gives fsdp and zero2 FSDP2's mixed precision (``spec``'s ``param_dtype``;
realrun/precision.py); the row keeps its name, the run's precision is the run's::

    >>> [spec_of(c).param_dtype for c in bench_configs(["fsdp"], [10], precision="bf16")[1:]]
    ['bf16']
"""
from __future__ import annotations

from simddp.errors import InputError
from simddp.result import COMPUTE_ONLY
from simddp.planning.registry import ALWAYS, names
from simddp.planning.strategy import Strategy, with_precision
from simddp.predict.sweep import sweep_strategies

# What realrun runs for real, in the registry's order: all but no_sync and sync_each, which
# are training-loop patterns, not wrappers.
BENCH_STRATEGIES = names(runs_for_real=True)
# The default grid (bench, validate): the replicated strategies; "all" adds the others.
DEFAULT_STRATEGIES = names(runs_for_real=True, offered=ALWAYS)
# realrun bench --gpus-per-node reaches the ranks' executor here, over LOCAL_WORLD_SIZE.
GPUS_PER_NODE_ENV = "REALRUN_GPUS_PER_NODE"
# What a profile's compute total is scaled to: the slowest rank's plain step, or rank 0's.
COMPUTE_BASES = ("slowest", "rank0")
# the default of --host-turns (realrun/ddp_host_costs.py)
HOST_TURNS = 8


def bench_configs(strategies, bucket_mbs, comm_hooks=(), shard_unit_mb=None,
                  precision: str = "fp32") -> list[dict]:
    """compute-only, then every configuration a sweep of ``strategies`` covers, in its order
    and under its names (``ddp+fp16``), so ``simddp compare`` pairs them row by row; fsdp
    and zero2 at ``precision`` (:func:`simddp.planning.strategy.with_precision`)."""
    bad = [s for s in strategies if s not in BENCH_STRATEGIES]
    if bad:
        raise InputError(f"--strategies: {bad[0]!r} does not run for real; choose from "
                         f"{', '.join(BENCH_STRATEGIES)}")
    mbs = sorted({float(mb) for mb in bucket_mbs})  # as typed: 0.01, not 10485 B / 2**20
    configs = [config_of(None)]
    for s in sweep_strategies(strategies, mbs, accum_steps=1, comm_hooks=comm_hooks,
                              shard_unit_mb=shard_unit_mb):  # the sweep's own checks and order
        mb = None
        if s.granularity == "bucket":
            mb = min(mbs, key=lambda typed: abs(typed - s.bucket_mb))
        configs.append(config_of(with_precision(s, precision), mb))
    return configs


def config_of(strategy: Strategy | None, bucket_mb: float | None = None) -> dict:
    """The configuration that runs ``strategy`` (None: compute-only); ``bucket_mb`` is the
    row's bucket size as typed (default the strategy's own, for bucketed strategies).

    >>> from simddp.planning.strategy import make_strategy
    >>> c = config_of(make_strategy("ddp+fp16", 4))
    >>> label(c), Strategy.from_dict(c["spec"]).comm_hook.kind, label(config_of(None))
    ('ddp+fp16-4MB', 'fp16', 'compute-only')
    """
    if strategy is None:
        return {"strategy": COMPUTE_ONLY, "bucket_mb": None, "spec": None}
    if bucket_mb is None and strategy.granularity == "bucket":
        bucket_mb = strategy.bucket_mb
    return {"strategy": strategy.name, "bucket_mb": bucket_mb, "spec": strategy.to_dict()}


def runs_torch_ddp(configs: list[dict]) -> bool:
    """Whether torch's DDP runs any of them, which then need 2 warm-up steps or more (it
    rebuilds its buckets in its second step)."""
    return any(s is not None and s.implementation == "torch" for s in map(spec_of, configs))


def shards(configs: list[dict]) -> bool:
    """Whether any of them shards (fsdp, zero2)."""
    return any(s is not None and s.reshard_after_forward is not None
               for s in map(spec_of, configs))


def two_level(configs: list[dict]) -> bool:
    """Whether any of them all-reduces in two levels (hierarchical), needing --gpus-per-node."""
    return any(s is not None and s.two_level for s in map(spec_of, configs))


def spec_of(config: dict) -> Strategy | None:
    """The Strategy a configuration runs (None for compute-only); one without ``spec`` is
    refused rather than run as compute-only."""
    if "spec" not in config:
        raise ValueError(f"configuration {label(config)!r} carries no 'spec' (its Strategy); "
                         "build it with realrun.configs.config_of(strategy)")
    return None if config["spec"] is None else Strategy.from_dict(config["spec"])


def label(config: dict) -> str:
    """'naive', 'bucketed-25MB', 'compute-only': a config's name in tables and file names."""
    mb = config["bucket_mb"]
    return config["strategy"] if mb is None else f"{config['strategy']}-{mb:g}MB"
