"""Prediction ranges (simddp/predict/scenarios.py) and the robust recommendation built on them."""
import json

import pytest

from simddp import (Layer, Link, ModelProfile, make_strategy, plan, recommend, resolve,
                    simulate, sweep)
from simddp.cli.main import main
from simddp.cost.factors import ALL_REDUCE
from simddp.cost.single import collective_s
from simddp.errors import InputError
from simddp.inputs.contention import PUBLISHED_GPU_SHORT, Contention
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.host import Host
from simddp.inputs.link_file import LinkFile
from simddp.predict.scenarios import UNCALIBRATED_CONTENTION, range_sources, scenario_set
from simddp.report.recommendation import recommendation_text
from simddp.result import Result



def toy(spread=None) -> ModelProfile:
    # two layers of 1 MB gradients, 1 ms forward and 2 ms backward each
    return ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 0.001, 0.002) for i in range(2)),
                        compute_spread=spread)


def scenario_contention(profile, link, host=None) -> dict:
    """Each scenario's contention factors, by name."""
    built = scenario_set(resolve(profile, link, 2, host=host), ranges=True)
    return {name: built.inputs[key].contention for name, key in built.names.items()}


def test_time_scaled_link_is_a_longer_all_reduce():
    link, host = Link("l", alpha_s=50e-6, busbw_gbps=1.0), GlooHost(blocking_alpha_s=80e-6)
    slow, slow_host = link.time_scaled(1.5), host.time_scaled(1.5)
    for blocking in (False, True):
        assert collective_s(slow, ALL_REDUCE, 10**6, 2, blocking, host=slow_host) == \
            pytest.approx(1.5 * collective_s(link, ALL_REDUCE, 10**6, 2, blocking, host=host))
    assert link.time_scaled(1.0) is link
    assert host.time_scaled(1.0) is host


def test_flat_is_scaled_exactly_by_the_corners():
    # flat: 6 ms of compute, then one 2 MB all-reduce of 2 ms (α 0, 1 GB/s, 2 ranks): 8 ms.
    # Compute x0.9..x1.2, all-reduce x0.8..x1.5, contention measured (none overlaps anyway).
    link = LinkFile(Link("l", 0.0, 1.0, time_spread=(0.8, 1.5)),
                    Contention(1.2, 1.2, source="link"))
    flat = make_strategy("flat")
    r = sweep(toy((0.9, 1.2)), link, 2, ["flat"], ranges=True)[0]
    assert r.step_s == pytest.approx(0.008)
    assert r.scenarios_s == pytest.approx({"low": 6 * 0.9e-3 + 2 * 0.8e-3,
                                           "high": 6 * 1.2e-3 + 2 * 1.5e-3,
                                           "comm_bound": 6 * 0.9e-3 + 2 * 1.5e-3,
                                           "compute_bound": 6 * 1.2e-3 + 2 * 0.8e-3})
    assert r.step_range_s == pytest.approx((0.007, 0.0102))
    assert simulate(toy(), link, plan(toy(), flat), 2).step_s == pytest.approx(0.008)


def test_no_spread_and_measured_contention_gives_a_point():
    link = LinkFile(Link("l", 0.0, 1.0), Contention(1.5, 1.5, source="link"))
    for r in sweep(toy(), link, 2, ["naive", "overlap", "ddp"], [1], ranges=True):
        assert r.step_range_s == pytest.approx((r.step_s, r.step_s))
    assert range_sources(resolve(toy(), link, 2)).startswith("none")


def test_uncalibrated_contention_only_at_the_comm_high_corners():
    contention = scenario_contention(toy(), Link("l", 0.0, 1.0))
    assert set(contention) == {"low", "high", "comm_bound", "compute_bound"}
    for name, c in contention.items():
        expect = UNCALIBRATED_CONTENTION if name in ("high", "comm_bound") else (1.0, 1.0)
        assert c.factors == expect
    # measured on the host (the model's own backward): no assumption is added
    host = Host("h", contention=(1.1, 1.3))
    assert all(c == host.measured_contention for c in
               scenario_contention(toy(), Link("l", 0.0, 1.0), host).values())
    bare, hosted = (resolve(toy(), Link("l", 0.0, 1.0), 2, host=h) for h in (None, host))
    assert not bare.contention.measured and hosted.contention.measured
    assert "calibrated" in range_sources(bare) and "calibrated" not in range_sources(hosted)


def test_every_range_holds_its_point():
    link = Link("l", 20e-6, 2.0, time_spread=(0.9, 1.6))
    profile = ModelProfile("m", tuple(Layer(f"l{i}", (3 * 10**5, 10**4), 0.0005, 0.001)
                                      for i in range(12)), compute_spread=(0.85, 1.3))
    for r in sweep(profile, link, 4, ["naive", "flat", "overlap", "bucketed", "ddp", "no_sync"],
                   [0.1, 1, 10], ranges=True):
        low, high = r.step_range_s
        assert low <= r.step_s <= high
        assert high > low  # every input moves every configuration here


def row(mb: float, point: float, **scenarios: float) -> Result:
    return Result("m", "l", "ddp", mb, 2, point, 0.0, 1, scenarios_s=scenarios)


