"""Import torch.profiler traces of a real data-parallel job into a simddp profile and link.

Trace a few steps of the real job on every rank (docs/TRACES.md says how), then::

    from simddp.ingest.trace import import_traces
    imp = import_traces(["trace.rank0.json", "trace.rank1.json"])
    imp.profile, imp.link_file, imp.host  # simddp's inputs, measured by the job itself
    imp.traced.strategy, imp.resimulated.step_s, imp.measured_step_s
    simddp.sweep(imp.profile, imp.link_file, 2, ["ddp"], [1, 4, 16], host=imp.host)

Torch-free: it reads the Chrome-trace JSON (CPU with Gloo, or CUDA with NCCL kernels). The
pipeline, one module each: events (load) -> timeline (lanes per rank: lanes, cpu, cuda) ->
steps (steps and phases; accumulation's micro-steps) -> collectives (ranks joined) -> fit
(the link by replay, compute contention) -> link_choice and bounds (the link kept only where
the sizes pin it within physical bounds, else a fallback, said) -> derive (profile, link,
host) -> traced (the traced configuration) -> closure (the link closed on the traced step;
--step-ms) -> summary. An FSDP2 trace takes fsdp (its units and calls) -> fsdp_import
instead; inventory names a trace's collectives in refusals; names (--module) apart.
docs/TRACES.md explains each step.
"""
from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, replace

import numpy as np

from simddp.errors import InputError
from simddp.inputs.contention import Contention
from simddp.inputs.host import Host
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.inputs.profile import ModelProfile
from simddp.inputs.resolved import NONE, Inputs
from simddp.result import Result
from simddp.sim.engine import simulate
from simddp.ingest.trace.bounds import (above_nccl_alpha, alpha_max_s, busbw_max_gbps,
                                        out_of_bounds)
from simddp.ingest.trace.closure import anchor_compute, close_link
from simddp.ingest.trace.collectives import JointStep, join_ranks
from simddp.ingest.trace.derive import Derived, derive
from simddp.ingest.trace.events import load_trace
from simddp.ingest.trace.fit import ComputeFit, LinkFit
from simddp.ingest.trace.fsdp import is_fsdp
from simddp.ingest.trace.fsdp_import import ShardedImport, derive_sharded
from simddp.ingest.trace.inventory import inventory
from simddp.ingest.trace.rank_timeline import Timeline
from simddp.ingest.trace.steps import Step, find_steps
from simddp.ingest.trace.timeline import build_timeline
from simddp.ingest.trace.traced import TracedConfig, traced_config

__all__ = ["TraceImport", "import_traces"]


@dataclass(frozen=True)
class TraceImport:
    """What the traces say, as simddp inputs, and how well they reproduce themselves."""

    profile: ModelProfile          # the profiler's overhead removed: the job without it
    link: Link
    contention: Contention         # the traced contention beside the link (source "link")
    host: Host | None
    traced: TracedConfig
    derived: Derived
    timelines: tuple[Timeline, ...]
    joint: tuple[JointStep, ...]
    measured_step_s: float         # the traced steps: median over steps of the slowest rank
    measured_p5_s: float
    measured_p95_s: float
    resimulated: Result            # the traced configuration, profiler overhead kept
    without_profiler: Result       # the traced configuration, as profile.json predicts it
    granularity: str               # "parameter" or "bucket"
    notes: tuple[str, ...]
    step_anchor_s: float | None = None   # the job's own step time without the profiler
    compute_scale: float = 1.0     # applied to the overhead-corrected compute to match it
    replayed_step_s: float = 0.0   # the traced configuration on the replay-fitted link
    comm_scale: float = 1.0        # applied to that link's costs to reproduce the trace
    sharded: ShardedImport | None = None   # an FSDP2 trace: its units, calls and laws

    @property
    def link_file(self) -> LinkFile:
        """The link and the contention traced beside it, as a link file holds them."""
        return LinkFile(self.link, self.contention if self.contention.measured else None)

    @property
    def world_size(self) -> int:
        """The traced world (a given link's own world size is another matter)."""
        return self.timelines[0].trace.world_size or len(self.timelines)

    @property
    def link_given(self) -> bool:
        """True for a one-GPU trace: the link is the one passed in, not measured."""
        return all(tl.local_comms for tl in self.timelines)

    @property
    def reproduction_error(self) -> float:
        """(re-simulated − measured) / measured for the traced configuration."""
        return self.resimulated.step_s / self.measured_step_s - 1.0

    @property
    def replay_error(self) -> float:
        """The same before the link's costs were scaled to close it (comm_scale)."""
        return self.replayed_step_s / self.measured_step_s - 1.0


