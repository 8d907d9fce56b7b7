"""Issue 53 item 3: busbw's interval covers what a rerun reads (calibrate/intervals.py).

    python -m pytest tests/calibrate/test_intervals.py -q      # no processes, < 15 s

Four calibrate runs in a row gave busbw 0.871 [0.854, 0.889] and 0.944 [0.912, 0.977]: the
Student-t interval of the link's fit (α held, plain least squares) assumed every size's
median equally precise, while on this box each size's stretch of seconds runs fast or slow
by several %. Synthetic sweeps here have that: a factor per size (its stretch) and jitter
per iteration, 2 ranks x 20 iterations each, as calibrate.combine.summarize reads them.
"""
from __future__ import annotations

import numpy as np
import pytest

from calibrate.analysis import Calibration, analyse
from calibrate.fit import fit_alpha_beta, fit_piecewise, predict_s
from calibrate.intervals import rerun_intervals
from calibrate.report import INTERVALS_NOTE, print_report
from calibrate.settings import CalibrateSettings, heldout_mask

SIZES = 1024 * 2 ** np.arange(17)      # calibrate's default 1 KiB .. 64 MiB
MASK = heldout_mask(len(SIZES), 3)
ALPHA_S, BUSBW_GBPS = 5e-4, 0.9


def _rows(rng, stretch: float, jitter: float) -> list[dict]:
    """One run's rows: per size the law times exp(stretch·N), per iteration exp(jitter·N)."""
    rows = []
    for n, t in zip(SIZES, predict_s(ALPHA_S, BUSBW_GBPS, SIZES, 2)):
        per_rank = t * np.exp(stretch * rng.standard_normal()) * np.exp(
            jitter * rng.standard_normal((2, 20)))
        rows.append({"size_bytes": int(n), "time_s": float(np.max(np.median(per_rank, 1))),
                     "times_s_per_rank": per_rank.tolist()})
    return rows


def _link_fit(rows):
    """The link's busbw as calibrate fits it with the sequence step: α held, plain least
    squares, on the sizes not held out."""
    kept = [r for r, held in zip(rows, MASK) if not held]
    return fit_alpha_beta([r["size_bytes"] for r in kept], [r["time_s"] for r in kept], 2,
                          "absolute", ALPHA_S)


def test_a_rerun_lands_inside_where_the_t_interval_missed_it():
    rng = np.random.default_rng(0)
    fits = []
    for _ in range(30):
        rows = _rows(rng, stretch=0.05, jitter=0.1)
        fit = _link_fit(rows)
        fits.append((fit, rerun_intervals(fit, rows, MASK, alpha_held=True)))
    pairs = [(a, b) for a in range(30) for b in range(30) if a != b]

    def covered(which: int) -> float:
        return np.mean([fits[a][which].busbw_ci_gbps[0] <= fits[b][0].busbw_gbps
                        <= fits[a][which].busbw_ci_gbps[1] for a, b in pairs])

    assert covered(0) < 0.4          # the t-interval: the non-overlapping runs
    assert covered(1) > 0.9          # the rerun interval
    truth = np.mean([lo <= BUSBW_GBPS <= hi for _, f in fits for lo, hi in [f.busbw_ci_gbps]])
    assert truth > 0.9


def test_the_iterations_count_where_the_medians_lie_on_the_line():
    # every size's median exactly on the law (the t-interval has no width), its iterations
    # spread ±20 %: a rerun's medians would not lie on it again
    law = predict_s(ALPHA_S, BUSBW_GBPS, SIZES, 2)
    spread = np.linspace(0.8, 1.2, 21)
    rows = [{"size_bytes": int(n), "time_s": float(t),
             "times_s_per_rank": [list(t * spread), list(t * spread)]}
            for n, t in zip(SIZES, law)]
    fit = _link_fit(rows)
    assert fit.busbw_ci_gbps == (pytest.approx(BUSBW_GBPS), pytest.approx(BUSBW_GBPS))
    lo, hi = rerun_intervals(fit, rows, MASK, alpha_held=True).busbw_ci_gbps
    assert lo < 0.97 * BUSBW_GBPS and hi > 1.03 * BUSBW_GBPS
    again = rerun_intervals(fit, rows, MASK, alpha_held=True).busbw_ci_gbps
    assert again == (lo, hi)          # the same measurement, the same report


def test_pinned_parameters_keep_their_single_value():
    rows = _rows(np.random.default_rng(1), 0.05, 0.1)
    fit = _link_fit(rows)
    assert rerun_intervals(fit, rows, MASK, alpha_held=True).alpha_ci_s == fit.alpha_ci_s
    both = fit_alpha_beta(SIZES, [r["time_s"] for r in rows], 2, "absolute", ALPHA_S,
                          fixed_busbw_gbps=BUSBW_GBPS)
    assert rerun_intervals(both, rows, [False] * len(rows), alpha_held=True,
                           busbw_held=True) is both


def test_a_free_alpha_and_each_piece_get_theirs():
    rows = _rows(np.random.default_rng(2), 0.05, 0.1)
    times = [r["time_s"] for r in rows]
    lone = fit_alpha_beta(SIZES, times, 2)
    wide = rerun_intervals(lone, rows, [False] * len(rows), alpha_held=False)
    assert wide.alpha_ci_s[0] <= lone.alpha_ci_s[0] and wide.alpha_ci_s[1] >= lone.alpha_ci_s[1]
    assert wide.busbw_ci_gbps[0] < lone.busbw_gbps < wide.busbw_ci_gbps[1]
    pw = fit_piecewise(SIZES, times, 2)
    pw2 = rerun_intervals(pw, rows, [False] * len(rows), alpha_held=False)
    for before, after in ((pw.lower, pw2.lower), (pw.upper, pw2.upper)):
        assert after.busbw_ci_gbps[0] <= before.busbw_ci_gbps[0]
        assert after.busbw_ci_gbps[1] >= before.busbw_ci_gbps[1]
        assert after.busbw_gbps == before.busbw_gbps


def test_calibrate_reports_the_rerun_interval(capsys):
    rows = _rows(np.random.default_rng(3), 0.05, 0.1)
    ranks = [{"rank": k, "world_size": 2, "sweep": [
        {"size_bytes": r["size_bytes"], "count": r["size_bytes"] // 4,
         "times_s": r["times_s_per_rank"][k]} for r in rows],
        "sequence": {"blocking_s": [8 * 1.5e-3] * 5, "async_s": [8 * 1.2e-3] * 5,
                     "lone_s": [ALPHA_S + 4096 / 0.9e9] * 20, "lone_bytes": 4096}}
        for k in range(2)]
    s = CalibrateSettings(world_sizes=(2,), sequence_count=8, contention=False, kinds=(),
                          progress=False)
    world = analyse(s, 2, ranks)
    t_only = fit_alpha_beta(*zip(*[(r["size_bytes"], r["time_s"])
                                   for r, h in zip(world.rows, world.heldout_mask) if not h]),
                            2, "absolute", world.link.alpha_s)
    lo, hi = world.fit.busbw_ci_gbps
    assert lo < t_only.busbw_ci_gbps[0] and hi > t_only.busbw_ci_gbps[1]
    print_report(Calibration(s, [world]), [])
    out = capsys.readouterr().out
    assert INTERVALS_NOTE in out
    # the link file's busbw, then its rerun interval
    (line,) = [x for x in out.splitlines() if x.split()[:2] == ["link", "file"]]
    words = line.split()
    at = words.index(f"{world.fit.busbw_gbps:.3f}")
    assert words[at + 2:at + 4] == [f"[{lo:.3f},", f"{hi:.3f}],"]
