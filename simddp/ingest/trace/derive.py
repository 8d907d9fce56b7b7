"""From joined steps to simddp's inputs: a ModelProfile, a Link and the host's launch cost.

    derived = derive(joint, timelines, name, grad_bytes, segment_grads)
    derived.profile        # per-parameter layers, the profiler's overhead removed
    derived.traced_profile # the same with the overhead kept: what the traced steps ran
    derived.link, derived.host, derived.link_fit, derived.compute_fit

- **Layers** are the backward's segments (simddp.ingest.trace.steps) in forward order: a
  layer's gradients are the ones its segment made ready, numbered so that the simulator's
  default ready order (reverse of the numbering) is the order the trace saw them ready. A
  segment's compute is its wall time minus the collective launch calls inside it (charged
  per collective by the host costs instead), minus the profiler's overhead (its events × the
  per-event cost), divided by ``1 + (compute_slowdown − 1)·f`` where f is the share of the
  segment spent beside a busy communication lane. On CUDA a segment's compute is its
  kernels' time on the GPU instead (simddp.ingest.trace.device): the GPU's waits for a host
  slowed by the profiler are left out, and forward and post likewise; the traced profile
  keeps the spans on the GPU's clock, waits included, as the traced steps ran them.
- **Which rank, which step**: ranks wait for each other at every all-reduce, so each step's
  compute is taken from its slowest rank; each part (forward, every segment, post) gets its
  median share of a step times the median step's total (:func:`_typical`).
- The **forward** total (all that precedes the backward) is spread over the layers like the
  backward; the engine only uses its sum, as DDP communicates nothing then.
  **optimizer_s** is the post phase: the compute lane's work after the backward (DDP's
  copies out of its buckets, the optimizer step, the loop's own work).
- **Link**: α, busbw and comm_slowdown whose replay of every traced step's gradient
  all-reduces on the engine's lane ends closest to the trace (simddp.ingest.trace.fit), plus
  compute_slowdown; world_size is the trace's.
- **Host costs**: the median host time of one launch call (``c10d::allreduce_`` on CPU),
  for the traced DDP implementation only; nothing on CUDA (launches don't stall the GPU).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from simddp.errors import InputError
from simddp.inputs.host import Host, HostCosts
from simddp.inputs.contention import Contention
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.inputs.resolved import NONE
from simddp.inputs.profile import Layer, ModelProfile
from simddp.ingest.trace.bounds import clamp_contention, contention_caps
from simddp.ingest.trace.collectives import JointStep, busy_overlap
from simddp.ingest.trace.fit import (ComputeFit, LinkFit, ReplayStep, fit_compute_slowdown)
from simddp.ingest.trace.link_choice import LinkChoice, choose_link
from simddp.ingest.trace.rank_timeline import Timeline


@dataclass(frozen=True)
class Derived:
    profile: ModelProfile
    traced_profile: ModelProfile
    link: Link
    contention: Contention          # the traced contention (source "link"; none: 1.0, 1.0)
    host: Host | None
    link_fit: LinkFit
    compute_fit: ComputeFit
    overhead_s: float               # profiler overhead per event
    grad_bytes: tuple[int, ...]     # in ready order
    grad_shapes: tuple
    segment_grads: tuple[tuple[int, ...], ...]   # backward order: ready indices per segment
    phases: dict                    # medians in seconds, as traced: forward, backward, ...
    device_phases: dict | None = None   # CUDA: the kernels' time per phase, the GPU's wait
    choice: LinkChoice | None = None    # how the link was chosen (None: given, one rank)
    contention_note: str | None = None  # why a traced slowdown was clamped, if it was


def derive(joint: list[JointStep], timelines: list[Timeline], name: str,
           grad_bytes: tuple[int, ...], segment_grads: tuple[tuple[int, ...], ...],
           given_link: LinkFile | None = None, alpha_s: float | None = None,
           fallback: LinkFile | None = None) -> Derived:
    """Build the profile, link and host costs from the steps every rank traced.

    ``grad_bytes``: each gradient's bytes in ready order; ``segment_grads``: which of them
    each backward segment made ready (the trace's gradients, or its buckets when the trace
    does not give per-parameter sizes); ``given_link``: the link to use instead of fitting
    one (a one-GPU trace, whose all-reduces moved nothing); ``alpha_s``: α as given, where
    the trace's sizes cannot tell it from bandwidth (only busbw and the slowdown fitted);
    ``fallback``: the link to use where the trace cannot give one
    (simddp.ingest.trace.link_choice)."""
    first = joint[0].ranks[0]
    shapes = [None] * len(grad_bytes) if len(first.grad_shapes) != len(grad_bytes) \
        else list(first.grad_shapes)
    labels = [seg.names[-1] if seg.names else "AccumulateGrad" for seg in first.segments]
    overhead_s = statistics.median(t.overhead_s for t in timelines)
    world = len(timelines) if timelines[0].trace.world_size is None \
        else timelines[0].trace.world_size
    device = timelines[0].device
    choice = None
    if given_link is None:
        samples = [s for j in joint for s in j.samples]
        choice = choose_link([_replay_step(j) for j in joint], [s.nbytes for s in samples],
                             [s.service_s for s in samples], world, device,
                             len(joint[0].samples), alpha_s, fallback)
        link_fit = choice.fit
    else:
        link_fit = LinkFit(given_link.link.alpha_s, given_link.link.busbw_gbps,
                           (given_link.contention or NONE).comm, sizes_separable=True,
                           slowdown_measured=False, residuals=())

    # Each segment's compute seconds on every rank of every step, and its share beside comm.
    # Under gradient accumulation every pass of a step (its micro-steps, then the synced
    # one) is observed: the earlier ones ran beside no gradient sync.
    obs: dict[tuple[int, int, int], list[tuple[float, float, float]]] = {}
    groups: dict = {}
    for i, j in enumerate(joint):
        for r, step in enumerate(j.ranks):
            off = j.offsets_s[r]
            for p, one in enumerate((*step.micro, step)):
                if len(one.segments) != len(step.segments):
                    raise InputError(f"{j.label}: its micro-steps' backward passes differ "
                                     "(other gradients, other autograd nodes)")
                for k, seg in enumerate(one.segments):
                    compute_s = max(0.0, seg.wall_s - seg.host_s)
                    clean_s = max(0.0, compute_s - overhead_s * seg.n_events) \
                        if seg.device_s is None else seg.device_s   # CUDA: its kernels' time
                    share = busy_overlap(j.samples, seg.start_s + off, seg.end_s + off)
                    obs.setdefault((i, r, p), []).append((clean_s, compute_s, share))
                    key = (seg.names, tuple(shapes[g] for g in segment_grads[k]))
                    groups.setdefault(key, []).append((clean_s, share))
    compute_fit = fit_compute_slowdown(groups, cap=contention_caps(device)[0])
    slow = compute_fit.slowdown
    _, _, contention_note = clamp_contention(compute_fit.implied or slow, link_fit.comm_slowdown,
                                             device)
    comm_cap = contention_caps(device)[1]
    if link_fit.slowdown_measured and link_fit.comm_slowdown >= comm_cap - 1e-3:
        contention_note = "; ".join(filter(None, [contention_note, (
            f"comm ×{comm_cap:g} beside compute is the fit's cap (simddp/ingest/trace/"
            "bounds.py): the traced all-reduces may have been slower still")]))
    # Ranks wait for each other at every all-reduce, so a step runs at its slowest rank's
    # pace: each step's compute is taken from the rank with the longest forward + backward.
    slowest = [max(range(len(j.ranks)), key=lambda r: j.ranks[r].backward_end_s
                   - j.ranks[r].start_s) for j in joint]
    # per step: [forward, segment 0, 1, ..., post]; a micro-step's forward and segments are
    # the mean over the step's passes (the engine runs each pass from the same profile)
    parts = {"clean": [], "kept": []}
    for (i, r) in enumerate(slowest):
        step = joint[i].ranks[r]
        post_s = step.post_busy_s
        kept_rows, clean_rows = [], []
        for p, one in enumerate((*step.micro, step)):
            segs = obs[(i, r, p)]
            kept_rows.append([one.forward_s] + [c / (1 + (slow - 1) * f) for _, c, f in segs])
            if one.device_s is None:  # CPU: the host's time less the profiler's per event
                forward_clean = one.forward_s - overhead_s * one.forward_events
            else:                     # CUDA: the kernels' time; the GPU's waits left out
                forward_clean = one.forward_device_s
            clean_rows.append([forward_clean] + [c / (1 + (slow - 1) * f) for c, _, f in segs])
        post_clean = post_s - overhead_s * step.post_events if step.device_s is None \
            else step.post_device_s
        parts["kept"].append([statistics.fmean(x) for x in zip(*kept_rows)] + [post_s])
        parts["clean"].append([statistics.fmean(x) for x in zip(*clean_rows)] + [post_clean])
    forward_clean, *clean, post_clean = _typical(parts["clean"])
    forward_kept, *kept, post_kept = _typical(parts["kept"])

    profile = _profile(name, segment_grads, grad_bytes, labels, clean, forward_clean, post_clean)
    traced = _profile(name, segment_grads, grad_bytes, labels, kept, forward_kept, post_kept)
    if given_link is not None:
        link, contention = given_link.link, given_link.contention or NONE
    else:
        link = Link(name=f"trace:{name}", alpha_s=link_fit.alpha_s,
                    busbw_gbps=link_fit.busbw_gbps, world_size=world,
                    backend=timelines[0].trace.backend or "",
                    source=f"simddp trace-import of {len(timelines)} rank trace(s), "
                           f"{len(joint)} step(s), {len(joint[0].samples)} all-reduces per step"
                           + ("" if choice is None or choice.cannot_fit is None else
                              f"; {choice.cannot_fit}; α from {choice.fallback}"))
        factors = (slow, link_fit.comm_slowdown)
        contention = NONE if factors == (1.0, 1.0) else Contention(*factors, source="link")
    return Derived(profile, traced, link, contention, _host(timelines, joint), link_fit,
                   compute_fit,
                   overhead_s, grad_bytes, tuple(shapes), segment_grads, _phases(joint),
                   _device_phases(joint), choice, contention_note)


def _device_phases(joint: list[JointStep]) -> dict | None:
    """CUDA: medians over steps and ranks of each phase's kernels' time on the GPU, and of
    the GPU's wait for the host (seconds); None on CPU."""
    each = [s for j in joint for s in j.ranks]
    return None if each[0].device_s is None else {
        "forward_device_s": statistics.median(s.forward_device_s for s in each),
        "backward_device_s": statistics.median(sum(g.device_s for g in s.segments)
                                               for s in each),
        "post_device_s": statistics.median(s.post_device_s for s in each),
        "device_s": statistics.median(s.device_s for s in each),
        "host_idle_s": statistics.median(s.host_idle_s for s in each),
    }