def import_traces(paths, *, bucket_mb: float | None = None, implementation: str | None = None,
                  name: str | None = None, step_s: float | None = None,
                  link: Link | LinkFile | None = None, alpha_s: float | None = None
                  ) -> TraceImport:
    """Read one trace per rank; InputError (one line) if they lack what the import needs.

    ``bucket_mb``: the traced bucket_cap_mb, if known (else inferred from the buckets);
    ``implementation``: "torch" or "realrun", if the trace's own marks mislead; ``step_s``:
    the job's step time without the profiler (its own log): the compute is scaled so that
    the traced configuration re-simulates to it (docs/TRACES.md, "The profiler's cost");
    ``link``: the network, required for a one-GPU trace (a trace of one rank moves nothing
    over a network; see simddp.ingest.trace.cuda); for a multi-rank trace, the link to use
    where the trace's sizes cannot pin one down (simddp.ingest.trace.link_choice);
    ``alpha_s``: the per-collective α where the traced sizes cannot tell it from bandwidth
    (e.g. torch DDP traced at 1 MB, its buckets all alike): calibrate's α of the same
    cluster; busbw and the slowdown are still fitted. An FSDP2 trace is read per unit
    (simddp.ingest.trace.fsdp_import): ``bucket_mb``, ``implementation`` and ``alpha_s``
    do not apply.
    """
    if alpha_s is not None:
        if not (isinstance(alpha_s, (int, float)) and 0 <= alpha_s < 10):
            raise InputError(f"alpha_s must be seconds >= 0, got {alpha_s!r}")
        if link is not None:
            raise InputError("--alpha-us: --link already gives the whole link; give one")
    if step_s is not None and not (isinstance(step_s, (int, float)) and 0 < step_s < 1e6):
        raise InputError(f"--step-ms must be a number > 0, got {step_s!r}")
    paths = [str(p) for p in paths]
    link = None if link is None else as_link_file(link)
    if not paths:
        raise InputError("give at least one trace file (one per rank)")
    timelines = _ordered([build_timeline(load_trace(p)) for p in paths])
    if any(is_fsdp(tl) for tl in timelines):
        return _import_sharded(timelines, name or _name(paths[0]), step_s, link, alpha_s,
                               bucket_mb, implementation)
    timelines = _read_timelines(timelines, link, implementation)
    steps = [find_steps(tl) for tl in timelines]
    hosts = {tl.trace.host for tl in timelines}
    joint = join_ranks(steps, same_clock=len(hosts) == 1 and None not in hosts,
                       labels=[tl.trace.label for tl in timelines])
    joint, notes = _consistent(joint)
    if not joint[0].samples:
        held = inventory(timelines[0]).text()
        raise InputError(f"{timelines[0].trace.path}: no all-reduce was issued between a "
                         f"backward's start and its optimizer step ({held}); gradient syncs "
                         "are what the import needs")
    grad_bytes, segment_grads, granularity = _gradients(joint[0], timelines[0])
    if granularity == "bucket":
        notes.append("the trace gives no per-parameter sizes (AccumulateGrad without Input "
                     "Dims): each traced all-reduce is one tensor of the profile, so bucket "
                     "sizes below the traced one cannot be predicted")
    total_syncs = sum(c.nbytes or 0 for c in joint[0].ranks[0].syncs)
    if granularity == "parameter" and total_syncs != sum(grad_bytes):
        notes.append(f"the gradient all-reduces move {total_syncs} bytes per step, the "
                     f"gradients are {sum(grad_bytes)} bytes")
    local = all(tl.local_comms for tl in timelines)
    derived = derive(joint, timelines, name or _name(paths[0]), grad_bytes, segment_grads,
                     given_link=link if local else None, alpha_s=alpha_s,
                     fallback=None if local else link)
    traced = traced_config(derived.profile, joint, timelines[0].implementation, bucket_mb)
    steps_s = [j.step_s for j in joint]
    measured_s = statistics.median(steps_s)
    return _predict(timelines, joint, derived, traced, link if local else None, steps_s,
                    measured_s, step_s, granularity, notes)


