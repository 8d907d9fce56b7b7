"""The strategy registry: one row per strategy, and every list of names derived from the rows.

A row says how :func:`simddp.planning.strategy.make_strategy` builds the Strategy, where the
name is offered, its colour and curve on every plot, and its help line. Code that means one
strategy writes ``Name.DDP``, never the string (tests/test_strategy_names.py)::

    >>> [row.name for row in ROWS if row.offered == ALWAYS]
    ['naive', 'flat', 'overlap', 'bucketed', 'ddp', 'no_sync']
    >>> ROW[Name.DDP].implementation, ROW[Name.DDP].first_bucket_mb, names(hookable=True)
    ('torch', 1.0, ('bucketed', 'ddp'))

Adding a strategy is a :class:`Name` and a row here; a new implementation also needs its
host costs and a realrun executor, a new granularity its plan in simddp/planning/plans.py.
"""
from __future__ import annotations

from dataclasses import dataclass

# Which DDP implementation runs a strategy (simddp/kinds.py): whose host costs apply and which
# executor realrun wraps the module with (realrun/executors/).
from simddp.kinds import REALRUN_DDP, TORCH_DDP, TORCH_FSDP


class Name:
    """Every strategy's name, for code that means one strategy."""

    NAIVE = "naive"
    FLAT = "flat"
    OVERLAP = "overlap"
    BUCKETED = "bucketed"
    DDP = "ddp"
    NO_SYNC = "no_sync"
    SYNC_EACH = "sync_each"
    FSDP = "fsdp"
    ZERO2 = "zero2"
    HSDP = "hsdp"
    HIERARCHICAL = "hierarchical"



# torch.distributed._DEFAULT_FIRST_BUCKET_BYTES: "1MB is a reasonable value"
DDP_FIRST_BUCKET_MB = 1.0

# Where a name is offered (``offered``):
ALWAYS = "always"          # swept by --strategies all, a choice everywhere
ON_REQUEST = "on request"  # named in --strategies only (sharded: other memory, other code)
TWO_LEVEL = "two-level"    # swept by all on a two-level cluster (--nodes) only
BASELINE = "baseline"      # never named in a sweep: it comes with the row it is the baseline of


@dataclass(frozen=True)
class StrategyRow:
    """One strategy: how its Strategy is built (the same field names), where it is offered,
    how it is drawn. ``first_bucket_mb`` None: the cap; ``curve``: (marker, line style,
    width, marker size, hollow) of its bucket-size curve, None: the default.
    """

    name: str
    help: str
    colour: str
    granularity: str
    overlap: bool
    implementation: str = REALRUN_DDP
    first_bucket_mb: float | None = None
    sync_last_only: bool = False
    reshard_after_forward: bool | None = None
    hybrid: bool = False
    algorithm: str = "ring"
    hookable: bool = False
    offered: str = ALWAYS
    curve: tuple | None = None

    @property
    def sharded(self) -> bool:
        return self.reshard_after_forward is not None

    @property
    def accumulates(self) -> bool:
        """About gradient accumulation (no_sync, sync_each): a training-loop pattern, run
        as K micro-steps, not a wrapper of its own."""
        return self.sync_last_only or self.offered == BASELINE

    @property
    def runs_for_real(self) -> bool:
        """Whether realrun bench runs it as a configuration of its own."""
        return not self.accumulates


