"""Compute after communication: a plan with collectives runs its layers x the host's factor.

Toy of tests/simddp/test_host.py: two layers, one 1 MB gradient each, forward 1 ms and
backward 2 ms per layer; α = 0, busbw 1 GB/s, 2 ranks (a 1 MB all-reduce takes 1 ms). With
the host's ``compute_after_comm`` x1.5 every layer's forward takes 1.5 ms and backward 3 ms.
Every timeline is computed by hand.
"""
from __future__ import annotations

import json

import pytest

from simddp.analytic.closed_form import closed_form_step_s
from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.inputs.host import Host
from simddp.inputs.io import host_from_json, host_to_json
from simddp.inputs.link import Link
from simddp.planning.plans import plan
from simddp.inputs.profile import Layer, ModelProfile
from simddp.planning.strategy import make_strategy
from simddp.predict.resolve import resolve

TOY = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
LINK = Link("l", 0.0, 1.0)
SLOWER = Host("box", compute_after_comm=1.5)


def run(strategy: str, host: Host | None = SLOWER, **kw):
    r = simulate(plan(TOY, make_strategy(strategy, **kw)), resolve(TOY, LINK, 2, host=host))
    return r, sorted((s.lane, s.label, round(s.start_s * 1e3, 6), round(s.end_s * 1e3, 6))
                     for s in r.spans)


def test_overlap_computes_at_the_slower_speed():
    # forward 0-3; l1 bwd 3-6, its all-reduce 6-7; l0 bwd 6-9, its all-reduce 9-10 (the
    # toy has no optimizer; test_the_optimizer_is_slower_too has one)
    r, spans = run("overlap")
    assert r.step_ms == pytest.approx(10.0)
    assert spans == [("comm", "grad0", 9.0, 10.0), ("comm", "grad1", 6.0, 7.0),
                     ("compute", "forward", 0.0, 3.0), ("compute", "l0 bwd", 6.0, 9.0),
                     ("compute", "l1 bwd", 3.0, 6.0)]
    # the compute-only floor is the profile's (6 ms): the slowdown is communication's cost
    assert r.compute_s * 1e3 == pytest.approx(6.0)
    assert r.exposed_comm_s * 1e3 == pytest.approx(4.0)


def test_flat_waits_for_the_slower_backward():
    # forward 0-3, backward 3-9, one 2 MB all-reduce 9-11
    r, _ = run("flat")
    assert r.step_ms == pytest.approx(11.0)


def test_no_factor_and_a_factor_of_one_change_nothing():
    assert run("overlap", None)[0].step_ms == pytest.approx(7.0)
    assert run("overlap", Host("box", compute_after_comm=1.0))[0].step_ms == pytest.approx(7.0)
    assert Host("box", compute_after_comm=1.0).free


def test_the_closed_form_refuses_it():
    with pytest.raises(ValueError, match="compute after communication"):
        closed_form_step_s(plan(TOY, make_strategy("overlap")),
                           resolve(TOY, LINK, 2, host=SLOWER))


def test_it_round_trips_and_is_checked():
    back = host_from_json(json.loads(json.dumps(host_to_json(SLOWER))))
    assert back.compute_after_comm == 1.5
    for bad in (0.9, "fast", float("nan"), True):
        with pytest.raises(InputError, match="compute_after_comm must be a slowdown >= 1.0"):
            Host("box", compute_after_comm=bad)


def test_the_optimizer_is_slower_too():
    # optimizer 2 ms -> 3 ms, after the last all-reduce ends at 10 ms
    toy = ModelProfile("toy", TOY.layers, optimizer_s=0.002)
    r = simulate(plan(toy, make_strategy("overlap")), resolve(toy, LINK, 2, host=SLOWER))
    assert r.step_ms == pytest.approx(13.0)
    assert r.compute_s * 1e3 == pytest.approx(8.0)


def test_the_sweep_header_says_it():
    from simddp.report.table import host_line
    assert SLOWER.compute_after_comm == 1.5 and "x1.50" in host_line(SLOWER).split()
    assert host_line(Host("box", compute_after_comm=1.0)) == "free (not charged)"
