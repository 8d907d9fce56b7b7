"""The discrete-event engine: a compute lane and a communication lane on SimPy.

Picture one GPU and one NCCL stream (or one Gloo process group). The compute lane runs the
forward, then each layer's backward in reverse order, then the optimizer. When a layer's
backward ends, the collectives the plan marked ready after that layer may launch. The comm
lane runs collectives one at a time, in launch order, each for its kind's α–β law
(``link.collective_s``: all-reduce, reduce-scatter, all-gather; a comm hook's calls add up).
The optimizer (and the next micro-step) waits until every collective of the step is done::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
    >>> r = simulate(toy, Link("l", 0.0, 1.0), plan(toy, make_strategy("overlap")), world_size=2)
    >>> round(r.step_ms, 6)    # 2 ms fwd, bwd l1 ends 4 ms, l0 ends 6 ms, comm 1 ms each
    7.0

With contention (``link.compute_slowdown``/``comm_slowdown`` > 1, measured by calibrate) a lane
runs slower while the other is busy; progress is tracked as remaining full-speed work. With a
:class:`~simddp.host.Host`, the DDP implementation that runs the plan (``strategy.implementation``)
also pays its hooks, launches and gradient copies on the compute lane (:func:`host_copies`),
and a comm hook's casts and products (simddp/hostwork.py).

Sharded plans (simddp/sharding.py) add two things, both plan data: a collective may be
released when a layer's forward or backward *starts* (``Collective.ready_at``: FSDP's
all-gather, issued one unit ahead), and a layer's compute may wait for a collective
(``Collective.gates``: a unit computes only once its parameters are gathered). The forward
is then timed in stretches between those layers; the optimizer runs on the shard, 1/p of it.
The implementation's host costs may say its collectives block (``blocking_collectives``:
FSDP2 on Gloo/CPU): then compute waits for each collective where it releases it.
The engine never looks at a strategy's name: it only executes the plan.
"""
from __future__ import annotations

import simpy

from simddp.host import FREE, Host
from simddp.hostwork import comm_gaps_s, host_copies, shard_host_s
from simddp.link import ALL_REDUCE, Link
from simddp.plans import Plan
from simddp.profile import ModelProfile
from simddp.result import (BACKWARD, COMM, COMPUTE, COPY, FORWARD, OPTIMIZER, SPAN_KIND, Result,
                           Span)
from simddp.sharding import AFTER_BACKWARD

__all__ = ["compute_only_s", "host_copies", "make_result", "simulate"]

_EPS_S = 1e-15  # leftover work below this is float noise, not work


class _Lanes:
    """Which lane is busy, and the process to interrupt when the other lane's state flips."""

    def __init__(self, env: simpy.Environment, link: Link) -> None:
        self.env = env
        self.slowdown = {COMPUTE: link.compute_slowdown, COMM: link.comm_slowdown}
        self.contended = link.compute_slowdown != 1.0 or link.comm_slowdown != 1.0
        self.busy = {COMPUTE: False, COMM: False}
        self.waiting: dict[str, simpy.Process | None] = {COMPUTE: None, COMM: None}
        self.spans: list[tuple[str, str, float, float, str]] = []

    def _set_busy(self, lane: str, busy: bool) -> None:
        self.busy[lane] = busy
        other = COMM if lane == COMPUTE else COMPUTE
        proc = self.waiting[other]
        if proc is not None and self.slowdown[other] != 1.0:
            self.waiting[other] = None  # one interrupt: a 2nd could land after its work ended
            proc.interrupt()  # its rate just changed: let it re-plan its remaining work

    def work(self, lane: str, label: str, kind: str, work_s: float, proc_ref: list):
        """Generator: occupy ``lane`` for ``work_s`` of full-speed work (slowed under contention)."""
        start_s = self.env.now
        if not self.contended:
            yield self.env.timeout(work_s)
        else:
            other = COMM if lane == COMPUTE else COMPUTE
            self._set_busy(lane, True)
            remaining_s = work_s
            while remaining_s > _EPS_S:
                rate = 1.0 / self.slowdown[lane] if self.busy[other] else 1.0
                t0 = self.env.now
                self.waiting[lane] = proc_ref[0]
                try:
                    yield self.env.timeout(remaining_s / rate)
                    remaining_s = 0.0
                except simpy.Interrupt:
                    remaining_s -= (self.env.now - t0) * rate
                finally:
                    self.waiting[lane] = None
            self._set_busy(lane, False)
        self.spans.append((lane, label, start_s, self.env.now, kind))