def test_robust_choice_differs_from_the_point_and_says_so():
    # 4 MB wins at the point by 1 %, but is 20 % behind when the job is more comm-bound;
    # 16 MB is never more than 1 % behind.
    rows = [row(4, 0.100, low=0.090, high=0.150, comm_bound=0.130),
            row(16, 0.101, low=0.091, high=0.125, comm_bound=0.110)]
    rec = recommend(rows)
    assert rec.bucket_mb == 16 and rec.point_best_mb == 4
    assert rec.worst_regret == pytest.approx(0.011, abs=1e-3)
    assert rec.point_best_worst_regret == pytest.approx(0.2, abs=1e-3)
    assert rec.step_range_s == (0.091, 0.125)
    # the text gives both sizes' worst-case regrets: why the slower point estimate wins
    numbers = recommendation_text(rec).replace("%", " ").split()
    assert "20.0" in numbers and "1.1" in numbers


def test_robust_choice_agrees_with_the_point_when_the_best_stays_best():
    rows = [row(4, 0.100, low=0.090, high=0.120), row(16, 0.101, low=0.091, high=0.125)]
    rec = recommend(rows)
    assert rec.bucket_mb == 4 and rec.point_best_mb is None and rec.worst_regret == 0
    text = recommendation_text(rec)          # said over the ranges, with no regret to give
    assert "ranges" in text and "within" not in text
    # without ranges: the plain point recommendation, no range words
    plain = recommend([Result("m", "l", "ddp", mb, 2, s, 0, 1) for mb, s in ((4, .1), (16, .2))])
    assert plain.worst_regret is None and "range" not in recommendation_text(plain)


def test_sweep_json_rows_carry_the_range(tmp_path, capsys):
    assert main(["sweep", "--bucket-mb", "1,10", "--strategies", "naive,ddp",
                 "--format", "json", "--out", str(tmp_path / "out")]) == 0
    doc = json.loads(capsys.readouterr().out)
    for r in doc["rows"]:
        low, high = r["step_ms_range"]
        assert low <= r["step_ms"] <= high
    # a preset on the a100: the published GPU contention, not measured (simddp/inputs/contention.py)
    assert PUBLISHED_GPU_SHORT in doc["setup"]["ranges"]
    saved = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert all(set(r["scenarios_s"]) == {"low", "high", "comm_bound", "compute_bound"}
               for r in saved["results"])
    csv_head = (tmp_path / "out" / "sweep.csv").read_text().splitlines()[0]
    assert "step_ms_low" in csv_head and "step_ms_high" in csv_head


def test_spreads_are_checked():
    with pytest.raises(InputError, match="compute_spread"):
        toy((1.1, 1.3))
    with pytest.raises(InputError, match="time_spread"):
        Link("l", 0.0, 1.0, time_spread=(0.9,))


def test_the_measured_contention_spread_is_two_more_scenarios():
    # overlap on the toy: 2 ms forward, l1's backward ends at 4 ms; its 1 ms all-reduce under
    # contention (c, m) overlaps l0's 2 ms backward. Contention x1.5/x1.5 at the point; its
    # spread x1.2/x1.2 .. x2/x2. Flat overlaps nothing: contention cannot move it.
    host = Host("h", contention=(1.5, 1.5), contention_spread=((1.2, 1.2), (2.0, 2.0)))
    link = Link("l", 0.0, 1.0)
    flat, overlap = sweep(toy(), link, 2, ["overlap", "flat"], ranges=True, host=host)
    assert set(overlap.scenarios_s) >= {"contention_low", "contention_high"}
    # x1.2: the all-reduce 4 -> 5.2 ms while l0 did 1.2/1.2 = 1 ms of work, its last 1 ms
    # alone -> 6.2 ms, l0's all-reduce -> 7.2. x2: 4 -> 6 ms, l0 did 1 ms, -> 7, -> 8.
    assert overlap.scenarios_s["contention_low"] == pytest.approx(0.0072)
    assert overlap.scenarios_s["contention_high"] == pytest.approx(0.008)
    assert flat.scenarios_s["contention_low"] == flat.scenarios_s["contention_high"] == flat.step_s
    assert "x1.20–x2.00" in range_sources(resolve(toy(), link, 2, host=host))
    with pytest.raises(InputError, match="contention_spread"):
        Host("h", contention=(1.5, 1.5), contention_spread=((1.2, 0.9), (2.0, 2.0)))


def test_the_contention_ends_widen_a_range_but_do_not_steer_the_pick():
    # two bucket sizes, equal in every corner; at contention's high end the overlapped one
    # (1 MB) is 30 % behind. Its range shows that; the pick stays with the point estimate.
    def row(mb, step_s, high_s):
        return Result("m", "l", "ddp", mb, 2, step_s, 0.0, 1, 1, 0.0,
                      scenarios_s={"low": step_s, "high": step_s, "comm_bound": step_s,
                                   "compute_bound": step_s, "contention_low": step_s,
                                   "contention_high": high_s})
    small, large = row(1.0, 0.100, 0.130), row(25.0, 0.101, 0.101)
    assert small.step_range_s == pytest.approx((0.100, 0.130))
    assert recommend([small, large]).bucket_mb == 1.0
