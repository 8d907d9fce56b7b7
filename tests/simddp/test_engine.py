"""The SimPy engine on hand-computed timelines (the link law: test_link.py; random models
against the closed form: test_closed_form.py).

Every timeline uses the same toy: 3 layers l0, l1, l2, each 1 ms forward and 2 ms backward,
one 1 MiB gradient each (tensor ids 0, 1, 2; ready in the order 2, 1, 0), on 2 ranks over a
link where one 1 MiB all-reduce takes 1 ms (2(p−1)/p = 1 at p = 2, busbw = 1 MiB/ms) plus α.
Without sync the compute lane always reads::

    forward 0–3 | l2 bwd 3–5 | l1 bwd 5–7 | l0 bwd 7–9      (compute-only step: 9 ms)

so a gradient of layer i is ready at 5, 7, 9 ms for i = 2, 1, 0. Spans are listed compute lane
first, then comm, each in time order, as ``(lane, label, start_ms, end_ms)``.
"""
from __future__ import annotations


import pytest

from simddp.analytic.closed_form import closed_form_step_s
from simddp.cost.factors import ALL_REDUCE
from simddp.cost.single import collective_s
from simddp.sim.engine import compute_only_s, simulate
from simddp.errors import InputError
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.planning.plans import plan
from simddp.inputs.profile import Layer, ModelProfile
from simddp.result import COMM, COMPUTE
from simddp.planning.strategy import ACCUM_BASELINE, MB, STRATEGIES, make_strategy
from simddp.predict.resolve import resolve

TOY = ModelProfile("toy3", tuple(Layer(f"l{i}", (MB,), 1e-3, 2e-3) for i in range(3)))
COMPUTE_LANE = [("compute", "forward", 0.0, 3.0), ("compute", "l2 bwd", 3.0, 5.0),
                ("compute", "l1 bwd", 5.0, 7.0), ("compute", "l0 bwd", 7.0, 9.0)]


def unit_link(alpha_ms: float = 0.0) -> Link:
    """1 MiB takes 1 ms (+ α) between 2 ranks."""
    return Link("unit", alpha_ms * 1e-3, MB / 1e6)


def run(name: str, link: Link | LinkFile | None = None, profile: ModelProfile = TOY,
        world_size: int = 2, **strategy_kw):
    p = plan(profile, make_strategy(name, **strategy_kw))
    return simulate(p, resolve(profile, link or unit_link(), world_size))


def timeline(result) -> list[tuple[str, str, float, float]]:
    rank = {COMPUTE: 0, COMM: 1}
    spans = [(s.lane, s.label, round(s.start_s * 1e3, 9), round(s.end_s * 1e3, 9))
             for s in result.spans]
    return sorted(spans, key=lambda s: (rank[s[0]], s[2], s[3]))


def step_ms(result) -> float:
    return round(result.step_s * 1e3, 9)


# --- every strategy on round numbers, α = 0 ------------------------------------------------

def test_naive_all_reduces_each_tensor_after_the_backward():
    # Nothing may start before l0's backward ends at 9; then 1 ms per tensor in ready order.
    r = run("naive")
    assert timeline(r) == COMPUTE_LANE + [
        ("comm", "grad2", 9.0, 10.0), ("comm", "grad1", 10.0, 11.0),
        ("comm", "grad0", 11.0, 12.0)]
    assert step_ms(r) == 12.0
    assert r.collectives == 3
    assert (round(r.exposed_comm_s * 1e3, 9), round(r.compute_s * 1e3, 9)) == (3.0, 9.0)


def test_blocking_alpha_applies_to_plans_that_wait_for_each_collective():
    # α 0.25 ms for overlapped all-reduces, 0.5 ms when each is waited for before the next:
    # naive (blocking) runs grad2 9-10.5, grad1 10.5-12, grad0 12-13.5; overlap is untouched
    # (grad2 5-6.25, grad1 7-8.25, grad0 9-10.25), and the closed form agrees with both.
    link = LinkFile(Link("unit", 0.25e-3, MB / 1e6), host=GlooHost(blocking_alpha_s=0.5e-3))
    naive = run("naive", link)
    assert timeline(naive)[4:] == [("comm", "grad2", 9.0, 10.5), ("comm", "grad1", 10.5, 12.0),
                                   ("comm", "grad0", 12.0, 13.5)]
    overlap = run("overlap", link)
    assert timeline(overlap)[4:] == [("comm", "grad2", 5.0, 6.25), ("comm", "grad1", 7.0, 8.25),
                                     ("comm", "grad0", 9.0, 10.25)]
    assert step_ms(run("flat", link)) == 12.5       # one 3 MiB all-reduce: 9 + 0.5 + 3
    for name, r in (("naive", naive), ("overlap", overlap)):
        assert r.step_s == pytest.approx(
            closed_form_step_s(plan(TOY, make_strategy(name)), resolve(TOY, link, 2)), rel=1e-9)
    assert link.link.allreduce_s(MB, 2) == pytest.approx(1.25e-3)
    assert collective_s(link.link, ALL_REDUCE, MB, 2, blocking=True,
                        host=link.host) == pytest.approx(1.5e-3)
    with pytest.raises(InputError, match="blocking_alpha_s"):
        GlooHost(blocking_alpha_s=-1e-3)


