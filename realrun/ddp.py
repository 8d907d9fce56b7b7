"""Real data-parallel training that executes a simddp plan, one all-reduce per planned collective.

Each rank wraps the same model; after backward, every trainable ``p.grad`` holds the average
over ranks. Which gradients go into which all-reduce, and in what order, comes from
``simddp.plan(profile, strategy)`` — the very plan the simulator times. ``strategy`` is a
simddp Strategy, or a name with bucket sizes (built by ``make_strategy``)::

    model = realrun.DDP(net, strategy="bucketed", bucket_mb=25)   # broadcasts rank 0's weights
    model = realrun.DDP(net, strategy=make_strategy("ddp", 10))   # the same, from a Strategy
    for tokens, target in shard:
        loss = loss_fn(model(tokens), target)
        loss.backward()                            # overlap strategies launch all-reduces here
        model.finish_gradient_synchronization()    # REQUIRED: wait, write the averages back
        opt.step(); opt.zero_grad(set_to_none=True)

``strategy="hierarchical"`` runs each bucket's all-reduce in two levels
(realrun/launch/two_level.py; docs/REALRUN.md, Two levels); every rank must build it at the
same point, as it makes the node groups. Gradient accumulation: the first K-1 backward passes
inside ``with model.no_sync():``. The process group must exist before ``DDP(...)`` is built.

How the plan is executed (the wrapper never looks at the strategy's name):

- Tensor id i is the i-th unique trainable parameter of ``module.parameters()`` (tied weights
  appear once, so they are reduced once; frozen parameters are never touched), or, with a
  measured ``profile``, the parameter its layer names as tensor i.
- ``plan.strategy.overlap`` true: a post-accumulate-grad hook marks a gradient ready; a
  collective launches (async) when all its gradients are ready AND every earlier collective
  has launched — buckets go out in plan order, like torch DDP's. Otherwise every collective
  launches, blocking, in plan order inside ``finish_gradient_synchronization()``.
- A parameter with no gradient on this rank (unused in this forward) contributes zeros, and
  ``finish_gradient_synchronization()`` launches whatever its hooks never did, in plan order,
  so every rank issues the same collectives in the same order. Afterwards its ``p.grad`` is
  the average — zeros if it was unused on every rank. torch DDP leaves such a grad None
  instead; with momentum or weight decay a zero gradient still moves the parameter.
"""
from __future__ import annotations

import os
import weakref
from contextlib import contextmanager
from dataclasses import replace
from typing import Callable, Iterator

import torch
import torch.distributed as dist
from torch import nn

from realrun.flat_bucket import FlatBucket
from realrun.launch.two_level import TwoLevel
from realrun.tensors import module_profile, trainable_parameters
from simddp.errors import InputError
from simddp.planning.plans import Collective, Plan, plan as make_plan
from simddp.inputs.profile import ModelProfile
from simddp.planning.registry import ALWAYS, TWO_LEVEL, Name, names
from simddp.planning.strategy import DDP_DEFAULT_BUCKET_MB, Strategy, make_strategy, mb_to_bytes

# What a name may be: simddp's replicated strategies, and bucketed in two levels.
NAMES = names(offered=(ALWAYS, TWO_LEVEL))

__all__ = ["DDP"]


