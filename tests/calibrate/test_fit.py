"""calibrate.fit and calibrate.nccl_table on synthetic data with known answers.

    python -m pytest tests/calibrate/test_fit.py -q      # < 2 s, no torch, no processes

Sizes are the default sweep (1 KiB..64 MiB by 2, 17 sizes); α and busbw are round numbers,
so a recovered value is checked against the number that made the data.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from calibrate.fit import (MAX_BUSBW_GBPS, PiecewiseFit, fit_alpha_beta, fit_piecewise,
                           heldout_error, heldout_mask, predict_s, suggest_piecewise, to_link)
from calibrate.analysis import WorldCalibration
from calibrate.files import csv_text
from calibrate.nccl_table import bandwidths_gbps, human_bytes, table
from simddp.inputs.link import Link
from simddp.inputs.contention import Contention
from simddp.inputs.io import link_file_from_json, link_to_json
from simddp.inputs.link_file import LinkFile

SIZES = 1024 * 2 ** np.arange(17)  # 1 KiB .. 64 MiB
ALPHA_S, BUSBW_GBPS = 50e-6, 1.0


def test_exact_line_recovered_exactly():
    times = predict_s(ALPHA_S, BUSBW_GBPS, SIZES, 2)
    fit = fit_alpha_beta(SIZES, times, 2)
    assert fit.alpha_s == pytest.approx(ALPHA_S, rel=1e-6)
    assert fit.busbw_gbps == pytest.approx(BUSBW_GBPS, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0, abs=1e-9)
    assert fit.max_rel_err < 1e-6
    assert (fit.min_bytes, fit.max_bytes, fit.n_points) == (1024, 64 * 2 ** 20, 17)


def test_ring_factor_of_the_world_size():
    # p=4 moves 2·3/4 = 1.5 bytes per byte: 1 MB at 1 GB/s busbw takes 1.5 ms + α.
    assert predict_s(0.0, 1.0, [1e6], 4)[0] == pytest.approx(1.5e-3)
    times = predict_s(ALPHA_S, 3.0, SIZES, 4)
    assert fit_alpha_beta(SIZES, times, 4).busbw_gbps == pytest.approx(3.0, rel=1e-6)


def test_noisy_line_recovered_and_intervals_cover_95_percent():
    # 3% multiplicative noise, 200 synthetic runs: each fit lands near the truth, and the
    # 95% intervals hold the true α and busbw in about 95% of the runs (binomial sd 1.5%).
    rng = np.random.default_rng(0)
    covered = np.zeros(2)
    runs = 200
    for _ in range(runs):
        times = predict_s(ALPHA_S, BUSBW_GBPS, SIZES, 2) * (1 + 0.03 * rng.standard_normal(17))
        fit = fit_alpha_beta(SIZES, times, 2)
        covered += [fit.alpha_ci_s[0] < ALPHA_S < fit.alpha_ci_s[1],
                    fit.busbw_ci_gbps[0] < BUSBW_GBPS < fit.busbw_ci_gbps[1]]
        assert fit.alpha_s == pytest.approx(ALPHA_S, rel=0.15)
        assert fit.busbw_gbps == pytest.approx(BUSBW_GBPS, rel=0.06)
        assert fit.r2 > 0.998
        assert not suggest_piecewise(fit)
    assert np.all((0.90 <= covered / runs) & (covered / runs <= 0.99)), covered / runs


def test_relative_weights_keep_alpha_absolute_weights_lose_it():
    # 5% multiplicative noise: at 64 MiB that is 3 ms, 60x α. Plain least squares is decided
    # by the biggest sizes and α drowns; relative residuals make small sizes count too.
    rng = np.random.default_rng(7)
    times = predict_s(ALPHA_S, BUSBW_GBPS, SIZES, 2) * (1 + 0.05 * rng.standard_normal(17))
    rel = fit_alpha_beta(SIZES, times, 2, "relative")
    plain = fit_alpha_beta(SIZES, times, 2, "absolute")
    assert abs(rel.alpha_s / ALPHA_S - 1) < 0.1
    assert abs(plain.alpha_s / ALPHA_S - 1) > 0.5
    assert plain.alpha_ci_s[1] - plain.alpha_ci_s[0] > 10 * (rel.alpha_ci_s[1] - rel.alpha_ci_s[0])
    same = fit_alpha_beta(SIZES, times, 2, 1.0 / times)  # explicit weights = "relative"
    assert same.alpha_s == pytest.approx(rel.alpha_s, rel=1e-6)
    assert same.weights == "custom"


def test_piecewise_finds_a_known_breakpoint():
    # A protocol switch at 64 KiB: low latency and slow below, high latency and fast above.
    lower = SIZES <= 64 * 1024
    times = np.where(lower, predict_s(30e-6, 0.2, SIZES, 2), predict_s(400e-6, 2.0, SIZES, 2))
    pw = fit_piecewise(SIZES, times, 2)
    assert pw.breakpoint_bytes == 64 * 1024
    assert (pw.lower.alpha_s, pw.lower.busbw_gbps) == (pytest.approx(30e-6), pytest.approx(0.2))
    assert (pw.upper.alpha_s, pw.upper.busbw_gbps) == (pytest.approx(400e-6), pytest.approx(2.0))
    assert pw.max_rel_err < 1e-6
    single = fit_alpha_beta(SIZES, times, 2)
    assert suggest_piecewise(single)  # one line misses this shape by far more than 15%
    assert single.rms_rel_err > 0.15
    np.testing.assert_allclose(pw.predict_s(SIZES), times, rtol=1e-6)


def test_piecewise_link_round_trip_and_prediction():
    times = np.where(SIZES <= 65536, predict_s(30e-6, 0.2, SIZES, 2),
                     predict_s(400e-6, 2.0, SIZES, 2))
    pw = fit_piecewise(SIZES, times, 2)
    link = to_link(pw, "t", 2, "gloo", source="test")
    measured = LinkFile(link, Contention(1.5, 2.0, source="link"))
    again = link_file_from_json(link_to_json(measured))
    assert again == measured
    assert (link.alpha_s, link.busbw_gbps) == (pw.upper.alpha_s, pw.upper.busbw_gbps)
    for n, t in zip(SIZES, times):
        assert link.allreduce_s(n, 2) == pytest.approx(t, rel=1e-6)
    assert (link.world_size, link.backend, again.contention.compute) == (2, "gloo", 1.5)


def test_heldout_mask_keeps_the_ends():
    assert heldout_mask(17, 3).nonzero()[0].tolist() == [1, 4, 7, 10, 13]
    assert heldout_mask(5, 3).nonzero()[0].tolist() == [1]
    assert not heldout_mask(17, 0).any()


def test_heldout_error_small_on_a_line_large_on_a_kink():
    rng = np.random.default_rng(3)
    times = predict_s(ALPHA_S, BUSBW_GBPS, SIZES, 2) * (1 + 0.02 * rng.standard_normal(17))
    held = heldout_error(SIZES, times, 2, every=3)
    assert held["heldout_bytes"] == [2048, 16384, 131072, 1048576, 8388608]
    assert held["fit"].n_points == 12
    assert held["median_rel_err"] < 0.05
    kinked = np.where(SIZES <= 65536, predict_s(30e-6, 0.2, SIZES, 2),
                      predict_s(400e-6, 2.0, SIZES, 2))
    single = heldout_error(SIZES, kinked, 2, every=3)
    pieces = heldout_error(SIZES, kinked, 2, every=3, piecewise=True)
    assert isinstance(pieces["fit"], PiecewiseFit)
    assert single["max_rel_err"] > 0.3
    assert pieces["median_rel_err"] < single["median_rel_err"] / 10


def test_flat_times_are_latency_bound():
    fit = fit_alpha_beta(SIZES[:6], np.full(6, 250e-6), 2)
    assert fit.alpha_s == pytest.approx(250e-6, rel=1e-6)
    assert fit.busbw_gbps > 0.5 * MAX_BUSBW_GBPS  # at the bound: the report says "unresolved"


@pytest.mark.parametrize("sizes, times, match", [
    ([1, 2, 3], [1.0, 2.0], "equal length"),
    ([1, 2], [1.0, 2.0], ">= 3 sizes"),
    ([1, 2, 3], [1.0, 0.0, 2.0], "> 0"),
    ([1, 2, 3], [1.0, math.nan, 2.0], "finite"),
])
def test_bad_fit_input(sizes, times, match):
    with pytest.raises(ValueError, match=match):
        fit_alpha_beta(sizes, times, 2)


def test_bad_weights_and_too_few_for_piecewise():
    times = predict_s(ALPHA_S, BUSBW_GBPS, SIZES, 2)
    with pytest.raises(ValueError, match="weights='loud'"):
        fit_alpha_beta(SIZES, times, 2, "loud")
    with pytest.raises(ValueError, match=">= 6 sizes"):
        fit_piecewise(SIZES[:5], times[:5], 2)


def test_nccl_tests_vocabulary():
    assert bandwidths_gbps(1e9, 1.0, 2) == (1.0, 1.0)   # 2(p−1)/p = 1 at p=2
    assert bandwidths_gbps(1e9, 2.0, 8) == (0.5, 0.875)
    assert [human_bytes(n) for n in (512, 1024, 1536, 2 ** 26)] == [
        "512 B", "1 KiB", "1.5 KiB", "64 MiB"]


def test_table_and_csv_rows():
    times = predict_s(ALPHA_S, BUSBW_GBPS, SIZES[:4], 2)
    rows = [{"size_bytes": int(n), "count": int(n) // 4, "time_s": t, "p95_s": 1.1 * t,
             "iters": 20} for n, t in zip(SIZES[:4], times)]
    fit = fit_alpha_beta(SIZES[:4], times, 2)
    mask = [False, True, False, False]
    text = table(rows, "float32", 2, fit, mask).splitlines()
    assert text[0].split() == ["#", "size", "count", "type", "redop", "time", "p95", "algbw",
                               "busbw", "fit", "err"]
    # 1 KiB: 50 µs + 1024 B / 1 GB/s = 51.024 µs; algbw = 1024 B / 51.024 µs = 0.020 GB/s
    assert text[2].split()[:8] == ["1024", "256", "float", "sum", "51.0", "56.1", "0.020",
                                   "0.020"]
    assert text[3].endswith("*") and not text[2].endswith("*")
    world = WorldCalibration(2, "float32", rows, fit, mask, {}, Link("l", 1e-5, 1.0))
    csv = csv_text([world]).splitlines()
    assert len(csv) == 5 and csv[2].split(",")[:3] == ["2", "2048", "512"]
    assert csv[2].split(",")[9] == "1"


def test_fixed_alpha_fits_busbw_alone_and_the_large_sizes_decide_it():
    # α held at 1 ms (the sequence step's), true line α 0.3 ms, busbw 0.24 GB/s, and four
    # erratic small sizes (3.3, 3.0, 1.6, 2.9 ms, as a shaped link here gives): plain least
    # squares still finds busbw within 2%; α's interval is the held value itself.
    sizes = np.array([2.0 ** k for k in range(12, 26)])
    times = predict_s(300e-6, 0.24, sizes, 2)
    times[:4] = [3.3e-3, 3.0e-3, 1.6e-3, 2.9e-3]
    fit = fit_alpha_beta(sizes, times, 2, "absolute", fixed_alpha_s=1e-3)
    assert fit.alpha_s == pytest.approx(1e-3) and fit.alpha_ci_s == (fit.alpha_s, fit.alpha_s)
    assert fit.busbw_gbps == pytest.approx(0.24, rel=0.02)
    assert fit.busbw_ci_gbps[0] < fit.busbw_gbps < fit.busbw_ci_gbps[1]
    held = heldout_error(sizes, times, 2, every=3, weights="absolute", fixed_alpha_s=1e-3)
    assert held["fit"].alpha_s == pytest.approx(1e-3)


def test_sequence_alphas_are_totals_minus_bandwidth_over_count():
    from calibrate.combine import combine_sequence as combine
    # 10 x 1 MB at 1 GB/s (p=2) = 10 ms of bandwidth. Queued: the slower rank's median.
    # Waited for: each repeat's slower rank (50, 45, 60 ms), then their mean, 51.67 ms.
    ranks = [{"blocking_s": [0.05, 0.04, 0.06], "async_s": [0.03, 0.03, 0.02]},
             {"blocking_s": [0.045] * 3, "async_s": [0.035] * 3}]
    r = combine(ranks, [10 ** 6] * 10, 1.0, 2)
    assert (r["count"], r["bytes"], r["repeats"]) == (10, 10 ** 7, 3)
    assert r["blocking_s"] == pytest.approx(0.155 / 3) and r["async_s"] == pytest.approx(0.035)
    assert r["blocking_alpha_s"] == pytest.approx((0.155 / 3 - 0.010) / 10)
    assert r["alpha_s"] == pytest.approx(0.0025)
    # faster than the bandwidth terms allow (noise): α is clamped at 0, never negative
    assert combine([{"blocking_s": [0.001], "async_s": [0.001]}], [10 ** 6] * 10, 1.0, 2)[
        "alpha_s"] == 0.0


def test_blocking_alpha_is_the_mean_call_a_step_adds_up():
    from calibrate.combine import combine_sequence as combine
    # 10 x 1 MB at 1 GB/s = 10 ms of bytes; α 0.4 ms a call (14 ms a chain), but in one
    # repeat of four two calls waited a 4 ms scheduler tick (22 ms): a step of waited-for
    # calls pays that tail on average, so the blocking α is the mean's, 0.6 ms, not the
    # median's 0.4. The queued chain keeps its median.
    totals = [0.014, 0.014, 0.022, 0.014]
    r = combine([{"blocking_s": totals, "async_s": totals}] * 2, [10 ** 6] * 10, 1.0, 2)
    assert r["blocking_alpha_s"] == pytest.approx(6e-4)
    assert r["alpha_s"] == pytest.approx(4e-4)
    # the repeats' p5 and p95 (0.4 and 1.08 ms, numpy's linear percentiles) over that mean
    assert r["blocking_alpha_spread"] == pytest.approx((0.4 / 0.6, 1.08 / 0.6), rel=1e-4)