def _read_timelines(timelines: list[Timeline], link: LinkFile | None,
                    implementation: str | None) -> list[Timeline]:
    """The timelines (in rank order), each with an all-reduce; ``link`` checked against
    what the traces can give."""
    for tl in timelines:
        if not any(c.kind == "allreduce" for c in tl.comms):
            held = inventory(tl)
            if not held.host and not held.ran:
                raise InputError(f"{tl.trace.path}: no collective in the trace (gloo:*, NCCL "
                                 "kernels, record_param_comms); was the model wrapped in "
                                 "DistributedDataParallel, realrun.DDP or FSDP2's fully_shard?")
            raise InputError(f"{tl.trace.path}: {held.lacking()}; the import reads data "
                             "parallelism's gradient all-reduces (torch DDP, realrun.DDP) and "
                             "FSDP2's all-gathers and reduce-scatters")
    _check_link(timelines, link)
    if implementation is not None:
        timelines = [_with_impl(tl, implementation) for tl in timelines]
    return timelines


def _predict(timelines, joint, derived, traced, link: LinkFile | None, steps_s: list[float],
             measured_s: float, step_s: float | None, granularity: str,
             notes: list[str]) -> TraceImport:
    """Replay the traced configuration, close the link on it (multi-rank traces), anchor
    the compute to ``step_s`` if given, and predict. The traced contention is the job's own:
    no default replaces it."""
    if link is None:
        traced_inputs = Inputs(derived.traced_profile, derived.link,
                               derived.link.world_size or len(timelines), derived.contention,
                               derived.host)
    else:   # one rank: its all-reduces took no time, so the traced step is re-run without
        traced_inputs = Inputs(derived.traced_profile,
                               Link(f"{link.link.name} at one rank", 0.0, link.link.busbw_gbps),
                               1, NONE, derived.host)
    replayed = simulate(traced.plan, traced_inputs, record=False)
    traced_inputs, comm_scale = (traced_inputs, 1.0) if link is not None else close_link(
        traced_inputs, traced.plan, measured_s)
    if link is None:
        traced_inputs, comm_scale, said = _within_bounds(traced_inputs, comm_scale,
                                                         timelines[0].device)
        kept = above_nccl_alpha(traced_inputs.link.alpha_s, timelines[0].device)
        notes = notes + [n for n in (said, kept) if n]
    resim = simulate(traced.plan, traced_inputs)
    inputs, scale = replace(traced_inputs, profile=derived.profile), 1.0
    if step_s is not None:
        inputs, scale = anchor_compute(inputs, traced.plan, step_s)
    predicted = simulate(traced.plan, inputs)
    out_link = traced_inputs.link if link is None else link.link
    contention = derived.contention if link is None else link.contention or NONE
    return TraceImport(inputs.profile, out_link, contention, derived.host, traced, derived,
                       tuple(timelines),
                       tuple(joint), measured_s, float(np.percentile(steps_s, 5)),
                       float(np.percentile(steps_s, 95)), resim, predicted, granularity,
                       tuple(notes) + traced.notes, step_s, scale, replayed.step_s, comm_scale)


