"""Host costs: the DDP implementation's hooks, launches and copies on the compute lane.

Toy: two layers, one 1 MB gradient each, forward 1 ms and backward 2 ms per layer; a link
with α = 0 and busbw 1 GB/s (2 ranks: 1 MB all-reduces in 1 ms); realrun's wrapper copying at
1 GB/s (1 MB copied in 1 ms). Every timeline is computed by hand.
"""
from __future__ import annotations

import json

import pytest

from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.inputs.host import Host, HostCosts
from simddp.inputs.io import (host_from_json, host_to_json, link_from_json, link_to_json, load_host,
                       load_link, profile_to_json)
from simddp.inputs.link import Link
from simddp.planning.plans import plan
from simddp.inputs.profile import Layer, ModelProfile
from simddp.planning.strategy import make_strategy
from simddp.predict.resolve import resolve

TOY = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)))
LINK = Link("l", 0.0, 1.0)
COPIES = Host("box", {"realrun": HostCosts(copy_gbps=1.0), "torch": HostCosts(copy_gbps=1.0)})


def spans_ms(strategy: str, host: Host = COPIES, **kw):
    r = simulate(plan(TOY, make_strategy(strategy, **kw)), resolve(TOY, LINK, 2, host=host))
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


def test_torchs_reducer_copies_a_one_gradient_bucket_in_and_out():
    # 2 MB gradients: each alone in its bucket (torch's first bucket is 1 MB), 2 ms to copy
    # and 2 ms to all-reduce. realrun.DDP reduces a lone gradient in place (scaled at launch,
    # 4-6 and 8-10; step 12); torch's reducer copies it into its bucket and, after the
    # backward, back out: grad1's bucket 6-8, out 10-12 once l0's copy-in is done, grad0's
    # bucket 10-12, out 12-14 (torch.profiler: reducer::mul_out and copy_bucket_to_grad on
    # every one-tensor bucket).
    big = ModelProfile("big", tuple(Layer(f"l{i}", (2 * 10**6,), 0.001, 0.002)
                                    for i in range(2)))

    def run(strategy: str, host: Host):
        r = simulate(plan(big, make_strategy(strategy, 1)), resolve(big, LINK, 2, host=host))
        return r.step_ms, sorted((s.label, round(s.start_s * 1e3, 6), round(s.end_s * 1e3, 6))
                                 for s in r.spans if s.lane == "compute" and "copy" in s.label)

    assert run("bucketed", COPIES) == (pytest.approx(12.0), [("copy-in", 4.0, 6.0),
                                                              ("copy-in", 8.0, 10.0)])
    step, copies = run("ddp", COPIES)
    assert step == pytest.approx(14.0)
    assert copies == [("bucket0 copy-out", 10.0, 12.0), ("bucket1 copy-out", 12.0, 14.0),
                      ("copy-in", 4.0, 6.0), ("copy-in", 8.0, 10.0)]
    in_place = Host("box", {"torch": HostCosts(copy_gbps=1.0, lone_in_place=True)})
    assert run("ddp", in_place)[0] == pytest.approx(12.0)     # the field overrides


def test_an_overlapping_bucket_copies_each_gradient_in_from_its_hook():
    step, spans = spans_ms("bucketed", bucket_mb=8)
    assert step == pytest.approx(12.0)
    assert ("compute", "copy-in", 4.0, 5.0) in spans   # l1's gradient, then l0's backward
    assert ("compute", "l0 bwd", 5.0, 7.0) in spans
    assert ("comm", "bucket0", 8.0, 10.0) in spans
    assert ("compute", "bucket0 copy-out", 10.0, 12.0) in spans
    kinds = {s.kind for s in simulate(plan(TOY, make_strategy("bucketed", 8)),
                                      resolve(TOY, LINK, 2, host=COPIES)).spans
             if "copy" in s.label}
    assert kinds == {"copy"}


