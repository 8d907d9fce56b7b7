"""The discrete-event engine: a compute lane and a communication lane on SimPy.

Picture one GPU and one NCCL stream (or one Gloo process group). The compute lane runs the
forward, then each layer's backward in reverse order, then the optimizer. When a layer's
backward ends, the collectives the plan marked ready after that layer may launch. The comm
lane runs collectives one at a time, in launch order, each for ``link.allreduce_s(bytes)``.
The optimizer (and the next micro-step) waits until every collective of the step is done::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy, plan
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
    >>> r = simulate(toy, Link("l", 0.0, 1.0), plan(toy, make_strategy("overlap")), world_size=2)
    >>> round(r.step_ms, 6)    # 2 ms fwd, bwd l1 ends 4 ms, l0 ends 6 ms, comm 1 ms each
    7.0

With contention (``link.compute_slowdown``/``comm_slowdown`` > 1, measured by calibrate) a lane
runs slower while the other is busy; progress is tracked as remaining full-speed work. With a
:class:`~simddp.host.Host`, the DDP implementation that runs the plan (``strategy.implementation``)
also pays its hooks, launches and gradient copies on the compute lane (:func:`host_copies`).
The engine never looks at a strategy's name: it only executes the plan.
"""
from __future__ import annotations

import simpy

from simddp.host import FREE, Host, HostCosts
from simddp.link import Link
from simddp.plans import Plan
from simddp.profile import ModelProfile
from simddp.result import (ALL_REDUCE, BACKWARD, COMM, COMPUTE, COPY, FORWARD, OPTIMIZER,
                           Result, Span)

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
    forward_s = profile.forward_s
    micro_steps = plan.micro_steps
    collectives = plan.collectives
    # Speed (bench/bench_sim.py): everything the two processes look up per event is prepared
    # once here — the backward schedule (label, seconds, layer), each collective's duration and
    # ready event — and without contention a lane is a bare timeout rather than a `yield from`
    # of _Lanes.work. Same events, same spans, same floats; ~25% fewer µs per event.
    backward = [(f"{layer.name} bwd", layer.backward_s, li)
                for li, layer in reversed(list(enumerate(profile.layers)))]
    blocking = not plan.strategy.overlap  # each collective waited for before the next
    comm_s = [link.allreduce_s(c.nbytes, world_size, blocking) for c in collectives]
    ready_after: list[dict[int, list[simpy.Event]]] = [{} for _ in range(micro_steps)]
    ready = []
    for c in collectives:
        ev = env.event()
        ready.append(ev)
        ready_after[c.micro_step].setdefault(c.ready_layer, []).append(ev)
    done = {k: env.event() for k in {c.micro_step for c in collectives}}
    last_of = {c.micro_step: i for i, c in enumerate(collectives)}
    costs = host.costs(plan.strategy.implementation) if host is not None else FREE
    copy_in, copy_out = host_copies(profile, costs, plan)
    copy_in_label = "hooks+copy-in" if costs.hook_s or costs.launch_s else "copy-in"
    coll_done = [env.event() for _ in collectives] if copy_out else []

    def compute():
        for k in range(micro_steps):
            ready_k = ready_after[k]
            if contended:
                yield from lanes.work(COMPUTE, "forward", FORWARD, forward_s, compute_ref)
            else:
                start_s = env.now
                yield timeout(forward_s)
                if record:
                    spans.append((COMPUTE, "forward", start_s, env.now, FORWARD))
            for label, backward_s, li in backward:
                if backward_s > 0:
                    if contended:
                        yield from lanes.work(COMPUTE, label, BACKWARD, backward_s, compute_ref)
                    else:
                        start_s = env.now
                        yield timeout(backward_s)
                        if record:
                            spans.append((COMPUTE, label, start_s, env.now, BACKWARD))
                extra_s = copy_in[k].get(li) if copy_in else None
                if extra_s:  # the wrapper's hooks, copy-in / in-place 1/p, before launches
                    yield from lanes.work(COMPUTE, copy_in_label, COPY, extra_s, compute_ref)
                evs = ready_k.get(li)
                if evs:
                    for ev in evs:
                        ev.succeed()
            if k in done and copy_out:  # wait for each bucket in launch order, copy it out
                for i, c in enumerate(collectives):
                    if c.micro_step == k:
                        if not coll_done[i].triggered:
                            yield coll_done[i]
                        if copy_out[i] > 0:
                            yield from lanes.work(COMPUTE, f"{c.label} copy-out", COPY,
                                                  copy_out[i], compute_ref)
            elif k in done:  # the step's end waits for its collectives (DDP's finalize_backward)
                yield done[k]
        if profile.optimizer_s > 0:
            yield from lanes.work(COMPUTE, "optimizer", OPTIMIZER, profile.optimizer_s,
                                  compute_ref)
        end_s[0] = env.now  # not env.now after the run: interrupted timeouts linger in the queue

    def comm():
        for i, c in enumerate(collectives):
            ev = ready[i]
            if not ev.triggered:
                yield ev
            if contended:
                yield from lanes.work(COMM, c.label, ALL_REDUCE, comm_s[i], comm_ref)
            else:
                start_s = env.now
                yield timeout(comm_s[i])
                if record:
                    spans.append((COMM, c.label, start_s, env.now, ALL_REDUCE))
            if coll_done:
                coll_done[i].succeed()
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