def simulate(profile: ModelProfile, link: Link, plan: Plan, world_size: int, *,
             host: Host | None = None, record: bool = True, stats: dict | None = None) -> Result:
    """Run one optimizer step of ``plan``; ``stats['events']`` gets the events processed.

    ``host``: the DDP implementations' host costs (None: free, as for presets).
    """
    if host is not None:
        link = host.contended(link)  # contention measured with this model, if any
    env = simpy.Environment()
    lanes = _Lanes(env, link)
    contended = lanes.contended
    spans = lanes.spans
    timeout = env.timeout
    micro_steps = plan.micro_steps
    collectives = plan.collectives
    # Speed (bench/bench_sim.py): everything the two processes look up per event is prepared
    # once here — the backward schedule (label, seconds, layer), each collective's duration and
    # ready event — and without contention a lane is a bare timeout rather than a `yield from`
    # of _Lanes.work. Same events, same spans, same floats; ~25% fewer µs per event.
    backward = [(f"{layer.name} bwd", layer.backward_s, li)
                for li, layer in reversed(list(enumerate(profile.layers)))]
    costs = host.costs(plan.strategy.implementation) if host is not None else FREE
    copy_in, copy_out = host_copies(profile, costs, plan, world_size)
    copy_in_label = "hooks+copy-in" if costs.hook_s or costs.launch_s else "copy-in"
    # hold: the compute lane waits for each collective it releases (FSDP2 on Gloo/CPU)
    hold = costs.blocking_collectives
    blocking = not plan.strategy.overlap or hold  # each collective waited for before the next
    event = env.event
    # What each compute point releases and waits for, per micro-step: after a layer's backward
    # (gradients ready: ready_after), and at the start of a layer's forward or backward
    # (at_start: FSDP's all-gathers issued one unit ahead, and the compute they gate).
    ready_after: list[dict[int, list[int]]] = [{} for _ in range(micro_steps)]  # collectives
    at_start: dict[str, list[dict[int, tuple[list, list]]]] = {
        FORWARD: [{} for _ in range(micro_steps)], BACKWARD: [{} for _ in range(micro_steps)]}
    ready = [event() for _ in collectives]
    finished = ([event() for _ in collectives] if copy_out or hold
                else [None] * len(collectives))
    # an all-gather's host work where it is issued and where its compute waits for it
    shard_s = ([shard_host_s(costs, c, world_size) for c in collectives]
               if plan.units and not costs.free else None)
    released = [False] * len(collectives)
    unreleased = [0]   # the first collective not released yet
    # plan() gives a plan without units or hook only plain all-reduces, released after a
    # layer's backward: the common case, kept lean (bench/bench_sim.py)
    if not plan.units and plan.strategy.comm_hook is None:
        comm_s = [link.allreduce_s(c.nbytes, world_size, blocking) for c in collectives]
        comm_kind = [SPAN_KIND[ALL_REDUCE]] * len(collectives)
        for i, c in enumerate(collectives):
            ready_after[c.micro_step].setdefault(c.ready_layer, []).append(i)
    else:  # each call by its kind's law, plus a hook's work between calls; gates
        gaps_s = comm_gaps_s(costs, plan) or [0.0] * len(collectives)
        comm_s = [sum(link.collective_s(c.kind, n, world_size, blocking) for n in c.calls) + gap_s
                  for c, gap_s in zip(collectives, gaps_s)]
        comm_kind = [SPAN_KIND[c.kind] for c in collectives]
        for i, c in enumerate(collectives):
            if c.ready_at == AFTER_BACKWARD:
                ready_after[c.micro_step].setdefault(c.ready_layer, []).append(i)
            else:
                at_start[c.ready_at][c.micro_step].setdefault(
                    c.ready_layer, ([], []))[0].append(i)
            if c.gates:
                finished[i] = finished[i] or event()
                at_start[c.gates[0]][c.micro_step].setdefault(
                    c.gates[1], ([], []))[1].append(i)
    fwd_at, bwd_at = at_start[FORWARD], at_start[BACKWARD]
    segments = _forward_segments(profile, {li for points in fwd_at for li in points})
    gated_backward = any(bwd_at)
    done = {k: env.event() for k in {c.micro_step for c in collectives}}
    last_of = {c.micro_step: i for i, c in enumerate(collectives)}
    optimizer_s = optimizer_share_s(profile, plan, world_size)

    def release(indices: list[int]):
        """Generator: launch these collectives; with ``hold``, wait for each to be done
        (those whose predecessors on the comm lane are all launched: the rest later)."""
        for i in indices:
            ready[i].succeed()
            released[i] = True
        if hold:
            while unreleased[0] < len(collectives) and released[unreleased[0]]:
                unreleased[0] += 1
            for i in indices:
                if i < unreleased[0] and not finished[i].triggered:
                    yield finished[i]

    def reach(point: tuple[list, list]):
        """Generator: release what is issued here (after its host work at issue), then wait
        for what this compute needs (and copy the gathered parameters out)."""
        releases, needs = point
        for i in releases:
            if shard_s and shard_s[i][0] > 0:
                yield from lanes.work(COMPUTE, f"{collectives[i].label} issue", COPY,
                                      shard_s[i][0], compute_ref)
            yield from release([i])
        for i in needs:
            if not finished[i].triggered:
                yield finished[i]
            if shard_s and shard_s[i][1] > 0:
                yield from lanes.work(COMPUTE, f"{collectives[i].label} copy-out", COPY,
                                      shard_s[i][1], compute_ref)

    def layer_work(label, kind, seconds):
        """One layer's forward or backward on the compute lane: through the contention
        model when collectives can overlap, else a plain timeout (the cheap path)."""
        if contended:
            yield from lanes.work(COMPUTE, label, kind, seconds, compute_ref)
            return
        start_s = env.now
        yield timeout(seconds)
        if record:
            spans.append((COMPUTE, label, start_s, env.now, kind))

    def compute():
        for k in range(micro_steps):
            ready_k, fwd_k, bwd_k = ready_after[k], fwd_at[k], bwd_at[k]
            for li, forward_s, label in segments:
                if li in fwd_k:
                    yield from reach(fwd_k[li])
                yield from layer_work(label, FORWARD, forward_s)
            for label, backward_s, li in backward:
                if gated_backward and li in bwd_k:
                    yield from reach(bwd_k[li])
                if backward_s > 0:
                    yield from layer_work(label, BACKWARD, backward_s)
                extra_s = copy_in[k].get(li) if copy_in else None
                if extra_s:  # the wrapper's hooks, copy-in / in-place 1/p, before launches
                    yield from lanes.work(COMPUTE, copy_in_label, COPY, extra_s, compute_ref)
                released_here = ready_k.get(li)
                if released_here:
                    if hold:
                        yield from release(released_here)
                    else:
                        for i in released_here:
                            ready[i].succeed()
            if k in done and copy_out:  # wait for each bucket in launch order, copy it out
                for i, c in enumerate(collectives):
                    if c.micro_step == k:
                        if not finished[i].triggered:
                            yield finished[i]
                        if copy_out[i] > 0:
                            yield from lanes.work(COMPUTE, f"{c.label} copy-out", COPY,
                                                  copy_out[i], compute_ref)
            elif k in done:  # the step's end waits for its collectives (DDP's finalize_backward)
                yield done[k]
        if optimizer_s > 0:
            yield from lanes.work(COMPUTE, "optimizer", OPTIMIZER, optimizer_s, compute_ref)
        end_s[0] = env.now  # not env.now after the run: interrupted timeouts linger in the queue

    def comm():
        for i, c in enumerate(collectives):
            ev = ready[i]
            if not ev.triggered:
                yield ev
            if contended:
                yield from lanes.work(COMM, c.label, comm_kind[i], comm_s[i], comm_ref)
            else:
                start_s = env.now
                yield timeout(comm_s[i])
                if record:
                    spans.append((COMM, c.label, start_s, env.now, comm_kind[i]))
            ev = finished[i]
            if ev is not None:
                ev.succeed()
            if last_of[c.micro_step] == i:
                done[c.micro_step].succeed()

    end_s = [0.0]
    compute_ref: list = [None]
    comm_ref: list = [None]
    compute_ref[0] = env.process(compute())
    comm_ref[0] = env.process(comm())
    events = 0
    step = env.step
    try:
        while True:
            step()
            events += 1
    except simpy.core.EmptySchedule:
        pass
    if stats is not None:
        stats["events"] = stats.get("events", 0) + events
    return make_result(profile, link, plan, world_size, end_s[0], spans if record else ())


