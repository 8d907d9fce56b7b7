"""The hierarchical all-reduce of a world on its own process groups: a node's ranks, then the
ranks with one local index across nodes. realrun.DDP's ``hierarchical`` strategy reduces its
buckets with it (realrun/flat_bucket.py), and calibrate times each level the way it is used here
(calibrate/ranks/levels.py)::

    two = TwoLevel.of(gpus_per_node=2)               # on every rank, in the same order
    two.all_reduce(buffer, async_op=True).wait()     # buffer: a multiple of 2 elements
    two.intra, two.inter                             # the groups, None where a level has one rank

Ranks are node-major: reduce-scatter inside the node, all-reduce of the 1/G shard across
nodes, all-gather inside the node (docs/REALRUN.md, Two levels). Every group must see its
collectives in the same order on every rank, so one worker thread runs the phases, buffer
after buffer in the order they were handed over.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch
import torch.distributed as dist

from simddp.errors import InputError

# torch 2.13 names them *_single (what FSDP2 issues); older releases *_tensor.
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


class TwoLevel:
    """The hierarchical all-reduce of ``group`` (None: the world), ``gpus_per_node`` ranks a
    node: its subgroups and the one thread that runs its phases. Made once per group and G
    (:meth:`of`): every group costs a rendezvous, and a process may wrap many models."""

    _made: dict = {}

    @classmethod
    def of(cls, gpus_per_node: int, group=None, device=None) -> "TwoLevel":
        parent = dist.group.WORLD if group is None else group
        made = cls._made.get((id(parent), gpus_per_node))
        if made is None or made.parent is not parent:  # a new world reuses no old groups
            made = cls._made[(id(parent), gpus_per_node)] = cls(gpus_per_node, group, device)
        return made

    def __init__(self, gpus_per_node: int, group=None, device=None) -> None:
        ranks = (dist.get_process_group_ranks(group) if group is not None
                 else list(range(dist.get_world_size())))
        g = gpus_per_node
        if isinstance(g, bool) or not isinstance(g, int) or g < 1 or len(ranks) % g:
            raise InputError(f"gpus_per_node={g!r}: must be an integer >= 1 that divides the "
                             f"{len(ranks)} ranks (node = rank // gpus_per_node)")
        me = dist.get_rank(group)
        self.parent = dist.group.WORLD if group is None else group
        self.gpus_per_node, self.nodes, self.local_rank = g, len(ranks) // g, me % g
        # Subgroups get the parent's timeout: new_group's default is 30 min, and a hung
        # rank must end the job within the world's --timeout-s.
        timeout = _timeout_of(self.parent, device)
        nodes = [ranks[i:i + g] for i in range(0, len(ranks), g)]
        columns = [ranks[k::g] for k in range(g)]  # the ranks with one local index
        # None: that level has one rank (G = 1, or one node), so it does nothing.
        self.intra = _subgroup(nodes, me // g, group, timeout) if g > 1 else None
        self.inter = _subgroup(columns, me % g, group, timeout) if self.nodes > 1 else None
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="realrun-two-level")
        self._shards: dict = {}  # (numel, dtype, device) -> this rank's shard, reused

    def all_reduce(self, payload: torch.Tensor, async_op: bool) -> "_Pending | None":
        """Sum ``payload`` over the group in two levels; async: queued to the worker."""
        if not async_op:
            self._phases(payload)
            return None
        return _Pending(self._worker.submit(self._phases, payload))

    def _phases(self, payload: torch.Tensor) -> None:
        # One level with one rank a piece: a plain all-reduce on the other, as simddp's law
        # reduces to the single link (on Gloo, RS + AG would cost ~1.5 all-reduces).
        if self.gpus_per_node == 1 or self.nodes == 1:
            dist.all_reduce(payload, group=self.inter if self.gpus_per_node == 1 else self.intra)
            return
        key = (payload.numel(), payload.dtype, payload.device)
        if key not in self._shards:
            self._shards[key] = payload.new_empty(payload.numel() // self.gpus_per_node)
        shard = self._shards[key]
        _REDUCE_SCATTER(shard, payload, group=self.intra)   # the node's sum of my 1/G
        dist.all_reduce(shard, group=self.inter)            # + the other nodes' sums of it
        _ALL_GATHER(payload, shard, group=self.intra)       # every 1/G back to every rank


class _Pending:
    """An async two-level all-reduce: ``wait()`` returns when it is done, or raises its error."""

    def __init__(self, future) -> None:
        self.future = future

    def wait(self) -> None:
        self.future.result()


def _subgroup(members: list[list[int]], mine: int, group, timeout):
    """This rank's group of ``members[mine]``; the parent itself when there is only one."""
    if len(members) == 1:
        return dist.group.WORLD if group is None else group
    if group is None:  # new_group's rule: every rank makes every group, in the same order
        return [dist.new_group(m, timeout=timeout) for m in members][mine]
    # Inside a subgroup the other ranks of the world take no part: each makes its own only.
    return dist.new_group(members[mine], timeout=timeout, use_local_synchronization=True)


def _timeout_of(group, device):
    try:
        return group._get_backend(device or torch.device("cpu")).options._timeout
    except (AttributeError, RuntimeError):  # a private API; without it, torch's default
        return None
