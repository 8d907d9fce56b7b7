"""The α–β closed form of bucketed overlap DDP against the DES on uniform layers.

Uniform model: 120 layers, one 1,000,000-byte gradient each (s = 120 MB), 0.1 ms of backward
each (B = 12 ms), no forward/optimizer. Two ranks, so β = 2·1/2 / busbw = 1/busbw. A bucket
of k layers is ready every k·0.1 ms; when k divides 120 the DES timeline is exactly the one
the closed form assumes, so T(b) must match to float noise there.
"""
from __future__ import annotations

import math

import pytest

from simddp.analytic.closed_form import closed_form_step_s
from simddp.sim.engine import simulate
from simddp.errors import InputError
from simddp.inputs.contention import Contention
from simddp.inputs.link import Link, LinkPiece
from simddp.inputs.resolved import Inputs
from simddp.presets.models import build_profile, parse_model
from simddp.presets.links import get_link
from simddp.analytic.optimal_bucket import (COMM_BOUND, COMPUTE_BOUND, ONE_BUCKET, closed_form_optimum,
                                   exposed_s, optimal_bucket_bytes, optimum, overhead_s)
from simddp.planning.plans import plan
from simddp.inputs.profile import Layer, ModelProfile
from simddp.planning.strategy import MB, Strategy, make_strategy

L, G = 120, 1_000_000
UNIFORM = ModelProfile("uniform", tuple(Layer(f"l{i}", (G,), 0.0, 1e-4) for i in range(L)))
S, B = L * G, L * 1e-4


def bucketed(k_layers: int) -> Strategy:
    b = k_layers * G
    return Strategy("bucketed", "bucket", True, b, b)   # textbook: first bucket = cap


def des_exposed_s(profile: ModelProfile, link: Link, strategy: Strategy) -> float:
    # the bare engine: no contention, as the closed form assumes
    return simulate(plan(profile, strategy), Inputs(profile, link, 2),
                    record=False).exposed_comm_s


def test_comm_bound_hand_computed():
    # busbw 5 GB/s: β·s = 24 ms > B = 12 ms, so the lane is the bottleneck at every b.
    # α = 120 µs: b* = s·√(α/B) = 120e6·√0.01 = 12e6 bytes (12 layers, 10 buckets).
    # T* = 2√(αB) + β·s − B = 2·1.2 ms + 24 ms − 12 ms = 14.4 ms.
    link = Link("l", 120e-6, 5.0)
    b, t_s = optimal_bucket_bytes(UNIFORM, link, 2)
    assert b == 12_000_000 and t_s == pytest.approx(14.4e-3, rel=1e-12)
    # DES: bucket 1 ready at 1.2 ms, then 10 back-to-back calls of 0.12 + 2.4 ms → 26.4 ms;
    # backward ends at 12 ms → 14.4 ms exposed.
    assert des_exposed_s(UNIFORM, link, bucketed(12)) == pytest.approx(14.4e-3, rel=1e-9)
    assert closed_form_optimum(UNIFORM, link, 2)["regime"] == COMM_BOUND


def test_compute_bound_hand_computed():
    # busbw 20 GB/s: β = 5e-11 s/byte, β·s = 6 ms < B. Slack B/s − β = 5e-11 s/byte.
    # α = 400 µs: the lane keeps pace from b = α / slack = 8e6 bytes (8 layers) up; the
    # stationary point s·√(α/B) = 21.9e6 lies beyond it, so b* = 8e6, T* = α + β·b = 0.8 ms.
    link = Link("l", 400e-6, 20.0)
    b, t_s = optimal_bucket_bytes(UNIFORM, link, 2)
    assert b == 8_000_000 and t_s == pytest.approx(0.8e-3, rel=1e-12)
    # DES: each 8-layer bucket (0.8 ms of backward) all-reduces in 0.4 + 0.4 ms, so only the
    # last one, ready at 12 ms, sticks out: 0.8 ms.
    assert des_exposed_s(UNIFORM, link, bucketed(8)) == pytest.approx(0.8e-3, rel=1e-9)
    assert closed_form_optimum(UNIFORM, link, 2)["regime"] == COMPUTE_BOUND