def host_copies(profile: ModelProfile, costs: HostCosts, plan: Plan
                ) -> tuple[list[dict[int, float]], list[float]]:
    """Host seconds of the DDP implementation on the compute lane: ([micro-step]{layer:
    copy-in and hook s}, [collective] copy-out s); ([], []) when ``costs`` are free.

    Copies at ``costs.copy_gbps`` (a lone tensor's in-place scaling at ``scale_gbps``), as
    realrun.DDP (flat_bucket.py) and torch's reducer do them: a bucket of several tensors
    copies each gradient in (scaled by 1/p) from its gradient hook when the plan overlaps,
    else at launch after the backward, and copies the average back out once its all-reduce is
    done; a lone tensor is scaled in place at launch and needs no copy-out. Each gradient's
    hook costs ``costs.hook_s`` where its copy-in is, and each collective ``costs.launch_s``
    at its launch.
    """
    if costs.free:
        return [], []
    rate = costs.copy_gbps * 1e9 if costs.copy_gbps else float("inf")
    scale_rate = (costs.scale_gbps or costs.copy_gbps or float("inf")) * 1e9
    hook_s, launch_s = costs.hook_s, costs.launch_s
    copy_in: list[dict[int, float]] = [{} for _ in range(plan.micro_steps)]
    copy_out = []
    for c in plan.collectives:
        per_layer = copy_in[c.micro_step]
        several = len(c.tensor_ids) > 1
        per_layer[c.ready_layer] = per_layer.get(c.ready_layer, 0.0) + launch_s
        for t in c.tensor_ids:
            layer = profile.tensor_layer[t] if (several and plan.strategy.overlap) else c.ready_layer
            per_layer[layer] = (per_layer.get(layer, 0.0) + hook_s
                                + profile.tensor_bytes[t] / (rate if several else scale_rate))
        copy_out.append(c.nbytes / rate if several else 0.0)
    return copy_in, copy_out


def compute_only_s(profile: ModelProfile, micro_steps: int) -> float:
    """Step seconds with no synchronisation at all: the floor every strategy is measured from."""
    return micro_steps * (profile.forward_s + profile.backward_s) + profile.optimizer_s


def make_result(profile: ModelProfile, link: Link, plan: Plan, world_size: int, step_s: float,
                spans=()) -> Result:
    # spans: (lane, label, start_s, end_s, kind) tuples or Spans
    """Wrap a predicted step time (engine or closed form) into a :class:`Result`."""
    strategy = plan.strategy
    compute_s = compute_only_s(profile, plan.micro_steps)
    return Result(model=profile.name, link=link.name, strategy=strategy.name,
                  bucket_mb=strategy.bucket_mb if strategy.granularity == "bucket" else None,
                  world_size=world_size, step_s=step_s,
                  exposed_comm_s=max(0.0, step_s - compute_s),
                  collectives=len(plan.collectives), accum_steps=plan.micro_steps,
                  compute_s=compute_s, spans=tuple(Span(*s) for s in spans))
