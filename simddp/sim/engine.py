"""The discrete-event engine: a compute lane and a communication lane on SimPy.

The compute lane runs the forward, each layer's backward in reverse, then the optimizer; a
collective may launch once its layer's backward ends, and the comm lane runs them one at a
time in launch order. The optimizer waits for every collective of the step::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan
    >>> from simddp.inputs.resolved import Inputs
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
    >>> r = simulate(plan(toy, make_strategy("overlap")), Inputs(toy, Link("l", 0.0, 1.0), 2))
    >>> round(r.step_ms, 6)    # 2 ms fwd, bwd l1 ends 4 ms, l0 ends 6 ms, comm 1 ms each
    7.0

Everything a strategy, a comm hook, sharding or the host changes is in the
:class:`~simddp.sim.schedule.Schedule` and :class:`~simddp.sim.costs.PlanCosts` built before
the first event; this module only walks them and never looks at a strategy's name
(docs/DESIGN.md, "The engine, piece by piece").
"""
from __future__ import annotations

import simpy

from typing import Any

from simddp.errors import InputError
from simddp.inputs.profile import ModelProfile
from simddp.inputs.resolved import Inputs
from simddp.kinds import Lane, Phase, SpanKind
from simddp.planning.plans import Plan
from simddp.planning.strategy import Strategy
from simddp.result import Result, Span
from simddp.sim.costs import PlanCosts, plan_costs, shard_ranks_of
from simddp.sim.lanes import Lanes
from simddp.sim.schedule import Schedule, build_schedule, optimizer_share_s

__all__ = ["compute_only_s", "make_result", "simulate"]

COMPUTE, COMM = Lane.COMPUTE, Lane.COMM
FORWARD, BACKWARD, COPY = SpanKind.FORWARD, SpanKind.BACKWARD, SpanKind.COPY


def simulate(plan: Plan, inputs: Inputs, *, record: bool = True, stats: dict | None = None,
             costs: PlanCosts | None = None) -> Result:
    """Run one optimizer step of ``plan`` on ``inputs``; ``stats['events']`` gets the events
    processed; ``costs``: the plan's costs on these inputs, if already worked out."""
    topology = inputs.topology
    if topology is not None and topology.world_size != inputs.world_size:
        raise InputError(f"world size {inputs.world_size} is not {topology.nodes} nodes × "
                         f"{topology.gpus_per_node} GPUs per node")
    pc = plan_costs(plan, inputs) if costs is None else costs
    schedule = build_schedule(inputs.profile, plan, shard_ranks_of(plan.strategy, inputs), pc)
    lane = pc.lane
    env = simpy.Environment()
    step = _Step(env, schedule, Lanes(env, lane.contention), record, lane.slowdowns,
                 None if lane.bucket is None else lane.bucket.fresh(), lane.wake_s)
    step.start()
    events = 0
    advance = env.step
    try:
        while True:
            advance()
            events += 1
    except simpy.core.EmptySchedule:
        pass
    if stats is not None:
        stats["events"] = stats.get("events", 0) + events
    return make_result(inputs, plan, step.end_s, step.lanes.spans if record else ())