def test_under_contention_the_closed_form_answers_what_the_rows_do():
    # Compute x1.5 while a collective runs, a collective x2 while compute runs; α 120 µs,
    # busbw 5 GB/s (comm-bound). The lane does B·1.5/2 = 9 ms of its work during the slowed
    # backward: B̃ = 9 ms, and the backward's own 12·0.5 = 6 ms count as exposed.
    link, contention = Link("l", 120e-6, 5.0), Contention(1.5, 2.0, source="given")
    # at 12 layers: b·B̃/s + (s/b)·α + β·s − B̃ + 6 = 0.9 + 1.2 + 24 − 9 + 6 = 23.1 ms
    assert overhead_s(UNIFORM, link, 2, 12e6, contention) == pytest.approx(23.1e-3, rel=1e-12)
    # the DES: bucket 1 ready at 1.2 ms; the other 10.8 ms of backward take 16.2 ms beside the
    # lane, which does 8.1 of its 25.2 ms meanwhile; 17.1 ms remain after 17.4 → 34.5 − 12
    des_s = simulate(plan(UNIFORM, bucketed(12)), Inputs(UNIFORM, link, 2, contention=contention),
                     record=False).exposed_comm_s
    assert des_s == pytest.approx(22.5e-3, rel=1e-9)
    # b* = s·√(α/B̃) = 13.86 MB, 2√(αB̃) + β·s − B̃ + 6 = 23.08 ms; without contention 14.4 ms
    b, t_s = optimal_bucket_bytes(UNIFORM, link, 2, contention)
    assert b == round(S * math.sqrt(120e-6 / 9e-3))
    assert t_s == pytest.approx(2 * math.sqrt(120e-6 * 9e-3) + 24e-3 - 9e-3 + 6e-3, rel=1e-9)
    assert closed_form_optimum(UNIFORM, link, 2, contention)["contention"] == [1.5, 2.0]


def test_formula_regimes_and_clamps():
    # exposed_s is the max of the two terms; check each side by hand (s=100, B=1, β=0.01).
    assert exposed_s(10, 100, 1.0, 0.0, 0.01) == pytest.approx(max(0.1, 0.1 + 1 - 1))
    assert exposed_s(50, 100, 1.0, 0.1, 0.001) == pytest.approx(max(0.15, 0.5 + 0.2 + 0.1 - 1))
    assert exposed_s(500, 100, 1.0, 0.1, 0.01) == exposed_s(100, 100, 1.0, 0.1, 0.01) == 1.1
    # α ≥ B: s·√(α/B) ≥ s, one bucket (b = s): T = α + β·s.
    assert optimum(100, 1.0, 2.0, 0.01) == (100, pytest.approx(3.0), ONE_BUCKET)
    # Nothing to overlap with: one bucket.
    assert optimum(100, 0.0, 0.1, 0.01)[::2] == (100, ONE_BUCKET)
    # No per-call cost and a fast link: smaller is always better, down to the floor.
    assert optimum(100, 1.0, 0.0, 0.001, min_bucket_bytes=5)[0] == 5


@pytest.mark.parametrize("alpha_us, busbw, regime", [
    (20, 1.5, COMM_BOUND), (100, 3.0, COMM_BOUND), (500, 6.0, COMM_BOUND),
    (1000, 0.5, COMM_BOUND),
    (100, 20.0, COMPUTE_BOUND), (300, 40.0, COMPUTE_BOUND), (700, 25.0, COMPUTE_BOUND),
    (1000, 20.0, COMPUTE_BOUND),
])
def test_des_grid_minimum_agrees_with_closed_form(alpha_us, busbw, regime):
    """Over every bucket size of k whole layers (k = 1…120), with the DES engine:

    1. where k divides 120 (no ragged last bucket), DES == T(b) to 1e-9 — the derivation;
    2. everywhere, DES ≥ T* — the closed-form optimum is a lower bound on uniform layers
       (a ragged last bucket only adds a call or a tail);
    3. the DES minimum is reached between the two divisor sizes that bracket b*, and is no
       worse than the closed form at those two sizes — "agrees within grid resolution".
    """
    link = Link("l", alpha_us * 1e-6, busbw)
    b_star, t_star = optimal_bucket_bytes(UNIFORM, link, 2)
    assert closed_form_optimum(UNIFORM, link, 2)["regime"] == regime
    grid = {k: des_exposed_s(UNIFORM, link, bucketed(k)) for k in range(1, L + 1)}
    divisors = [k for k in grid if L % k == 0]
    for k in divisors:
        assert grid[k] == pytest.approx(overhead_s(UNIFORM, link, 2, k * G), rel=1e-9, abs=1e-12)
    assert min(grid.values()) >= t_star * (1 - 1e-9)
    below = max([k for k in divisors if k * G <= b_star], default=1)
    above = min([k for k in divisors if k * G >= b_star], default=L)
    k_des = min(grid, key=grid.get)
    assert below <= k_des <= above
    assert grid[k_des] <= min(grid[below], grid[above])


def test_des_and_recurrence_agree_on_the_grid():
    # The fine grid above uses the engine; the recurrence (closed_form_step_s) is the same
    # plan without events and must give the same exposed time.
    link = Link("l", 300e-6, 2.0)
    for k in (1, 7, 13, 40, 120):
        st = bucketed(k)
        recurrence_s = closed_form_step_s(plan(UNIFORM, st), Inputs(UNIFORM, link, 2)) - B
        assert des_exposed_s(UNIFORM, link, st) == pytest.approx(recurrence_s, rel=1e-9)