class DDP(nn.Module):
    """Data-parallel wrapper running ``simddp.plan(profile, strategy)``.

    strategy: a replicating :class:`~simddp.planning.strategy.Strategy` without comm hook, or
      a name of :data:`NAMES` (no_sync plans like ddp); ``bucket_mb`` (default 25)
      and ``first_bucket_mb`` are MiB, like torch's ``bucket_cap_mb``, and go with a name only.
    profile: this module's ModelProfile (e.g. measured, with its gradient-ready order).
    gpus_per_node: hierarchical's ranks per node; default ``LOCAL_WORLD_SIZE``, else 1.

    Exposed for tests and benchmarks: ``plan``, ``buckets`` (tensor ids per collective, in
    launch order), ``param_names`` (tensor id -> name), ``collectives_last_step``, and two
    optional callbacks, ``on_collective_launch(collective)`` and ``on_sync_done()``.
    """

    def __init__(self, module: nn.Module, strategy: str | Strategy = Name.BUCKETED,
                 bucket_mb: float | None = None, first_bucket_mb: float | None = None,
                 process_group=None, profile: ModelProfile | None = None,
                 gpus_per_node: int | None = None) -> None:
        super().__init__()
        # Validate everything before the first collective, so bad input fails on every rank.
        strategy = _strategy_from(strategy, bucket_mb, first_bucket_mb)
        named = trainable_parameters(module)
        profile, named = _checked_profile(module, named, profile)
        devices = {p.device for _, p in named}
        if len(devices) > 1:
            raise InputError(f"trainable parameters live on {len(devices)} devices "
                             f"({', '.join(sorted(map(str, devices)))}); DDP needs one per rank")
        if not dist.is_initialized():
            raise RuntimeError("realrun.DDP needs an initialised process group: call "
                               "dist.init_process_group first, or start the ranks with "
                               "realrun.launch.run_world or torchrun")
        self.plan: Plan = make_plan(profile, strategy)
        self.module = module
        self.process_group = process_group
        self.param_names: tuple[str, ...] = tuple(name for name, _ in named)
        self.buckets: list[tuple[int, ...]] = self.plan.buckets
        self.world_size = dist.get_world_size(process_group)
        self.collectives_last_step = 0
        self.on_collective_launch: Callable[[Collective], None] | None = None
        self.on_sync_done: Callable[[], None] | None = None

        params = [p for _, p in named]
        self.two_level: TwoLevel | None = None
        if strategy.two_level:  # checks G, then makes the node groups
            if gpus_per_node is None:
                gpus_per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
            self.two_level = TwoLevel.of(gpus_per_node, process_group, devices.pop())
        broadcast_from_rank0(module, process_group)
        self._flat = [FlatBucket(c, params, self.world_size, process_group, self.two_level)
                      for c in self.plan.collectives]
        self._bucket_of = {tid: i for i, c in enumerate(self.plan.collectives)
                           for tid in c.tensor_ids}
        self._slot_of = {tid: k for c in self.plan.collectives
                         for k, tid in enumerate(c.tensor_ids)}
        self._require_sync = True
        self._needs_sync = True   # set by forward/backward, cleared by a finished sync
        self._ready = [False] * len(params)
        self._missing = [len(c.tensor_ids) for c in self.plan.collectives]
        self._next = 0            # index of the next collective to launch
        self._launched = 0
        # The hooks hold only a weak reference: a dropped wrapper leaves no live hooks behind.
        self_ref = weakref.ref(self)
        self._grad_hooks = [p.register_post_accumulate_grad_hook(_make_hook(self_ref, tid))
                            for tid, p in enumerate(params)]

    def forward(self, *args, **kwargs):
        if torch.is_grad_enabled():
            self._needs_sync = True
        return self.module(*args, **kwargs)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """No communication inside; gradients accumulate in ``p.grad`` until a synced step."""
        previous = self._require_sync
        self._require_sync = False
        try:
            yield
        finally:
            self._require_sync = previous

    def finish_gradient_synchronization(self) -> None:
        """Launch what the hooks did not, wait for all, leave the average in each ``p.grad``.

        Call once after each synced ``backward()``; a second call before the next forward or
        backward does nothing, and so does a call inside :meth:`no_sync`.
        """
        if not self._require_sync or not self._needs_sync:
            return
        async_op = self.plan.strategy.overlap
        while self._next < len(self._flat):
            self._launch_next(async_op)
        for bucket in self._flat:  # launch order; each write-back waits for its own work
            bucket.finish()
        self.collectives_last_step, self._launched = self._launched, 0
        self._next = 0
        self._needs_sync = False
        self._ready = [False] * len(self._ready)
        self._missing = [len(c.tensor_ids) for c in self.plan.collectives]
        if self.on_sync_done is not None:
            self.on_sync_done()

    def remove_hooks(self) -> None:
        """Detach the gradient hooks (the module can then be wrapped again)."""
        for handle in self._grad_hooks:
            handle.remove()
        self._grad_hooks = []

    def _on_grad_ready(self, tid: int) -> None:
        self._needs_sync = True
        if not (self._require_sync and self.plan.strategy.overlap):
            return  # accumulating, or this plan launches everything after backward
        if self._ready[tid]:
            raise RuntimeError(f"realrun.DDP: gradient of {self.param_names[tid]!r} became "
                               "ready twice in one synced step; call "
                               "finish_gradient_synchronization() after each backward, or run "
                               "the extra backward passes inside no_sync()")
        self._ready[tid] = True
        index = self._bucket_of[tid]
        self._flat[index].add(self._slot_of[tid])
        self._missing[index] -= 1
        # Launch in plan order: a full bucket waits for every earlier bucket to go first.
        while self._next < len(self._flat) and self._missing[self._next] == 0:
            self._launch_next(async_op=True)

    def _launch_next(self, async_op: bool) -> None:
        bucket = self._flat[self._next]
        if self.on_collective_launch is not None:
            self.on_collective_launch(bucket.collective)
        bucket.launch(async_op)
        self._next += 1
        self._launched += 1