def _phases(joint: list[JointStep]) -> dict:
    """Medians over steps and ranks of each phase as traced (seconds), and events per step."""
    each = [s for j in joint for s in j.ranks]
    return {
        "step_s": statistics.median(j.step_s for j in joint),
        "forward_s": statistics.median(s.forward_s for s in each),
        "backward_s": statistics.median(s.backward_s for s in each),
        "wait_s": statistics.median(s.wait_s for s in each),
        "post_s": statistics.median(s.post_busy_s for s in each),
        "optimizer_s": statistics.median(s.optimizer_s for s in each),
        "others_s": statistics.median(sum(s.others_exposed_s) for s in each),
        "events_per_step": statistics.median(
            s.forward_events + s.post_events + sum(g.n_events for g in s.segments)
            for s in each),
    }


def _typical(steps: list[list[float]]) -> list[float]:
    """Each part's seconds in a typical step: its median share of the step's compute, times
    the median over steps of that compute. A loaded host stalls some part of every step at
    random; per-part medians alone would drop stalls the median step still pays."""
    shares = [max(0.0, statistics.median(x)) for x in zip(*steps)]
    total = statistics.median(sum(max(0.0, p) for p in step) for step in steps)
    norm = sum(shares)
    return [total * s / norm if norm > 0 else total / len(shares) for s in shares]