class _Step:
    """One optimizer step on SimPy: the events the two processes meet at, and the processes.
    For speed, each process keeps per-event lookups in locals, and without contention a lane
    is a bare timeout: the same events, spans and floats."""

    def __init__(self, env: simpy.Environment, schedule: Schedule, lanes: Lanes,
                 record: bool, comm_slowdowns: list[float] | None = None,
                 bucket: Any = None, wake_s: float = 0.0) -> None:
        self.env, self.s, self.lanes, self.record = env, schedule, lanes, record
        self.comm_slowdowns = comm_slowdowns     # per collective (a host's own), or None
        self.bucket = bucket                     # a shaped link's token bucket, or None
        self.wake_s = wake_s                     # the first collective after compute waits
        self.computed = False                    # compute ran in this micro-step (wake)
        n = len(schedule.collectives)
        self.ready = [env.event() for _ in range(n)]          # launched by the compute lane
        self.finished = [env.event() if w else None for w in schedule.waited]
        self.done = {k: env.event() for k in schedule.last_of}   # a micro-step's last is done
        self.released = [False] * n
        self.unreleased = 0      # the first collective not released yet (hold)
        self.end_s = 0.0
        self.compute_ref: list = [None]
        self.comm_ref: list = [None]

    def start(self) -> None:
        self.compute_ref[0] = self.env.process(self.compute())
        self.comm_ref[0] = self.env.process(self.comm())

    def compute(self):
        """The training thread: forward, backward with its releases, waits, optimizer."""
        s, ready, hold = self.s, self.ready, self.s.hold
        fwd_at, bwd_at = s.at_start[Phase.FORWARD], s.at_start[Phase.BACKWARD]
        gated_backward = s.gated_backward
        for k in range(s.micro_steps):
            after_k, fwd_k, bwd_k = s.after_backward[k], fwd_at[k], bwd_at[k]
            self.computed = False
            for li, forward_s, label in s.forward:
                if li in fwd_k:
                    yield from self.reach(fwd_k[li])
                yield from self.layer_work(label, FORWARD, forward_s)
            for label, backward_s, li in s.backward:
                if gated_backward and li in bwd_k:
                    yield from self.reach(bwd_k[li])
                if backward_s > 0:
                    yield from self.layer_work(label, BACKWARD, backward_s)
                extra_s = s.copy_in[k].get(li) if s.copy_in else None
                if extra_s:  # the wrapper's hooks, copy-in / in-place 1/p, before launches
                    yield from self.host_work(s.copy_in_label, extra_s)
                released_here = after_k.get(li)
                if released_here:
                    if hold:
                        yield from self.release(released_here)
                    else:
                        for i in released_here:
                            ready[i].succeed()
            yield from self.end_micro_step(k)
        if s.optimizer_s > 0:
            yield from self.lanes.work(COMPUTE, "optimizer", SpanKind.OPTIMIZER, s.optimizer_s,
                                       self.compute_ref)
        self.end_s = self.env.now  # not env.now after the run: interrupted timeouts linger

    def end_micro_step(self, k: int):
        """The micro-step's end waits for its collectives (DDP's finalize_backward), and
        with host copies copies each bucket out, in launch order."""
        if k not in self.done:
            return
        if not self.s.copy_out:
            yield self.done[k]
            return
        for i, c in enumerate(self.s.collectives):
            if c.micro_step == k:
                if not self.finished[i].triggered:
                    yield self.finished[i]
                if self.s.copy_out[i] > 0:
                    yield from self.host_work(f"{c.label} copy-out", self.s.copy_out[i])

    def comm(self):
        """The collective stream: each collective in launch order, once released."""
        env, s, lanes, record = self.env, self.s, self.lanes, self.record
        timeout, contended, spans = env.timeout, lanes.contended, lanes.spans
        slowdowns, bucket, wake_s = self.comm_slowdowns, self.bucket, self.wake_s
        woken = set()   # micro-steps whose first collective started
        for i, c in enumerate(s.collectives):
            ev = self.ready[i]
            if not ev.triggered:
                yield ev
            start_s = env.now
            if wake_s and c.micro_step not in woken:
                woken.add(c.micro_step)
                if self.computed:   # Gloo's threads asleep since the last collective
                    yield timeout(wake_s)
            work_s = s.comm_s[i] if bucket is None else s.comm_s[i] - bucket.unshaped_s(i, env.now)
            if contended:
                yield from lanes.work(COMM, c.label, s.comm_kinds[i], work_s, self.comm_ref,
                                      slowdowns[i] if slowdowns else None, start_s)
            else:
                yield timeout(work_s)
                if record:
                    spans.append((COMM, c.label, start_s, env.now, s.comm_kinds[i]))
            if bucket is not None:
                bucket.done(env.now)
            ev = self.finished[i]
            if ev is not None:
                ev.succeed()
            if s.last_of[c.micro_step] == i:
                self.done[c.micro_step].succeed()

    def release(self, indices: list[int]):
        """Launch these collectives; with ``hold``, wait for each to be done (those whose
        predecessors on the comm lane are all launched: the rest later)."""
        for i in indices:
            self.ready[i].succeed()
            self.released[i] = True
        if self.s.hold:
            n = len(self.released)
            while self.unreleased < n and self.released[self.unreleased]:
                self.unreleased += 1
            for i in indices:
                if i < self.unreleased and not self.finished[i].triggered:
                    yield self.finished[i]

    def reach(self, point: tuple[list[int], list[int]]):
        """Release what is issued here (after its host work at issue), then wait for what
        this compute needs (and copy the gathered parameters out)."""
        releases, needs = point
        shard_s, collectives = self.s.shard_s, self.s.collectives
        for i in releases:
            if shard_s and shard_s[i][0] > 0:
                yield from self.host_work(f"{collectives[i].label} issue", shard_s[i][0])
            yield from self.release([i])
        for i in needs:
            if not self.finished[i].triggered:
                yield self.finished[i]
            if shard_s and shard_s[i][1] > 0:
                yield from self.host_work(f"{collectives[i].label} copy-out", shard_s[i][1])

    def host_work(self, label: str, seconds: float):
        """The DDP implementation's copies, hooks and casts on the compute lane."""
        yield from self.lanes.work(COMPUTE, label, COPY, seconds, self.compute_ref)

    def layer_work(self, label: str, kind: str, seconds: float):
        """One layer's forward or backward on the compute lane: through the contention
        model when collectives can overlap, else a plain timeout (the cheap path)."""
        self.computed = True
        if self.lanes.contended:
            yield from self.lanes.work(COMPUTE, label, kind, seconds, self.compute_ref)
            return
        start_s = self.env.now
        yield self.env.timeout(seconds)
        if self.record:
            self.lanes.spans.append((COMPUTE, label, start_s, self.env.now, kind))


