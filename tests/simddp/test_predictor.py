"""A sweep does each engine run once (simddp/predict/predictor.py): the work is counted, not timed,
and every shortcut gives the step a run of its own would (issue 21)."""
import dataclasses
import math

import pytest
import simpy

from simddp import (Layer, Link, ModelProfile, build_profile, get_link, load_host,
                    load_link_file, load_profile, make_strategy, parse_model, plan, resolve,
                    simulate, sweep)
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.host import Host, HostCosts
from simddp.inputs.link_file import LinkFile
from simddp.predict.predictor import Predictor, engine_key, micro_step_strategies, runs_alone
from simddp.inputs.profile import Layer as ProfileLayer
from simddp.predict.scenarios import scenario_set, scenarios
from simddp.inputs.topology import Topology
from tests.simddp.golden import MEASURED

XL_STRATEGIES = ["naive", "flat", "overlap", "bucketed", "ddp", "no_sync"]


@pytest.fixture
def counted(monkeypatch):
    """Counts engine runs (a SimPy Environment each) and Layers built (profile rebuilds)."""
    count = {"runs": 0, "layers": 0}
    env_init = simpy.core.Environment.__init__

    def counting_env_init(self, *args, **kwargs):   # however the engine names the class
        count["runs"] += 1
        env_init(self, *args, **kwargs)

    monkeypatch.setattr(simpy.core.Environment, "__init__", counting_env_init)
    post_init = ProfileLayer.__post_init__

    def counting_post_init(self):
        count["layers"] += 1
        post_init(self)

    monkeypatch.setattr(ProfileLayer, "__post_init__", counting_post_init)
    return count


def test_the_xl_sweep_with_ranges_runs_the_engine_eleven_times(counted):
    # 83 rows x (point + 4 scenarios) was 415 runs and 321,694 Layer rebuilds (issue 21).
    # A preset has no measured spread: low and compute_bound are the point, high and
    # comm_bound one contended run. 1..20 MB cut xl's 435 tensors into 3 layouts (bucketed's
    # and ddp's coincide): naive, flat, overlap and 3 layouts at the point (6); overlap and
    # the layouts contended (4); sync_each and no_sync are ddp's micro-step repeated, plus one
    # compute-only micro-step (1). naive and flat overlap nothing: no contended run.
    # no device: contention not known, as the sweep assumed before (none … x1.4)
    profile = dataclasses.replace(build_profile(parse_model("transformer-xl")), device=None)
    counted["layers"] = 0
    stats = {}
    rows = sweep(profile, get_link("eth-100g"), 2, XL_STRATEGIES, range(1, 21), ranges=True,
                 stats=stats)
    assert len(rows) == 83
    assert counted["runs"] == stats["work"]["engine_runs"] == 11
    assert counted["layers"] == 0          # nothing to scale: no profile rebuilt
    # each plan built once, not once per scenario: sync_each's and no_sync's micro-steps are
    # ddp's plan at their size (3 bucket-less + 20 bucketed + 20 ddp)
    assert stats["work"]["plans"] == 43


def test_a_measured_spread_rebuilds_the_profile_once_per_factor(counted):
    profile = dataclasses.replace(build_profile(parse_model("transformer-small")),
                                  compute_spread=(0.9, 1.2), device=None)
    counted["layers"] = 0
    stats = {}
    sweep(profile, get_link("eth-100g"), 2, XL_STRATEGIES, [1, 10, 100], ranges=True,
          stats=stats)
    # two scaled profiles (x0.9, x1.2), each layer built once, whatever the number of rows
    assert counted["layers"] == 2 * len(profile.layers)
    assert stats["work"]["scenario_inputs"] == 4     # low, high, comm_bound, compute_bound


def brute_force(profile, link, world, strategy, host, topology=None):
    """The old way: every scenario's inputs built and simulated from scratch."""
    point = resolve(profile, link, world, host=host, topology=topology)
    out = {}
    for name, scn in scenarios(point).items():
        inputs = point.scaled(scn.compute_factor, scn.comm_factor, scn.contention)
        out[name] = simulate(plan(inputs.profile, strategy), inputs, record=False).step_s
    return out


def toy(spread=None):
    return ModelProfile("toy", tuple(Layer(f"l{i}", (3 * 10**5, 10**4), 0.0005, 0.001)
                                     for i in range(8)), compute_spread=spread)


def setups():
    measured = (load_profile(MEASURED / "profile.json"), load_link_file(MEASURED / "link.json"),
                load_host(MEASURED / "profile.json"))
    spread_link = LinkFile(Link("l", 20e-6, 2.0, time_spread=(0.9, 1.6)),
                           host=GlooHost(blocking_alpha_s=40e-6))
    copies = Host("copies", {"realrun": HostCosts(copy_gbps=2.0, hook_s=2e-5, launch_s=1e-5),
                             "torch": HostCosts(copy_gbps=3.0, hook_s=1e-5),
                             "fsdp": HostCosts(copy_gbps=4.0, gather_s=1e-4,
                                               blocking_collectives=True)},
                  contention=(1.3, 1.6), contention_spread=((1.1, 1.2), (1.7, 2.2)))
    two_nodes = Topology(2, 2, get_link("nvlink-a100"))
    yield "measured", *measured, 2, None
    # no device: no contention assumed at the point, as before
    yield "preset", dataclasses.replace(build_profile(parse_model("mlp-6x512")), device=None), \
        get_link("eth-100g"), None, 4, None
    yield "spreads", toy((0.85, 1.3)), spread_link, None, 4, None
    yield "host", toy((0.9, 1.1)), spread_link, copies, 2, None
    yield "2x2", toy((0.9, 1.1)), spread_link, copies, 4, two_nodes
    # compute after communication: every plan with collectives, its optimizer too
    after = dataclasses.replace(copies, compute_after_comm=1.2)
    yield "after comm", dataclasses.replace(toy((0.9, 1.1)), optimizer_s=0.002), spread_link, \
        after, 2, None
    # the wake of the first collective after compute: once per micro-step (sync_each,
    # no_sync), under contention, and not for FSDP's first all-gather (before any compute)
    woken = dataclasses.replace(spread_link, host=GlooHost(blocking_alpha_s=40e-6,
                                                           idle_wake_s=3e-4))
    yield "wake", toy((0.9, 1.1)), woken, copies, 2, None
    yield "wake 2x2", toy((0.9, 1.1)), woken, copies, 4, two_nodes


