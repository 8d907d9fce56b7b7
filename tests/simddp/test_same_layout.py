"""Issue 23, item 2: bucket sizes that make the same buckets are one configuration in the
recommendation, the comparison and validate's verdict; a verdict below the noise says so.

    python -m pytest tests/simddp/test_same_layout.py -q      # no processes, < 5 s

The model: 8 tensors of 4 MiB (mlp-8x1024's gradients), so bucket_cap_mb 1 and 4 both put
each tensor in its own bucket (8 collectives), while 16 and 40 group them.
"""
from __future__ import annotations

import numpy as np
import pytest

from simddp import Layer, Link, ModelProfile, make_strategy, plan
from simddp.compare import compare_results, format_table
from simddp.predict.layouts import group_by_layout, layout_key
from simddp.compare.verdict import verdict
from simddp.result import Result
from simddp.predict.sweep import sweep
from simddp.predict.recommend import recommend

PROFILE = ModelProfile("m", tuple(Layer(f"l{i}", (4 << 20,), 5e-3, 1e-2) for i in range(8)))
LINK = Link("l", 1e-4, 5.0)   # each all-reduce hides under a 10 ms backward
MBS = (1.0, 4.0, 16.0, 40.0)


def predicted(strategies=("ddp",)) -> list[Result]:
    return sweep(PROFILE, LINK, 2, list(strategies), MBS)


def measured(strategy: str, times_ms: dict[float, float], spread: float = 0.01,
             n: int = 30) -> list[Result]:
    out = []
    for i, (mb, ms) in enumerate(times_ms.items()):
        steps = ms * 1e-3 * (1 + spread * np.random.default_rng(i).standard_normal(n))
        out.append(Result("m", "loopback", strategy, mb, 2, float(np.median(steps)), 0.0, 8,
                          source="measured", step_p5_s=float(np.percentile(steps, 5)),
                          step_p95_s=float(np.percentile(steps, 95)), samples=n,
                          steps_s=tuple(steps), spec=make_strategy(strategy, mb)))
    return out


def test_one_and_four_mb_make_the_same_buckets():
    assert plan(PROFILE, make_strategy("ddp", 1.0)).buckets == \
        plan(PROFILE, make_strategy("ddp", 4.0)).buckets
    rows = predicted()
    by_profile = [[r.bucket_mb for r in g] for g in group_by_layout(rows, PROFILE)]
    by_prediction = [[r.bucket_mb for r in g] for g in group_by_layout(rows)]
    assert by_profile == by_prediction == [[1.0, 4.0], [16.0], [40.0]]
    assert layout_key(rows[0], PROFILE) != layout_key(rows[2], PROFILE)


@pytest.mark.parametrize("profile", [PROFILE, None])
def test_recommend_names_one_size_per_layout_and_a_runner_up_of_another(profile):
    rec = recommend(predicted(), profile)
    assert rec.bucket_mb == 4.0 and rec.same_layout_mb == (1.0,)   # 4 is closer to 25 MB
    assert rec.runner_up_mb in (16.0, 40.0)
    assert rec.runner_up_step_s > rec.step_s


def test_compare_scores_the_recommended_strategy_and_pools_the_same_layout():
    # 1 MB measures 6.9 % faster than 4 MB: noise between two runs of one configuration
    p = predicted(("bucketed", "ddp"))
    m = (measured("bucketed", {1.0: 60.0, 4.0: 62.0, 16.0: 64.0, 40.0: 70.0})
         + measured("ddp", {1.0: 56.0, 4.0: 59.9, 16.0: 64.0, 40.0: 70.0}))
    s = compare_results(p, m).summary
    assert s.bucket_strategy == "ddp"                 # as recommend(), not "bucketed"
    assert s.same_layout == ((1.0, 4.0),)
    assert s.predicted_best_bucket_mb == s.measured_best_bucket_mb == 4.0
    assert s.regret == 0.0
    c = compare_results(p, m, profile=PROFILE)    # by the plan's buckets: the same groups
    s = c.summary
    assert s.same_layout == ((1.0, 4.0),) and s.regret == 0.0
    assert s.predicted_best_bucket_mbs == s.measured_best_bucket_mbs == (1.0, 4.0)
    # the table's pooled column holds that pool's median on both of its rows, and no other
    (pooled,) = s.same_layout_ms
    cells = [line.split() for line in format_table(c).splitlines()[1:10]]
    assert [(r[0], r[1]) for r in cells if r[-1] == f"{pooled:.2f}"] == [("ddp", "1"),
                                                                        ("ddp", "4")]


def test_verdict_pools_the_same_layout():
    v = verdict(predicted(), measured("ddp", {1.0: 56.0, 4.0: 59.9, 16.0: 64.0, 40.0: 70.0}),
                PROFILE)
    assert v["proven"] is True and v["word"] == "PROVEN" and v["recommended_mb"] == 4.0
    assert v["text"].split(":")[0] == v["word"]
    assert "60" in v["text"].split()               # the pool's 2 x 30 steps
    assert v["same_layout_mb"] == [1.0, 4.0] and v["runner_up_mb"] == 16.0


def test_fastest_below_the_noise_is_not_plainly_proven():
    # issue 23: "PROVEN: ddp at 4 MB is the fastest" for 56.12 vs 56.64 ms (0.9 %)
    v = verdict(predicted(), measured("ddp", {4.0: 56.12, 16.0: 56.64, 40.0: 70.0},
                                      spread=0.05), PROFILE)
    # issue 53: a 5 % step spread (p5-p95 about 13 %) is wider than the 4.8 % margin
    assert v["proven"] is None
    assert v["word"] == "CANNOT TELL" and v["measured_best_mb"] == 4.0
    # the margin to the 3 % line is 3 % plus the measured lead: short of the spread
    assert v["verdict_margin_pct"] == pytest.approx(3 + v["runner_up_pct"])
    assert round(v["verdict_margin_pct"], 1) == 4.8
    assert v["verdict_margin_pct"] < v["spread_pct"]
    low, high = v["runner_up_ci_pct"]
    assert low <= 0 < high


def test_without_steps_the_p5_p95_spreads_decide():
    rows = [Result("m", "l", "ddp", mb, 2, ms * 1e-3, 0.0, 8, source="measured",
                   step_p5_s=(ms - 3) * 1e-3, step_p95_s=(ms + 3) * 1e-3, samples=30)
            for mb, ms in ((4.0, 56.12), (16.0, 56.64), (40.0, 70.0))]
    v = verdict(predicted(), rows, PROFILE)
    assert v["word"] == "CANNOT TELL" and v["spread_from"] == "p5-p95"


def test_an_edge_layout_names_its_sizes_not_the_smallest_size():
    """4 MB recommended and at the small end: 1 MB was swept too, but makes the same buckets;
    "the smallest size swept" was false (notebook, 2026-11-24)."""
    from simddp.report.recommendation import recommendation_text
    from simddp.predict.recommend import Recommendation
    from simddp.planning.strategy import make_strategy
    rec = Recommendation("ddp", 4.0, 0.078, 40.0, 0.080, "smallest", None,
                         same_layout_mb=(1.0,), spec=make_strategy("ddp", 4.0))
    from simddp.predict.layouts import sizes_text
    edge = recommendation_text(rec).splitlines()[0]   # the sentence that says "extend"
    assert "smallest" in edge and "extend" in edge
    assert sizes_text([1.0, 4.0]) in edge and "size" not in edge.split()