def test_flat_all_reduces_everything_at_once_after_the_backward():
    # One 3 MiB collective from 9: 3 ms. With α = 0 this ties naive.
    r = run("flat")
    assert timeline(r) == COMPUTE_LANE + [("comm", "flat", 9.0, 12.0)]
    assert step_ms(r) == 12.0 and r.collectives == 1


def test_overlap_launches_each_gradient_when_its_layer_is_done():
    # tensor 2 ready at 5 -> 5–6, tensor 1 at 7 -> 7–8, tensor 0 at 9 -> 9–10: only the last
    # all-reduce is exposed.
    r = run("overlap")
    assert timeline(r) == COMPUTE_LANE + [
        ("comm", "grad2", 5.0, 6.0), ("comm", "grad1", 7.0, 8.0),
        ("comm", "grad0", 9.0, 10.0)]
    assert step_ms(r) == 10.0 and round(r.exposed_comm_s * 1e3, 9) == 1.0


def test_bucketed_cap_of_two_tensors():
    # Cap 2 MiB: bucket0 = tensors (2, 1), ready with tensor 1 at 7 -> 7–9 (2 MiB);
    # bucket1 = (0,), ready at 9 -> 9–10.
    r = run("bucketed", bucket_mb=2)
    assert timeline(r) == COMPUTE_LANE + [
        ("comm", "bucket0", 7.0, 9.0), ("comm", "bucket1", 9.0, 10.0)]
    assert step_ms(r) == 10.0 and r.bucket_mb == 2.0


def test_ddp_small_first_bucket_launches_earlier_but_leaves_a_bigger_last_one():
    # First bucket 1 MiB: tensor 2 alone, ready at 5 -> 5–6. The cap then holds (1, 0),
    # ready at 9 -> 9–11. Versus bucketed above, the first launch moves from 7 to 5 ms but the
    # exposed tail grows from 1 to 2 ms: 11 ms instead of 10.
    r = run("ddp", bucket_mb=2)
    assert timeline(r) == COMPUTE_LANE + [
        ("comm", "bucket0", 5.0, 6.0), ("comm", "bucket1", 9.0, 11.0)]
    assert step_ms(r) == 11.0


def test_ddp_small_first_bucket_wins_when_the_cap_holds_the_whole_model():
    # Cap 25 MiB > 3 MiB. Textbook bucketing: one 3 MiB bucket at 9 -> 9–12. DDP's 1 MiB first
    # bucket overlaps tensor 2 with l1's backward (5–6), leaving 2 MiB at 9 -> 9–11: 1 ms saved.
    bucketed, ddp = run("bucketed", bucket_mb=25), run("ddp", bucket_mb=25)
    assert timeline(bucketed) == COMPUTE_LANE + [("comm", "bucket0", 9.0, 12.0)]
    assert timeline(ddp) == COMPUTE_LANE + [
        ("comm", "bucket0", 5.0, 6.0), ("comm", "bucket1", 9.0, 11.0)]
    assert (step_ms(bucketed), step_ms(ddp)) == (12.0, 11.0)


# --- the same with α = 1 ms: every collective costs 1 ms more --------------------------------

@pytest.mark.parametrize("name, kw, comm, step", [
    # 3 per-tensor collectives of 2 ms after 9.
    ("naive", {}, [("grad2", 9, 11), ("grad1", 11, 13), ("grad0", 13, 15)], 15),
    # One collective pays α once: 1 + 3 = 4 ms after 9. Now flat beats naive by 2 α.
    ("flat", {}, [("flat", 9, 13)], 13),
    # 5–7, 7–9, 9–11: each 2 ms collective ends just as the next gradient is ready.
    ("overlap", {}, [("grad2", 5, 7), ("grad1", 7, 9), ("grad0", 9, 11)], 11),
    # (2, 1) at 7: 1 + 2 -> 7–10; (0,) ready at 9 waits for the link: 10–12.
    ("bucketed", {"bucket_mb": 2}, [("bucket0", 7, 10), ("bucket1", 10, 12)], 12),
    # (2,) at 5: 5–7; (1, 0) at 9: 1 + 2 -> 9–12.
    ("ddp", {"bucket_mb": 2}, [("bucket0", 5, 7), ("bucket1", 9, 12)], 12),
])
def test_every_strategy_with_one_ms_alpha(name, kw, comm, step):
    r = run(name, unit_link(alpha_ms=1.0), **kw)
    assert timeline(r) == COMPUTE_LANE + [("comm", label, float(a), float(b))
                                          for label, a, b in comm]
    assert step_ms(r) == step


