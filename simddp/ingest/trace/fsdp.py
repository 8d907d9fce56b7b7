"""An FSDP2 trace read per unit: each unit's compute, its all-gathers and reduce-scatter, and
the host work FSDP2 does around each, on one rank (CPU: the training thread is the lane).

    steps = sharded_steps(timeline)          # InputError if it is not an FSDP2 trace
    s = steps[0]
    [u.name for u in s.units], [(c.kind, c.unit, c.phase) for c in s.calls]

torch FSDP2 (``fully_shard``) marks its work with ``record_function`` ranges named after the
module each unit wraps: ``FSDP::pre_forward (blocks.0)`` (where it all-gathers the unit's
parameters: ``FSDP::all_gather (blocks.0)``, a ``c10d::_allgather_base_`` launch, the wait,
``FSDP::all_gather_copy_out``), ``FSDP::post_forward`` (the reshard), ``FSDP::pre_backward``
inside the unit's first autograd node (the re-gather's copy-out, and
``FSDP::backward_prefetch for X``: the next unit's re-gather), and the autograd node
``RegisterPostBackwardFunctionBackward`` after the unit's gradients are ready (its
``FSDP::post_backward_reduce``: the reduce-scatter; for a unit whose input needs no gradient,
and for the root module, whose ranges carry no name, inside the root's
``FSDP::root_post_backward_callback``). On Gloo each collective blocks the training thread;
a reduce-scatter runs as an all-reduce of the whole tensor.

Within a step, on the lane, everything outside FSDP's ranges is compute, and it belongs to
the unit whose ranges bound it: forward from a unit's first ``pre_forward`` to the next
unit's (the last: to the backward), backward from the previous unit's post-backward to its
own (a layer without parameters rides with the unit before it, as simddp's units group
them: simddp/planning/sharding.py). Compute before the first unit (zero_grad, data) and
after the backward besides the optimizer (the loop's own work) is the step's ``lead_s``.
Every FSDP range is one call's work: the forward ones the unit's all-gather, the backward
``pre_backward`` its re-gather (or, with ``reshard_after_forward=False``, its
reduce-scatter), a prefetch the prefetched unit's re-gather, the post-backward its
reduce-scatter; the part of a call's ranges in which its collective ran and the thread ran
no op is its wait, the rest its host seconds. A unit of several modules runs FSDP2's hooks
once per module (``pre_forward`` three times for three modules): all of them are the unit's
call's: grouping modules saves that work too, as measured (docs/TRACES.md, "FSDP2
traces").
"""
from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass

from simddp.errors import InputError
from simddp.ingest.trace.events import Event
from simddp.ingest.trace.inventory import inventory
from simddp.ingest.trace.rank_timeline import HOST_CATEGORIES, NODE, Comm, Timeline, merge
from simddp.ingest.trace.steps import step_windows

MARK = "FSDP::"
POST_BACKWARD = NODE + "RegisterPostBackwardFunctionBackward"
_NAMED = re.compile(r"^FSDP::(?P<what>\w+)(?: \((?P<unit>.*)\))?$")   # the root: no name
GATHER, SCATTER = "allgather", "reducescatter"
_PREFETCH = re.compile(r"^FSDP::backward_prefetch for (?P<unit>.*)$")
_ROOT_ONLY = ("root_pre_forward", "root_post_backward_callback")   # the root's, no unit
FORWARD, BACKWARD = "forward", "backward"


def is_fsdp(tl: Timeline) -> bool:
    """Whether torch FSDP2 ran the traced job (its ``FSDP::pre_forward (...)`` ranges)."""
    return any(e.name.startswith("FSDP::pre_forward") for e in tl.trace.events)


@dataclass(frozen=True)
class Call:
    """One all-gather or reduce-scatter of one unit on one rank."""

    kind: str            # "allgather" or "reducescatter"
    unit: str
    phase: str           # "forward" or "backward"
    nbytes: int          # the whole unit's bytes (simddp's and nccl-tests' convention)
    issue_s: float       # its launch on the lane
    start_s: float       # its run on the backend's thread
    end_s: float
    span_s: float        # lane seconds in the FSDP ranges that are this call's
    wait_s: float        # of which the lane sat idle while the collective ran
    events: int          # profiler events recorded in those ranges

    @property
    def host_s(self) -> float:
        return max(0.0, self.span_s - self.wait_s)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.unit, self.phase


