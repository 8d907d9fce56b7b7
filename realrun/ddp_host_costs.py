"""What a DDP implementation costs the host per step, besides the all-reduces themselves.

Measured on the ranks, all at once, and handed to simddp as a :class:`simddp.inputs.host.Host`
(charged by simddp.sim.overheads.host_copies): :func:`measure_copies` the copies' GB/s,
:func:`measure_hooks` the seconds per gradient and per launch, from each implementation's steps
on a 1-rank group beside plain steps (docs/FINDINGS.md#host-costs).
"""
from __future__ import annotations

import copy
import gc
import statistics
import time
from contextlib import contextmanager
from typing import Iterator

import torch
import torch.distributed as dist

from realrun.configs import HOST_TURNS, config_of
from realrun.steps import Trainer
from realrun.workload import Workload
from simddp.inputs.host import Host, HostCosts
from simddp.planning.registry import Name
from simddp.planning.strategy import DDP_DEFAULT_BUCKET_MB, make_strategy


def copy_passes(tensor_bytes: list[int], ctx, grads: list[torch.Tensor] | None = None):
    """(copy, in_place): flat_bucket.py's passes over gradients of ``tensor_bytes``: copy-in
    scaled by 1/p then copy-out, and a lone tensor's in-place scale (``div_(1.0)``, so repeats
    do not shrink the values). ``grads``: the model's own gradients (default random ones)."""
    if grads is None:
        grads = [torch.randn(max(1, n // 4), device=ctx.device) for n in tensor_bytes]
    flat = torch.empty(sum(g.numel() for g in grads), device=ctx.device)
    views, offset = [], 0
    for g in grads:
        views.append(flat[offset:offset + g.numel()])
        offset += g.numel()
    scale = 1.0 / ctx.world_size

    def copy(ranges: bool = False) -> None:
        for g, v in zip(grads, views):
            torch.mul(g, scale, out=v)
        for g, v in zip(grads, views):
            g.copy_(v)
        ctx.synchronize()

    def in_place(ranges: bool = False) -> None:
        for g in grads:
            g.div_(1.0)
        ctx.synchronize()
    return copy, in_place


def copy_rates(tensor_bytes: list[int], copy_s: float, in_place_s: float) -> dict:
    """``copy_gbps`` (bytes moved in and out / time) and ``in_place_gbps``."""
    total = sum(tensor_bytes)
    return {"bytes": total, "copy_gbps": 2 * total / copy_s / 1e9,
            "in_place_gbps": total / in_place_s / 1e9}


def measure_copies(tensor_bytes: list[int], ctx, repeats: int,
                   grads: list[torch.Tensor] | None = None) -> dict:
    """GB/s of realrun.DDP's gradient copies, all ranks at once: each pass of
    :func:`copy_passes` timed after a barrier, median of ``repeats``."""
    out = {}
    for name, fn in zip(("copy", "in_place"), copy_passes(tensor_bytes, ctx, grads)):
        fn()
        times = []
        for _ in range(max(5, repeats)):
            ctx.barrier()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[f"{name}_s"] = statistics.median(times)
    return {**out, **copy_rates(tensor_bytes, out["copy_s"], out["in_place_s"])}


# A training step under each implementation on this rank's own 1-rank process group, where an
# all-reduce has nobody to wait for: what is left over the plain step is host cost.
SOLO_CONFIGS = {"wrapper": config_of(make_strategy(Name.OVERLAP)),          # N hooks, N launches
                "bucket": config_of(make_strategy(Name.BUCKETED, 1e6)),     # N hooks, 1 launch
                Name.FLAT: config_of(make_strategy(Name.FLAT)),  # N notes, copies after backward
                "torch": config_of(make_strategy(Name.DDP, DDP_DEFAULT_BUCKET_MB))}  # the reducer


def solo_trainer(name: str, workload: Workload, ctx, payload: dict, shared: dict) -> Trainer:
    """The ``SOLO_CONFIGS[name]`` step on this rank's 1-rank group. ``shared`` keeps the group:
    every rank makes every 1-rank group once, in the same order, as ``new_group`` requires."""
    if "solo_group" not in shared:
        shared["solo_group"] = [dist.new_group([r]) for r in range(ctx.world_size)][ctx.rank]
    return Trainer(SOLO_CONFIGS[name], workload, ctx, payload, shared["solo_group"])


class SharedWeights:
    """A Workload whose ``build`` hands out copies of ``trainer``'s module sharing its weights'
    storage (new Parameter objects: own hooks and ``.grad``), so the solo steps do not each hold
    the weights."""

    def __init__(self, trainer: Trainer) -> None:
        self.module, self.inputs, self.loss_fn = trainer.model, trainer.inputs, trainer.loss_fn

    def build(self, seed: int, rank: int, device) -> tuple:
        memo = {id(t): t for t in self.module.buffers()}
        memo.update({id(p): torch.nn.Parameter(p.detach(), requires_grad=p.requires_grad)
                     for p in self.module.parameters()})  # tied weights stay tied: one id
        return copy.deepcopy(self.module, memo), self.inputs, self.loss_fn


# Three round-robins, each against its own plain steps: all models at once held 12x the
# parameters' bytes where a torch DDP step needs 3x (docs/FINDINGS.md#memory-and-the-allocator).
HOOK_GROUPS = (("wrapper", "bucket"), (Name.FLAT,), ("torch",))
PLAIN_KEYS = {"wrapper": "plain_s", Name.FLAT: "flat_plain_s", "torch": "torch_plain_s"}
# each round-robin: warm-up, then --host-turns turns of steps (the longest phase of a profile)
WARMUP_STEPS, TURN_STEPS = 3, 3


def measure_hooks(workload: Workload, payload: dict, ctx, plain: Trainer | None = None,
                  on_group=None) -> dict:
    """Rank side: median step seconds of the plain model and each :data:`SOLO_CONFIGS` step,
    round-robin within each of :data:`HOOK_GROUPS` (``plain_s``, ``flat_plain_s``,
    ``torch_plain_s``: the plain steps beside each group); ``flat_copy_calls_s``: flat's copy
    calls timed themselves; ``steps_s``: every step's seconds, in order. ``on_group(names)``
    runs after each group, once its models are released."""
    plain = plain or Trainer(config_of(None), workload, ctx, payload)
    turns = payload.get("host_turns") or HOST_TURNS
    weights, shared, out = SharedWeights(plain), {}, {}
    for group in HOOK_GROUPS:
        trainers = {"plain": plain, **{name: solo_trainer(name, weights, ctx, payload, shared)
                                       for name in group}}
        for name in group:
            share_optimizer_state(plain, trainers[name])
        with time_copy_calls(trainers.get(Name.FLAT)) as calls:
            steps = _round_robin(trainers, ctx, turns)
        medians = {name: statistics.median(t) for name, t in steps.items()}
        out.setdefault("steps_s", {}).update(
            {f"{name}_s": steps[name] for name in group},
            **{PLAIN_KEYS[group[0]]: steps["plain"]})
        if calls:
            out["flat_copy_calls_s"] = statistics.median(calls[-turns * TURN_STEPS:])
        out.update({f"{name}_s": medians[name] for name in group})
        out[PLAIN_KEYS[group[0]]] = medians["plain"]
        del trainers
        gc.collect()  # the wrappers' hooks and buffers form cycles
        if on_group is not None:
            on_group(group)
    return out


@contextmanager
def time_copy_calls(trainer: Trainer | None) -> Iterator[list[float]]:
    """Seconds of each step's copy-in and copy-out calls of flat ``trainer`` (nothing if None),
    appended per step while inside: a difference of step medians over N gradients would carry
    the whole step's noise. The wrappers come off on leaving, so no cycle keeps buffers alive."""
    seconds: list[float] = []
    if trainer is None:
        yield seconds
        return
    (bucket,) = trainer.model._flat
    fill, finish, started = bucket._fill, bucket.finish, [0.0]
    device = trainer.device

    def clock() -> float:   # on a GPU the copies are kernels: their end, not their launch
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter()

    def timed_fill():
        t0 = clock()
        out = fill()
        started[0] = clock() - t0
        return out

    def timed_finish():
        t0 = clock()
        finish()
        seconds.append(started[0] + clock() - t0)
    bucket._fill, bucket.finish = timed_fill, timed_finish
    try:
        yield seconds
    finally:
        del bucket._fill, bucket.finish   # the class's methods again


def share_optimizer_state(source: Trainer, trainer: Trainer) -> None:
    """``trainer``'s optimizer updates ``source``'s state in place (a :class:`SharedWeights`
    copy: same order), saving 2x the weights per trainer; same work, shared step count."""
    state = source.optimizer.state
    for p, q in zip(source.model.parameters(), trainer.model.parameters()):
        if p is not q and p in state:
            trainer.optimizer.state[q] = state[p]


def _round_robin(trainers: dict[str, Trainer], ctx, turns: int) -> dict[str, list[float]]:
    """Step seconds of each trainer, in order, each after a barrier. After its turn a trainer's
    gradients are dropped (untimed), so only the stepping one holds any."""
    for _ in range(WARMUP_STEPS):  # torch DDP rebuilds its buckets in its second step
        for trainer in trainers.values():
            trainer.step()
            trainer.optimizer.zero_grad(set_to_none=True)
    times: dict[str, list[float]] = {k: [] for k in trainers}
    for _ in range(turns):
        for name, trainer in trainers.items():
            for _ in range(TURN_STEPS):
                ctx.barrier()
                t0 = time.perf_counter()
                trainer.step()
                times[name].append(time.perf_counter() - t0)
            trainer.optimizer.zero_grad(set_to_none=True)
    return times


def host_from_measurements(name: str, copy: dict, hooks: dict | None,
                           tensor_bytes: list[int], source: str = "") -> Host:
    """The :class:`Host` of realrun's wrapper and torch's DDP from :func:`measure_copies` and
    :func:`measure_hooks` (None: hooks free); both copy at the same rates.

    >>> h = host_from_measurements("box", {"copy_gbps": 1.0, "in_place_gbps": 2.0},
    ...     {"plain_s": 0.04, "wrapper_s": 0.05, "bucket_s": 0.05, "torch_s": 0.043}, [10**6] * 4)
    >>> h.costs("realrun").launch_s, h.costs("torch").copy_gbps
    (0.002, 1.0)
    """
    copies = {"copy_gbps": copy["copy_gbps"], "scale_gbps": copy["in_place_gbps"]}
    f = hook_fields(hooks, copy, tensor_bytes) if hooks else {}
    return Host(name, {"realrun": HostCosts(**copies, hook_s=f.get("hook_s", 0.0),
                                            launch_s=f.get("launch_s", 0.0),
                                            hook_after_backward_s=f.get("hook_after_backward_s")),
                       "torch": HostCosts(**copies, hook_s=f.get("ddp_hook_s", 0.0))},
                source=source)


def hook_fields(hooks: dict, copy: dict, tensor_bytes: list[int]) -> dict:
    """Host seconds ``hook_s``, ``launch_s`` (realrun's wrapper) and ``ddp_hook_s`` (torch's
    reducer) from solo-step medians. Over the plain step and the copies, overlap (``wrapper_s``)
    leaves N·hook + N·launch and one bucket (``bucket_s``) N·hook + launch: two equations for
    the two costs (without ``bucket_s``, all hook); never below 0. ``flat_copy_calls_s`` gives
    ``hook_after_backward_s``, the flat calls' cost over their bytes per gradient.

    >>> hook_fields({"plain_s": 0.04, "wrapper_s": 0.05, "bucket_s": 0.05, "torch_s": 0.043},
    ...             {"copy_gbps": 1.0, "in_place_gbps": 2.0}, [10 ** 6] * 4)
    {'hook_s': 0.0, 'launch_s': 0.002, 'ddp_hook_s': 0.0}
    >>> hook_fields({"plain_s": 0.04, "wrapper_s": 0.05, "bucket_s": 0.05,
    ...              "flat_copy_calls_s": 0.01}, {"copy_gbps": 1.0, "in_place_gbps": 2.0},
    ...             [10 ** 6] * 4)["hook_after_backward_s"]      # (10 - 8) ms / 4
    0.0005
    """
    n, total = len(tensor_bytes), sum(tensor_bytes)
    torch_plain_s = hooks.get("torch_plain_s", hooks["plain_s"])
    copies_s = 2 * total / (copy["copy_gbps"] * 1e9)
    over_overlap = hooks["wrapper_s"] - hooks["plain_s"] - total / (copy["in_place_gbps"] * 1e9)
    launch_s = 0.0
    if "bucket_s" in hooks and n > 1:
        over_bucket = hooks["bucket_s"] - hooks["plain_s"] - copies_s
        launch_s = max(0.0, (over_overlap - over_bucket) / (n - 1))
    after = {}
    if "flat_copy_calls_s" in hooks:
        after["hook_after_backward_s"] = round(max(0.0, (hooks["flat_copy_calls_s"]
                                                         - copies_s) / n), 9)
    return {"hook_s": round(max(0.0, over_overlap / n - launch_s), 9),
            "launch_s": round(launch_s, 9), **after,
            "ddp_hook_s": round(max(0.0, (hooks.get("torch_s", torch_plain_s)
                                          - torch_plain_s - copies_s) / n), 9)}