def test_world_size_scales_the_bandwidth_term():
    # At 4 ranks a 1 MiB ring all-reduce moves 2·3/4 = 1.5 MiB per rank: 1.5 ms each.
    r = run("overlap", world_size=4)
    assert timeline(r)[4:] == [("comm", "grad2", 5.0, 6.5), ("comm", "grad1", 7.0, 8.5),
                               ("comm", "grad0", 9.0, 10.5)]
    assert step_ms(r) == 10.5


def test_optimizer_runs_after_the_last_collective():
    # overlap ends its last collective at 10; a 1 ms optimizer then runs 10–11.
    toy = ModelProfile("toy3", TOY.layers, optimizer_s=1e-3)
    r = run("overlap", profile=toy)
    assert timeline(r)[:5] == COMPUTE_LANE + [("compute", "optimizer", 10.0, 11.0)]
    assert step_ms(r) == 11.0 and r.compute_s == pytest.approx(10e-3)


def test_buckets_launch_in_bucket_order_not_readiness_order():
    # Measured ready order 0, 2, 1 with a 2 MiB cap: bucket0 = (0, 2) ready at 9 (tensor 0 is
    # l0's), bucket1 = (1,) ready at 7 — but it launches second, like torch DDP: 9–11, 11–12.
    tied = ModelProfile("tied", TOY.layers, ready_order=(0, 2, 1))
    r = run("bucketed", profile=tied, bucket_mb=2)
    assert timeline(r) == COMPUTE_LANE + [
        ("comm", "bucket0", 9.0, 11.0), ("comm", "bucket1", 11.0, 12.0)]


# --- gradient accumulation: no_sync vs syncing every micro-step -----------------------------

def test_no_sync_two_micro_steps():
    # Micro-step 0 syncs nothing: 0–9. Micro-step 1 is the ddp timeline shifted by 9:
    # bucket0 (2,) at 14 -> 14–15, bucket1 (1, 0) at 18 -> 18–20.
    r = run("no_sync", accum_steps=2)
    assert timeline(r) == COMPUTE_LANE + [
        ("compute", "forward", 9.0, 12.0), ("compute", "l2 bwd", 12.0, 14.0),
        ("compute", "l1 bwd", 14.0, 16.0), ("compute", "l0 bwd", 16.0, 18.0),
        ("comm", "bucket0", 14.0, 15.0), ("comm", "bucket1", 18.0, 20.0)]
    assert step_ms(r) == 20.0 and r.collectives == 2 and r.accum_steps == 2


def test_sync_each_two_micro_steps():
    # Every micro-step is the 11 ms ddp step: the next forward waits for the sync (11–14).
    r = run(ACCUM_BASELINE, accum_steps=2)
    assert timeline(r) == COMPUTE_LANE + [
        ("compute", "forward", 11.0, 14.0), ("compute", "l2 bwd", 14.0, 16.0),
        ("compute", "l1 bwd", 16.0, 18.0), ("compute", "l0 bwd", 18.0, 20.0),
        ("comm", "bucket0", 5.0, 6.0), ("comm", "bucket1", 9.0, 11.0),
        ("comm", "bucket0", 16.0, 17.0), ("comm", "bucket1", 20.0, 22.0)]
    assert step_ms(r) == 22.0 and r.collectives == 4


def test_four_micro_steps_no_sync_saves_the_exposed_sync_of_three():
    # no_sync: 3 silent micro-steps (27 ms), then 27 + 11 = 38. sync_each: 4 × 11 = 44.
    # The difference is 3 × the 2 ms exposed tail of a synced micro-step.
    no_sync, each = run("no_sync", accum_steps=4), run(ACCUM_BASELINE, accum_steps=4)
    assert timeline(no_sync)[-2:] == [("comm", "bucket0", 32.0, 33.0),
                                      ("comm", "bucket1", 36.0, 38.0)]
    assert [s for s in timeline(no_sync) if s[1] == "forward"] == [
        ("compute", "forward", t, t + 3.0) for t in (0.0, 9.0, 18.0, 27.0)]
    assert [s[2:] for s in timeline(each) if s[0] == "comm"] == [
        span for k in range(4) for span in ((5.0 + 11 * k, 6.0 + 11 * k),
                                             (9.0 + 11 * k, 11.0 + 11 * k))]
    assert (step_ms(no_sync), step_ms(each)) == (38.0, 44.0)
    assert (no_sync.collectives, each.collectives) == (2, 8)


# --- the result ----------------------------------------------------------------------------

def test_result_fields_and_switches():
    stats: dict = {}
    p = plan(TOY, make_strategy("bucketed", 2))
    r = simulate(p, resolve(TOY, unit_link(), 2), record=False, stats=stats)
    assert (r.model, r.link, r.strategy, r.bucket_mb, r.world_size) == ("toy3", "unit",
                                                                       "bucketed", 2.0, 2)
    assert (r.spans, r.source, r.accum_steps, r.collectives) == ((), "predicted", 1, 2)
    assert r.step_ms == pytest.approx(10.0) and stats["events"] > 0
    assert run("naive").bucket_mb is None
    assert compute_only_s(TOY, 3) == pytest.approx(27e-3)