def test_a_plan_launched_after_the_backward_pays_its_own_hook_cost():
    """hook_after_backward_s replaces hook_s where gradients are launched after the
    backward: flat's hooks only note a gradient and its copy calls run at the launch
    (realrun measured 27 against 84 µs a gradient, docs/results/2026-11-26-flat-host.md), and
    naive's lone tensors are scaled in place at theirs. Hooks 1 ms a gradient, 0.25 ms after
    the backward: flat's copy-in is 2 x (0.25 + 1) ms from the backward's end at 6 ms;
    naive's 2 x (0.25 + 1) ms of scaling, then two 1 ms all-reduces, one after the other."""
    both = Host("box", {"realrun": HostCosts(copy_gbps=1.0, hook_s=1e-3,
                                             hook_after_backward_s=0.25e-3)})
    step, spans = spans_ms("flat", both)
    assert step == pytest.approx(12.5)
    assert ("compute", "hooks+copy-in", 6.0, 8.5) in spans
    assert ("comm", "flat", 8.5, 10.5) in spans
    step, spans = spans_ms("bucketed", both, bucket_mb=8)   # overlapping: hook_s
    assert ("compute", "hooks+copy-in", 4.0, 6.0) in spans
    old = Host("box", {"realrun": HostCosts(copy_gbps=1.0, hook_s=1e-3)})   # not measured
    assert spans_ms("flat", old)[0] == pytest.approx(14.0)
    step, spans = spans_ms("naive", both)
    assert step == pytest.approx(10.5)
    assert ("compute", "hooks+copy-in", 6.0, 8.5) in spans
    assert ("comm", "grad1", 8.5, 9.5) in spans and ("comm", "grad0", 9.5, 10.5) in spans
    assert spans_ms("naive", old)[0] == pytest.approx(12.0)   # hook_s: 2 x (1 + 1) ms
    step, spans = spans_ms("overlap", both)          # lone tensors from their hooks: hook_s
    assert step == spans_ms("overlap", old)[0]


def test_no_host_or_free_costs_change_nothing():
    for name in ("naive", "flat", "overlap", "bucketed", "ddp"):
        p = plan(TOY, make_strategy(name))
        free = simulate(p, resolve(TOY, LINK, 2)).step_s
        assert simulate(p, resolve(TOY, LINK, 2, host=Host("empty"))).step_s == free
        zeros = Host("zeros", {"realrun": HostCosts()})
        assert simulate(p, resolve(TOY, LINK, 2, host=zeros)).step_s == free


def test_host_costs_round_trip_and_are_checked(tmp_path):
    assert host_from_json(host_to_json(COPIES)) == COPIES
    with pytest.raises(InputError, match="copy_gbps"):
        HostCosts(copy_gbps=0.0)
    with pytest.raises(InputError, match="hook_s"):
        HostCosts(hook_s=-1.0)
    with pytest.raises(InputError, match="hook_after_backward_s"):
        HostCosts(hook_after_backward_s=float("nan"))
    with pytest.raises(InputError, match="lone_in_place must be true or false"):
        HostCosts(lone_in_place="no")
    measured = Host("box", {"realrun": HostCosts(hook_s=1e-4, hook_after_backward_s=5e-5),
                            "torch": HostCosts(copy_gbps=2.0, lone_in_place=True)})
    assert host_from_json(host_to_json(measured)) == measured
    with pytest.raises(InputError, match="unknown implementation 'nccl'"):
        Host("box", {"nccl": HostCosts()})
    # A profile carries them as its host_costs section
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile_to_json(TOY, host=COPIES)))
    assert load_host(path) == COPIES
    path.write_text(json.dumps(profile_to_json(TOY)))
    assert load_host(path) is None


