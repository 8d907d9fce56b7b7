"""A sweep's predictions, each engine run done once: plans, scenarios and rows shared.

Picture the xl sweep: 83 rows, each wanting its step at the point and in four to six input
scenarios (simddp/predict/scenarios.py). Done row by row that was 415 engine runs and a rebuilt
profile per scenario per row (issue 21: 5.8 s). Most of it repeats itself:

- the scenarios' inputs (a profile scaled by the compute spread, a link by the all-reduce
  spread, the contention) belong to the sweep, not to a row: built once here;
- scenarios with equal inputs are one run (a preset has no measured spread: ``low`` and
  ``compute_bound`` are the point, ``high`` and ``comm_bound`` one contended run);
- rows whose plans the engine cannot tell apart (ddp at 1 MB is bucketed at 1 MB; ten big
  tensors fill every cap from 1 to 20 MB alike) share their runs (:func:`engine_key`);
- a plan that never overlaps compute with communication (naive, flat) steps for the sum of
  its parts, so each scenario moves it by its scaled compute and all-reduce seconds, with
  no run at all (:func:`runs_alone`).

The toy below: 2 ms forward, l1's backward ends at 4 ms, its 1 ms all-reduce runs 1.5 ms
under contention while l0's backward does 1 ms of its 2, which ends at 6.5 ms; l0's
all-reduce 7.5::

    >>> from simddp import Layer, Link, ModelProfile, make_strategy
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002)
    ...                                 for i in range(2)), compute_spread=(0.9, 1.2))
    >>> link = Link("l", 0.0, 1.0, compute_slowdown=1.5, comm_slowdown=1.5,
    ...             time_spread=(1.0, 1.2))
    >>> r = Predictor(toy, link, 2, ranges=True).predict(make_strategy("overlap"))
    >>> round(r.step_s * 1e3, 3), {name: round(s * 1e3, 3) for name, s in r.scenarios_s.items()}
    (7.5, {'low': 6.9, 'high': 9.0, 'comm_bound': 7.2, 'compute_bound': 8.7})

``Predictor.work`` counts what was done (engine runs, scenario inputs built), so a test can
hold the count where a timing would be noise (tests/simddp/test_predictor.py).
"""
from __future__ import annotations

from dataclasses import fields, replace
from operator import attrgetter

from simddp.inputs.contention import with_contention
from simddp.sim.engine import compute_only_s, make_result, simulate
from simddp.sim.comm import comm_seconds
from simddp.inputs.host import FREE, Host, HostCosts, after_comm_factor
from simddp.sim.overheads import host_copies
from simddp.inputs.link import Link
from simddp.planning.plans import Collective, Plan, plan
from simddp.inputs.profile import ModelProfile
from simddp.predict.scenarios import build_inputs, point_scenario, scenarios
from simddp.result import Result
from simddp.sim.schedule import optimizer_share_s
from simddp.planning.sharding import AFTER_BACKWARD
from simddp.planning.strategy import Strategy
from simddp.inputs.topology import Topology

# Strategy fields the engine never reads: the name (docs/DESIGN.md: the engine never branches
# on it), the granularity and bucket caps (they act through the plan's collectives, which the
# key holds), the implementation (it acts through its HostCosts, which the key holds).
_NOT_ENGINE = frozenset({"name", "granularity", "bucket_bytes", "first_bucket_bytes",
                         "implementation"})


# A collective's fields as a plain tuple: equal tuples compare in C, where equal Collectives
# compare field by field in Python (1.2 µs each: 0.2 s of the xl sweep's lookups). Not its
# label: it names spans, and no step depends on it (overlap's one all-reduce per tensor is
# bucketed's at 1 MB once names are set aside: two runs fewer on a 10k-tensor sweep).
_COLLECTIVE_FIELDS = attrgetter(*(f.name for f in fields(Collective) if f.name != "label"))


def engine_key(p: Plan, costs: HostCosts = FREE) -> tuple:
    """Everything of a plan and its host costs the engine reads for a step's time: two
    plans with equal keys have equal steps on equal inputs (not equal spans: labels differ).
    ~0.3 ms for xl's largest plan (1352 collectives), a tenth of building it."""
    s = p.strategy
    rest = tuple(getattr(s, f.name) for f in fields(s) if f.name not in _NOT_ENGINE)
    return costs, rest, tuple(map(_COLLECTIVE_FIELDS, p.collectives)), p.micro_steps, p.units


