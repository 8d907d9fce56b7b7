"""One planned all-reduce made real: gradients in, average out.

A :class:`FlatBucket` is a box for the gradients of one ``simddp.plans.Collective``. Each
gradient is copied into one flat buffer already divided by the world size, as soon as it is
ready (``add``, from its hook — torch's reducer does the same fused ``mul_out``); launching
fills whatever was not added (zeros where a parameter got no gradient) and all-reduces the
buffer; finishing waits and copies the average back into each ``p.grad``::

    bucket = FlatBucket(collective, params, world_size=2, group=None)
    bucket.add(0)                    # optional: gradient 0 of this bucket is ready
    bucket.launch(async_op=True)     # from a gradient hook, or from finish
    bucket.finish()                  # wait, then p.grad = average over ranks

Copying at readiness spreads the copies over the backward instead of doing them all at launch,
and fusing the division saves a pass over the bucket: on loopback this brought our bucketed
from 1.11× to about 1.02× torch DDP's step time (see docs/BENCHMARKS.md).

The buffer is allocated on first use and reused every step, on the parameters' device and in
their promoted dtype. ``p.grad`` is never a view into it: gradients are copied in and out, so
``zero_grad(set_to_none=True)``, optimizers that replace ``.grad`` and in-place
``zero_grad(set_to_none=False)`` all keep working. A collective of ONE tensor whose gradient
exists and is contiguous skips the copies and all-reduces the gradient in place (naive and
overlap have one such collective per tensor, so they never need twice the gradient memory).

**Two levels** (``reducer=TwoLevel(...)``, the ``hierarchical`` strategy): the bucket's
all-reduce runs as simddp/topology.py times it, ranks node-major (node = rank // G, G =
``gpus_per_node``): reduce-scatter inside the node, all-reduce of this rank's 1/G shard across
nodes (the ranks with the same local index), all-gather inside the node; one node, or one rank
a node, is one all-reduce. The buffer is padded
with zeros to a multiple of G elements so the shards are equal. The three phases of a bucket
depend on each other and every group must see its collectives in the same order on every rank,
so one worker thread per world runs them, bucket after bucket in launch order; ``launch``
hands it the buffer and returns at once, as an async all-reduce does.
"""
from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import torch
import torch.distributed as dist

from simddp.errors import InputError


class FlatBucket:
    """The gradients of one collective (``collective.tensor_ids``), flattened in that order."""

    def __init__(self, collective, params: Sequence[torch.nn.Parameter], world_size: int,
                 group=None, reducer: "TwoLevel | None" = None) -> None:
        self.collective = collective
        self.reducer = reducer  # None: one all-reduce over ``group``
        self.params = [params[tid] for tid in collective.tensor_ids]
        self.world_size = world_size
        self.group = group
        self.numels = [p.numel() for p in self.params]
        self.offsets = [sum(self.numels[:i]) for i in range(len(self.numels))]
        self.dtype = functools.reduce(torch.promote_types, (p.dtype for p in self.params))
        self.device = self.params[0].device
        self.buffer: torch.Tensor | None = None  # allocated on first use, then reused
        self._payload: torch.Tensor | None = None  # what was all-reduced this step
        self._work = None
        self._added = [False] * len(self.params)   # slots filled by add() this step

    @property
    def launched(self) -> bool:
        return self._payload is not None

    def add(self, slot: int) -> None:
        """Gradient ``slot`` of this bucket is ready: copy it in, divided by the world size."""
        if len(self.params) == 1 and self.reducer is None:
            return  # a lone gradient is reduced in place at launch: nothing to copy
        self._copy_in(slot)
        self._added[slot] = True

    def launch(self, async_op: bool) -> None:
        """Fill the payload with gradient / world_size and start the all-reduce (sum)."""
        payload = self._fill()
        self._added = [False] * len(self.params)
        if self.reducer is None:
            self._work = dist.all_reduce(payload, group=self.group, async_op=async_op)
        else:
            self._work = self.reducer.all_reduce(payload, async_op)
        self._payload = payload

    def finish(self) -> None:
        """Wait for the all-reduce, leave the average in every ``p.grad``, reset for next step."""
        if self._work is not None:
            self._work.wait()
        payload, self._payload, self._work = self._payload, None, None
        if payload is None or payload is not self.buffer:
            return  # not launched, or the gradient itself was reduced in place
        with torch.no_grad():
            for p, offset, numel in zip(self.params, self.offsets, self.numels):
                average = payload[offset:offset + numel].view(p.shape)
                if p.grad is None:
                    # The parameter got no gradient on this rank: it still gets the average.
                    p.grad = average.to(dtype=p.dtype, copy=True)
                else:
                    p.grad.copy_(average)

    def _fill(self) -> torch.Tensor:
        if len(self.params) == 1 and self.reducer is None:
            grad = self.params[0].grad
            if grad is not None and _plain(grad) and grad.is_contiguous():
                with torch.no_grad():
                    grad.div_(self.world_size)  # pre-divided, as in _copy_in
                return grad
        for slot, added in enumerate(self._added):
            if not added:
                self._copy_in(slot)
        return self.buffer

    def _copy_in(self, slot: int) -> None:
        if self.buffer is None:
            # Two levels: zero padding up to a multiple of G elements (equal shards); it is
            # never written, so it stays zero and sums to zero.
            multiple = 1 if self.reducer is None else self.reducer.gpus_per_node
            total = -(-sum(self.numels) // multiple) * multiple
            self.buffer = torch.zeros(total, dtype=self.dtype, device=self.device)
        p, offset, numel = self.params[slot], self.offsets[slot], self.numels[slot]
        view = self.buffer[offset:offset + numel].view(p.shape)
        with torch.no_grad():
            if p.grad is None:
                view.zero_()  # unused on this rank: contribute nothing, but take part
            elif not _plain(p.grad):
                raise RuntimeError(f"realrun.DDP: gradient of a {tuple(p.shape)} parameter "
                                   f"has layout {p.grad.layout}; only dense gradients are "
                                   "supported (use sparse=False)")
            else:
                # Pre-divide like torch DDP's reducer (fused into the copy), so the sum of the
                # shares is the average and half-precision gradients don't overflow.
                torch.mul(p.grad, 1.0 / self.world_size, out=view)


def _plain(tensor: torch.Tensor) -> bool:
    return tensor.layout == torch.strided


# torch 2.13 names them *_single (what FSDP2 issues); older releases *_tensor. On Gloo the
# reduce-scatter is torch's composition: the input cloned, all-reduced, the shard copied out
# (docs/CALIBRATE.md), so inside a node it moves 2(G-1)/G·n per rank, not (G-1)/G·n.
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


class TwoLevel:
    """The hierarchical all-reduce of ``group`` (None: the world), ``gpus_per_node`` ranks a
    node, node-major: the subgroups it needs and the one thread that runs its phases::

        two = TwoLevel.of(gpus_per_node=2)     # on every rank, in the same order
        two.all_reduce(buffer, async_op=True).wait()   # buffer: a multiple of 2 elements

    Made once per group and G (:meth:`of`), since every group costs a rendezvous and sockets
    to every member, and a process may wrap many models (realrun bench: one per bucket size).
    """

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
