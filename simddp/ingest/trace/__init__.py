"""Import torch.profiler traces of a real data-parallel job into a simddp profile and link.

Trace a few steps of the real job on every rank (docs/TRACES.md says how), then::

    from simddp.ingest.trace import import_traces
    imp = import_traces(["trace.rank0.json", "trace.rank1.json"])
    imp.profile, imp.link_file, imp.host  # simddp's inputs, measured by the job itself
    imp.traced.strategy, imp.resimulated.step_s, imp.measured_step_s
    simddp.sweep(imp.profile, imp.link_file, 2, ["ddp"], [1, 4, 16], host=imp.host)

Torch-free: it reads the Chrome-trace JSON (CPU with Gloo, or CUDA with NCCL kernels). The
pipeline, one module each: events (load) -> timeline (lanes per rank: lanes, cpu, cuda) ->
steps (steps and phases) -> collectives (ranks joined) -> fit (the link by replay, compute
contention) -> derive (profile, link, host) -> traced (the traced configuration) -> closure
(the link closed on the traced step; --step-ms) -> summary; names (--module) apart.
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
from simddp.ingest.trace.closure import anchor_compute, close_link
from simddp.ingest.trace.collectives import JointStep, join_ranks
from simddp.ingest.trace.derive import Derived, derive
from simddp.ingest.trace.events import load_trace
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
    ``link``: the network, required for a one-GPU trace and refused otherwise (a trace of
    one rank moves nothing over a network, so there is nothing to fit; see
    simddp.ingest.trace.cuda); ``alpha_s``: the per-collective α where the traced sizes
    are too alike to tell it from bandwidth (all within 1.5×, e.g. torch DDP traced at 1 MB):
    calibrate's α of the same cluster; busbw and the slowdown are still fitted.
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
    timelines = _read_timelines(paths, link, implementation)
    steps = [find_steps(tl) for tl in timelines]
    hosts = {tl.trace.host for tl in timelines}
    joint = join_ranks(steps, same_clock=len(hosts) == 1 and None not in hosts,
                       labels=[tl.trace.label for tl in timelines])
    joint, notes = _consistent(joint)
    if not joint[0].samples:
        raise InputError(f"{timelines[0].trace.path}: no all-reduce was issued between a "
                         "backward's start and its optimizer step; gradient syncs are what "
                         "the import needs")
    grad_bytes, segment_grads, granularity = _gradients(joint[0], timelines[0])
    if granularity == "bucket":
        notes.append("the trace gives no per-parameter sizes (AccumulateGrad without Input "
                     "Dims): each traced all-reduce is one tensor of the profile, so bucket "
                     "sizes below the traced one cannot be predicted")
    total_syncs = sum(c.nbytes or 0 for c in joint[0].ranks[0].syncs)
    if granularity == "parameter" and total_syncs != sum(grad_bytes):
        notes.append(f"the gradient all-reduces move {total_syncs} bytes per step, the "
                     f"gradients are {sum(grad_bytes)} bytes")
    derived = derive(joint, timelines, name or _name(paths[0]), grad_bytes, segment_grads,
                     given_link=link, alpha_s=alpha_s)
    traced = traced_config(derived.profile, joint, timelines[0].implementation, bucket_mb)
    steps_s = [j.step_s for j in joint]
    measured_s = statistics.median(steps_s)
    return _predict(timelines, joint, derived, traced, link, steps_s, measured_s, step_s,
                    granularity, notes)


def _read_timelines(paths: list[str], link: LinkFile | None,
                    implementation: str | None) -> list[Timeline]:
    """One timeline per trace, in rank order, each with an all-reduce; ``link`` checked
    against what the traces can give."""
    if not paths:
        raise InputError("give at least one trace file (one per rank)")
    timelines = _ordered([build_timeline(load_trace(p)) for p in paths])
    for tl in timelines:
        if not any(c.kind == "allreduce" for c in tl.comms):
            raise InputError(f"{tl.trace.path}: no all-reduce in the trace (gloo:all_reduce, "
                             "nccl*AllReduce* kernels, record_param_comms on one GPU); was "
                             "the model wrapped in DistributedDataParallel or realrun.DDP?")
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
    """A one-GPU trace needs ``link``; a trace with a network to fit refuses one."""
    local = [tl.local_comms for tl in timelines]
    if all(local) and link is None:
        raise InputError(f"{timelines[0].trace.path}: a one-rank trace (world size 1) moves "
                         "no gradient over a network, so it gives sizes and ready times but no "
                         "link; add --link PRESET|link.json (python -m simddp links)")
    if not any(local) and link is not None:
        raise InputError(f"--link {link.link.name}: the traces come from "
                         f"{timelines[0].trace.world_size or len(timelines)} ranks and the "
                         "link is fitted from them; --link is for one-rank traces")


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
