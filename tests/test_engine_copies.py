"""Link.copy_gbps: the DDP wrapper's gradient copies on the compute lane, hand-computed.

Toy: two layers, one 1 MB gradient each, forward 1 ms and backward 2 ms per layer; a link
with α = 0 and busbw 1 GB/s (2 ranks: 1 MB all-reduces in 1 ms) and copies at 1 GB/s (1 MB
copied in 1 ms).
"""
from __future__ import annotations

import pytest

from simddp.engine import simulate
from simddp.io import link_from_json, link_to_json
from simddp.errors import InputError
from simddp.link import Link
from simddp.plan import plan
from simddp.profile import Layer, ModelProfile
from simddp.strategy import make_strategy

TOY = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
LINK = Link("l", 0.0, 1.0, copy_gbps=1.0)


def spans_ms(strategy: str, **kw):
    r = simulate(TOY, LINK, plan(TOY, make_strategy(strategy, **kw)), 2)
    return r.step_ms, sorted((s.lane, s.label, round(s.start_s * 1e3, 6), round(s.end_s * 1e3, 6))
                             for s in r.spans)


def test_flat_copies_in_after_backward_and_out_after_the_collective():
    step, spans = spans_ms("flat")
    assert step == pytest.approx(12.0)
    assert ("compute", "copy-in", 6.0, 8.0) in spans
    assert ("comm", "flat", 8.0, 10.0) in spans
    assert ("compute", "flat copy-out", 10.0, 12.0) in spans


def test_lone_tensors_are_scaled_in_place_at_launch_with_no_copy_out():
    step, spans = spans_ms("overlap")
    assert step == pytest.approx(9.0)
    assert [s for s in spans if s[1] == "copy-in"] == [("compute", "copy-in", 4.0, 5.0),
                                                       ("compute", "copy-in", 7.0, 8.0)]
    assert ("comm", "grad1", 5.0, 6.0) in spans and ("comm", "grad0", 8.0, 9.0) in spans


def test_an_overlapping_bucket_copies_each_gradient_in_from_its_hook():
    step, spans = spans_ms("bucketed", bucket_mb=8)
    assert step == pytest.approx(12.0)
    assert ("compute", "copy-in", 4.0, 5.0) in spans   # l1's gradient, then l0's backward
    assert ("compute", "l0 bwd", 5.0, 7.0) in spans
    assert ("comm", "bucket0", 8.0, 10.0) in spans
    assert ("compute", "bucket0 copy-out", 10.0, 12.0) in spans


def test_free_copies_change_nothing():
    free = Link("l", 0.0, 1.0)
    for name in ("naive", "flat", "overlap", "bucketed"):
        p = plan(TOY, make_strategy(name))
        assert simulate(TOY, free, p, 2).step_s == simulate(TOY, Link("l", 0.0, 1.0, copy_gbps=None), p, 2).step_s


def test_copy_gbps_round_trips_and_is_checked():
    assert link_from_json(link_to_json(LINK)).copy_gbps == 1.0
    with pytest.raises(InputError, match="copy_gbps"):
        Link("l", 0.0, 1.0, copy_gbps=0.0)


def test_in_place_scaling_has_its_own_rate():
    fast = Link("l", 0.0, 1.0, copy_gbps=1.0, scale_gbps=2.0)   # 1 MB scaled in 0.5 ms
    r = simulate(TOY, fast, plan(TOY, make_strategy("overlap")), 2)
    assert r.step_ms == pytest.approx(8.0)   # bwd 2-4, scale 4-4.5, bwd 4.5-6.5, scale -7, comm -8


def test_hook_cost_per_gradient_on_the_compute_lane():
    # hook_s 0.5 ms per gradient on top of the copies: overlap's l1 gradient is hooked and
    # scaled 4-5.5, l0's backward 5.5-7.5, its hook + scale 7.5-9, grad0 9-10. torch's
    # reducer (the ddp strategy) pays ddp_hook_s instead: 0.1 ms per gradient, so its bucket's
    # two copy-ins take 1.1 ms each. Hooks alone (no copy rate) are charged too.
    hooked = Link("l", 0.0, 1.0, copy_gbps=1.0, hook_s=0.5e-3, ddp_hook_s=0.1e-3)
    r = simulate(TOY, hooked, plan(TOY, make_strategy("overlap")), 2)
    spans = sorted((s.label, round(s.start_s * 1e3, 6), round(s.end_s * 1e3, 6))
                   for s in r.spans if s.label == "hooks+copy-in")
    assert spans == [("hooks+copy-in", 4.0, 5.5), ("hooks+copy-in", 7.5, 9.0)]
    assert r.step_ms == pytest.approx(10.0)
    ddp = simulate(TOY, hooked, plan(TOY, make_strategy("ddp", bucket_mb=8)), 2)
    assert sorted(round(s.duration_s * 1e3, 6) for s in ddp.spans
                  if s.label == "hooks+copy-in") == [1.1, 1.1]
    only = Link("l", 0.0, 1.0, hook_s=1e-3)
    assert simulate(TOY, only, plan(TOY, make_strategy("overlap")), 2).step_ms == \
        pytest.approx(9.0)   # bwd 2-4, hook 4-5, bwd 5-7, hook 7-8, grad0 8-9
    with pytest.raises(InputError, match="hook_s"):
        Link("l", 0.0, 1.0, hook_s=-1.0)


def test_launch_cost_per_collective_of_the_wrapper_only():
    # launch_s 1 ms per collective, nothing else: overlap launches two (l1's at 4-5, l0's at
    # 7-8: step 9 ms); one bucket of both gradients launches once (backward ends 6, launch
    # 6-7, 2 MB all-reduce 7-9); torch's ddp plan pays no launch cost (step 8 ms).
    link = Link("l", 0.0, 1.0, launch_s=1e-3)

    def step(name, **kw):
        return simulate(TOY, link, plan(TOY, make_strategy(name, **kw)), 2).step_ms
    assert step("overlap") == pytest.approx(9.0)
    assert step("bucketed", bucket_mb=8) == pytest.approx(9.0)
    assert step("ddp", bucket_mb=8) == pytest.approx(8.0)