@dataclass(frozen=True)
class UnitWork:
    """One unit's compute in one step (lane seconds outside FSDP's ranges)."""

    name: str
    forward_s: float
    backward_s: float
    forward_events: int
    backward_events: int
    grad_bytes: tuple[int | None, ...]       # ready order
    grad_shapes: tuple[tuple[int, ...] | None, ...]


@dataclass(frozen=True)
class ShardedStep:
    """One rank's step of an FSDP2 job."""

    label: str
    start_s: float
    end_s: float
    units: tuple[UnitWork, ...]     # forward order
    calls: tuple[Call, ...]         # issue order
    lead_s: float                   # compute before the first unit and after the backward,
    lead_events: int                # the optimizer aside
    optimizer_s: float              # the Optimizer.step range (on this rank's shards)
    optimizer_events: int
    backward_start_s: float

    @property
    def step_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def compute_s(self) -> float:
        return (self.lead_s + self.optimizer_s
                + sum(u.forward_s + u.backward_s for u in self.units))


def sharded_steps(tl: Timeline) -> list[ShardedStep]:
    """Every whole step of an FSDP2 trace on one rank; InputError if none."""
    if tl.device != "cpu":
        raise InputError(f"{tl.trace.path}: an FSDP2 trace on CUDA ({inventory(tl).text()}) "
                         "is not read yet (its kernels' clock); see docs/TRACES.md, Limits")
    ranges = [e for e in tl.trace.events if e.cat in HOST_CATEGORIES
              and (e.name.startswith(MARK) or e.name == POST_BACKWARD)]
    tid = Counter(e.tid for e in ranges if e.name.startswith("FSDP::pre_forward")).most_common(1)
    ranges = [e for e in ranges if e.tid == tid[0][0]]
    steps = []
    for w in step_windows(tl):
        inside = [e for e in ranges if w.start_s <= e.start_s < w.end_s]
        if any(e.name.startswith("FSDP::post_backward") for e in inside) and \
                any(e.name.startswith("FSDP::pre_forward") for e in inside):
            steps.append(_step(tl, w, inside))
    if not steps:
        raise InputError(f"{tl.trace.path}: no step holds FSDP2's forward and post-backward "
                         "(FSDP::pre_forward, RegisterPostBackwardFunctionBackward); trace at "
                         "least one whole training step")
    return steps


def _outermost(events: list[Event]) -> list[Event]:
    out, end_s = [], float("-inf")
    for e in sorted(events, key=lambda e: (e.start_s, -e.end_s)):
        if e.start_s >= end_s:
            out.append(e)
            end_s = e.end_s
    return out


def _unit(m: re.Match) -> str:
    """The unit a range's name names: its module's, or "" for the root module."""
    return m.group("unit") or ""


def _post_backward_unit(e: Event, ranges: list[Event]) -> str | None:
    """The unit whose ``FSDP::post_backward_*`` ranges ``e`` is or holds (None: none)."""
    for x in [e] + [x for x in ranges if e.contains(x) and x is not e]:
        m = _NAMED.match(x.name)
        if m and m.group("what").startswith("post_backward"):
            return _unit(m)
    return None


