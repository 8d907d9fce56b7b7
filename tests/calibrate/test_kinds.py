"""Reduce-scatter and all-gather in calibrate: the fit per kind, the analysis of synthetic rank
timings into ``Link.kind_fits``, the files and report, and (slow) a short real run.

    python -m pytest tests/calibrate/test_kinds.py -q -m "not slow"   # seconds, no processes

Synthetic data are round numbers: α 100 µs for every kind, busbw 1.0 GB/s for all-reduce,
0.8 for reduce-scatter and 0.5 for all-gather, so each recovered value is checked against
the number that made it.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from calibrate import cli
from calibrate.analysis import analyse
from calibrate.combine import combine_kind_sequence
from calibrate.files import write_outputs
from calibrate.fit import fit_alpha_beta, heldout_error, predict_s, to_link
from calibrate.report import print_report
from calibrate.nccl_table import bandwidths_gbps
from calibrate.settings import CalibrateSettings
from simddp.errors import InputError
from simddp.cost.single import collective_s
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.io import (link_file_from_json, link_from_json, link_to_json, load_link,
                              load_link_file)
from simddp.inputs.link import KindFit
from simddp.inputs.link_file import LinkFile

from tests._messages import assert_names, words
from tests.calibrate.test_cli import ROOT, SMALL

SIZES = 1024 * 2 ** np.arange(17)  # the default sweep, 1 KiB .. 64 MiB
ALPHA_S = 100e-6
BUSBW = {"all_reduce": 1.0, "reduce_scatter": 0.8, "all_gather": 0.5}
KINDS = ("reduce_scatter", "all_gather")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("world_size", [2, 4])
def test_fit_per_kind_recovers_alpha_and_busbw(kind, world_size):
    # (p−1)/p·n per rank: at p=4, 1 MB at 0.5 GB/s takes 1.5 ms + α (an all-reduce: 3 ms).
    assert predict_s(0.0, 0.5, [1e6], 4, kind)[0] == pytest.approx(1.5e-3)
    times = predict_s(ALPHA_S, BUSBW[kind], SIZES, world_size, kind)
    fit = fit_alpha_beta(SIZES, times, world_size, kind=kind)
    assert (fit.alpha_s, fit.busbw_gbps) == pytest.approx((ALPHA_S, BUSBW[kind]), rel=1e-6)
    assert fit.kind == kind and fit.predict_s(SIZES) == pytest.approx(times)
    # The same times read with the all-reduce's factor: busbw twice too high. The kind matters.
    as_allreduce = fit_alpha_beta(SIZES, times, world_size)
    assert as_allreduce.busbw_gbps == pytest.approx(2 * BUSBW[kind], rel=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_held_alpha_fit_per_kind_on_noisy_data(kind):
    # What calibrate does with the sequence step: α held, busbw by plain least squares.
    rng = np.random.default_rng(3)
    times = predict_s(ALPHA_S, BUSBW[kind], SIZES, 2, kind) * (1 + 0.03 * rng.standard_normal(17))
    held = heldout_error(SIZES, times, 2, 3, weights="absolute", fixed_alpha_s=ALPHA_S,
                         kind=kind)
    fit = held["fit"]
    assert fit.alpha_s == pytest.approx(ALPHA_S) and fit.kind == kind
    assert fit.busbw_gbps == pytest.approx(BUSBW[kind], rel=0.05)
    assert fit.busbw_ci_gbps[0] < BUSBW[kind] < fit.busbw_ci_gbps[1]
    assert held["median_rel_err"] < 0.1


def test_kind_sequence_alpha_is_total_minus_bandwidth_over_count():
    # 8 reduce-scatters of 4 MB queued on 4 ranks at 0.8 GB/s: 8 x 3.75 ms of bandwidth;
    # the slower rank's median total 38 ms leaves 8 x 1 ms.
    seq = [{"kinds": {"reduce_scatter": {"async_s": t, "sizes_bytes": [4e6] * 8}}}
           for t in ([0.037, 0.038, 0.039], [0.030, 0.031, 0.032])]
    out = combine_kind_sequence(seq, "reduce_scatter", 0.8, 4)
    assert out["async_s"] == pytest.approx(0.038)
    assert out["bandwidth_s"] == pytest.approx(0.030)
    assert out["alpha_s"] == pytest.approx(0.001)
    assert (out["count"], out["bytes"], out["repeats"]) == (8, 32_000_000, 3)


def _ranks(world_size: int = 2, sequence: bool = True, kinds=KINDS) -> list[dict]:
    """What run_rank returns on each rank, made from the round-number laws with ±2% jitter."""
    rng = np.random.default_rng(world_size)

    def sweep(kind):
        law = predict_s(ALPHA_S, BUSBW[kind], SIZES, world_size, kind)
        return [{"size_bytes": int(n), "count": int(n) // 4,
                 "times_s": (t * (1 + 0.02 * rng.uniform(-1, 1, 5))).tolist()}
                for n, t in zip(SIZES, law)]

    seq_sizes = [65536] * 8
    ranks = []
    for rank in range(world_size):
        out = {"rank": rank, "world_size": world_size, "sweep": sweep("all_reduce"),
               "kinds": {kind: sweep(kind) for kind in kinds}}
        if sequence:  # α in a step: 300 µs per collective, on top of the bandwidth terms;
            # each waited for, 500 µs after a first call of 2 ms (the wake)
            total = {k: float(predict_s(300e-6, BUSBW[k], seq_sizes, world_size, k).sum())
                     for k in BUSBW}
            waited = {k: 2e-3 + float(predict_s(500e-6, BUSBW[k], seq_sizes[1:], world_size,
                                                k).sum()) for k in BUSBW}
            out["sequence"] = {"blocking_s": [total["all_reduce"] * 1.2] * 3,
                               "async_s": [total["all_reduce"]] * 3,
                               "kinds": {k: {"async_s": [total[k]] * 3,
                                             "blocking_s": [waited[k]] * 3,
                                             "blocking_first_s": [2e-3] * 3,
                                             "sizes_bytes": seq_sizes} for k in kinds}}
        ranks.append(out)
    return ranks


def _settings(**kw) -> CalibrateSettings:
    return CalibrateSettings(world_sizes=(2,), sequence_count=8, contention=False,
                             progress=False, **kw)


def _lines(out: str, first: str) -> list[str]:
    """The lines of ``out`` whose first word is ``first``."""
    return [line for line in out.splitlines() if line.split()[:1] == [first]]


def _ratios(line: str) -> list[str]:
    """The ratios ("x0.79") a line gives, in order."""
    return re.findall(r"x\d+\.\d\d", line)


def c_seq(world, kind):
    return world.kinds[kind].sequence


def test_analyse_writes_kind_fits_with_the_step_alpha():
    world = analyse(_settings(), 2, _ranks())
    fits = world.link.kind_fits
    assert set(fits) == set(KINDS) == set(world.kinds)
    for kind in KINDS:
        assert fits[kind].alpha_s == pytest.approx(ALPHA_S, rel=0.05)   # small sizes' lone α
        assert c_seq(world, kind)["queued_alpha_s"] == pytest.approx(300e-6, rel=0.01)
        assert fits[kind].busbw_gbps == pytest.approx(BUSBW[kind], rel=0.03)
        # waited for each, the calls after the first: its own α, not the all-reduce's wait
        assert world.host.kind_blocking_alpha_s[kind] == pytest.approx(500e-6, rel=0.05)
        c = world.kinds[kind]
        assert c.lone_fit.alpha_s == pytest.approx(ALPHA_S, rel=0.2)  # the sweep's own
        assert c.sequence["count"] == 8 and c.heldout["heldout_bytes"]
        assert c.allreduce_busbw_gbps == pytest.approx(1.0, rel=0.03)  # same sizes, same fit
    assert world.link.alpha_s == pytest.approx(ALPHA_S, rel=0.05)   # issue 19's law
    assert world.sequence["queued_alpha_s"] == pytest.approx(300e-6, rel=0.01)
    assert world.link.busbw_gbps == pytest.approx(1.0, rel=0.03)
    assert_names(world.link.source, "kind_fits", *KINDS)


def test_without_the_sequence_step_kind_fits_are_the_lone_fits():
    world = analyse(_settings(sequence=False), 2, _ranks(sequence=False, kinds=("all_gather",)))
    (kind,) = world.link.kind_fits
    c = world.kinds[kind]
    assert kind == "all_gather" and c.sequence is None and c.fit is c.lone_fit
    assert world.link.kind_fits[kind].alpha_s == pytest.approx(ALPHA_S, rel=0.2)
    assert world.link.kind_fits[kind].busbw_gbps == pytest.approx(0.5, rel=0.03)
    assert c.blocking_alpha_s is None   # no chain waited for
    assert kind not in world.host.kind_blocking_alpha_s


def test_link_round_trip_with_and_without_kind_fits():
    fit = fit_alpha_beta(SIZES, predict_s(ALPHA_S, 1.0, SIZES, 2), 2)
    plain = to_link(fit, "lo", 2, "gloo")
    assert "kind_fits" not in link_to_json(plain)   # a link without them reads as before
    link = dataclasses.replace(plain, kind_fits={"reduce_scatter": KindFit(3e-4, 0.8),
                                                 "all_gather": KindFit(2e-4, 0.5)})
    doc = json.loads(json.dumps(link_to_json(link)))
    assert doc["kind_fits"]["all_gather"] == {"alpha_s": 2e-4, "busbw_gbps": 0.5}
    again = link_from_json(doc)
    assert again == link and again.kind_fits == link.kind_fits
    # and the simulator's law uses them: α + (p−1)/p · n / busbw
    assert again.collective_s("all_gather", 1e6, 2) == pytest.approx(2e-4 + 0.5e6 / 0.5e9)
    # a kind's own waited-for α (the gloo_host section) round-trips and replaces α + the
    # all-reduce's wait
    link = dataclasses.replace(link, kind_fits={
        "all_gather": KindFit(2e-4, 0.5), "reduce_scatter": KindFit(3e-4, 0.8)})
    measured = LinkFile(link, host=GlooHost(blocking_alpha_s=ALPHA_S + 4e-4,
                                            kind_blocking_alpha_s={"all_gather": 2.5e-4}))
    doc = json.loads(json.dumps(link_to_json(measured)))
    assert doc["gloo_host"]["kind_blocking_alpha_s"]["all_gather"] == 2.5e-4
    assert "reduce_scatter" not in doc["gloo_host"]["kind_blocking_alpha_s"]
    again = link_file_from_json(doc)
    assert again == measured
    assert collective_s(again.link, "all_gather", 1e6, 2, True, host=again.host) == (
        pytest.approx(2.5e-4 + 1e-3))
    assert collective_s(again.link, "reduce_scatter", 1e6, 2, True, host=again.host) == (
        pytest.approx(3e-4 + 4e-4 + 0.5e6 / 0.8e9))
    assert again.host.time_scaled(2.0).kind_blocking_alpha_s["all_gather"] == 5e-4
    with pytest.raises(InputError, match="kind_blocking_alpha_s.all_gather"):
        link_file_from_json({**doc, "gloo_host": {"kind_blocking_alpha_s": {
            "all_gather": -1e-4}}})


def test_files_and_report_show_each_kind(tmp_path, capsys):
    from calibrate.analysis import Calibration
    s = _settings()
    cal = Calibration(s, [analyse(s, 2, _ranks())], 0.1, 1.0)
    paths = write_outputs(cal, tmp_path, plots=True)
    assert tmp_path / "kinds.csv" in paths
    assert load_link(tmp_path / "link.json").kind_fits == cal.link.kind_fits
    rows = list(csv.DictReader((tmp_path / "kinds.csv").open()))
    assert [r["kind"] for r in rows] == ["reduce_scatter"] * 17 + ["all_gather"] * 17
    big = rows[16]  # 64 MiB reduce-scatter at p=2: busbw = algbw / 2
    assert float(big["busbw_gbps"]) == pytest.approx(float(big["algbw_gbps"]) / 2)
    run = json.loads((tmp_path / "allreduce.json").read_text())["runs"][0]
    assert set(run["kinds"]) == set(KINDS)
    assert run["kinds"]["all_gather"]["fit"]["kind"] == "all_gather"
    print_report(cal, paths)
    out = capsys.readouterr().out
    assert "kinds.csv" in words(out)      # where the rows are
    # a line per kind: the overlapped α (µs), from how many small sizes, how many queued,
    # the waited-for α, busbw and its ratio to the all-reduce's
    for kind in KINDS:
        c = cal.worlds[0].kinds[kind]
        (line,) = _lines(out, f"{kind}:")
        assert_names(line, f"{c.fit.alpha_s * 1e6:.0f}", "7", "8",
                     f"{c.blocking_alpha_s * 1e6:.0f}", f"{c.fit.busbw_gbps:.3f}",
                     f"x{c.fit.busbw_gbps / cal.link.busbw_gbps:.2f}", "held-out")
        assert len(_ratios(line)) == 1   # the kinds ran on all the sizes: one ratio
    assert round(cal.worlds[0].kinds["reduce_scatter"].blocking_alpha_s * 1e6) == 500
    # when they stop below the all-reduce's largest size, the like-for-like ratio too
    from calibrate.report import describe_kind
    c = cal.worlds[0].kinds["reduce_scatter"]
    line = describe_kind(c, 1.0, 2 ** 30)
    assert _ratios(line) == [f"x{c.fit.busbw_gbps:.2f}",
                             f"x{c.fit.busbw_gbps / c.allreduce_busbw_gbps:.2f}"]
    assert_names(line, f"{c.allreduce_busbw_gbps:.3f}")
    assert bandwidths_gbps(2e9, 2.0, 2, "all_gather") == (1.0, 0.5)


def test_kinds_flag_and_setting():
    assert CalibrateSettings().kinds == KINDS
    # the kinds' sweep: up to a quarter of --max-bytes, unless that leaves < 3 sizes to fit
    assert CalibrateSettings().kind_sizes_bytes == list(SIZES[:-2])
    assert CalibrateSettings(min_bytes=1 << 20, max_bytes=16 << 20).kind_sizes_bytes == [
        1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20]
    assert CalibrateSettings(kinds_max_bytes=8192).kind_sizes_bytes == [1024, 2048, 4096, 8192]
    with pytest.raises(InputError, match="--kinds-max-bytes 4096 leaves 2 sizes to fit"):
        CalibrateSettings(kinds_max_bytes=4096)   # 3 sizes, the middle one held out
    settings, _ = cli.parse_args(["--kinds-max-bytes", "1M", "--out", "/nonexistent/x"])
    assert settings.kind_sizes_bytes[-1] == 1 << 20
    assert CalibrateSettings(kinds=["all_gather"]).kinds == ("all_gather",)
    with pytest.raises(InputError, match="--kinds: 'broadcast' is not"):
        CalibrateSettings(kinds=("broadcast",))
    with pytest.raises(InputError, match="distinct"):
        CalibrateSettings(kinds=("all_gather", "all_gather"))
    settings, _ = cli.parse_args(["--kinds", "none", "--out", "/nonexistent/never-written"])
    assert settings.kinds == ()
    settings, _ = cli.parse_args(["--kinds", "all-gather", "--out", "/nonexistent/x"])
    assert settings.kinds == ("all_gather",)


@pytest.mark.slow
def test_a_short_real_run_writes_kind_fits(tmp_path):
    """2 Gloo ranks, 1 thread each: reduce-scatter and all-gather swept, queued in the
    sequence step and written as kind_fits; --kinds all_gather writes only that one."""
    for kinds, out in ((None, tmp_path / "both"), ("all_gather", tmp_path / "ag")):
        extra = [] if kinds is None else ["--kinds", kinds]
        proc = subprocess.run(
            [sys.executable, "-m", "calibrate", *SMALL, *extra, "--no-contention",
             "--no-plots", "--threads-per-rank", "1", "--explain", "--out", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-2000:]
        measured = load_link_file(out / "link.json")
        link = measured.link
        want = ("reduce_scatter", "all_gather") if kinds is None else ("all_gather",)
        assert set(link.kind_fits) == set(want)
        for kind in want:
            fit = link.kind_fits[kind]
            assert fit.alpha_s >= 0 and fit.busbw_gbps > 0
            assert measured.host.kind_blocking_alpha_s.get(kind, -1.0) >= 0
            (line,) = _lines(proc.stdout, f"{kind}:")   # its α and waited-for α, in µs
            assert_names(line, f"{fit.alpha_s * 1e6:.0f}",
                         f"{measured.host.kind_blocking_alpha_s[kind] * 1e6:.0f}")
        run = json.loads((out / "allreduce.json").read_text())["runs"][0]
        # the all-reduce's sizes up to a quarter of --max-bytes (64K): 1K..16K
        assert [r["size_bytes"] for r in run["kinds"][want[0]]["rows"]] == [
            r["size_bytes"] for r in run["rows"]][:5]
        assert run["kinds"][want[0]]["sequence"]["count"] == 4
        assert (out / "kinds.csv").exists()
