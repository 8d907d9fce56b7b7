"""The names the engine, the plans and the timelines share, as enums, not strings that match.

Three small vocabularies, each a :class:`~enum.StrEnum` so files keep their spelling (a member
*is* its string: ``Phase.FORWARD == "forward"``, and JSON writes it as such):

- :class:`Phase`: the points of one layer where a plan releases or gates a collective:
  when its forward or backward starts, or after its backward (gradients ready);
- :class:`CollectiveKind`: what a plan issues (link laws are per kind; file spelling
  ``all_reduce``);
- :class:`SpanKind` and :class:`Lane`: what an interval on a timeline is, and on which lane::

    >>> CollectiveKind.REDUCE_SCATTER.span_kind     # shown as the string it is
    'reduce-scatter'
    >>> Phase("backward") is Phase.BACKWARD, SpanKind.FORWARD == "forward"
    (True, True)
"""
from __future__ import annotations

from enum import StrEnum


class _Name(StrEnum):
    """A member reads as its string in reprs too, as plans and spans always showed it."""

    def __repr__(self) -> str:
        return repr(self.value)


class Phase(_Name):
    """Where in a layer's pass a collective is released or gates compute."""

    FORWARD = "forward"                # when the layer's forward starts
    BACKWARD = "backward"              # when the layer's backward starts
    AFTER_BACKWARD = "after_backward"  # when the layer's backward ends: its gradients are ready


class Lane(_Name):
    """One GPU's two lanes: its compute stream and its collective stream."""

    COMPUTE = "compute"
    COMM = "comm"


class SpanKind(_Name):
    """What a timeline interval is. Compute lane: the model's phases and the DDP
    implementation's host work (hooks and copies: ``COPY``); comm lane: the collectives."""

    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"
    COPY = "copy"
    OTHER = "compute"
    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"
    ALL_TO_ALL = "all-to-all"


class CollectiveKind(_Name):
    """What a plan's collective does (its law: simddp/cost/)."""

    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    ALL_TO_ALL = "all_to_all"   # no plan issues one; the law prices it (nccl-tests logs, traces)

    @property
    def span_kind(self) -> SpanKind:
        """Its kind on a timeline (files spell it with a hyphen)."""
        return SpanKind(self.value.replace("_", "-"))


# Which DDP implementation runs a strategy: whose host costs apply (simddp/inputs/host.py keys them
# so in host files) and which executor realrun wraps the module with (realrun/executors/).
REALRUN_DDP = "realrun"   # realrun.DDP, the wrapper that executes a plan (realrun/ddp.py)
TORCH_DDP = "torch"       # torch's DistributedDataParallel (and every comm hook)
TORCH_FSDP = "fsdp"       # torch FSDP2, fully_shard (realrun/sharded.py)
IMPLEMENTATIONS = (REALRUN_DDP, TORCH_DDP, TORCH_FSDP)