def _import_sharded(timelines: list[Timeline], name: str, step_s: float | None,
                    link: LinkFile | None, alpha_s: float | None, bucket_mb: float | None,
                    implementation: str | None) -> TraceImport:
    """An FSDP2 trace (simddp.ingest.trace.fsdp_import): its units' profile, its kinds'
    laws and FSDP2's host costs; the traced fsdp or zero2 plan re-simulated and closed."""
    for flag, value in (("--alpha-us", alpha_s), ("--bucket-mb", bucket_mb),
                        ("--implementation", implementation)):
        if value is not None:
            raise InputError(f"{flag}: an FSDP2 trace has no buckets or DDP implementation, and "
                             "each collective kind's α is fitted; give --link for what it cannot "
                             "fit")
    if all(tl.local_comms for tl in timelines):
        raise InputError(f"{timelines[0].trace.path}: a one-rank FSDP2 trace moves nothing "
                         "over a network; trace two ranks or more")
    profiles, fsdp_link, host, sharded, plan, notes, grad_bytes, grad_shapes = \
        derive_sharded(timelines, name, link)
    steps_s = [max(s.step_s for s in per_rank) for per_rank in sharded.steps]
    measured_s = statistics.median(steps_s)
    world = fsdp_link.world_size
    traced_inputs = Inputs(profiles["kept"], fsdp_link, world, NONE, sharded.traced_host)
    replayed = simulate(plan, traced_inputs, record=False)
    traced_inputs, comm_scale = close_link(traced_inputs, plan, measured_s)
    traced_inputs, comm_scale, said = _within_bounds(traced_inputs, comm_scale,
                                                     timelines[0].device)
    kept = above_nccl_alpha(max([traced_inputs.link.alpha_s] + [
        f.alpha_s for f in traced_inputs.link.kind_fits.values()]), timelines[0].device)
    notes = notes + [n for n in (said, kept) if n]
    resim = simulate(plan, traced_inputs)
    inputs, scale = replace(traced_inputs, profile=profiles["clean"], host=host), 1.0
    if step_s is not None:   # the profiler slows FSDP2's host work as much as the compute
        inputs, scale = anchor_compute(inputs, plan, step_s, host_too=True)
        host = inputs.host
    predicted = simulate(plan, inputs)
    units = tuple(tuple(range(sum(len(layer.grad_bytes) for layer in profiles["kept"].layers[:i]),
                              sum(len(layer.grad_bytes)
                                  for layer in profiles["kept"].layers[:i + 1])))
                  for i in range(len(profiles["kept"].layers)))
    counts = sharded.calls_per_step
    traced = TracedConfig(plan.strategy, plan, tuple(c.tensor_ids for c in plan.collectives),
                          None, not any(n.startswith("the trace ran") for n in notes), ())
    derived = Derived(inputs.profile, profiles["kept"], traced_inputs.link, NONE, host,
                      LinkFit(traced_inputs.link.alpha_s, traced_inputs.link.busbw_gbps, 1.0,
                              True, False, ()), ComputeFit(1.0, False, 0),
                      statistics.median(t.overhead_s for t in timelines), grad_bytes,
                      grad_shapes, units, sharded.phases)
    del counts
    return TraceImport(inputs.profile, traced_inputs.link, NONE, host, traced, derived,
                       tuple(timelines), (), measured_s, float(np.percentile(steps_s, 5)),
                       float(np.percentile(steps_s, 95)), resim, predicted, "unit",
                       tuple(notes), step_s, scale, replayed.step_s, comm_scale, sharded)


def _within_bounds(inputs: Inputs, scale: float, device: str) -> tuple[Inputs, float, str | None]:
    """``inputs`` whose link, closed on the traced step by ``scale``, keeps the physical bounds
    (simddp.ingest.trace.bounds): the scale held where closing would break one, and said."""
    link = inputs.link
    fits = [link, *link.kind_fits.values()]     # the all-reduce's and each kind's law
    alpha, busbw = max(f.alpha_s for f in fits), max(f.busbw_gbps for f in fits)
    why = out_of_bounds(alpha, busbw, device)
    if why is None:
        return inputs, scale, None
    base = link.time_scaled(1.0 / scale)
    hi = alpha_max_s(device) / (alpha / scale) if alpha > 0 else float("inf")
    lo = busbw * scale / busbw_max_gbps()
    held = min(max(scale, lo), hi)
    return (replace(inputs, link=base.time_scaled(held)), held,
            f"closing the link on the traced step needs its costs ×{scale:.3g}, where {why}; "
            f"held at ×{held:.3g}, so the re-simulated step differs from the traced one")