def compute_only_s(profile: ModelProfile, micro_steps: int, optimizer_s: float | None = None
                   ) -> float:
    """Step seconds with no synchronisation at all: the floor every strategy is measured from
    (``optimizer_s``: a sharded plan's share, :func:`optimizer_share_s`)."""
    optimizer_s = profile.optimizer_s if optimizer_s is None else optimizer_s
    return micro_steps * (profile.forward_s + profile.backward_s) + optimizer_s


def make_result(inputs: Inputs, plan: Plan, step_s: float, spans=()) -> Result:
    """Wrap a predicted step time (engine or closed form) into a :class:`Result`; ``spans``:
    (lane, label, start_s, end_s, kind) tuples or Spans."""
    return result_of(inputs, plan.strategy, plan.micro_steps, plan.calls, step_s, spans)


def result_of(inputs: Inputs, strategy: Strategy, micro_steps: int, calls: int,
              step_s: float, spans=()) -> Result:
    """:func:`make_result` for a step of ``micro_steps`` and ``calls`` collective calls,
    without its plan (the predictor sums one of several micro-steps from their own)."""
    profile, world_size = inputs.profile, inputs.world_size
    compute_s = compute_only_s(profile, micro_steps, optimizer_share_s(
        profile, strategy, shard_ranks_of(strategy, inputs)))
    return Result(model=profile.name, link=inputs.link.name, strategy=strategy.name,
                  bucket_mb=strategy.bucket_mb if strategy.granularity == "bucket" else None,
                  world_size=world_size, step_s=step_s,
                  exposed_comm_s=max(0.0, step_s - compute_s),
                  collectives=calls, accum_steps=micro_steps,
                  compute_s=compute_s, spans=tuple(Span(*s) for s in spans), spec=strategy)
