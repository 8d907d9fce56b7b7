"""The small-collective law (issue 19), hand-checked on round numbers.

A collective that a step overlaps costs on the comm lane what it costs alone, α + b·n/busbw
with α the link's ``alpha_s`` (calibrate: the small sizes' lone α); queued ones complete one
after another at that cost, whatever sits in front of them. Blocking plans pay
``blocking_alpha_s`` instead. docs/results/2026-11-25-small-collective-law.md has the
measurements behind it.
"""
import pytest

from simddp import Layer, Link, ModelProfile, make_strategy, plan, simulate
from simddp.comm_law import comm_seconds

# l1: one 1 MB gradient; l0: four of 1 kB. Forward and backward 1 ms per layer.
TOY = ModelProfile("toy", (Layer("l0", (1000,) * 4, 0.001, 0.001),
                           Layer("l1", (1_000_000,), 0.001, 0.001)))
LINK = Link("l", alpha_s=100e-6, busbw_gbps=1.0, blocking_alpha_s=300e-6)  # 1 GB/s, p = 2


def comm_spans(result):
    return [(round(s.start_s * 1e3, 6), round(s.end_s * 1e3, 6))
            for s in result.spans if s.lane == "comm"]


def test_small_ones_queued_behind_a_large_one_each_cost_their_lone_time():
    # forward 0-2 ms; l1's backward 2-3 ms, its 1 MB all-reduce 3 -> 3 + 0.1 + 1.0 = 4.1 ms;
    # l0's backward 3-4 ms, its four 1 kB all-reduces wait for the lane, then 0.101 ms each
    r = simulate(TOY, LINK, plan(TOY, make_strategy("overlap")), world_size=2)
    assert comm_spans(r) == [(3.0, 4.1), (4.1, 4.201), (4.201, 4.302), (4.302, 4.403),
                             (4.403, 4.504)]
    assert r.step_s == pytest.approx(4.504e-3)


def test_blocking_plans_pay_the_blocking_alpha():
    # naive: after the backward (4 ms) each all-reduce is waited for: 0.3 ms of α each
    r = simulate(TOY, LINK, plan(TOY, make_strategy("naive")), world_size=2)
    seconds = comm_seconds(plan(TOY, make_strategy("naive")), LINK, 2)
    assert sorted(round(s * 1e3, 6) for s in seconds) == [0.301] * 4 + [1.3]
    assert r.step_s == pytest.approx((4.0 + 4 * 0.301 + 1.3) * 1e-3)


def test_the_step_grows_by_one_lone_alpha_per_extra_collective():
    # the same 4 kB in 4 all-reduces (overlap) or in 1 (a 0.01 MB bucket): after the large
    # one, the small ones add 4 x 0.101 ms when issued alone and 0.104 ms when bucketed
    alone = simulate(TOY, LINK, plan(TOY, make_strategy("overlap")), world_size=2).step_s
    bucketed = simulate(TOY, LINK, plan(TOY, make_strategy("bucketed", 0.01)),
                        world_size=2).step_s
    assert alone - bucketed == pytest.approx(3 * 100e-6, abs=1e-9)