def _ordered(timelines: list[Timeline]) -> list[Timeline]:
    """By distributedInfo.rank when every trace has a distinct one, else as given."""
    ranks = [tl.trace.rank for tl in timelines]
    worlds = {tl.trace.world_size for tl in timelines} - {None}
    if len(worlds) > 1:
        raise InputError(f"the traces come from worlds of different sizes ({sorted(worlds)})")
    if None not in ranks:
        if len(set(ranks)) != len(ranks):
            dup = next(r for r in ranks if ranks.count(r) > 1)
            raise InputError(f"two traces are both rank {dup}; give one trace per rank")
        timelines = sorted(timelines, key=lambda tl: tl.trace.rank)
    if worlds and len(timelines) > next(iter(worlds)):
        raise InputError(f"{len(timelines)} traces for a world of {next(iter(worlds))} ranks")
    return timelines


def _check_link(timelines: list[Timeline], link: LinkFile | None) -> None:
    """A one-GPU trace needs ``link``; a multi-rank trace takes one only where it cannot
    give its own (simddp.ingest.trace.link_choice)."""
    local = [tl.local_comms for tl in timelines]
    if all(local) and link is None:
        raise InputError(f"{timelines[0].trace.path}: a one-rank trace (world size 1) moves "
                         "no gradient over a network, so it gives sizes and ready times but no "
                         "link; add --link PRESET|link.json (python -m simddp links)")


def _with_impl(tl: Timeline, implementation: str) -> Timeline:
    if implementation not in ("torch", "realrun"):
        raise InputError(f"--implementation must be torch or realrun, got {implementation!r}")
    return replace(tl, implementation=implementation)


def _consistent(joint: list[JointStep]) -> tuple[list[JointStep], list[str]]:
    """Steps whose gradients and backward segments match the first step's on every rank."""
    def shape(step: Step) -> tuple:
        return step.grad_bytes, tuple(s.grads for s in step.segments)

    ref = shape(joint[0].ranks[0])
    kept = [j for j in joint if all(shape(s) == ref for s in j.ranks)]
    dropped = [j.label for j in joint if j not in kept]
    notes = [f"left out {len(dropped)} step(s) whose backward differs from "
             f"{joint[0].label}'s: {', '.join(dropped)}"] if dropped else []
    return kept, notes


def _gradients(first: JointStep, tl: Timeline) -> tuple[tuple, tuple, str]:
    """(bytes per gradient in ready order, ready indices per segment, granularity)."""
    step = first.ranks[0]
    if all(b is not None for b in step.grad_bytes):
        return step.grad_bytes, tuple(s.grads for s in step.segments), "parameter"
    sizes = [c.nbytes for c in step.syncs]
    if not sizes or any(b is None for b in sizes):
        raise InputError(f"{tl.trace.path}: the trace has no tensor sizes; record it with "
                         "torch.profiler.profile(record_shapes=True, ...)")
    owner = [next((k for k, s in enumerate(step.segments) if c.issue_s < s.end_s),
                  len(step.segments) - 1) for c in step.syncs]
    segs = tuple(tuple(i for i, k in enumerate(owner) if k == seg)
                 for seg in range(len(step.segments)))
    return tuple(sizes), segs, "bucket"


def _name(path: str) -> str:
    base = os.path.basename(path)
    for suffix in (".gz", ".json", ".pt.trace"):
        base = base[: -len(suffix)] if base.endswith(suffix) else base
    return base.split(".rank")[0]