def _forward_segments(profile: ModelProfile, points: set[int]) -> list[tuple[int, float, str]]:
    """(first layer, seconds, label) of each stretch of forward between the layers where
    compute waits or releases something; one "forward" span when no layer but 0 does."""
    layers = profile.layers
    if not points - {0}:
        return [(0, profile.forward_s, "forward")]
    starts = sorted(points | {0})
    ends = starts[1:] + [len(layers)]
    return [(a, sum(layer.forward_s for layer in layers[a:b]), f"{layers[a].name} fwd")
            for a, b in zip(starts, ends)]


def optimizer_share_s(profile: ModelProfile, plan: Plan, world_size: int) -> float:
    """The optimizer's seconds on one rank: all of it, or 1/p when it updates a shard."""
    return profile.optimizer_s / (world_size if plan.shards_optimizer else 1)


def compute_only_s(profile: ModelProfile, micro_steps: int, optimizer_s: float | None = None
                   ) -> float:
    """Step seconds with no synchronisation at all: the floor every strategy is measured from
    (``optimizer_s``: a sharded plan's share, :func:`optimizer_share_s`)."""
    optimizer_s = profile.optimizer_s if optimizer_s is None else optimizer_s
    return micro_steps * (profile.forward_s + profile.backward_s) + optimizer_s


def make_result(profile: ModelProfile, link: Link, plan: Plan, world_size: int, step_s: float,
                spans=()) -> Result:
    # spans: (lane, label, start_s, end_s, kind) tuples or Spans
    """Wrap a predicted step time (engine or closed form) into a :class:`Result`."""
    strategy = plan.strategy
    compute_s = compute_only_s(profile, plan.micro_steps,
                               optimizer_share_s(profile, plan, world_size))
    return Result(model=profile.name, link=link.name, strategy=strategy.name,
                  bucket_mb=strategy.bucket_mb if strategy.granularity == "bucket" else None,
                  world_size=world_size, step_s=step_s,
                  exposed_comm_s=max(0.0, step_s - compute_s),
                  collectives=plan.calls, accum_steps=plan.micro_steps,
                  compute_s=compute_s, spans=tuple(Span(*s) for s in spans), spec=strategy)
