"""realrun validate's verdict on its own recommendation: PROVEN, PROVEN within 3 %, REFUTED
or CANNOT TELL, decided by the margin against a 3 % allowance clearing the spread (the rows'
split halves, or a 95 % bootstrap interval of the regret where wider), not by whether the
recommended median falls inside the best's p95 (which a noisy box makes nearly always true).
Constructed rows, no timing: tests/simddp/test_compare_verdict.py has the split-halves cases."""
from __future__ import annotations

import numpy as np
import pytest

from realrun.workflows.validate.report import Prediction, ValidationReport
from realrun.workflows.validate.settings import ValidateSettings
from simddp.compare import compare_results
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.inputs.profile import Layer, ModelProfile
from simddp.result import Result
from tests._messages import assert_names


def result(source: str, bucket_mb: float, step_s: float, steps_s=()) -> Result:
    return Result("m", "l", "ddp", bucket_mb, 2, step_s, 0.0, 1, source=source,
                  step_p5_s=min(steps_s, default=None), step_p95_s=max(steps_s, default=None),
                  samples=len(steps_s), steps_s=steps_s)


def report(best_steps, other_steps) -> ValidationReport:
    """The simulator recommends 40 MB (predicted faster); the measurement is as given."""
    predicted = [result("predicted", 1.0, 0.080), result("predicted", 40.0, 0.070)]
    measured = [result("measured", 1.0, float(np.median(best_steps)), tuple(best_steps)),
                result("measured", 40.0, float(np.median(other_steps)), tuple(other_steps))]
    s = ValidateSettings(strategies=("ddp",), bucket_mbs=(1.0, 40.0))
    # 8 tensors of 512 KiB: 1 MB buckets hold 2 each, 40 MB ones all but the first bucket's
    # (a profile whose sizes make the same buckets at both would be one configuration)
    profile = ModelProfile("m", (Layer("l", (512 << 10,) * 8, 0.01, 0.01),))
    link = LinkFile(Link("l", 1e-4, 1.0))
    before = Prediction("before running", link, None, profile, predicted,
                        compare_results(predicted, measured).split_halves(5))
    return ValidationReport(s, None, None, measured, before, None, [], None, "", (0.0, 0.0), 1.0)


def steps(median_s: float, spread: float, n: int = 30, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median_s * (1 + spread * rng.standard_normal(n)))


def test_a_clearly_slower_recommendation_is_refuted_with_its_interval():
    v = report(steps(0.070, 0.01), steps(0.080, 0.01, seed=1)).verdict()
    assert (v["proven"], v["word"], v["claim"]) == (False, "REFUTED", "refuted")
    assert v["text"].startswith(v["word"])
    low, high = v["regret_ci_pct"]
    assert 3 < low < v["regret_pct"] < high and v["spread_from"] == "95 % interval"
    assert_names(v["text"], f"{low:+.1f}", f"{high:+.1f}")   # the interval, as read


def test_a_close_recommendation_is_proven_within_the_margin():
    v = report(steps(0.0700, 0.005), steps(0.0705, 0.005, seed=1)).verdict()
    assert (v["proven"], v["word"], v["claim"]) == (True, "PROVEN within 3 %", "within")
    assert v["text"].startswith(v["word"])
    assert v["regret_ci_pct"][1] <= 3.0 and v["verdict_margin_pct"] > v["spread_pct"]


def test_noisy_runs_that_cannot_tell_the_two_apart_say_so_instead_of_naming_a_winner():
    # 2 % apart, 30 % spread: the p95 rule said PROVEN; the interval straddles the margin
    v = report(steps(0.070, 0.3), steps(0.0714, 0.3, seed=1)).verdict()
    assert (v["proven"], v["word"], v["claim"]) == (None, "CANNOT TELL", None)
    assert v["text"].startswith(v["word"])
    low, high = v["regret_ci_pct"]
    assert low < 3.0 < high and v["verdict_margin_pct"] < v["spread_pct"]
    assert_names(v["text"], f"{v['verdict_margin_pct']:.1f}", f"{v['spread_pct']:.1f}")


def test_the_recommendation_measured_fastest_is_proven():
    v = report(steps(0.080, 0.01), steps(0.070, 0.01, seed=1)).verdict()
    assert (v["proven"], v["word"], v["claim"]) == (True, "PROVEN", "fastest")
    assert v["text"].split()[0] == "PROVEN:"
    assert v["regret_pct"] == pytest.approx(0.0)
