"""One planned all-reduce made real: gradients in, average out.

A :class:`FlatBucket` is a box for the gradients of one ``simddp.planning.plans.Collective``. Each
gradient is copied into one flat buffer already divided by the world size, as soon as it is
ready (``add``, from its hook — torch's reducer does the same fused ``mul_out``); launching
fills whatever was not added (zeros where a parameter got no gradient) and all-reduces the
buffer; finishing waits and copies the average back into each ``p.grad``::

    bucket = FlatBucket(collective, params, world_size=2, group=None)
    bucket.add(0)                    # optional: gradient 0 of this bucket is ready
    bucket.launch(async_op=True)     # from a gradient hook, or from finish
    bucket.finish()                  # wait, then p.grad = average over ranks

Copying at readiness, with the division fused, brings realrun's bucketed step close to torch
DDP's (docs/FINDINGS.md#host-costs). The buffer is reused every step; ``p.grad`` is never a view
into it, so every way of zeroing or replacing ``.grad`` keeps working. A collective of ONE
dense contiguous gradient is all-reduced in place (naive and overlap never need twice the
gradient memory). With ``reducer=TwoLevel(...)`` (hierarchical) the buffer is zero-padded to a
multiple of G elements and the reducer runs the two-level all-reduce.
"""
from __future__ import annotations

import functools
from typing import Sequence

import torch
import torch.distributed as dist

from realrun.launch.two_level import TwoLevel


class FlatBucket:
    """The gradients of one collective (``collective.tensor_ids``), flattened in that order."""

    def __init__(self, collective, params: Sequence[torch.nn.Parameter], world_size: int,
                 group=None, reducer: TwoLevel | None = None) -> None:
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