def runs_alone(p: Plan, copy_out_s: list[float]) -> bool:
    """Whether compute and communication never run at the same time in ``p``, so its step
    is the sum of its parts and contention cannot touch it: no sharding, every collective
    released after its micro-step's last backward (layer 0) and waited for at the
    micro-step's end, and no host work once one is done except after the micro-step's last
    (a copy-out would run beside the next collective). ``copy_out_s``: host_copies()'s."""
    if p.units:
        return False
    last = {c.micro_step: i for i, c in enumerate(p.collectives)}
    for i, c in enumerate(p.collectives):
        if c.ready_at != AFTER_BACKWARD or c.gates is not None or c.ready_layer != 0:
            return False
        if copy_out_s and copy_out_s[i] > 0 and last[c.micro_step] != i:
            return False
    return True


def micro_step_plans(p: Plan) -> list[Plan]:
    """Each micro-step of ``p`` as a plan of its own (one micro-step, its collectives
    renumbered from 0). The engine ends a micro-step only when its collectives are done
    (DDP's finalize_backward), so the next starts on two idle lanes and a step is the sum
    of its micro-steps run alone, plus the optimizer: sync_each's four are ddp's one, and
    no_sync's first three are compute only."""
    one = replace(p.strategy, accum_steps=1, sync_last_only=False)
    return [Plan(one, tuple(replace(c, micro_step=0, launch_index=j)
                            for j, c in enumerate(p.per_micro_step(k))), 1, p.units)
            for k in range(p.micro_steps)]