def _step(tl: Timeline, w, ranges: list[Event]) -> ShardedStep:
    nodes = [n for n in tl.nodes if w.start_s <= n.start_s < w.end_s]
    if not nodes:
        raise InputError(f"{tl.trace.path}: {w.label} has FSDP2's ranges but no backward")
    bwd_start = nodes[0].start_s
    calls, parts = _calls(tl, w, ranges, bwd_start)
    work = merge((e.start_s, e.end_s) for e in parts)   # FSDP's ranges: the calls' work

    def compute(a: float, b: float) -> tuple[float, int]:
        """Lane seconds and profiler events in [a, b) outside FSDP's ranges."""
        if b <= a:
            return 0.0, 0
        inner = sum(max(0.0, min(b, y) - max(a, x)) for x, y in work)
        events = tl.events_between(a, b) - sum(
            tl.events_between(max(a, x), min(b, y)) for x, y in work if y > a and x < b)
        return (b - a) - inner, max(0, events)

    # A unit of several modules runs FSDP2's pre-forward hook once per module: its first
    # is where the unit's forward starts.
    pre_forward, names = [], []
    for e in _outermost(ranges):
        if e.name.startswith("FSDP::pre_forward") and e.start_s < bwd_start:
            name = _unit(_NAMED.match(e.name))
            if name not in names:
                pre_forward.append(e)
                names.append(name)
            elif names[-1] != name:
                raise InputError(f"{tl.trace.path}: {w.label} runs unit {name!r}'s forward "
                                 "again after others (gradient accumulation): FSDP2 "
                                 "accumulation is not read yet; trace one micro-step per step")
    # each unit's post-backward: from its first FSDP::post_backward_* range to its last, or
    # the autograd node after its gradients that holds them (the root's
    # FSDP::root_post_backward_callback may hold several units': those whose input needs no
    # gradient)
    top = _outermost(ranges)
    spans: dict[str, tuple[float, float]] = {}
    for x in ranges:
        m = _NAMED.match(x.name)
        if m and m.group("what").startswith("post_backward") and x.start_s >= bwd_start:
            a, b = spans.get(_unit(m), (float("inf"), float("-inf")))
            spans[_unit(m)] = (min(a, x.start_s), max(b, x.end_s))
    for e in top:
        held = [u for u, (a, b) in spans.items() if e.start_s <= a and b <= e.end_s]
        if len(held) == 1:
            spans[held[0]] = (e.start_s, e.end_s)
    forward = {}
    for i, (name, e) in enumerate(zip(names, pre_forward)):
        end = pre_forward[i + 1].start_s if i + 1 < len(pre_forward) else bwd_start
        forward[name] = compute(e.start_s, end)
    backward, grads, prev = {}, {}, bwd_start
    order = sorted(spans, key=lambda u: spans[u][0])
    for name in order:
        start, end = spans[name]
        backward[name] = compute(prev, max(prev, end))
        grads[name] = [n for n in nodes if n.is_grad and prev <= n.start_s < start]
        prev = max(prev, end)
    missing = [n for n in names if n not in backward]
    if missing:
        raise InputError(f"{tl.trace.path}: {w.label}: unit {missing[0]!r} ran forward but no "
                         "FSDP::post_backward range names it")
    _share_gradients(order, grads, {c.unit: c.nbytes for c in calls if c.kind == GATHER})
    lead_s, lead_events = compute(w.start_s, pre_forward[0].start_s)
    post_s, post_events = compute(prev, w.end_s)
    optimizer = [o for o in tl.optimizer if prev <= o.start_s < w.end_s]
    opt_s = sum(o.end_s - o.start_s for o in optimizer)
    opt_events = sum(tl.events_between(o.start_s, o.end_s) for o in optimizer)
    units = tuple(UnitWork(n, forward[n][0], backward[n][0], forward[n][1], backward[n][1],
                           tuple(g.grad_bytes for g in grads[n]),
                           tuple(g.grad_shape for g in grads[n])) for n in names)
    return ShardedStep(w.label, w.start_s, w.end_s, units, calls,
                       lead_s + max(0.0, post_s - opt_s), lead_events
                       + max(0, post_events - opt_events), opt_s, opt_events, bwd_start)


def _share_gradients(order: list[str], grads: dict, capacity: dict) -> None:
    """Gradients made ready before several units' post-backward ran together (the root's
    callback) all fall to the first of them: share them out by the units' all-gathered
    bytes, largest gradient first into the unit it fills best."""
    for i, unit in enumerate(order):
        empty = []
        for later in order[i + 1:]:
            if grads[later]:
                break
            empty.append(later)
        got = sum(g.grad_bytes or 0 for g in grads[unit])
        if not empty or got <= capacity.get(unit, got):
            continue
        room = {u: capacity.get(u, 0) for u in [unit] + empty}
        share: dict[str, list] = {u: [] for u in room}
        for g in sorted(grads[unit], key=lambda g: -(g.grad_bytes or 0)):
            fits = [u for u in room if room[u] >= (g.grad_bytes or 0)] or [unit]
            best = min(fits, key=lambda u: room[u] - (g.grad_bytes or 0))
            share[best].append(g)
            room[best] -= g.grad_bytes or 0
        for u, got_grads in share.items():   # each keeps its gradients' ready order
            grads[u] = sorted(got_grads, key=lambda g: g.start_s)


