"""What a DDP implementation costs the host per step, besides the all-reduces themselves.

Measured by ``realrun validate`` on the ranks (all at once, as in the real run) and handed to
simddp as a :class:`simddp.inputs.host.Host`, whose costs the engine charges on the compute lane for
the implementation that runs each strategy (simddp.sim.overheads.host_copies):

- :func:`measure_copies` — GB/s of realrun.DDP's gradient copies (``copy_gbps``,
  ``scale_gbps``), also timed as probes (realrun/workflows/validate/probes.py);
- :func:`measure_hooks` — seconds per gradient of the hook path (``hook_s`` for realrun's
  Python wrapper, ``ddp_hook_s`` for torch's C++ reducer) and per collective the wrapper
  launches (``launch_s``): each implementation runs the model's steps on a 1-rank process
  group, where an all-reduce has nobody to wait for, interleaved with plain steps; what is
  left over the plain step and the copies is split by :func:`hook_fields`. realrun's Python
  wrapper costs several times torch's C++ reducer per gradient (docs/FINDINGS.md#host-costs).
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
    """(copy, in_place): the passes of flat_bucket.py over gradients of ``tensor_bytes`` —
    copy-in scaled by 1/p (``torch.mul(g, 1/p, out=view)``) then copy-out (``g.copy_(view)``),
    and a lone tensor's in-place 1/p (``div_(1.0)``: the same pass, without shrinking the
    values every repeat). ``grads``: the model's own gradients to copy (flattened, fp32),
    so the passes add one model-sized buffer, not two; default fresh random ones."""
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
    """GB/s of realrun.DDP's gradient copies over this model's tensors, all ranks at once:
    each pass of :func:`copy_passes` (over ``grads`` if given) timed after a barrier, median
    of ``repeats``."""
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
    """A stand-in for a Workload whose ``build`` hands out copies of one built ``trainer``'s
    module that share its parameters' and buffers' storage (new Parameter objects, so each
    copy has its own hooks and ``.grad``): the solo steps time the same work as on models of
    their own without holding one model's weights each."""

    def __init__(self, trainer: Trainer) -> None:
        self.module, self.inputs, self.loss_fn = trainer.model, trainer.inputs, trainer.loss_fn

    def build(self, seed: int, rank: int, device) -> tuple:
        memo = {id(t): t for t in self.module.buffers()}
        memo.update({id(p): torch.nn.Parameter(p.detach(), requires_grad=p.requires_grad)
                     for p in self.module.parameters()})  # tied weights stay tied: one id
        return copy.deepcopy(self.module, memo), self.inputs, self.loss_fn


# Three round-robins, each against its own plain steps: realrun's wrapper with and without
# its one bucket, realrun's flat, then torch's reducer. All models at once held 4 x (weights
# + gradients) and the buckets: 12x the parameters' bytes where a torch DDP step needs 3x
# (docs/FINDINGS.md#memory-and-the-allocator); flat's bucket beside the other one would be a
# fourth.
HOOK_GROUPS = (("wrapper", "bucket"), (Name.FLAT,), ("torch",))
PLAIN_KEYS = {"wrapper": "plain_s", Name.FLAT: "flat_plain_s", "torch": "torch_plain_s"}
# each round-robin: warm-up, then turns (--host-turns, default HOST_TURNS) of steps; at 8 the
# three groups take ~190 steps of the model, the longest phase of a profile
WARMUP_STEPS, TURN_STEPS = 3, 3


def measure_hooks(workload: Workload, payload: dict, ctx, plain: Trainer | None = None,
                  on_group=None) -> dict:
    """Rank side: median step seconds of the plain model and of each solo step
    (:data:`SOLO_CONFIGS`), round-robin within each of :data:`HOOK_GROUPS`: 3 warm-up steps
    each, then ``payload["host_turns"]`` turns (default 8) of 3 steps. ``plain_s`` is the plain
    steps' median beside realrun's wrapper, ``flat_plain_s`` beside its flat, ``torch_plain_s``
    beside torch's;
    ``flat_copy_calls_s`` the median per step of flat's copy-in and copy-out calls, timed
    themselves (:func:`time_copy_calls`); ``steps_s`` every timed step's seconds, in order,
    under the same keys (the profile keeps them per rank: the hook costs follow the box's
    speed, docs/FINDINGS.md#host-costs). ``plain``: the plain step's
    Trainer (its weights are shared by the solo steps; default a new one).
    ``on_group(names)`` runs after each group, once its models are released."""
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
    """Seconds of each step's copy-in and copy-out calls of ``trainer``'s realrun.DDP with
    one bucket (flat), appended per step while inside: its fill and finish, timed around
    the calls (nothing when ``trainer`` is None). A difference of step medians divided by N
    gradients carries the whole step's noise, on a few gradients far more than the calls
    cost; the calls' own times do not. The wrappers come off on leaving, so no cycle keeps the
    trainer's buffers alive into the next group (the memory bound)."""
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
    """``trainer``'s optimizer updates ``source``'s state tensors in place, parameter by
    parameter (its module is a :class:`SharedWeights` copy: the same order): Adam's two
    moments would otherwise be 2x the weights' bytes per trainer. The same update work;
    the step count is shared, which changes only the bias correction's value."""
    state = source.optimizer.state
    for p, q in zip(source.model.parameters(), trainer.model.parameters()):
        if p is not q and p in state:
            trainer.optimizer.state[q] = state[p]


def _round_robin(trainers: dict[str, Trainer], ctx, turns: int) -> dict[str, list[float]]:
    """Step seconds of each trainer, in order: 3 warm-up steps each, then ``turns`` turns of 3
    steps, each after a barrier. After its turn a trainer's gradients are dropped (untimed), so
    only the stepping one holds any; the first step of a turn then frees none, for every trainer
    alike."""
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
    """The :class:`Host` of realrun's wrapper and torch's DDP from the copy rates
    (:func:`measure_copies`) and the solo-step medians (:func:`measure_hooks`, or None: hooks
    free). Both implementations copy at the same rates.

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
    reducer) from solo-step medians.

    ``hooks``: ``plain_s`` (no DDP; ``torch_plain_s`` beside torch's, if measured apart),
    ``wrapper_s`` (realrun.DDP "overlap": N gradients, N
    collectives, each gradient scaled in place at ``in_place_gbps``), optionally ``bucket_s``
    (realrun.DDP with one bucket: N gradients, 1 collective, copied in and out at
    ``copy_gbps``) and ``torch_s`` (torch DDP, copies both ways). What is left over the plain
    step and the copies: overlap N·hook + N·launch, one bucket N·hook + launch — two equations
    for the two costs; without ``bucket_s`` it is all hook. Never below 0 (noise).

    ``flat_copy_calls_s`` (realrun.DDP "flat": its copy-in and copy-out calls after the
    backward, timed themselves) gives ``hook_after_backward_s``: what they cost over the
    copies' bytes, per gradient. Flat's hooks, which only note a gradient
    (docs/FINDINGS.md#host-costs), are not in it.

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
