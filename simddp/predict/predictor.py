"""A sweep's predictions, each engine run done once: plans, scenarios and rows shared.

Each row wants its step at the point and in each input scenario; most of that repeats:

- the scenarios' inputs are the sweep's, built once
  (:class:`~simddp.predict.scenarios.ScenarioSet`), and scenarios with equal inputs are one run;
- rows whose plans the engine cannot tell apart share their runs (:func:`engine_key`);
- a plan that never overlaps compute with communication is moved by its scaled parts, with
  no run at all (:func:`runs_alone`).

The toy: 2 ms forward, l1's backward ends at 4 ms, its 1 ms all-reduce runs 1.5 ms under
contention while l0's backward does 1 ms of its 2, which ends at 6.5 ms; l0's all-reduce 7.5::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy
    >>> from simddp.inputs.contention import Contention
    >>> from simddp.inputs.resolved import Inputs
    >>> from simddp.predict.scenarios import scenario_set
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002)
    ...                                 for i in range(2)), compute_spread=(0.9, 1.2))
    >>> point = Inputs(toy, Link("l", 0.0, 1.0, time_spread=(1.0, 1.2)), 2,
    ...                Contention(1.5, 1.5, source="link"))
    >>> r = Predictor(scenario_set(point, ranges=True)).predict(make_strategy("overlap"))
    >>> round(r.step_s * 1e3, 3), {name: round(s * 1e3, 3) for name, s in r.scenarios_s.items()}
    (7.5, {'low': 6.9, 'high': 9.0, 'comm_bound': 7.2, 'compute_bound': 8.7})

``Predictor.work`` counts engine runs and inputs built, for tests that cannot time.
"""
from __future__ import annotations

from dataclasses import fields, replace
from operator import attrgetter

from simddp.inputs.host import FREE, HostCosts, after_comm_factor
from simddp.planning.plans import Collective, Plan, plan
from simddp.planning.sharding import AFTER_BACKWARD
from simddp.planning.strategy import Strategy
from simddp.predict.scenarios import ScenarioSet
from simddp.result import Result
from simddp.sim.costs import PlanCosts, plan_costs, shard_ranks_of
from simddp.sim.engine import compute_only_s, make_result, result_of, simulate
from simddp.sim.schedule import optimizer_share_s

# Strategy fields the engine never reads: they act through the plan's collectives or its
# HostCosts, which the key holds, or are just the name.
_NOT_ENGINE = frozenset({"name", "granularity", "bucket_bytes", "first_bucket_bytes",
                         "implementation"})


# A collective's fields as a plain tuple, which compares in C; not its label, which only
# names spans.
_COLLECTIVE_FIELDS = attrgetter(*(f.name for f in fields(Collective) if f.name != "label"))


def engine_key(p: Plan, costs: HostCosts = FREE) -> tuple:
    """Everything of a plan and its host costs the engine reads for a step's time: equal
    keys, equal steps on equal inputs (not equal spans: labels differ)."""
    s = p.strategy
    rest = tuple(getattr(s, f.name) for f in fields(s) if f.name not in _NOT_ENGINE)
    return costs, rest, tuple(map(_COLLECTIVE_FIELDS, p.collectives)), p.micro_steps, p.units


def runs_alone(p: Plan, copy_out_s: list[float]) -> bool:
    """Whether compute and communication never run at the same time in ``p``, so its step
    is the sum of its parts: no sharding, every collective released after the micro-step's
    backward and waited for at its end, and no copy-out but after its last."""
    if p.units:
        return False
    last = {c.micro_step: i for i, c in enumerate(p.collectives)}
    for i, c in enumerate(p.collectives):
        if c.ready_at != AFTER_BACKWARD or c.gates is not None or c.ready_layer != 0:
            return False
        if copy_out_s and copy_out_s[i] > 0 and last[c.micro_step] != i:
            return False
    return True