def _calls(tl: Timeline, w, ranges: list[Event], bwd_start: float
           ) -> tuple[tuple[Call, ...], list[Event]]:
    """Each all-gather and reduce-scatter of the step with the FSDP ranges that are its
    (module text), and FSDP's outermost ranges."""
    comms = [c for c in tl.comms if c.kind in (GATHER, SCATTER)
             and w.start_s <= c.issue_s < w.end_s]
    keyed: list[tuple[tuple[str, str, str], Comm, float]] = []   # and its range's end
    for c in comms:
        phase = FORWARD if c.issue_s < bwd_start else BACKWARD
        around = [e for e in ranges if e.start_s <= c.issue_s <= e.end_s and _NAMED.match(e.name)
                  and _NAMED.match(e.name).group("what") not in _ROOT_ONLY]
        unit = _unit(_NAMED.match(around[-1].name)) if around else None
        if unit is None:
            continue        # not FSDP's: listed with the other collectives
        keyed.append(((c.kind, unit, phase), c, around[-1].end_s))
    calls = {key for key, _, _ in keyed}
    span: dict = {}

    def add(key, a: float, b: float) -> None:
        if key in calls and b > a:
            s, n = span.get(key, (0.0, 0))
            span[key] = (s + b - a, n + tl.events_between(a, b))

    def own(unit: str) -> tuple[str, str, str]:
        """A pre_backward's call: its unit's re-gather, or (zero2) its reduce-scatter."""
        key = (GATHER, unit, BACKWARD)
        return key if key in calls else (SCATTER, unit, BACKWARD)

    top = _outermost(ranges)
    first_gather = next((k for k, _, _ in keyed if k[0] == GATHER), None)
    last_scatter = next((k for k, _, _ in reversed(keyed) if k[0] == SCATTER), None)
    for e in top:
        m = _NAMED.match(e.name)
        what = m.group("what") if m else ""
        post = _post_backward_unit(e, ranges)
        if post is not None:
            add((SCATTER, post, BACKWARD), e.start_s, e.end_s)
        elif what in ("pre_forward", "post_forward"):
            add((GATHER, _unit(m), FORWARD), e.start_s, e.end_s)
        elif what == "pre_backward":
            cursor = e.start_s
            for child in sorted((x for x in ranges if e.contains(x) and _PREFETCH.match(x.name)),
                                key=lambda x: x.start_s):
                add(own(_unit(m)), cursor, child.start_s)
                add((GATHER, _PREFETCH.match(child.name).group("unit"), BACKWARD),
                    child.start_s, child.end_s)
                cursor = child.end_s
            add(own(_unit(m)), cursor, e.end_s)
        elif e.start_s < bwd_start and first_gather is not None:   # FSDP::root_pre_forward
            add(first_gather, e.start_s, e.end_s)
        elif last_scatter is not None:                             # root_post_backward...
            add(last_scatter, e.start_s, e.end_s)
    # The lane waits inside ops that began before the launch (the autograd node around a
    # post-backward hook): only ops begun after it are work done meanwhile.
    tid = ranges[0].tid if ranges else None
    ops = sorted((e.start_s, e.end_s) for e in tl.trace.events
                 if e.cat == "cpu_op" and e.tid == tid and w.start_s <= e.start_s < w.end_s)
    starts = [a for a, _ in ops]
    out = []
    for key, c, range_end in keyed:
        # waited: from the launch to the run's end, within the range that issued it (a
        # gloo thread's end stamp can be late: the lane may have gone on by then), less the
        # ops begun meanwhile (the launch op itself may hold the wait, or return at once)
        until = min(c.end_s, range_end)
        lo, hi = bisect.bisect_right(starts, c.issue_s), bisect.bisect_left(starts, until)
        worked = sum(min(b, until) - a for a, b in merge(ops[lo:hi]))
        idle = max(0.0, (until - c.issue_s) - worked)
        s, n = span.get(key, (0.0, 0))
        out.append(Call(key[0], key[1], key[2], c.nbytes or 0, c.issue_s, c.start_s, c.end_s,
                        s, min(idle, s), n))
    return tuple(out), top