class Predictor:
    """Predicts configurations of one profile, link, world size and host; with ``ranges``
    also each input scenario (``Result.scenarios_s``). ``record`` keeps the point's spans;
    ``stats['events']`` counts the SimPy events of the runs done; ``topology``: a two-level
    cluster, ``link`` the link between its nodes (as :func:`simddp.sim.engine.simulate`);
    ``device``: what the compute runs on, which sets the contention when none was measured
    (:func:`simddp.inputs.contention.default_contention`: the published one on a GPU)."""

    def __init__(self, profile: ModelProfile, link: Link, world_size: int,
                 host: Host | None = None, *, ranges: bool = False, record: bool = False,
                 stats: dict | None = None, topology: Topology | None = None,
                 device: str | None = None) -> None:
        self.profile, self.link, self.world_size, self.host = profile, link, world_size, host
        self.record, self.stats, self.topology = record, stats, topology
        self.scenarios = scenarios(profile, link, host, device) if ranges else {}
        point = point_scenario(link, host, device)
        self.point_key = point.key
        self.comm_factors = {scn.key: scn.comm_factor for scn in self.scenarios.values()}
        # Scenario key -> (profile, link, host): built once per sweep, shared by every row.
        # The point's link or host carries its contention where the engine reads it (the
        # link and host as given, unless a default applies).
        self.inputs = {self.point_key: (profile, *with_contention(link, host,
                                                                  point.contention)),
                       **build_inputs(profile, link, host, self.scenarios.values())}
        # Engine key -> a small id: a lookup with the key itself compares every collective
        # of a hit (209k Collective.__eq__ calls on the xl sweep, 0.3 s), so it is done once.
        self.ids: dict[tuple, int] = {}
        self.steps: dict[tuple[int, tuple], float] = {}   # (id, scenario key) -> step s
        self.alone: dict[int, bool] = {}                  # id -> runs_alone()
        self.parts: dict[int, list[tuple[int, Plan]]] = {}  # id -> its micro-steps' (id, plan)
        self.work = {"engine_runs": 0, "plans": 0, "scenario_inputs": len(self.inputs) - 1}

    def costs(self, strategy: Strategy) -> HostCosts:
        return self.host.costs(strategy.implementation) if self.host is not None else FREE

    def predict(self, strategy: Strategy) -> Result:
        """``strategy``'s Result: the point, and with ranges its scenarios' steps."""
        p = plan(self.profile, strategy)
        self.work["plans"] += 1
        costs = self.costs(strategy)
        pid = self._id(p, costs)
        if self.record:   # the whole timeline: one run of the whole plan
            result = self._run(p, self.point_key, record=True)
            self.steps.setdefault((pid, self.point_key), result.step_s)
        else:
            result = make_result(self.profile, self.link, p, self.world_size,
                                 self.step_s(pid, p, costs, self.point_key))
        if not self.scenarios:
            return result
        return replace(result, scenarios_s={name: self.step_s(pid, p, costs, scn.key)
                                            for name, scn in self.scenarios.items()})

    def step_s(self, pid: int, p: Plan, costs: HostCosts, scenario_key: tuple) -> float:
        """Step seconds of ``p`` (id ``pid``) under ``costs`` in a scenario, from the runs
        already done where they tell (see the module text), else from one engine run."""
        step_s = self.steps.get((pid, scenario_key))
        if step_s is not None:
            return step_s
        if p.micro_steps > 1:
            if pid not in self.parts:
                self.parts[pid] = [(self._id(part, costs), part) for part in micro_step_plans(p)]
            profile, _, host = self.inputs[scenario_key]

            def optimizer_s(q: Plan) -> float:   # as the engine charges it in q
                return optimizer_share_s(profile, q, self.world_size) * after_comm_factor(host, q)

            def part_s(part_id: int, part: Plan) -> float:
                # a compute-only micro-step of a plan that communicates computes as its plan
                s = self.step_s(part_id, part, costs, scenario_key) - optimizer_s(part)
                return s if part.collectives else s * after_comm_factor(host, p)
            step_s = sum(part_s(*part) for part in self.parts[pid]) + optimizer_s(p)
        elif scenario_key != self.point_key and self._runs_alone(pid, p, costs):
            step_s = (self.step_s(pid, p, costs, self.point_key)
                      + self._parts_moved_s(p, scenario_key, costs))
        else:
            step_s = self._run(p, scenario_key).step_s
        self.steps[pid, scenario_key] = step_s
        return step_s

    def _id(self, p: Plan, costs: HostCosts) -> int:
        return self.ids.setdefault(engine_key(p, costs), len(self.ids))

    def _runs_alone(self, pid: int, p: Plan, costs: HostCosts) -> bool:
        if pid not in self.alone:
            self.alone[pid] = runs_alone(p, host_copies(self.profile, costs, p,
                                                        self.world_size)[1])
        return self.alone[pid]

    def _run(self, p: Plan, scenario_key: tuple, record: bool = False) -> Result:
        profile, link, host = self.inputs[scenario_key]
        self.work["engine_runs"] += 1
        return simulate(profile, link, p, self.world_size, host=host, record=record,
                        stats=self.stats, topology=self._topology(scenario_key))

    def _topology(self, scenario_key: tuple) -> Topology | None:
        """The cluster a scenario runs on: a link file's per-level inter link scales with the
        scenario's link between nodes (its comm factor)."""
        if self.topology is None:
            return None
        return self.topology.time_scaled(self.comm_factors.get(scenario_key, 1.0))

    def _parts_moved_s(self, p: Plan, scenario_key: tuple, costs: HostCosts) -> float:
        """How far a scenario moves a plan that runs its lanes one after the other: its
        compute seconds and its comm lane's seconds there minus at the point (host work is
        held at its measurement; contention never applies, nothing overlaps)."""
        def parts_s(key: tuple) -> float:
            profile, link, host = self.inputs[key]
            compute_s = compute_only_s(profile, p.micro_steps,
                                       optimizer_share_s(profile, p, self.world_size))
            return (compute_s * after_comm_factor(host, p)
                    + sum(comm_seconds(p, link, self.world_size, costs, self._topology(key))))

        return parts_s(scenario_key) - parts_s(self.point_key)


def scenario_steps(profile: ModelProfile, link: Link, world_size: int, strategy: Strategy,
                   host: Host | None = None, device: str | None = None) -> dict[str, float]:
    """Step seconds of ``strategy`` in each scenario of simddp/predict/scenarios.py (the point is the
    plain simulation)."""
    return Predictor(profile, link, world_size, host, ranges=True,
                     device=device).predict(strategy).scenarios_s