def test_an_old_link_file_with_host_fields_is_refused_saying_how_to_get_a_current_one(tmp_path):
    """The first simddp.link/1 files held the host costs: such a link is refused in one line,
    as a link and as host costs, naming its format and what to re-run; a current link has no
    host."""
    old = {"format": "simddp.link/1", "name": "cal", "alpha_s": 1e-4, "busbw_gbps": 1.0,
           "copy_gbps": 2.0, "scale_gbps": 4.0, "hook_s": 1e-4, "ddp_hook_s": 3e-5,
           "launch_s": 5e-5}
    path = tmp_path / "link.json"
    path.write_text(json.dumps(old))
    for read in (lambda: load_link(path), lambda: link_from_json(old), lambda: load_host(path)):
        with pytest.raises(InputError) as e:
            read()
        message = str(e.value)
        assert len(message.splitlines()) == 1
        # its format, the host fields it holds, and the two commands that replace it
        assert "simddp.link/1" in message and "copy_gbps" in message and "scale_gbps" in message
        assert "calibrate" in message and "realrun" in message
    path.write_text(json.dumps(link_to_json(Link("cal", 1e-4, 1.0))))
    assert load_link(path) == Link("cal", 1e-4, 1.0) and load_host(path) is None


def test_in_place_scaling_has_its_own_rate():
    fast = Host("box", {"realrun": HostCosts(copy_gbps=1.0, scale_gbps=2.0)})  # 1 MB in 0.5 ms
    r = simulate(plan(TOY, make_strategy("overlap")), resolve(TOY, LINK, 2, host=fast))
    assert r.step_ms == pytest.approx(8.0)   # bwd 2-4, scale 4-4.5, bwd 4.5-6.5, scale -7, comm -8


def test_each_implementation_pays_its_own_hook_cost():
    # realrun's wrapper 0.5 ms per gradient on top of the copies: overlap's l1 gradient is
    # hooked and scaled 4-5.5, l0's backward 5.5-7.5, its hook + scale 7.5-9, grad0 9-10.
    # torch's reducer (the ddp strategy) 0.1 ms per gradient, so its bucket's two copy-ins
    # take 1.1 ms each. Hooks alone (no copy rate) are charged too.
    hooked = Host("box", {"realrun": HostCosts(copy_gbps=1.0, hook_s=0.5e-3),
                          "torch": HostCosts(copy_gbps=1.0, hook_s=0.1e-3)})
    r = simulate(plan(TOY, make_strategy("overlap")), resolve(TOY, LINK, 2, host=hooked))
    spans = sorted((s.label, round(s.start_s * 1e3, 6), round(s.end_s * 1e3, 6))
                   for s in r.spans if s.label == "hooks+copy-in")
    assert spans == [("hooks+copy-in", 4.0, 5.5), ("hooks+copy-in", 7.5, 9.0)]
    assert r.step_ms == pytest.approx(10.0)
    ddp = simulate(plan(TOY, make_strategy("ddp", bucket_mb=8)), resolve(TOY, LINK, 2, host=hooked))
    assert sorted(round(s.duration_s * 1e3, 6) for s in ddp.spans
                  if s.label == "hooks+copy-in") == [1.1, 1.1]
    only = Host("box", {"realrun": HostCosts(hook_s=1e-3)})
    # bwd 2-4, hook 4-5, bwd 5-7, hook 7-8, grad0 8-9
    assert simulate(plan(TOY, make_strategy("overlap")),
                    resolve(TOY, LINK, 2, host=only)).step_ms == pytest.approx(9.0)


def test_launch_cost_per_collective_of_the_implementation_that_has_one():
    # realrun's launch_s 1 ms per collective, nothing else: overlap launches two (l1's at 4-5,
    # l0's at 7-8: step 9 ms); one bucket of both gradients launches once (backward ends 6,
    # launch 6-7, 2 MB all-reduce 7-9); torch's ddp plan has no costs here (step 8 ms).
    host = Host("box", {"realrun": HostCosts(launch_s=1e-3)})

    def step(name, **kw):
        return simulate(plan(TOY, make_strategy(name, **kw)),
                        resolve(TOY, LINK, 2, host=host)).step_ms
    assert step("overlap") == pytest.approx(9.0)
    assert step("bucketed", bucket_mb=8) == pytest.approx(9.0)
    assert step("ddp", bucket_mb=8) == pytest.approx(8.0)