def _strategy_from(strategy: str | Strategy, bucket_mb: float | None,
                   first_bucket_mb: float | None) -> Strategy:
    """The Strategy to plan, with one synced micro-step (:meth:`DDP.no_sync` skips the others)."""
    if isinstance(strategy, Strategy):
        if bucket_mb is not None or first_bucket_mb is not None:
            raise InputError(f"bucket_mb / first_bucket_mb: strategy {strategy.name!r} is a "
                             "Strategy with its own bucket sizes; pass a name to give them")
        if strategy.reshard_after_forward is not None or strategy.comm_hook is not None:
            raise InputError(f"strategy {strategy.name!r}: realrun.DDP replicates without comm "
                             "hooks; run sharded or hooked strategies under torch "
                             "(realrun.executors)")
        return replace(strategy, accum_steps=1)
    if strategy not in NAMES:
        raise InputError(f"strategy={strategy!r}: choose from {', '.join(NAMES)}")
    bucket_mb = DDP_DEFAULT_BUCKET_MB if bucket_mb is None else bucket_mb
    mb_to_bytes(bucket_mb, "bucket_mb")
    if first_bucket_mb is not None:
        mb_to_bytes(first_bucket_mb, "first_bucket_mb")
    return make_strategy(strategy, bucket_mb, first_bucket_mb=first_bucket_mb)


def _make_hook(self_ref: "weakref.ref[DDP]", tid: int) -> Callable[[torch.Tensor], None]:
    def hook(_param: torch.Tensor) -> None:
        ddp = self_ref()
        if ddp is not None:
            ddp._on_grad_ready(tid)
    return hook


def _checked_profile(module: nn.Module, named: list, profile: ModelProfile | None
                     ) -> tuple[ModelProfile, list]:
    """(profile, the (name, parameter) of each tensor id): matched by name where the profile
    names its tensors, else by ``parameters()`` order and sizes."""
    if profile is None:
        return module_profile(module), named
    names = [n for n in profile.tensor_names if n]
    by_name = dict(named)
    if len(names) == profile.n_tensors and set(names) == set(by_name):
        ordered = [(n, by_name[n]) for n in names]
    elif names and len(names) == profile.n_tensors:
        missing = sorted(set(by_name) - set(names)) or sorted(set(names) - set(by_name))
        raise InputError(f"profile {profile.name!r} does not name this module's trainable "
                         f"parameters (e.g. {missing[0]!r} is in one and not the other)")
    else:
        ordered = named
    sizes = tuple(p.numel() * p.element_size() for _, p in ordered)
    if profile.tensor_bytes != sizes:
        raise InputError(f"profile {profile.name!r} has {profile.n_tensors} tensors "
                         f"{profile.tensor_bytes[:4]}...; the module's trainable parameters "
                         f"are {len(sizes)} tensors {sizes[:4]}...")
    return profile, ordered


def broadcast_from_rank0(module: nn.Module, process_group=None) -> None:
    """Copy every parameter (frozen too) and buffer of the group's rank 0 to all its ranks."""
    src = dist.get_global_rank(process_group, 0) if process_group is not None else 0
    with torch.no_grad():
        for tensor in list(module.parameters()) + list(module.buffers()):
            if tensor.is_contiguous():
                dist.broadcast(tensor, src=src, group=process_group)
            else:  # collectives need dense memory; go through a contiguous copy
                dense = tensor.contiguous()
                dist.broadcast(dense, src=src, group=process_group)
                tensor.copy_(dense)