def _profile(name: str, segment_grads, grad_bytes, labels: list[str], backward_s: list[float],
             forward_s: float, post_s: float) -> ModelProfile:
    """Layers in forward order (the segments reversed), gradients numbered so that reverse
    numbering is the traced ready order."""
    total_s = sum(backward_s)
    layers = []
    for k in reversed(range(len(segment_grads))):
        share = backward_s[k] / total_s if total_s > 0 else 1 / len(segment_grads)
        grads = tuple(grad_bytes[g] for g in reversed(segment_grads[k]))
        name_k = f"bwd{k:03d} {labels[k]}"   # its backward's index and last autograd node
        layers.append(Layer(name_k, grads, forward_s * share, backward_s[k]))
    n = len(grad_bytes)
    return ModelProfile(name, tuple(layers), post_s, tuple(range(n - 1, -1, -1)))


def _replay_step(j: JointStep) -> ReplayStep:
    """A step's gradient all-reduces and the ranks' mean backward span, on rank 0's clock."""
    spans = [(s.backward_start_s + off, s.backward_end_s + off)
             for s, off in zip(j.ranks, j.offsets_s)]
    return ReplayStep(tuple(s.ready_s for s in j.samples), tuple(s.nbytes for s in j.samples),
                      tuple(s.end_s for s in j.samples),
                      (statistics.mean(a for a, _ in spans), statistics.mean(b for _, b in spans)))


def _host(timelines: list[Timeline], joint: list[JointStep]) -> Host | None:
    """The median launch call's host seconds, for the traced implementation (CPU only)."""
    launches = [c.launch_s for j in joint for s in j.ranks for c in s.syncs if c.launch_s > 0]
    if timelines[0].device != "cpu" or not launches:
        return None
    impl = timelines[0].implementation
    return Host("trace", {impl: HostCosts(launch_s=statistics.median(launches))},
                source=f"median of {len(launches)} launch calls in the trace ({impl})")
