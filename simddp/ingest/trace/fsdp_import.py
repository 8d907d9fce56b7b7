"""An FSDP2 trace imported: a profile of its units, a link with all-gather and reduce-scatter
laws, FSDP2's host costs, and the traced configuration (fsdp or zero2) re-simulated.

    imp = import_traces(["fsdp.rank0.json", "fsdp.rank1.json"])    # routes here
    imp.traced.strategy.name, imp.sharded.units                      # 'fsdp', 21
    simddp.sweep(imp.profile, imp.link_file, 2, ["fsdp", "zero2", "ddp"], [25],
                 host=imp.host, shard_unit_mb=1)

What each piece is (simddp.ingest.trace.fsdp reads a rank's steps):

- **Profile**: one layer per traced unit, in forward order, with the gradients its backward
  made ready (their recorded shapes) and its compute (forward, backward: lane seconds outside
  FSDP's ranges, the profiler's per-event cost removed). Other unit sizes
  (``--shard-unit-mb``) group these layers as FSDP2 would group the modules; a unit smaller
  than a traced one cannot be split. ``optimizer_s`` is the traced optimizer times the world
  size (it ran on 1/p shards; simddp charges a sharded plan 1/p of it). Compute before the
  first unit and after the backward besides the optimizer rides with the first layer.
- **Each step's compute** is its slowest rank's (every collective waits for the last rank);
  each part's seconds are its median share times the median total (as for DDP traces).
- **Link**: per kind, a least-squares line through each all-gather's and reduce-scatter's
  time on the lane (ready when the last rank issued it, done when the first saw it end),
  kept where the sizes pin it down within bounds (simddp.ingest.trace.bounds); else the time
  at the traced sizes gives the term that dominates there under the fallback link's law
  (--link, else a preset) and the fallback gives the other. The all-reduce (the DDP
  alternative) is a reduce-scatter then an all-gather, as a ring runs it; on Gloo, which
  reduce-scatters by all-reducing the whole tensor, it is the reduce-scatter's own time.
- **Host** (``fsdp``): per kind a line through each call's host seconds (its FSDP ranges
  less its wait) against its bytes: the intercepts are ``gather_s`` and ``scatter_s``, the
  slope the copies' rate (``copy_gbps``; simddp.sim.overheads.shard_host_s charges n(1+1/p)
  bytes a call); ``blocking_collectives``: on Gloo the lane waits for each.
- **Closing**: as for DDP traces, the link's costs are scaled by one factor so that the
  traced configuration re-simulates to the traced median step (simddp.ingest.trace.closure).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from simddp.cost.factors import ALL_GATHER, REDUCE_SCATTER, kind_factor
from simddp.errors import InputError
from simddp.inputs.host import Host, HostCosts
from simddp.cost import GB, bytes_s
from simddp.inputs.link import KindFit, Link
from simddp.inputs.link_file import LinkFile
from simddp.inputs.profile import Layer, ModelProfile
from simddp.kinds import TORCH_FSDP
from simddp.planning.plans import plan as make_plan
from simddp.planning.registry import Name
from simddp.planning.strategy import make_strategy
from simddp.ingest.trace.bounds import (LineFit, alpha_max_s, busbw_max_gbps, line_fit,
                                        out_of_bounds, unpinned)
from simddp.ingest.trace.fsdp import GATHER, SCATTER, BACKWARD, ShardedStep, sharded_steps
from simddp.ingest.trace.link_choice import CPU_FALLBACK, GPU_FALLBACK
from simddp.ingest.trace.rank_timeline import Timeline

KINDS = {GATHER: ALL_GATHER, SCATTER: REDUCE_SCATTER}
_MIN_S = 1e-6


@dataclass(frozen=True)
class JointCall:
    """One all-gather or reduce-scatter of one step, seen by every rank (rank 0's clock)."""

    kind: str
    unit: str
    phase: str
    nbytes: int
    ready_s: float
    end_s: float
    service_s: float          # its time on the one-at-a-time lane
    host_s: float             # median over ranks of its host seconds, as traced
    clean_host_s: float       # the same, the profiler's per-event cost removed


@dataclass(frozen=True)
class KindLaw:
    """One kind's law and how it was chosen."""

    kind: str                 # simddp's spelling: all_gather, reduce_scatter
    alpha_s: float
    busbw_gbps: float
    line: LineFit
    cannot_fit: str | None    # why the line was not kept
    fallback: str | None      # what gave the term the trace could not


@dataclass(frozen=True)
class ShardedImport:
    """What an FSDP2 trace holds, beside the TraceImport's profile, link and host."""

    strategy: str                          # fsdp or zero2
    units: tuple[str, ...]                 # forward order
    unit_bytes: tuple[int, ...]
    calls_per_step: dict                   # {"all_gather": 42, "reduce_scatter": 21}
    laws: tuple[KindLaw, ...]
    all_reduce_from: str                   # how the all-reduce law was made
    steps: tuple[tuple[ShardedStep, ...], ...]   # per step, per rank
    joint: tuple[tuple[JointCall, ...], ...]      # per step
    host_lines: dict                       # kind -> (intercept s, slope s/byte, calls)
    traced_host: Host                      # the host costs as traced (profiler kept)
    phases: dict                           # medians (s): step, compute, host, wait, optimizer
    rs_as_all_reduce: bool


def read_sharded(timelines: list[Timeline]) -> list[list[ShardedStep]]:
    """Per step traced on every rank, each rank's ShardedStep (matched by label); InputError
    if the ranks' calls differ."""
    per_rank = [sharded_steps(tl) for tl in timelines]
    labels = [s.label for s in per_rank[0] if all(any(t.label == s.label for t in r)
                                                  for r in per_rank)]
    if not labels:
        raise InputError("the FSDP2 traces share no step; record the same steps on every rank")
    out = []
    for label in labels:
        steps = [next(s for s in r if s.label == label) for r in per_rank]
        keys = [[c.key for c in s.calls] for s in steps]
        if any(k != keys[0] for k in keys):
            bad = next(i for i, k in enumerate(keys) if k != keys[0])
            raise InputError(f"{label}: {timelines[0].trace.label} issued {len(keys[0])} FSDP "
                             f"collectives, {timelines[bad].trace.label} {len(keys[bad])} (or "
                             "others); are these traces of one job, recorded at the same steps?")
        out.append(steps)
    ref = [u.name for u in out[0][0].units]
    kept = [s for s in out if [u.name for u in s[0].units] == ref]
    return kept


def join_calls(steps: list[ShardedStep], overhead_s: float) -> tuple[JointCall, ...]:
    """The step's calls seen together: ready when the last rank issued it, done when the
    first saw it end, served one at a time."""
    out, prev_end = [], float("-inf")
    for i, call in enumerate(steps[0].calls):
        each = [s.calls[i] for s in steps]
        ready = max(c.issue_s for c in each)
        end = max(min(c.end_s for c in each), ready + _MIN_S)
        begin = min(max(ready, prev_end), end)
        prev_end = max(prev_end, end)
        host = statistics.median(c.host_s for c in each)
        clean = statistics.median(max(0.0, c.host_s - overhead_s * c.events) for c in each)
        out.append(JointCall(call.kind, call.unit, call.phase, call.nbytes, ready, end,
                             max(end - begin, _MIN_S), host, clean))
    return tuple(out)


def kind_law(kind: str, calls: list[JointCall], world_size: int, device: str,
             fallback: LinkFile | None) -> KindLaw:
    """The law of one kind (module text)."""
    simddp_kind = KINDS[kind]
    sizes = [c.nbytes for c in calls]
    times = [c.service_s for c in calls]
    line = line_fit(sizes, times, world_size, simddp_kind)
    why = unpinned(line) or out_of_bounds(line.alpha_s, line.busbw_gbps, device)
    if why is None and line.alpha_s >= 0:
        return KindLaw(simddp_kind, line.alpha_s, line.busbw_gbps, line, None, None)
    if why is None:
        why = f"α {line.alpha_s * 1e6:.0f} µs is below 0"
    given = fallback is not None
    fb = fallback.link if given else _preset(device)
    name = f"--link {fb.name}" if given else f"preset {fb.name}"
    # the mean call, not the median: a step pays its calls' sum (docs/FINDINGS.md#blocking-alpha)
    n_mean, t_mean = float(np.mean(sizes)), float(np.mean(times))
    f_alpha, f_busbw = _fallback_segment(fb, simddp_kind)
    if f_alpha >= bytes_s(simddp_kind, float(np.median(sizes)), world_size, f_busbw):
        # the traced time is mostly α there: it gives α
        alpha = max(0.0, t_mean - bytes_s(simddp_kind, n_mean, world_size, f_busbw))
        busbw = f_busbw
    else:                      # mostly bytes: it gives busbw (a time turned into busbw)
        alpha = f_alpha
        busbw = n_mean / max(t_mean - f_alpha, _MIN_S) / GB * kind_factor(simddp_kind,
                                                                          world_size)
    alpha = min(alpha, alpha_max_s(device))
    busbw = min(busbw, busbw_max_gbps())
    cannot = (f"cannot fit the {simddp_kind} law from {len(calls)} calls in "
              f"{line.size_text()}: {why}")
    return KindLaw(simddp_kind, alpha, busbw, line, cannot, name)


def _preset(device: str) -> Link:
    from simddp.presets.links import get_link
    return get_link(CPU_FALLBACK if device == "cpu" else GPU_FALLBACK)


def _fallback_segment(link: Link, kind: str) -> tuple[float, float]:
    fit = link.kind_fits.get(kind)
    return (fit.alpha_s, fit.busbw_gbps) if fit is not None else (link.alpha_s, link.busbw_gbps)


def all_reduce_law(gather: KindLaw, scatter: KindLaw, rs_as_all_reduce: bool
                   ) -> tuple[float, float, str]:
    """(α, busbw, how) of an all-reduce from the two kinds' laws (module text)."""
    if rs_as_all_reduce:   # Gloo: the reduce-scatter is an all-reduce of the whole tensor
        return (scatter.alpha_s, 2 * scatter.busbw_gbps,
                "the reduce-scatter's own time: Gloo reduce-scatters by all-reducing the "
                "whole tensor")
    busbw = 2 / (1 / gather.busbw_gbps + 1 / scatter.busbw_gbps)
    return (gather.alpha_s + scatter.alpha_s, busbw,
            "a reduce-scatter then an all-gather, as a ring all-reduce runs")


def host_line(calls: list[tuple[int, float]]) -> tuple[float, float]:
    """(intercept s, slope s/byte) of host seconds against bytes over calls; slope 0 where
    the bytes do not tell it (one size, or a slope not above its standard error)."""
    n = np.asarray([b for b, _ in calls], dtype=float)
    t = np.asarray([s for _, s in calls], dtype=float)
    if len(set(n.tolist())) < 2:
        return float(np.median(t)), 0.0
    design = np.column_stack([np.ones_like(n), n])
    coef, *_ = np.linalg.lstsq(design, t, rcond=None)
    resid = t - design @ coef
    cov = float(np.sum(resid ** 2)) / max(1, len(t) - 2) * np.linalg.pinv(design.T @ design)
    slope, se = float(coef[1]), float(np.sqrt(max(cov[1, 1], 0.0)))
    if slope <= 0 or slope < 2 * se:
        return float(np.median(t)), 0.0
    return max(0.0, float(coef[0])), slope


def fsdp_host(lines: dict, world_size: int, blocking: bool, source: str) -> Host:
    """The ``fsdp`` implementation's HostCosts from the two kinds' host lines (module text)."""
    slopes = [line[1] for line in lines.values() if line[1] > 0]
    # shard_host_s charges n/p + n bytes a call at copy_gbps: slope = (1 + 1/p) / rate
    rate = (1 + 1 / world_size) / statistics.median(slopes) / 1e9 if slopes else None
    costs = HostCosts(copy_gbps=rate, gather_s=lines.get(GATHER, (0.0, 0.0))[0],
                      scatter_s=lines.get(SCATTER, (0.0, 0.0))[0],
                      blocking_collectives=blocking)
    return Host("trace", {TORCH_FSDP: costs}, source=source)


def derive_sharded(timelines: list[Timeline], name: str, fallback: LinkFile | None):
    """(profile as fsdp2 ran it without the profiler, the same with it, link, host,
    ShardedImport, the traced plan, per-step traced seconds)."""
    device = timelines[0].device
    world = timelines[0].trace.world_size or len(timelines)
    steps = read_sharded(timelines)
    overhead_s = statistics.median(t.overhead_s for t in timelines)
    joint = tuple(join_calls(s, overhead_s) for s in steps)
    first = steps[0][0]
    strategy_name = Name.FSDP if any(c.kind == GATHER and c.phase == BACKWARD
                                     for c in first.calls) else Name.ZERO2
    # per unit: its gradients (ready order) from the trace, else its all-gather's bytes
    unit_bytes = {}
    for c in joint[0]:
        if c.kind == GATHER:
            unit_bytes.setdefault(c.unit, c.nbytes)
    grads = []
    for u in first.units:
        if u.grad_bytes and all(b is not None for b in u.grad_bytes):
            grads.append((u.grad_bytes, u.grad_shapes))
        elif u.name in unit_bytes:
            grads.append(((unit_bytes[u.name],), (None,)))
        else:
            raise InputError(f"{timelines[0].trace.path}: unit {u.name!r} has no gradient "
                             "sizes and no all-gather; record with record_shapes=True")
    # compute: each step's slowest rank; each part its median share of the median total
    parts = {"clean": [], "kept": []}
    for per_rank in steps:
        s = max(per_rank, key=lambda x: x.compute_s)
        kept = [s.lead_s] + [u.forward_s for u in s.units] + [u.backward_s for u in s.units] \
            + [s.optimizer_s]
        clean = [s.lead_s - overhead_s * s.lead_events] \
            + [u.forward_s - overhead_s * u.forward_events for u in s.units] \
            + [u.backward_s - overhead_s * u.backward_events for u in s.units] \
            + [s.optimizer_s - overhead_s * s.optimizer_events]
        parts["kept"].append(kept)
        parts["clean"].append(clean)
    from simddp.ingest.trace.derive import _typical
    profiles = {}
    for key in ("clean", "kept"):
        lead, *rest = _typical(parts[key])
        units = len(first.units)
        fwd, bwd, opt = rest[:units], rest[units:2 * units], rest[-1]
        layers = []
        for i, u in enumerate(first.units):
            gb, _ = grads[i]
            layers.append(Layer(u.name or "(root)", tuple(reversed(gb)),
                                fwd[i] + (lead if i == 0 else 0.0), bwd[i]))
        n = sum(len(g) for g, _ in grads)
        profiles[key] = ModelProfile(name, tuple(layers), opt * world,
                                     tuple(range(n - 1, -1, -1)))
    # laws
    by_kind = {k: [c for j in joint for c in j if c.kind == k] for k in (GATHER, SCATTER)}
    if not by_kind[GATHER] or not by_kind[SCATTER]:
        raise InputError(f"{timelines[0].trace.path}: FSDP2's ranges but no "
                         f"{'all-gather' if not by_kind[GATHER] else 'reduce-scatter'} ran "
                         "(gloo:all_gather, gloo:all_reduce)")
    gather = kind_law(GATHER, by_kind[GATHER], world, device, fallback)
    scatter = kind_law(SCATTER, by_kind[SCATTER], world, device, fallback)
    rs_as_ar = any(e.name == "gloo:all_reduce" for e in timelines[0].trace.events)
    ar_alpha, ar_busbw, ar_how = all_reduce_law(gather, scatter, rs_as_ar)
    link = Link(name=f"trace:{name}", alpha_s=ar_alpha, busbw_gbps=min(ar_busbw,
                                                                       busbw_max_gbps()),
                world_size=world, backend=timelines[0].trace.backend or "",
                kind_fits={law.kind: KindFit(law.alpha_s, law.busbw_gbps)
                           for law in (gather, scatter)},
                source=f"simddp trace-import of {len(timelines)} FSDP2 rank trace(s), "
                       f"{len(joint)} step(s); all-reduce: {ar_how}")
    # host: per kind, host seconds against bytes over every call of every step
    lines, kept_lines = {}, {}
    for k in (GATHER, SCATTER):
        lines[k] = (*host_line([(c.nbytes, c.clean_host_s) for c in by_kind[k]]),
                    len(by_kind[k]))
        kept_lines[k] = (*host_line([(c.nbytes, c.host_s) for c in by_kind[k]]),
                         len(by_kind[k]))
    blocking = device == "cpu"
    calls = len(joint[0])
    host = fsdp_host({k: v[:2] for k, v in lines.items()}, world, blocking,
                     f"simddp trace-import: FSDP2's host work around {calls} calls a step, "
                     "the profiler's cost removed")
    traced_host = fsdp_host({k: v[:2] for k, v in kept_lines.items()}, world, blocking,
                            "as traced")
    strategy = make_strategy(strategy_name)
    plan = make_plan(profiles["kept"], strategy)
    counts = {KINDS[k]: sum(1 for c in joint[0] if c.kind == k) for k in (GATHER, SCATTER)}
    planned = {KINDS[k]: sum(1 for c in plan.collectives if c.kind == KINDS[k])
               for k in (GATHER, SCATTER)}
    notes = []
    if counts != planned:
        notes.append(f"the trace ran {counts} per step, simddp's {strategy_name} plan "
                     f"{planned}: the re-simulation is of the plan")
    each = [s for per_rank in steps for s in per_rank]
    phases = {
        "step_s": statistics.median(max(s.step_s for s in per_rank) for per_rank in steps),
        "compute_s": statistics.median(s.compute_s for s in each),
        "host_s": statistics.median(sum(c.host_s for c in s.calls) for s in each),
        "wait_s": statistics.median(sum(c.wait_s for c in s.calls) for s in each),
        "optimizer_s": statistics.median(s.optimizer_s for s in each),
        "service_s": statistics.median(sum(c.service_s for c in j) for j in joint),
    }
    sharded = ShardedImport(strategy_name, tuple(u.name for u in first.units),
                            tuple(sum(g) for g, _ in grads), counts, (gather, scatter),
                            ar_how, tuple(tuple(s) for s in steps), joint, lines,
                            traced_host, phases, rs_as_ar)
    grad_bytes = tuple(b for g, _ in reversed(grads) for b in g)
    grad_shapes = tuple(sh for _, shapes in reversed(grads) for sh in shapes)
    return profiles, link, host, sharded, plan, notes, grad_bytes, grad_shapes
