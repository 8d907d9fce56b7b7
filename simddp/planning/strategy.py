"""Gradient-sync strategies as data: what to group, when it may launch, how many micro-steps.

:func:`simddp.planning.plans.plan` reads these fields; the simulator and the real executors
only ever run the plan::

    >>> s = make_strategy("ddp", bucket_mb=25)
    >>> s.first_bucket_bytes, s.implementation
    (1048576, 'torch')

``bucket_mb`` follows torch's ``bucket_cap_mb`` (MiB). Sharded strategies and comm hooks are
the same dataclass with more fields set::

    >>> s = make_strategy("bucketed+powersgd:2", bucket_mb=25)
    >>> s.comm_hook.rank, s.implementation, make_strategy("zero2").reshard_after_forward
    (2, 'torch', False)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from simddp.errors import InputError
from simddp.planning.hooks import CommHook, parse_comm_hook
from simddp.cost.hierarchical import ALGORITHMS
from simddp.planning.sharding import check_param_dtype, param_dtype_of
from simddp.planning.grad_dtype import check_grad_dtype
from simddp.kinds import IMPLEMENTATIONS
from simddp.planning.registry import (ALWAYS, BASELINE, ON_REQUEST,
                               ROW, TORCH_DDP, TWO_LEVEL, Name, names)


class UnknownStrategy(InputError):
    """A strategy name that is none of the strategies (a CLI words its own message)."""


MB = 2**20                 # torch's bucket_cap_mb counts MiB
DDP_DEFAULT_BUCKET_MB = 25.0

# The lists every caller reads, in the registry's order (simddp/planning/registry.py).
STRATEGIES = names(offered=ALWAYS)          # what --strategies all sweeps
HIERARCHICAL = Name.HIERARCHICAL
BUCKETED = names(granularity="bucket", offered=(ALWAYS, ON_REQUEST, TWO_LEVEL))
SHARDED = names(sharded=True, hybrid=False)
HYBRID = names(hybrid=True)
HOOKABLE = names(hookable=True)
SWEEPABLE = names(offered=(ALWAYS, ON_REQUEST, TWO_LEVEL))
# no_sync's baseline: the same K micro-steps, DDP-synced every time.
ACCUM_BASELINE = names(offered=BASELINE)[0]


@dataclass(frozen=True)
class Strategy:
    """Which gradients go together, when they may launch, and who runs them (fields:
    docs/FORMATS.md, the results file's ``spec``).

    granularity: "tensor" (one collective per gradient), "all" (one flat collective),
    "bucket" (torch DDP's size rule) or "unit" (sharded, with ``reshard_after_forward``
    True for fsdp, False for zero2; ``hybrid``: HSDP). implementation: whose host costs apply
    (:class:`simddp.inputs.host.Host`). param_dtype, cast_gbps: FSDP2's mixed precision
    (simddp/planning/sharding.py); grad_dtype: the dtype gradients are reduced in
    (simddp/planning/grad_dtype.py); None: fp32.
    """

    name: str
    granularity: str
    overlap: bool
    bucket_bytes: int | None = None
    first_bucket_bytes: int | None = None
    accum_steps: int = 1
    sync_last_only: bool = False
    implementation: str = "realrun"
    reshard_after_forward: bool | None = None
    hybrid: bool = False
    shard_unit_bytes: int | None = None
    comm_hook: CommHook | None = None
    # How each all-reduce crosses a two-level cluster: "ring" over every rank, as NCCL and
    # Gloo do, or "hierarchical" (docs/TOPOLOGY.md).
    algorithm: str = "ring"
    param_dtype: str | None = None
    cast_gbps: float | None = None
    grad_dtype: str | None = None

    def __post_init__(self) -> None:
        if self.granularity not in ("tensor", "all", "bucket", "unit"):
            raise InputError(f"strategy {self.name!r}: granularity must be tensor, all or "
                             "bucket, or unit when sharded")
        if (self.granularity == "unit") != (self.reshard_after_forward is not None):
            raise InputError(f"strategy {self.name!r}: granularity unit goes with "
                             "reshard_after_forward True or False, and only it")
        if self.hybrid and self.granularity != "unit":
            raise InputError(f"strategy {self.name!r}: hybrid (HSDP) shards, so it goes with "
                             "granularity unit")
        if self.comm_hook is not None and (self.granularity != "bucket"
                                           or self.implementation != "torch"):
            raise InputError(f"strategy {self.name!r}: a comm hook needs buckets under torch "
                             f"DDP ({', '.join(HOOKABLE)})")
        if self.granularity == "bucket" and not (self.bucket_bytes and self.first_bucket_bytes
                                                 and self.bucket_bytes > 0
                                                 and self.first_bucket_bytes > 0):
            raise InputError(f"strategy {self.name!r}: a bucketed strategy needs bucket sizes > 0")
        if not isinstance(self.accum_steps, int) or self.accum_steps < 1:
            raise InputError(f"--accum-steps must be an integer >= 1, got {self.accum_steps!r}")
        if self.algorithm not in ALGORITHMS:
            raise InputError(f"strategy {self.name!r}: algorithm must be ring or hierarchical, "
                             f"got {self.algorithm!r}")
        if self.implementation not in IMPLEMENTATIONS:
            raise InputError(f"strategy {self.name!r}: implementation must be one of "
                             f"{', '.join(IMPLEMENTATIONS)}, got {self.implementation!r}")
        check_param_dtype(self.param_dtype)
        object.__setattr__(self, "grad_dtype", check_grad_dtype(self.grad_dtype))  # fp32: None
        if self.grad_dtype is not None and self.comm_hook is not None:
            raise InputError(f"strategy {self.name!r}: a comm hook compresses fp32 gradients; "
                             f"--grad-dtype is {self.grad_dtype}")
        if self.param_dtype is not None and self.granularity != "unit":
            raise InputError(f"strategy {self.name!r}: param_dtype (FSDP2's mixed precision) "
                             f"applies to {' and '.join(SHARDED)} only")
        if self.cast_gbps is not None and not (
                isinstance(self.cast_gbps, (int, float)) and not isinstance(self.cast_gbps, bool)
                and math.isfinite(self.cast_gbps) and self.cast_gbps > 0):
            raise InputError(f"strategy {self.name!r}: cast_gbps must be a number > 0 GB/s, "
                             f"got {self.cast_gbps!r}")

    @property
    def base(self) -> str:
        """The strategy without its comm hook: 'ddp' for ddp+fp16 (what realrun wraps, what
        a plot draws it like)."""
        hook = self.comm_hook
        return self.name if hook is None else self.name[:-len(hook.name) - 1]

    @property
    def accumulates(self) -> bool:
        """Whether it is about gradient accumulation (no_sync, and its sync_each baseline):
        it runs ``accum_steps`` micro-steps by default."""
        return self.sync_last_only or self.name == ACCUM_BASELINE

    @property
    def is_baseline(self) -> bool:
        """Whether speedups are measured against it: naive per step, sync_each per
        optimizer step.

        >>> [make_strategy(n).is_baseline for n in ("naive", "overlap", "sync_each", "no_sync")]
        [True, False, True, False]
        """
        if self.accumulates:
            return not self.sync_last_only
        return self.granularity == "tensor" and not self.overlap

    @property
    def beyond_ddp(self) -> bool:
        """Whether it shards, compresses or all-reduces in two levels: what a sweep
        recommends as a strategy, beside the bucket size."""
        return (self.reshard_after_forward is not None or self.comm_hook is not None
                or self.two_level)

    @property
    def shards_optimizer(self) -> bool:
        """Whether each rank's optimizer updates only its shard (1/p, or 1/G for hsdp)."""
        return self.reshard_after_forward is not None

    @property
    def two_level(self) -> bool:
        """Whether each all-reduce runs in two levels, not one ring over every rank."""
        return self.algorithm != "ring"

    def to_dict(self) -> dict:
        """Plain JSON-able fields (a rank's payload); :meth:`from_dict` reads them back.

        >>> s = make_strategy("ddp+powersgd:2", bucket_mb=4)
        >>> Strategy.from_dict(s.to_dict()) == s, s.base
        (True, 'ddp')
        """
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.comm_hook is not None:
            out["comm_hook"] = {f.name: getattr(self.comm_hook, f.name)
                                for f in fields(self.comm_hook)}
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Strategy":
        data = dict(data)
        if data.get("comm_hook") is not None:
            data["comm_hook"] = CommHook(**data["comm_hook"])
        return cls(**data)

    @property
    def bucket_mb(self) -> float | None:
        # rounded so 0.1 MB (104857 bytes after truncation) reads back as 0.1, matching files
        return None if self.bucket_bytes is None else round(self.bucket_bytes / MB, 6)


def split_name(name: str) -> tuple[str, str | None]:
    """A strategy name's base and comm hook: 'ddp+fp16' -> ('ddp', 'fp16'); 'fsdp' -> ('fsdp', None).

    >>> split_name("bucketed+powersgd:2"), split_name("zero2")
    (('bucketed', 'powersgd:2'), ('zero2', None))
    """
    base, _, hook = name.partition("+")
    return base, hook or None


def strategy_of(name: str, bucket_mb: float | None = None, accum_steps: int = 1
                ) -> Strategy | None:
    """The Strategy a result file without ``spec`` names; None for compute-only or an
    unknown name. The one place a strategy's name is read back.

    >>> strategy_of("ddp+fp16", 4.0).comm_hook.kind, strategy_of("compute-only")
    ('fp16', None)
    """
    if split_name(name)[0] not in ROW:
        return None
    mb = () if bucket_mb is None else (bucket_mb,)
    try:
        return make_strategy(name, *mb, accum_steps=accum_steps)
    except InputError:
        return None


def mb_to_bytes(mb: float, flag: str = "--bucket-mb") -> int:
    if isinstance(mb, bool) or not isinstance(mb, (int, float)) or not math.isfinite(mb) or mb <= 0:
        raise InputError(f"{flag}: {mb!r} is not a number > 0 (MB, e.g. 25)")
    if mb * MB > 2**62:  # beyond any real model; int() of 1e308 would overflow
        raise InputError(f"{flag}: {mb!r} MB is too large")
    return max(1, int(mb * MB))


def with_precision(strategy: Strategy, precision: str, cast_gbps: float | None = None
                   ) -> Strategy:
    """``strategy`` at ``--precision``: fsdp and zero2 at bf16 take FSDP2's mixed precision
    (casts timed at ``cast_gbps``); anything else is unchanged (bf16 there is autocast).

    >>> [with_precision(make_strategy(n), "bf16").param_dtype for n in ("fsdp", "ddp")]
    ['bf16', None]
    """
    dtype = param_dtype_of(precision)
    if dtype is None or strategy.reshard_after_forward is None:
        return strategy
    return replace(strategy, param_dtype=dtype, cast_gbps=cast_gbps)


def make_strategy(name: str, bucket_mb: float = DDP_DEFAULT_BUCKET_MB,
                  accum_steps: int = 1, first_bucket_mb: float | None = None, *,
                  comm_hook: str | CommHook | None = None,
                  shard_unit_mb: float | None = None, param_dtype: str | None = None,
                  cast_gbps: float | None = None) -> Strategy:
    """The named strategy (docs/CLI.md, "The strategies"); a comm hook comes as ``comm_hook`` or
    in the name ("ddp+fp16"), and the strategy's name has it. ``bucket_mb`` matters for
    bucketed strategies only."""
    base, hook_text = split_name(name)
    if hook_text:
        if comm_hook is not None:
            raise InputError(f"strategy {name!r}: give the comm hook once, in the name or apart")
        comm_hook = hook_text
    if comm_hook is not None:
        hook = comm_hook if isinstance(comm_hook, CommHook) else parse_comm_hook(comm_hook)
        if base not in HOOKABLE:
            raise InputError(f"--comm-hook {hook.name}: works with {' and '.join(HOOKABLE)} "
                             f"(torch DDP buckets), not {base}")
        plain = make_strategy(base, bucket_mb, accum_steps, first_bucket_mb)
        # torch DDP runs every hook; its bucket_cap_mb makes bucketed's equal first bucket
        return replace(plain, name=f"{base}+{hook.name}", comm_hook=hook,
                       implementation=TORCH_DDP)
    row = ROW.get(name)
    if row is None:
        raise UnknownStrategy(f"unknown strategy {name!r}; choose from {', '.join(SWEEPABLE)}")
    if (param_dtype is not None or cast_gbps is not None) and not row.sharded:
        raise InputError(f"strategy {name!r}: param_dtype (FSDP2's mixed precision) applies "
                         f"to {' and '.join(SHARDED)} only")
    if row.sharded:
        unit = None if shard_unit_mb is None else mb_to_bytes(shard_unit_mb, "--shard-unit-mb")
        return Strategy(name, row.granularity, row.overlap, accum_steps=accum_steps,
                        implementation=row.implementation,
                        reshard_after_forward=row.reshard_after_forward, hybrid=row.hybrid,
                        shard_unit_bytes=unit,
                        param_dtype=param_dtype, cast_gbps=cast_gbps)
    if row.granularity != "bucket":
        return Strategy(name, row.granularity, row.overlap, accum_steps=accum_steps,
                        implementation=row.implementation)
    cap = mb_to_bytes(bucket_mb)
    if first_bucket_mb is None:
        first_bucket_mb = row.first_bucket_mb   # None: the first bucket is the cap
    first = cap if first_bucket_mb is None else mb_to_bytes(first_bucket_mb, "--first-bucket-mb")
    return Strategy(name, "bucket", row.overlap, cap, first, accum_steps,
                    sync_last_only=row.sync_last_only, implementation=row.implementation,
                    algorithm=row.algorithm)