# Table order is the order of every list, table row and CLI choice derived from it.
ROWS = (
    StrategyRow(Name.NAIVE, "one all-reduce per gradient, all after backward (the baseline)",
                "#C44E52", "tensor", overlap=False),
    StrategyRow(Name.FLAT, "one all-reduce of every gradient copied into one buffer, "
                "after backward", "#8172B2", "all", overlap=False),
    StrategyRow(Name.OVERLAP, "one all-reduce per gradient, launched in backward as each "
                "is ready", "#937860", "tensor", overlap=True),
    # bucketed and ddp coincide wherever the first bucket makes no difference: their curves
    # differ enough (marker, line, width) that neither hides the other
    StrategyRow(Name.BUCKETED, "buckets of --bucket-mb, the first one too, launched in "
                "backward", "#4C72B0", "bucket", overlap=True, hookable=True,
                curve=("s", "--", 1.6, 5, True)),
    StrategyRow(Name.DDP, "torch DistributedDataParallel: a 1 MB first bucket, then "
                "--bucket-mb", "#55A868", "bucket", overlap=True, implementation=TORCH_DDP,
                first_bucket_mb=DDP_FIRST_BUCKET_MB, hookable=True,
                curve=("o", "-", 1.4, 4, False)),
    StrategyRow(Name.NO_SYNC, "ddp over K micro-steps (--accum-steps), synced on the last "
                "only", "#DA8BC3", "bucket", overlap=True, implementation=TORCH_DDP,
                first_bucket_mb=DDP_FIRST_BUCKET_MB, sync_last_only=True),
    StrategyRow(Name.SYNC_EACH, "ddp over K micro-steps, synced on every one (no_sync's "
                "baseline)", "#64B5CD", "bucket", overlap=True, implementation=TORCH_DDP,
                first_bucket_mb=DDP_FIRST_BUCKET_MB, offered=BASELINE),
    # FSDP2 fully_shard, reshard_after_forward True (ZeRO-3) / False (ZeRO-2)
    StrategyRow(Name.FSDP, "torch FSDP2 (ZeRO-3): parameters gathered per unit, resharded "
                "after forward", "#8C564B", "unit", overlap=True, implementation=TORCH_FSDP,
                reshard_after_forward=True, offered=ON_REQUEST),
    StrategyRow(Name.ZERO2, "torch FSDP2 (ZeRO-2): parameters kept from forward to "
                "backward", "#E377C2", "unit", overlap=True, implementation=TORCH_FSDP,
                reshard_after_forward=False, offered=ON_REQUEST),
    # FSDP2 fully_shard on a 2-D mesh (replicate, shard): HSDP, sharded in a node
    StrategyRow(Name.HSDP, "torch FSDP2 on a 2-D mesh (HSDP): fsdp inside each node, "
                "replicas across nodes all-reduce the shards", "#BCBD22", "unit", overlap=True,
                implementation=TORCH_FSDP, reshard_after_forward=True, hybrid=True,
                offered=ON_REQUEST),
    # bucketed with a two-level all-reduce (simddp/cost/hierarchical.py)
    StrategyRow(Name.HIERARCHICAL, "bucketed, each all-reduce in two levels: inside the "
                "node, across nodes, inside", "#1F3A93", "bucket", overlap=True,
                algorithm="hierarchical", offered=TWO_LEVEL,
                curve=("^", "-.", 1.4, 5, False)),
)
ROW = {row.name: row for row in ROWS}


def names(*, offered: tuple[str, ...] | str | None = None, hookable: bool | None = None,
          sharded: bool | None = None, granularity: str | None = None,
          runs_for_real: bool | None = None, hybrid: bool | None = None) -> tuple[str, ...]:
    """The names of the rows that match every filter given, in table order.

    >>> names(offered=(ALWAYS, ON_REQUEST))[-4:], names(sharded=True, hybrid=False)
    (('no_sync', 'fsdp', 'zero2', 'hsdp'), ('fsdp', 'zero2'))
    """
    if isinstance(offered, str):
        offered = (offered,)
    return tuple(row.name for row in ROWS
                 if (offered is None or row.offered in offered)
                 and (hookable is None or row.hookable == hookable)
                 and (sharded is None or row.sharded == sharded)
                 and (granularity is None or row.granularity == granularity)
                 and (runs_for_real is None or row.runs_for_real == runs_for_real)
                 and (hybrid is None or row.hybrid == hybrid))


def help_lines(choices: tuple[str, ...]) -> str:
    """One line per strategy, for a command's --help.

    >>> print(help_lines((Name.NAIVE, Name.FLAT)))
    strategies:
      naive         one all-reduce per gradient, all after backward (the baseline)
      flat          one all-reduce of every gradient copied into one buffer, after backward
    """
    return "\n".join(["strategies:"] + [f"  {n:14}{ROW[n].help}" for n in choices])