def test_world_size_enters_through_beta():
    # 4 ranks: β = 2·3/4 / busbw = 1.5/busbw; with busbw 7.5 GB/s that is 1/5e9, the same as
    # the 2-rank 5 GB/s case above → same optimum.
    assert optimal_bucket_bytes(UNIFORM, Link("l", 120e-6, 7.5), 4) == \
        (12_000_000, pytest.approx(14.4e-3, rel=1e-12))


def test_piecewise_link_picks_best_segment():
    # Small messages: low α, poor bandwidth; large: high α, full bandwidth. The optimum must
    # be the brute-force minimum of overhead_s over a fine log grid (T is convex per segment).
    link = Link("pw", 50e-6, 5.0, pieces=(LinkPiece(2e6, 20e-6, 2.0), LinkPiece(None, 200e-6, 5.0)))
    b, t_s = optimal_bucket_bytes(UNIFORM, link, 2)
    sizes = [10 ** (4 + i / 400) for i in range(4 * 400 + 1)]          # 10 kB … 100 MB
    brute = min(overhead_s(UNIFORM, link, 2, x) for x in sizes)
    assert t_s <= brute * (1 + 1e-6)
    assert overhead_s(UNIFORM, link, 2, b) == pytest.approx(t_s)


def test_default_sweep_profile_is_close():
    """transformer-small @a100 b8s1024, eth-100g, 2 ranks (docs/ACCOUNT.md): closed form
    15.9 MB / 10.94 ms; the DES minimum over 0.5…100 MB is 11.04 ms at ≈ 27–28 MB. The
    overhead agrees to 1%; the bucket size does not (31 MB embedding/head tensors, 9.4 MB FFN
    tensors), and the DES curve is flat there (within 0.65 ms between 10 and 30 MB)."""
    profile = build_profile(parse_model("transformer-small"), "a100", 8, 1024)
    link = get_link("eth-100g")
    opt = closed_form_optimum(profile, link, 2)
    assert opt["regime"] == COMM_BOUND and 15 < opt["bucket_mb"] < 17
    des = {mb: des_exposed_s(profile, link, make_strategy("bucketed", mb))
           for mb in (5, 10, 15, 20, 25, 27.5, 30, 40, 50)}
    assert min(des.values()) == pytest.approx(opt["overhead_ms"] / 1e3, rel=0.03)
    at_opt = des_exposed_s(profile, link, make_strategy("bucketed", opt["bucket_mb"]))
    assert at_opt <= min(des.values()) * 1.06


def test_bad_world_size():
    with pytest.raises(InputError, match="--world-size"):
        optimal_bucket_bytes(UNIFORM, Link("l", 1e-4, 1.0), 1)


def test_closed_form_optimum_keys():
    opt = closed_form_optimum(UNIFORM, Link("l", 120e-6, 5.0), 2)
    assert set(opt) >= {"bucket_mb", "overhead_ms", "regime"}
    assert opt["bucket_mb"] == pytest.approx(12e6 / 2**20)
    assert opt["overhead_ms"] == pytest.approx(14.4) and math.isclose(opt["buckets"], 10.0)


def test_the_sweep_says_why_the_closed_form_and_the_simulator_disagree(capsys):
    """One 96 MiB embedding ready last and small layers before it: the closed form wants
    small even buckets, the simulator knows the embedding can neither be split nor overlap."""
    from simddp.analytic.optimum_gap import UNEVEN, gap_line, reasons, uneven_readiness
    from simddp.predict.sweep import sweep
    layers = (Layer("emb", (96 * MB,), 1e-3, 1e-3),) + tuple(
        Layer(f"l{i}", (MB // 4,), 1e-3, 4e-3) for i in range(16))
    lumpy = ModelProfile("lumpy", layers)
    link = Link("l", 2e-4, 10.0)
    opt = closed_form_optimum(lumpy, link, 2)
    results = sweep(lumpy, link, 2, ["bucketed"], [0.25, 1, 4, 16, 64, 256])
    line = gap_line(Inputs(lumpy, link, 2), opt, results)
    # both reasons hold here: the embedding outgrows the closed form's bucket, and the bytes
    # are not ready evenly; the line gives them (and no other)
    assert max(lumpy.tensor_bytes) >= opt["bucket_bytes"]
    assert uneven_readiness(lumpy) > UNEVEN
    why = reasons(Inputs(lumpy, link, 2), opt)
    assert len(why) == 2 and line is not None and all(reason in line for reason in why)
    # 100 even 1 MiB layers, α 2 ms: closed form 2.23 MB, 2.234 ms; simulated 5 MB, 2.52 ms
    even = ModelProfile("even", tuple(Layer(f"l{i}", (MB,), 0, 1e-3) for i in range(100)))
    slow = Link("slow", 2e-3, 10.0)
    assert gap_line(Inputs(even, slow, 2), closed_form_optimum(even, slow, 2),
                    sweep(even, slow, 2, ["bucketed"], [1, 2, 5, 10, 25, 50])) is None