@pytest.mark.parametrize("name, profile, link, host, world, topology", list(setups()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_every_shortcut_steps_as_its_own_run_would(name, profile, link, host, world, topology):
    names = ["naive", "flat", "overlap", "bucketed", "ddp", "no_sync", "fsdp", "zero2"]
    rows = sweep(profile, link, world, names, [0.1, 1, 4], accum_steps=3, ranges=True,
                 host=host, comm_hooks=["fp16", "powersgd:2"], topology=topology)
    for r in rows:
        want = brute_force(profile, link, world, r.spec, host, topology)
        assert r.scenarios_s.keys() == want.keys()
        for k in want:
            assert math.isclose(r.scenarios_s[k], want[k], rel_tol=1e-9), (r.strategy, k)
        point = simulate(profile, link, plan(profile, r.spec), world, host=host, record=False,
                         topology=topology)
        assert math.isclose(r.step_s, point.step_s, rel_tol=1e-9), r.strategy


def test_runs_alone_only_where_nothing_overlaps():
    profile = toy()
    alone = {name: runs_alone(plan(profile, make_strategy(name, 1)), [])
             for name in ("naive", "flat", "overlap", "bucketed", "fsdp")}
    assert alone == {"naive": True, "flat": True, "overlap": False, "bucketed": False,
                     "fsdp": False}
    # a copy-out after the first of two collectives runs beside the second: not alone
    naive = plan(profile, make_strategy("naive"))
    assert not runs_alone(naive, [1e-3] + [0.0] * (len(naive.collectives) - 1))
    assert runs_alone(naive, [0.0] * (len(naive.collectives) - 1) + [1e-3])


def test_sync_each_is_ddp_micro_step_repeated():
    profile = toy()
    ddp = plan(profile, make_strategy("ddp", 1))
    parts = [plan(profile, s) for s in micro_step_strategies(make_strategy("sync_each", 1, 3))]
    assert len(parts) == 3 and all(engine_key(p) == engine_key(ddp) for p in parts)
    no_sync = micro_step_strategies(make_strategy("no_sync", 1, accum_steps=3))
    assert no_sync[:2] == [None, None] and engine_key(plan(profile, no_sync[2])) == \
        engine_key(ddp)
    # a name or a label never splits a key; host costs do
    overlap = plan(profile, make_strategy("overlap"))
    assert engine_key(overlap) == engine_key(plan(profile, make_strategy("bucketed", 0.001)))
    assert engine_key(overlap) != engine_key(overlap, HostCosts(hook_s=1e-5))


def test_record_keeps_each_row_s_own_timeline():
    profile = toy()
    pred = Predictor(scenario_set(resolve(profile, get_link("eth-100g"), 2)), record=True)
    overlap, bucketed = (pred.predict(make_strategy(n, 0.001)) for n in ("overlap", "bucketed"))
    assert overlap.step_s == bucketed.step_s      # one layout, two names for its all-reduces
    assert {s.label for s in overlap.spans} >= {"grad0"}
    assert {s.label for s in bucketed.spans} >= {"bucket0"}


def test_a_two_level_cluster_s_hierarchical_rows_too():
    topology = Topology(2, 2, get_link("nvlink-a100"))
    link = Link("l", 20e-6, 2.0, time_spread=(0.9, 1.6))
    profile = toy((0.9, 1.1))
    pred = Predictor(scenario_set(resolve(profile, link, 4, topology=topology), ranges=True))
    for strategy in (make_strategy("hierarchical", 1), make_strategy("hierarchical", 4)):
        r = pred.predict(strategy)
        want = brute_force(profile, link, 4, strategy, None, topology)
        assert r.scenarios_s == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("name", ["fsdp", "zero2"])
def test_sharded_micro_steps_run_alone_too(name):
    # gathers issued at each micro-step's forward, reduce-scatters after its backward, and
    # FSDP2 on Gloo holding the training thread: still nothing crosses a micro-step's end
    blocking = Host("h", {"fsdp": HostCosts(copy_gbps=4.0, gather_s=1e-4, scatter_s=2e-4,
                                            blocking_collectives=True)},
                    contention=(1.3, 1.6), contention_spread=((1.1, 1.2), (1.7, 2.2)))
    link = LinkFile(Link("l", 20e-6, 2.0, time_spread=(0.9, 1.6)),
                    host=GlooHost(blocking_alpha_s=40e-6))
    profile = toy((0.9, 1.2))
    for host in (None, blocking):
        strategy = make_strategy(name, accum_steps=3, shard_unit_mb=0.5)
        point = resolve(profile, link, 4, host=host)
        r = Predictor(scenario_set(point, ranges=True)).predict(strategy)
        assert r.scenarios_s == pytest.approx(brute_force(profile, link, 4, strategy, host),
                                              rel=1e-9)
        assert r.step_s == pytest.approx(simulate(profile, link, plan(profile, strategy), 4,
                                                  host=host).step_s, rel=1e-9)