def micro_step_strategies(strategy: Strategy) -> list[Strategy | None]:
    """Each micro-step of ``strategy``'s step as a strategy of one micro-step, or None for one
    that only computes. A micro-step ends only when its collectives are done (DDP's
    finalize_backward), so a step is the sum of its micro-steps run alone, plus the optimizer::

        >>> from simddp import make_strategy
        >>> [s and s.accum_steps for s in micro_step_strategies(make_strategy("no_sync", 25, 3))]
        [None, None, 1]
    """
    one = replace(strategy, accum_steps=1, sync_last_only=False)
    last = strategy.accum_steps - 1
    return [one if not strategy.sync_last_only or k == last else None
            for k in range(strategy.accum_steps)]


class Predictor:
    """Predicts configurations on one :class:`~simddp.predict.scenarios.ScenarioSet`: the
    point, and with ranges each input scenario (``Result.scenarios_s``). ``record`` keeps the
    point's spans; ``stats['events']`` counts the SimPy events of the runs done."""

    def __init__(self, scenario_set: ScenarioSet, *, record: bool = False,
                 stats: dict | None = None) -> None:
        self.set, self.record, self.stats = scenario_set, record, stats
        self.point_key = scenario_set.point_key
        self.inputs = scenario_set.inputs
        # Engine key -> a small id: a lookup by the key itself compares every collective.
        self.ids: dict[tuple, int] = {}
        self.steps: dict[tuple[int, tuple], float] = {}   # (id, scenario key) -> step s
        self.costs: dict[tuple[int, tuple], PlanCosts] = {}   # (id, scenario key) -> costs
        self.alone: dict[int, bool] = {}                  # id -> runs_alone()
        self.parts: dict[int, list[tuple[int, Plan]]] = {}  # id -> its micro-steps' (id, plan)
        self.plans: dict[tuple, Plan] = {}                # strategy but its name -> plan
        self.work = {"engine_runs": 0, "plans": 0, "scenario_inputs": len(self.inputs) - 1}

    def predict(self, strategy: Strategy) -> Result:
        """``strategy``'s Result: the point, and with ranges its scenarios' steps."""
        point = self.set.point
        costs = point.costs(strategy.implementation)
        if strategy.accum_steps > 1 and not self.record:   # its micro-steps, each run alone
            parts = self._parts_of(strategy)
            pid = self.ids.setdefault(("micro-steps", *(i for i, _ in parts)), len(self.ids))
            self.parts.setdefault(pid, parts)
            result = result_of(point, strategy, len(parts), sum(q.calls for _, q in parts),
                               self.step_s(pid, None, self.point_key))
            p = None
        else:
            p = self._plan(strategy)
            pid = self._id(p, costs)
            if self.record:   # the whole timeline: one run of the whole plan
                result = self._run(pid, p, self.point_key, record=True)
                self.steps.setdefault((pid, self.point_key), result.step_s)
            else:
                result = make_result(point, p, self.step_s(pid, p, self.point_key))
        if not self.set.names:
            return result
        return replace(result, scenarios_s={name: self.step_s(pid, p, key)
                                            for name, key in self.set.names.items()})

    def step_s(self, pid: int, p: Plan | None, scenario_key: tuple) -> float:
        """Step seconds of ``p`` (None for a step registered as its micro-steps) in a
        scenario, from the runs already done where they tell, else from one engine run."""
        step_s = self.steps.get((pid, scenario_key))
        if step_s is not None:
            return step_s
        if p is not None and p.micro_steps > 1 and pid not in self.parts:
            self.parts[pid] = self._parts_of(p.strategy)
        if pid in self.parts:
            step_s = self._micro_steps_s(self.parts[pid], scenario_key)
        elif scenario_key != self.point_key and self._runs_alone(pid, p):
            step_s = (self.step_s(pid, p, self.point_key)
                      + self._parts_moved_s(pid, p, scenario_key))
        else:
            step_s = self._run(pid, p, scenario_key).step_s
        self.steps[pid, scenario_key] = step_s
        return step_s

    def _plan(self, strategy: Strategy) -> Plan:
        """``strategy``'s plan; its collectives shared with a strategy that differs only in
        name (sync_each's micro-step is ddp's plan)."""
        key = tuple(getattr(strategy, f.name) for f in fields(strategy) if f.name != "name")
        known = self.plans.get(key)
        if known is None:
            self.work["plans"] += 1
            known = self.plans[key] = plan(self.set.point.profile, strategy)
            return known
        return Plan(strategy, known.collectives, known.micro_steps, known.units)

    def _parts_of(self, strategy: Strategy) -> list[tuple[int, Plan]]:
        """(id, plan) of each micro-step of ``strategy`` (:func:`micro_step_strategies`); a
        compute-only one is an empty plan."""
        costs = self.set.point.costs(strategy.implementation)
        plans = [None if s is None else self._plan(s) for s in micro_step_strategies(strategy)]
        one = next(q for q in plans if q is not None)
        plans = [q or Plan(one.strategy, (), 1, one.units) for q in plans]
        return [(self._id(q, costs), q) for q in plans]

    def _micro_steps_s(self, parts: list[tuple[int, Plan]], scenario_key: tuple) -> float:
        """A step of several micro-steps: each run alone, plus the optimizer once, as the
        engine charges it in the whole step (its compute after communication included)."""
        inputs = self.inputs[scenario_key]
        profile = inputs.profile
        synced = next((q for _, q in parts if q.collectives), parts[0][1])
        whole_factor = after_comm_factor(inputs.host, synced)

        def optimizer_s(q: Plan, factor: float) -> float:   # as the engine charges it in q
            return optimizer_share_s(profile, q, shard_ranks_of(q.strategy, inputs)) * factor

        def part_s(part_id: int, part: Plan) -> float:
            # a compute-only micro-step of a plan that communicates computes as its plan
            factor = after_comm_factor(inputs.host, part)
            s = self.step_s(part_id, part, scenario_key) - optimizer_s(part, factor)
            return s if part.collectives else s * whole_factor
        return sum(part_s(*part) for part in parts) + optimizer_s(synced, whole_factor)

    def plan_costs(self, pid: int, p: Plan, scenario_key: tuple) -> PlanCosts:
        """``p``'s costs in a scenario (simddp/sim/costs.py), worked out once."""
        pc = self.costs.get((pid, scenario_key))
        if pc is None:
            pc = self.costs[pid, scenario_key] = plan_costs(p, self.inputs[scenario_key])
        return pc

    def _id(self, p: Plan, costs: HostCosts) -> int:
        return self.ids.setdefault(engine_key(p, costs), len(self.ids))

    def _runs_alone(self, pid: int, p: Plan) -> bool:
        if pid not in self.alone:
            self.alone[pid] = runs_alone(p, self.plan_costs(pid, p, self.point_key).copy_out)
        return self.alone[pid]

    def _run(self, pid: int, p: Plan, scenario_key: tuple, record: bool = False) -> Result:
        self.work["engine_runs"] += 1
        return simulate(p, self.inputs[scenario_key], record=record, stats=self.stats,
                        costs=self.plan_costs(pid, p, scenario_key))

    def _parts_moved_s(self, pid: int, p: Plan, scenario_key: tuple) -> float:
        """How far a scenario moves a plan that runs its lanes one after the other: its
        compute and comm seconds there minus at the point (host work held as measured)."""
        def parts_s(key: tuple) -> float:
            inputs, pc = self.inputs[key], self.plan_costs(pid, p, key)
            compute_s = compute_only_s(inputs.profile, p.micro_steps, optimizer_share_s(
                inputs.profile, p, shard_ranks_of(p.strategy, inputs)))
            return compute_s * pc.compute_factor + sum(pc.comm_s)

        return parts_s(scenario_key) - parts_s(self.point_key)
