"""fsdp and zero2 on hand-computed timelines, their plans, and the closed form on random ones.

The toy of test_engine.py: 3 layers l0, l1, l2, each 1 ms forward and 2 ms backward, one 1 MiB
gradient each, 2 ranks, a link where a 1 MiB all-reduce takes 1 ms. A reduce-scatter or an
all-gather moves half an all-reduce's bytes, (p−1)/p·n: 1 MiB takes 0.5 ms. One layer per
unit unless said otherwise. Spans as ``(lane, label, start_ms, end_ms)``, compute lane first.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simddp.analytic.closed_form import closed_form_step_s
from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.host import Host, HostCosts
from simddp.inputs.io import host_from_json, host_to_json
from simddp.cost.factors import ALL_GATHER, REDUCE_SCATTER
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.planning.plans import plan
from simddp.presets import build_profile, parse_model
from simddp.inputs.profile import Layer, ModelProfile
from simddp.planning.sharding import shard_units
from simddp.planning.strategy import MB, make_strategy
from simddp.predict.resolve import resolve
from tests.simddp.test_engine import TOY, step_ms, timeline, unit_link


def run(name: str, profile: ModelProfile = TOY, **kw):
    return simulate(plan(profile, make_strategy(name, **kw)), resolve(profile, unit_link(), 2))


def test_the_issue_hand_check():
    # mlp-4x1024 (4 × 4 MiB, B = 16 MiB) with no compute, α 0, busbw 1 GB/s, 4 ranks: every
    # collective runs back to back on the one comm lane (no contention: the laws alone).
    profile = build_profile(parse_model("mlp-4x1024")).scaled(0.0, 0.0, 0.0)
    link, b = Link("hand", 0.0, 1.0), 16 * MB
    inputs = resolve(profile, link, 4, contention="none")

    def ms(name: str) -> float:
        return simulate(plan(profile, make_strategy(name, 25)), inputs).step_ms

    assert ms("flat") == pytest.approx(2 * 3 / 4 * b / 1e6)          # 25.166 ms
    assert ms("fsdp") == pytest.approx(3 * 3 / 4 * b / 1e6)          # 37.749: AG, AG', RS
    assert ms("zero2") == pytest.approx(2 * 3 / 4 * b / 1e6)         # 25.166: AG, RS
    assert ms("bucketed+fp16") == pytest.approx(3 / 4 * b / 1e6)     # 12.583: half the bytes
    assert [round(ms(n), 3) for n in ("flat", "fsdp", "zero2", "bucketed+fp16")] == \
        [25.166, 37.749, 25.166, 12.583]


FSDP_TIMELINE = [
    # t=0 reaching l0 issues AG(l0) and, one unit ahead, AG(l1); l0 waits for its gather
    ("compute", "l0 fwd", 0.5, 1.5),
    ("compute", "l1 fwd", 1.5, 2.5),    # AG(l1) ran 0.5–1.0, under l0's forward
    ("compute", "l2 fwd", 2.5, 3.5),    # AG(l2), issued at 1.5 on reaching l1, done at 2.0
    ("compute", "l2 bwd", 4.0, 6.0),    # resharded after forward: waits for its re-gather
    ("compute", "l1 bwd", 6.0, 8.0),    # its re-gather was prefetched at 3.5, done at 4.5
    ("compute", "l0 bwd", 8.0, 10.0),   # re-gather issued at 6.0, after RS(l2): done at 7.0
    ("comm", "l0 all-gather", 0.0, 0.5), ("comm", "l1 all-gather", 0.5, 1.0),
    ("comm", "l2 all-gather", 1.5, 2.0),
    ("comm", "l2 re-gather", 3.5, 4.0), ("comm", "l1 re-gather", 4.0, 4.5),
    ("comm", "l2 reduce-scatter", 6.0, 6.5), ("comm", "l0 re-gather", 6.5, 7.0),
    ("comm", "l1 reduce-scatter", 8.0, 8.5), ("comm", "l0 reduce-scatter", 10.0, 10.5)]


def test_fsdp_gathers_one_unit_ahead_and_regathers_for_backward():
    r = run("fsdp")
    assert timeline(r) == FSDP_TIMELINE
    assert step_ms(r) == 10.5 and r.collectives == 9 and r.bucket_mb is None
    assert [s.kind for s in r.spans if s.lane == "comm"][:4] == ["all-gather"] * 4
    assert {s.kind for s in r.spans if "reduce-scatter" in s.label} == {"reduce-scatter"}


def test_zero2_keeps_the_gathered_units_through_backward():
    # The same forward; backward never waits: each unit's reduce-scatter follows its backward.
    r = run("zero2")
    assert timeline(r) == FSDP_TIMELINE[:3] + [
        ("compute", "l2 bwd", 3.5, 5.5), ("compute", "l1 bwd", 5.5, 7.5),
        ("compute", "l0 bwd", 7.5, 9.5)] + FSDP_TIMELINE[6:9] + [
        ("comm", "l2 reduce-scatter", 5.5, 6.0), ("comm", "l1 reduce-scatter", 7.5, 8.0),
        ("comm", "l0 reduce-scatter", 9.5, 10.0)]
    assert step_ms(r) == 10.0 and r.collectives == 6


def test_the_optimizer_updates_only_the_shard():
    # A 1 ms optimizer (all parameters) takes 1/p = 0.5 ms on a shard: fsdp 10.5 + 0.5.
    toy = ModelProfile("toy3", TOY.layers, optimizer_s=1e-3)
    r = run("fsdp", toy)
    assert timeline(r)[6] == ("compute", "optimizer", 10.5, 11.0)
    assert step_ms(r) == 11.0 and r.compute_s == pytest.approx(9.5e-3)   # 9 + 0.5
    assert round(r.exposed_comm_s * 1e3, 9) == 1.5


def test_bigger_units_gather_more_at_once():
    # --shard-unit-mb 2: units (l0, l1) of 2 MiB (1 ms per collective) and (l2,) of 1 MiB.
    # Forward: AG(u0) 0–1, AG(u1) 1–1.5; l0+l1 run 1–3 as one stretch, l2 3–4. Backward:
    # reaching l2 at 4 issues AG'(u1) 4–4.5 and AG'(u0) 4.5–5.5; l2 4.5–6.5; RS(u1) 6.5–7;
    # l1 6.5–8.5, l0 8.5–10.5; RS(u0) only after l0: 10.5–11.5. A step 1 ms longer than one
    # unit per layer: the last reduce-scatter is twice as big.
    r = run("fsdp", shard_unit_mb=2)
    assert [u.names for u in plan(TOY, make_strategy("fsdp", shard_unit_mb=2)).units] == \
        [("l0", "l1"), ("l2",)]
    assert timeline(r) == [
        ("compute", "l0 fwd", 1.0, 3.0), ("compute", "l2 fwd", 3.0, 4.0),
        ("compute", "l2 bwd", 4.5, 6.5), ("compute", "l1 bwd", 6.5, 8.5),
        ("compute", "l0 bwd", 8.5, 10.5),
        ("comm", "l0…l1 all-gather", 0.0, 1.0), ("comm", "l2 all-gather", 1.0, 1.5),
        ("comm", "l2 re-gather", 4.0, 4.5), ("comm", "l0…l1 re-gather", 4.5, 5.5),
        ("comm", "l2 reduce-scatter", 6.5, 7.0), ("comm", "l0…l1 reduce-scatter", 10.5, 11.5)]
    assert step_ms(r) == 11.5


def test_units_group_layers_and_carry_layers_without_parameters():
    # act (no parameters) rides with the unit before it; a lone leading one joins unit 0.
    p = ModelProfile("m", (Layer("pre"), Layer("a", (MB,)), Layer("act"), Layer("b", (MB, MB)),
                           Layer("c", (3 * MB,))))
    units = shard_units(p, None)
    assert [(u.layers, u.names, u.tensor_ids, u.nbytes, u.first_layer, u.last_layer)
            for u in units] == [((0, 1, 2), ("a",), (0,), MB, 1, 1),
                                ((3,), ("b",), (1, 2), 2 * MB, 3, 3),
                                ((4,), ("c",), (3,), 3 * MB, 4, 4)]
    # 2 MiB units: a (1 MiB) is not full, a + b (3 MiB) is; c opens the next.
    assert [u.names for u in shard_units(p, 2 * MB)] == [("a", "b"), ("c",)]
    assert [u.names for u in shard_units(p, 100 * MB)] == [("a", "b", "c")]


def test_sharded_plans_as_an_executor_reads_them():
    p = plan(TOY, make_strategy("fsdp"))
    assert p.strategy.reshard_after_forward is True and p.strategy.implementation == "fsdp"
    assert p.shards_optimizer and make_strategy("zero2").reshard_after_forward is False
    rows = [(c.label, c.kind, c.nbytes, c.ready_at, c.ready_layer, c.gates)
            for c in p.collectives]
    assert rows == [
        ("l0 all-gather", ALL_GATHER, MB, "forward", 0, ("forward", 0)),
        ("l1 all-gather", ALL_GATHER, MB, "forward", 0, ("forward", 1)),
        ("l2 all-gather", ALL_GATHER, MB, "forward", 1, ("forward", 2)),
        ("l2 re-gather", ALL_GATHER, MB, "backward", 2, ("backward", 2)),
        ("l1 re-gather", ALL_GATHER, MB, "backward", 2, ("backward", 1)),
        ("l2 reduce-scatter", REDUCE_SCATTER, MB, "after_backward", 2, None),
        ("l0 re-gather", ALL_GATHER, MB, "backward", 1, ("backward", 0)),
        ("l1 reduce-scatter", REDUCE_SCATTER, MB, "after_backward", 1, None),
        ("l0 reduce-scatter", REDUCE_SCATTER, MB, "after_backward", 0, None)]
    # every micro-step gathers and reduce-scatters again
    p2 = plan(TOY, make_strategy("zero2", accum_steps=2))
    assert [c.micro_step for c in p2.collectives] == [0] * 6 + [1] * 6
    assert [c.launch_index for c in p2.collectives] == list(range(12))


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "2"])
def test_bad_shard_unit_is_an_input_error(bad):
    with pytest.raises(InputError, match="--shard-unit-mb: .* is not a number > 0"):
        make_strategy("fsdp", shard_unit_mb=bad)


@pytest.mark.parametrize("seed", range(6))
def test_closed_form_matches_the_engine_on_random_sharded_and_hooked_plans(seed, random_profile):
    rng = np.random.RandomState(300 + seed)
    link = Link("l", 20e-6, 2.0)
    for case in range(12):
        profile = random_profile(rng, grid=bool(case % 2), measured=bool(rng.rand() < 0.3))
        name = ["fsdp", "zero2", "ddp+fp16", "bucketed+powersgd:2"][case % 4]
        strategy = make_strategy(name, float(rng.choice([1, 4, 25])),
                                 accum_steps=int(rng.randint(1, 3)),
                                 shard_unit_mb=None if rng.rand() < 0.5 else 3.0)
        p = plan(profile, strategy)
        world = int(rng.choice([2, 3, 8]))
        inputs = resolve(profile, link, world)
        r = simulate(p, inputs, record=False)
        assert r.step_s == pytest.approx(closed_form_step_s(p, inputs),
                                         rel=1e-9, abs=1e-12), f"seed {seed} case {case} {name}"
        assert r.step_s >= r.compute_s * (1 - 1e-12)


def test_collective_laws_and_measured_fits_per_kind():
    from simddp.cost.single import collective_s
    from simddp.inputs.io import link_from_json, link_to_json
    from simddp.cost.factors import ALL_REDUCE, kind_factor
    from simddp.inputs.link import KindFit

    link = Link("l", alpha_s=1e-3, busbw_gbps=1.0)          # 1 GB/s = 1e6 bytes per ms
    # 4 ranks: an all-reduce sends 2·3/4 of n, a reduce-scatter or all-gather 3/4
    assert link.collective_s(ALL_REDUCE, 10**6, 4) == pytest.approx(1e-3 + 1.5e-3)
    assert link.collective_s(REDUCE_SCATTER, 10**6, 4) == pytest.approx(1e-3 + 0.75e-3)
    assert link.collective_s(ALL_GATHER, 10**6, 4) == pytest.approx(1e-3 + 0.75e-3)
    assert kind_factor(ALL_GATHER, 2) == 0.5
    # calibrate may measure a kind on its own: α 2 ms, busbw 0.5 GB/s for all-gathers
    fitted = Link("l", 1e-3, 1.0, kind_fits={"all_gather": {"alpha_s": 2e-3, "busbw_gbps": 0.5}})
    assert fitted.kind_fits == {"all_gather": KindFit(2e-3, 0.5)}
    assert fitted.collective_s(ALL_GATHER, 10**6, 4) == pytest.approx(2e-3 + 1.5e-3)
    assert fitted.collective_s(REDUCE_SCATTER, 10**6, 4) == pytest.approx(1e-3 + 0.75e-3)
    assert link_from_json(link_to_json(fitted)) == fitted                # files keep them
    assert fitted.time_scaled(2.0).collective_s(ALL_GATHER, 10**6, 4) == pytest.approx(7e-3)
    assert fitted.with_overrides(busbw_gbps=2.0).kind_fits == {}         # one line again
    # waited for (FSDP2 on Gloo): a fit's lone α plus what waiting costs an all-reduce,
    # blocking α 3 ms − α 1 ms = 2 ms; a kind without a fit takes the blocking α itself
    waits = GlooHost(blocking_alpha_s=3e-3)
    assert collective_s(fitted, ALL_GATHER, 10**6, 4, blocking=True,
                        host=waits) == pytest.approx(5.5e-3)
    assert collective_s(fitted, ALL_GATHER, 10**6, 4, host=waits) == pytest.approx(3.5e-3)
    assert collective_s(fitted, REDUCE_SCATTER, 10**6, 4, blocking=True,
                        host=waits) == pytest.approx(3.75e-3)
    with pytest.raises(InputError, match="kind_fits: unknown kind 'broadcast'"):
        Link("l", 0.0, 1.0, kind_fits={"broadcast": KindFit(0.0, 1.0)})
    with pytest.raises(InputError, match="kind_fits.all_gather.busbw_gbps"):
        Link("l", 0.0, 1.0, kind_fits={"all_gather": {"alpha_s": 0.0, "busbw_gbps": 0.0}})


# --- FSDP2's host work and its blocking collectives (the "fsdp" implementation's HostCosts) ---

def run_host(name: str, costs: HostCosts, profile: ModelProfile = TOY):
    host = Host("box", {"fsdp": costs})
    return simulate(plan(profile, make_strategy(name)), resolve(profile, unit_link(), 2, host=host))


def test_fsdp2_host_work_lands_where_it_issues_and_copies_out():
    # Copies 1 MiB per ms, 0.5 ms per call. All-gather: at issue 0.5 + shard (½ MiB) 0.5 ms,
    # once done the whole unit out 1 ms. Reduce-scatter: at issue 0.5 + 1 ms in, out ½ ms.
    costs = HostCosts(copy_gbps=MB / 1e6, gather_s=0.5e-3, scatter_s=0.5e-3)
    r = run_host("zero2", costs)
    assert timeline(r) == [
        ("compute", "l0 all-gather issue", 0.0, 1.0),      # reaching l0 issues AG(l0), AG(l1)
        ("compute", "l1 all-gather issue", 1.0, 2.0),
        ("compute", "l0 all-gather copy-out", 2.0, 3.0),   # AG(l0) done at 1.5
        ("compute", "l0 fwd", 3.0, 4.0),
        ("compute", "l2 all-gather issue", 4.0, 5.0),      # reaching l1 issues AG(l2)
        ("compute", "l1 all-gather copy-out", 5.0, 6.0),
        ("compute", "l1 fwd", 6.0, 7.0),
        ("compute", "l2 all-gather copy-out", 7.0, 8.0),
        ("compute", "l2 fwd", 8.0, 9.0),
        ("compute", "l2 bwd", 9.0, 11.0), ("compute", "copy-in", 11.0, 12.5),   # RS(l2) issue
        ("compute", "l1 bwd", 12.5, 14.5), ("compute", "copy-in", 14.5, 16.0),
        ("compute", "l0 bwd", 16.0, 18.0), ("compute", "copy-in", 18.0, 19.5),
        ("compute", "l2 reduce-scatter copy-out", 19.5, 20.0),   # the step's end, in order
        ("compute", "l1 reduce-scatter copy-out", 20.0, 20.5),
        ("compute", "l0 reduce-scatter copy-out", 20.5, 21.0),
        ("comm", "l0 all-gather", 1.0, 1.5), ("comm", "l1 all-gather", 2.0, 2.5),
        ("comm", "l2 all-gather", 5.0, 5.5),
        ("comm", "l2 reduce-scatter", 12.5, 13.0), ("comm", "l1 reduce-scatter", 16.0, 16.5),
        ("comm", "l0 reduce-scatter", 19.5, 20.0)]
    # 9 ms compute + 3 × (1 + 1) all-gathers + 3 × (1.5 + 0.5) reduce-scatters, all overlapped
    assert step_ms(r) == 21.0


def test_blocking_collectives_hold_the_compute_lane():
    # Gloo on CPU: each collective runs on the training thread, so compute waits for it where
    # it is issued; the wire adds up to the compute (zero2: 9 + 6 × 0.5 ms).
    r = run_host("zero2", HostCosts(blocking_collectives=True))
    assert timeline(r) == [
        ("compute", "l0 fwd", 1.0, 2.0),     # AG(l0) 0–0.5 then the prefetched AG(l1) 0.5–1.0
        ("compute", "l1 fwd", 2.5, 3.5),     # AG(l2), issued on reaching l1: 2.0–2.5
        ("compute", "l2 fwd", 3.5, 4.5),
        ("compute", "l2 bwd", 4.5, 6.5), ("compute", "l1 bwd", 7.0, 9.0),
        ("compute", "l0 bwd", 9.5, 11.5),
        ("comm", "l0 all-gather", 0.0, 0.5), ("comm", "l1 all-gather", 0.5, 1.0),
        ("comm", "l2 all-gather", 2.0, 2.5),
        ("comm", "l2 reduce-scatter", 6.5, 7.0), ("comm", "l1 reduce-scatter", 9.0, 9.5),
        ("comm", "l0 reduce-scatter", 11.5, 12.0)]
    assert step_ms(r) == 12.0
    assert step_ms(run_host("fsdp", HostCosts(blocking_collectives=True))) == 9.0 + 9 * 0.5
    # without blocking, the plan's overlap: 10.5 and 10.0 ms (the timelines above)
    assert step_ms(run_host("fsdp", HostCosts())) == 10.5


def test_blocking_collectives_pay_their_own_kinds_waited_for_alpha():
    # calibrate measured each kind waited for: all-gather 0.25 ms, reduce-scatter 0.5 ms of α
    # (the all-reduce's wait, blocking α 2 ms − α 0, is not added to them). zero2, blocking:
    # 3 all-gathers of 0.25 + 0.5 ms and 3 reduce-scatters of 0.5 + 0.5 ms on the 9 ms lane.
    from simddp.inputs.link import KindFit
    link = LinkFile(
        replace(unit_link(), kind_fits={ALL_GATHER: KindFit(0.0, MB / 1e6),
                                        REDUCE_SCATTER: KindFit(0.0, MB / 1e6)}),
        host=GlooHost(blocking_alpha_s=2e-3, kind_blocking_alpha_s={ALL_GATHER: 0.25e-3,
                                                                    REDUCE_SCATTER: 0.5e-3}))
    host = Host("box", {"fsdp": HostCosts(blocking_collectives=True)})
    zero2 = plan(TOY, make_strategy("zero2"))
    r = simulate(zero2, resolve(TOY, link, 2, host=host))
    assert timeline(r)[-6:] == [
        ("comm", "l0 all-gather", 0.0, 0.75), ("comm", "l1 all-gather", 0.75, 1.5),
        ("comm", "l2 all-gather", 2.5, 3.25),   # issued on reaching l1, after l0 fwd 1.5-2.5
        ("comm", "l2 reduce-scatter", 7.25, 8.25), ("comm", "l1 reduce-scatter", 10.25, 11.25),
        ("comm", "l0 reduce-scatter", 13.25, 14.25)]
    assert step_ms(r) == 9.0 + 3 * 0.75 + 3 * 1.0
    # without their own, each pays its lone α 0 + the all-reduce's wait 2 ms
    old = replace(link, host=replace(link.host, kind_blocking_alpha_s={}))
    assert step_ms(simulate(zero2, resolve(TOY, old, 2, host=host))) == 9.0 + 6 * 2.5


def test_fsdp2_host_costs_change_no_other_implementation_and_round_trip():
    costs = HostCosts(copy_gbps=1.0, gather_s=1e-3, scatter_s=2e-3, blocking_collectives=True)
    host = Host("box", {"fsdp": costs})
    assert host.costs("fsdp").blocking_collectives and not costs.free
    assert not HostCosts(gather_s=1e-3).free and HostCosts().free
    assert host_from_json(host_to_json(host)) == host
    for name in ("flat", "ddp", "bucketed"):
        p = plan(TOY, make_strategy(name))
        assert simulate(p, resolve(TOY, unit_link(), 2, host=host)).step_s == \
            simulate(p, resolve(TOY, unit_link(), 2)).step_s
    with pytest.raises(InputError, match="blocking_collectives"):
        HostCosts(blocking_collectives="yes")
    with pytest.raises(InputError, match="gather_s"):
        HostCosts(gather_s=-1.0)
