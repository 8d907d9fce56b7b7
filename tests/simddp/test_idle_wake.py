"""The wake after compute: a micro-step's first collective issued after compute waits
its link file's ``GlooHost.idle_wake_s`` before it runs (simddp.rig.gloo_shared_cpu).

Toy of tests/simddp/test_compute_after_comm.py: two layers, one 1 MB gradient each, forward
1 ms and backward 2 ms per layer; α = 0, busbw 1 GB/s, 2 ranks (a 1 MB all-reduce takes
1 ms); the wake is 0.5 ms. Every timeline is computed by hand.
"""
from __future__ import annotations

import json

import pytest

from simddp.analytic.closed_form import closed_form_step_s
from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.inputs.host import Host
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.io import link_file_from_json, link_to_json
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.planning.plans import plan
from simddp.inputs.profile import Layer, ModelProfile
from simddp.report.table import setup_line
from simddp.planning.strategy import make_strategy
from simddp.predict.resolve import resolve

TOY = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
WOKEN = LinkFile(Link("l", 0.0, 1.0), host=GlooHost(idle_wake_s=0.0005))


def run(strategy: str, link: Link | LinkFile = WOKEN, host: Host | None = None, **kw):
    r = simulate(plan(TOY, make_strategy(strategy, **kw)), resolve(TOY, link, 2, host=host))
    return r, [(s.label, round(s.start_s * 1e3, 6), round(s.end_s * 1e3, 6))
               for s in r.spans if s.lane == "comm"]


def test_naive_s_first_all_reduce_waits_the_next_does_not():
    # forward 0-2, backward 2-6; grad1 wakes 6-6.5 and runs to 7.5; grad0 7.5-8.5
    r, comm = run("naive")
    assert r.step_ms == pytest.approx(8.5)
    assert comm == [("grad1", 6.0, 7.5), ("grad0", 7.5, 8.5)]


def test_flat_pays_it_once():
    r, comm = run("flat")      # one 2 MB all-reduce 6-8 becomes 6-8.5
    assert r.step_ms == pytest.approx(8.5)
    assert comm == [("flat", 6.0, 8.5)]


def test_overlap_hides_it_behind_the_backward():
    # l1 bwd 2-4, grad1 launched at 4 wakes to 4.5 and runs to 5.5 under l0 bwd (4-6);
    # grad0 6-7, no wake: the lane's threads are up
    r, comm = run("overlap")
    assert r.step_ms == pytest.approx(7.0)
    assert comm == [("grad1", 4.0, 5.5), ("grad0", 6.0, 7.0)]


def test_every_micro_step_that_communicates_pays_it():
    # sync_each: two micro-steps of 6 ms compute, each with one 2 MB bucket after its
    # backward: 6-8.5, then 8.5 + 6 = 14.5-17; no_sync communicates in the last only
    assert run("sync_each", bucket_mb=100, accum_steps=2)[1] == [("bucket0", 6.0, 8.5),
                                                                 ("bucket0", 14.5, 17.0)]
    r, comm = run("no_sync", bucket_mb=100, accum_steps=2)
    assert r.step_ms == pytest.approx(14.5) and comm == [("bucket0", 12.0, 14.5)]


def test_a_collective_issued_before_any_compute_pays_none():
    # FSDP's first all-gather goes out at the forward's start: nothing has slept
    assert run("fsdp")[0].step_ms == pytest.approx(run("fsdp", Link("l", 0.0, 1.0))[0].step_ms)


def test_the_wake_does_not_contend_with_compute():
    # compute x1.5 and comm x2 while both run. grad1 is launched at 4 and wakes to 4.5 while
    # l0 bwd runs at full speed (0.5 of its 2 ms done); then both run: the all-reduce's 1 ms
    # at half speed ends at 6.5, by when l0 bwd did 2 x 2/3 = 1.333 more, 0.1667 left at
    # full speed: 6.6667; grad0 then 1 ms alone: 7.6667
    r, comm = run("overlap", host=Host("box", contention=(1.5, 2.0)))
    assert r.step_ms == pytest.approx(7.0 + 2 / 3)
    assert comm[0] == ("grad1", 4.0, 6.5)


def test_none_and_zero_change_nothing():
    for link in (Link("l", 0.0, 1.0),
                 LinkFile(Link("l", 0.0, 1.0), host=GlooHost(idle_wake_s=0.0))):
        assert run("naive", link)[0].step_ms == pytest.approx(8.0)


def test_the_link_file_keeps_it_and_refuses_a_bad_one():
    doc = link_to_json(WOKEN)
    assert doc["gloo_host"]["idle_wake_s"] == 0.0005
    assert link_file_from_json(json.loads(json.dumps(doc))) == WOKEN
    assert "gloo_host" not in link_to_json(Link("l", 0.0, 1.0))   # not measured: absent
    with pytest.raises(InputError, match="idle_wake_s"):
        GlooHost(idle_wake_s=-0.001)


def test_the_closed_form_refuses_it_and_the_setup_line_says_it():
    with pytest.raises(ValueError, match="wake"):
        closed_form_step_s(plan(TOY, make_strategy("naive")), resolve(TOY, WOKEN, 2))
    # the link's part of the line gives the wake, in ms
    assert WOKEN.host.idle_wake_s == 0.0005
    link_part = setup_line(TOY, WOKEN, 2).split(" | ")[1]
    assert "wake" in link_part and "0.5" in link_part.split()
