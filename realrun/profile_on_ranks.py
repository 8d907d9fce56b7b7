"""Profile a model on every rank at once: what a step computes, and what DDP costs the host.

A profile taken in one process alone misses what the real run shares the host with: the other
ranks. ``realrun profile`` and ``realrun validate`` both run this::

    profile, measured, host = profile_world(Workload.preset(spec, 2, 8), WorldConfig(world_size=2))
    save_json("profile.json", {**profile_to_json(profile, host=host), "measured": measured})

Each rank times its layers (realrun/layer_timing.py), plain steps, the DDP implementations'
host costs (realrun/ddp_host_costs.py), its backward against its own all-reduces
(``Host.contention``) and, for fsdp or zero2, FSDP2's host work (realrun/fsdp_host_costs.py).
Rank 0's per-layer split is kept, scaled to the slowest rank's median plain step; the host
costs are the slowest rank's; ``compute_spread`` is the plain step's p5 and p95 over its median.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
from typing import NamedTuple

import numpy as np
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from realrun.configs import COMPUTE_BASES, HOST_TURNS, config_of
from realrun.launch.contention_timing import compute_after_comm, median_overlap
from realrun import fsdp_host_costs
from realrun.fsdp_host_costs import fsdp_costs, host_over_rounds, measure_fsdp, sharded_plans
from realrun.ddp_host_costs import (HOOK_GROUPS, TURN_STEPS, WARMUP_STEPS, SharedWeights,
                                    host_from_measurements, measure_copies, measure_hooks)
from realrun.launch import run_world
from realrun.launch.env import ranks_on_this_cpu, usable_cpus
from realrun.memory_fit import (CANNOT, CLOSE, Machine, fit_text, host_memory, judge, preset_need,
                                rank_need, refusal, warning)
from realrun.launch.world import WorldConfig
from realrun.peak_memory import PeakMemory, memory_over_ranks
from realrun.layer_timing import profile_workload
from realrun.step_progress import StepProgress
from realrun.steps import Trainer
from realrun.tensors import trainable_parameters
from realrun.timing import timed
from realrun.workload import Workload
from simddp.errors import InputError
from simddp.inputs.contention_measurement import combine_contention
from simddp.sim.engine import compute_only_s
from simddp.inputs.host import Host
from simddp.inputs.io import profile_from_json, profile_to_json
from simddp.inputs.profile import ModelProfile
from simddp.planning.registry import TORCH_FSDP
from simddp.planning.strategy import SHARDED
from simddp.presets.models import ModelSpec

class ProfileRun(NamedTuple):
    """What :func:`profile_world` measured: the profile, the raw measurements, the host costs."""

    profile: ModelProfile
    measured: dict
    host: Host


CONTENTION_REPEATS = 9  # each ~3 steps long; their p10-p90 is the contention's spread
# The phases of profile_rank, in order (what its progress lines name)
LAYERS, PLAIN, COPIES, HOOKS, CONTENTION, FSDP = (
    "layers", "plain steps", "copies", "host costs", "contention", "sharded host costs")


def planned_steps(repeats: int, warmup: int, host_turns: int = HOST_TURNS,
                  world_size: int = 2, fsdp: bool = False) -> dict[str, int]:
    """Optimizer steps each rank runs in each phase of :func:`profile_rank` (what its progress
    counts); contention's repeats and FSDP2's wire-only steps count as their compute's steps.

    >>> planned_steps(10, 3)
    {'layers': 23, 'plain steps': 12, 'copies': 9, 'host costs': 198, 'contention': 31}
    """
    chunk = 1 + PlainSteps.CHUNK
    hooks = sum((1 + len(group)) * (WARMUP_STEPS + host_turns * TURN_STEPS)
                for group in HOOK_GROUPS)
    steps = {LAYERS: warmup + 2 * repeats, PLAIN: PlainSteps.WARMUP + chunk, COPIES: chunk,
             HOOKS: hooks + chunk}
    if world_size > 1:  # median_overlap: 2 warm-ups and each repeat compute twice
        steps[CONTENTION] = 2 * (2 + CONTENTION_REPEATS) + chunk
        if fsdp:  # per strategy: compute-only, its step and its wire, round-robin
            f = fsdp_host_costs
            steps[FSDP] = len(SHARDED) * 3 * (f.WARMUP + f.ROUNDS * f.CHUNK)
    return steps


def profile_rank(payload: dict, ctx) -> dict:
    """Rank function: profile the model on this rank while the other ranks do the same."""
    torch.set_flush_denormal(True)
    workload = Workload(**payload["workload"])
    progress, counting = _rank_progress(payload, ctx)
    with counting:
        try:
            out = _profile_phases(workload, payload, ctx, progress)
        except BaseException:
            progress.close(done=False)
            raise
    progress.close()
    return out


def _profile_phases(workload: Workload, payload: dict, ctx, progress: StepProgress) -> dict:
    machine = host_memory() if ctx.device.type == "cpu" else None  # before any model is built

    def built(model: torch.nn.Module) -> None:
        if payload.get("memory_check") and ctx.rank == 0:
            _check_memory(workload, model, payload, ctx, machine, progress.write)
        progress.phase(LAYERS)
    memory = PeakMemory(ctx.device)
    profile, measured = profile_workload(
        workload, seed=payload["seed"], rank=ctx.rank, repeats=payload["repeats"],
        warmup=payload["warmup"], optimizer=payload["optimizer"], device=ctx.device,
        precision=payload["precision"], on_built=built)
    # Plain steps in chunks spread over the run, as a shared box's speed drifts
    # (docs/FINDINGS.md#drift-and-the-compute-only-anchor).
    memory.mark("layers")  # one model at a time from here: the plain one, shared
    progress.phase(PLAIN)
    plain = PlainSteps(workload, payload, ctx)
    plain.chunk()
    progress.phase(COPIES)
    measured["copy"] = measure_copies(list(profile.tensor_bytes), ctx, payload["repeats"],
                                      plain.gradients())
    plain.chunk()
    memory.mark("copies")
    progress.phase(HOOKS)
    measured["hooks"] = measure_hooks(SharedWeights(plain.trainer), payload, ctx, plain.trainer,
                                      on_group=lambda g: memory.mark(f"hooks:{'+'.join(g)}"))
    plain.chunk()
    memory.mark("plain")
    if ctx.world_size > 1:  # this model's backward against its own gradients' all-reduces
        progress.phase(CONTENTION)
        trainer = plain.trainer

        def compute() -> None:
            trainer.optimizer.zero_grad(set_to_none=True)
            trainer.loss().backward()
        stream = [torch.zeros(max(1, n // 4), device=ctx.device) for n in profile.tensor_bytes]
        measured["contention"] = median_overlap(compute, stream, ctx, CONTENTION_REPEATS)
        del stream
        plain.chunk()
        memory.mark("contention")
    if payload.get(TORCH_FSDP) is not None and ctx.world_size > 1:  # FSDP2's host work
        progress.phase(FSDP)
        measured["fsdp_steps_s"] = measure_fsdp(SharedWeights(plain.trainer), payload, ctx,
                                                payload[TORCH_FSDP]["shard_unit_mb"],
                                                plain=plain.trainer,
                                                on_group=lambda s: memory.mark(f"fsdp:{s}"))
    measured["plain_steps_s"] = plain.times
    # what shares this rank's CPUs: simddp sweep's caution (simddp/rig/cpu_share.py)
    measured.update(backend=ctx.backend, cpus=usable_cpus(),
                    ranks_on_host=ranks_on_this_cpu(ctx.world_size))
    measured["allocator"] = ctx.allocator
    measured["memory"] = memory.summary()
    return {"profile": profile_to_json(profile), "measured": measured}


def _rank_progress(payload: dict, ctx) -> tuple[StepProgress, contextlib.AbstractContextManager]:
    """(rank 0's progress if asked for, else a silent one; the context counting steps into it)."""
    settings = payload.get("progress")
    planned = planned_steps(payload["repeats"], payload["warmup"], payload.get("host_turns")
                            or HOST_TURNS, ctx.world_size, payload.get(TORCH_FSDP) is not None)
    show = settings is not None and ctx.rank == 0
    progress = StepProgress(planned, show=show, **(settings or {}))
    if not show:
        return progress, contextlib.nullcontext()
    return progress, _counting_steps(progress)


@contextlib.contextmanager
def _counting_steps(progress: StepProgress):
    """Every optimizer step of this process is one step of ``progress``, so the phases' loops
    stay as they are (a line written inside a timed step is absorbed by the medians)."""
    handle = register_optimizer_step_post_hook(lambda _opt, _args, _kwargs: progress.step())
    try:
        yield
    finally:
        handle.remove()


def _check_memory(workload: Workload, model: torch.nn.Module, payload: dict, ctx,
                  machine: Machine | None, write) -> None:
    """Rank 0's memory line, once its model is built, for what the launcher could not judge
    (your own model; a GPU's memory); InputError when the ranks cannot fit."""
    spec = ModelSpec(**workload.spec) if workload.spec else None
    if spec is not None:
        need = preset_need(spec, workload.batch, workload.seq, payload["optimizer"],
                           payload["precision"])
    else:
        need = rank_need(sum(p.numel() for p in model.parameters()), payload["optimizer"],
                         payload["precision"])
    ranks = int(os.environ.get("LOCAL_WORLD_SIZE", ctx.world_size))
    if ctx.device.type == "cuda":  # one rank a GPU; its weights are on it already
        free, total = torch.cuda.mem_get_info(ctx.device)
        machine, ranks = Machine(total, free + need.weights_bytes, "GPU"), 1
    fit = judge(need, ranks, machine)
    write(f"profile: {fit_text(fit)}")
    if fit.verdict == CANNOT:
        raise InputError(refusal(fit, workload.name))
    if fit.verdict == CLOSE:
        write(warning(fit))


class PlainSteps:
    """Hook-free compute-only steps, each after a barrier (as realrun bench times them)."""

    WARMUP = 3   # untimed steps before the first chunk
    CHUNK = 8    # timed steps per chunk: 4 chunks, 32 steps on 2+ ranks

    def __init__(self, workload: Workload, payload: dict, ctx) -> None:
        self.ctx = ctx
        self.trainer = Trainer(config_of(None), workload, ctx, payload)
        self.times: list[float] = []
        for _ in range(self.WARMUP):
            self.trainer.step()

    def chunk(self) -> None:
        # one untimed step first: the step after another phase runs slow
        # (docs/FINDINGS.md#drift-and-the-compute-only-anchor)
        self.ctx.barrier()
        self.trainer.step()
        for _ in range(self.CHUNK):
            self.ctx.barrier()
            self.times.append(timed(self.ctx, self.trainer.step))

    def gradients(self) -> list[torch.Tensor] | None:
        """The last step's gradients, flat, in tensor-id order (None unless all contiguous fp32)."""
        grads = [p.grad for _, p in trainable_parameters(self.trainer.model)]
        if not all(g is not None and g.dtype == torch.float32 and g.is_contiguous()
                   for g in grads):
            return None
        return [g.view(-1) for g in grads]


def profile_world(workload: Workload, world: WorldConfig | None = None, *, threads: int = 1,
                  repeats: int = 15, warmup: int = 3, optimizer: str = "sgd", seed: int = 0,
                  precision: str = "fp32", compute_basis: str = "slowest", fsdp: bool = False,
                  shard_unit_mb: float | None = None, host_turns: int = HOST_TURNS,
                  progress: dict | None = None, memory_check: bool = False
                  ) -> ProfileRun | None:
    """What the ranks of ``world`` (default 2 Gloo ranks) measured; None on torchrun ranks
    other than 0. ``compute_basis``: scale compute to the slowest rank's median plain step
    ("slowest", as realrun bench times a step) or rank 0's ("rank0"). ``fsdp``: also FSDP2's
    host costs. ``host_turns``: the host-cost round-robin's turns (fewer: quicker, noisier).
    ``progress``: :class:`~realrun.step_progress.StepProgress` settings for rank 0's stderr
    (None: quiet). ``memory_check``: rank 0 fails the run when the ranks cannot fit."""
    if compute_basis not in COMPUTE_BASES:
        raise ValueError(f"compute_basis must be one of {COMPUTE_BASES}, got {compute_basis!r}")
    world = WorldConfig() if world is None else world
    world_size = world.world_size
    payload = {"workload": workload.to_json(), "repeats": repeats, "warmup": warmup,
               "optimizer": optimizer, "seed": seed, "precision": precision,
               "host_turns": host_turns, "progress": progress, "memory_check": memory_check,
               TORCH_FSDP: {"shard_unit_mb": shard_unit_mb} if fsdp else None}
    ranks = run_world("realrun.profile_on_ranks:profile_rank", payload, threads_per_rank=threads,
                      **world.launch_args())
    if ranks is None:
        return None
    measured = ranks[0]["measured"]
    # forward vs backward from the hook-free passes (hooks inflate the forward most)
    profile = profile_from_json(ranks[0]["profile"]).scaled(
        forward_s=measured["forward_s_unhooked"], backward_s=measured["backward_s_unhooked"])
    # The total from whole plain steps, as realrun bench times them: the hook-free passes
    # miss part of a step (docs/FINDINGS.md#drift-and-the-compute-only-anchor).
    steps0 = measured["plain_steps_s"]
    per_step = np.max([r["measured"]["plain_steps_s"] for r in ranks], axis=0)
    basis_steps = per_step if compute_basis == "slowest" else steps0
    target_s = float(np.median(basis_steps))
    k = target_s / compute_only_s(profile, 1)
    profile = profile.scaled(forward_s=profile.forward_s * k, backward_s=profile.backward_s * k,
                             optimizer_s=profile.optimizer_s * k)
    spread = [float(np.percentile(per_step, q) / np.median(per_step)) for q in (5, 95)]
    measured["plain_chunk_ms"] = [float(np.median(basis_steps[i:i + PlainSteps.CHUNK])) * 1e3
                                  for i in range(0, len(basis_steps), PlainSteps.CHUNK)]
    profile = dataclasses.replace(profile, compute_spread=tuple(spread))
    measured["memory"] = memory_over_ranks([r["measured"]["memory"] for r in ranks])
    measured.update(world_size=world_size, compute_basis=compute_basis, compute_scale=k,
                    rank0_step_s=statistics.median(steps0),
                    slowest_step_s=float(np.median(per_step)), compute_spread=spread)
    # The hook path's step medians from the slowest rank; each rank's own kept beside them.
    per_rank = [r["measured"]["hooks"] for r in ranks]
    measured["hooks_per_rank"] = per_rank
    measured["hooks"] = {key: max(h[key] for h in per_rank)
                         for key in per_rank[0] if key != "steps_s"}
    host = host_from_measurements(f"{workload.name} on {world_size} ranks", measured["copy"],
                                  measured["hooks"], list(profile.tensor_bytes),
                                  f"realrun profile on {world_size} ranks at once")
    if world_size > 1:
        c = combine_contention([r["measured"]["contention"] for r in ranks])
        measured["contention"] = {k: c[k] for k in ("compute_slowdown", "comm_slowdown",
                                                    "spread", "notes", "per_rank")}
        # a step that communicates computes as the probe's compute alone (the layers' basis)
        ranks_of_basis = c["per_rank"][:None if compute_basis == "slowest" else 1]
        measured["compute_after_comm"] = after = compute_after_comm(
            ranks_of_basis, profile.forward_s + profile.backward_s)
        host = Host(host.name, host.implementations, host.source,
                    contention=(c["compute_slowdown"], c["comm_slowdown"]),
                    contention_spread=c["spread"], compute_after_comm=after)
    if "fsdp_steps_s" in measured:
        host = _with_fsdp_costs(host, ranks, workload.build(seed, 0, torch.device("cpu"))[0],
                                profile, world, shard_unit_mb)
    return ProfileRun(profile, measured, host)


def _with_fsdp_costs(host: Host, ranks: list[dict], module, profile: ModelProfile,
                     world: WorldConfig, shard_unit_mb: float | None) -> Host:
    """``host`` with the "fsdp" implementation's costs from the ranks' FSDP2 steps (summary in
    rank 0's ``measured``)."""
    measured = ranks[0]["measured"]
    per_rank = [r["measured"].pop("fsdp_steps_s") for r in ranks]  # max over ranks per step
    host_s, steps_s = host_over_rounds(
        {k: list(np.max([t[k] for t in per_rank], axis=0)) for k in per_rank[0]})
    # On CPU/Gloo FSDP2's collectives block the training thread; NCCL's overlap
    costs, measured[TORCH_FSDP] = fsdp_costs(
        host_s, sharded_plans(module, shard_unit_mb), measured["copy"]["copy_gbps"],
        world.world_size, profile.optimizer_s, blocking=world.backend == "gloo")
    measured[TORCH_FSDP]["steps_ms"] = {k: v * 1e3 for k, v in steps_s.items()}
    return dataclasses.replace(host, implementations={**host.implementations, TORCH_FSDP: costs})
