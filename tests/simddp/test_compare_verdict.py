"""Issue 53 items 1 and 4, on constructed rows (no processes, no timing):

- validate's verdict follows from the rows' own split halves: "PROVEN" only where the margin
  it needs clears that spread, else "this run cannot tell: margin X % < spread Y %";
- compare's best bucket and its table agree where sizes that make the same buckets are
  pooled: the table shows the pooled median, and the line names the pool.

The model: 8 tensors of 4 MiB (mlp-8x1024's gradients), so bucket_cap_mb 1 and 4 make the
same buckets (one per tensor) while 16 and 40 group them; simddp recommends 4 MB.
"""
from __future__ import annotations

import pytest

from simddp import Layer, Link, ModelProfile, make_strategy
from simddp.compare import compare_results, format_table
from simddp.compare.verdict import MARGIN_PCT, judge, verdict
from simddp.result import Result
from simddp.predict.sweep import sweep
from simddp.predict.recommend import recommend

PROFILE = ModelProfile("m", tuple(Layer(f"l{i}", (4 << 20,), 5e-3, 1e-2) for i in range(8)))
LINK = Link("l", 1e-4, 5.0)
TURN = 5   # steps per turn, as realrun bench's --chunk


def predicted() -> list[Result]:
    return sweep(PROFILE, LINK, 2, ["ddp"], [1.0, 4.0, 16.0, 40.0])


def turns(ms: float, apart_pct: float, n_turns: int = 6) -> tuple[float, ...]:
    """Steps in bench order: odd turns ``apart_pct`` / 2 above ``ms``, even turns below, so
    the row's median is ``ms`` and its halves read ``apart_pct`` apart."""
    d = apart_pct / 200.0
    return tuple(ms * 1e-3 * (1 + (d if k % 2 == 0 else -d))
                 for k in range(n_turns) for _ in range(TURN))


def row(mb: float, steps: tuple[float, ...]) -> Result:
    s = sorted(steps)
    return Result("m", "loopback", "ddp", mb, 2, s[len(s) // 2 - 1] / 2 + s[len(s) // 2] / 2,
                  0.0, 8, source="measured", step_p5_s=s[1], step_p95_s=s[-2],
                  samples=len(steps), steps_s=steps, spec=make_strategy("ddp", mb))


def leads_with_its_word(v: dict) -> bool:
    """The verdict's text opens with its word (PROVEN, CANNOT TELL, ...) and a colon."""
    return v["text"].split(":")[0] == v["word"]


def test_the_recommendation_is_4_mb():
    assert recommend(predicted(), PROFILE).bucket_mb == 4.0


def test_fastest_by_more_than_the_split_is_proven_and_names_margin_and_spread():
    measured = [row(4.0, turns(56.0, 2.0)), row(16.0, turns(62.0, 2.0)),
                row(40.0, turns(70.0, 2.0))]
    v = verdict(predicted(), measured, PROFILE, turn_steps=TURN)
    assert v["word"] == "PROVEN" and v["proven"] is True and v["claim"] == "fastest"
    assert v["halves_apart_pct"] == pytest.approx(2.0)
    assert v["verdict_margin_pct"] == pytest.approx(100 * (62 / 56 - 1))
    assert v["spread_from"] == "split halves" and v["spread_pct"] == pytest.approx(2.0)
    assert v["recommended_mb"] == v["measured_best_mb"] == 4.0 and v["runner_up_mb"] == 16.0
    assert v["runner_up_pct"] == pytest.approx(100 * (62 / 56 - 1), abs=0.05)
    assert leads_with_its_word(v)


def test_the_same_gap_under_a_wide_split_cannot_tell():
    """The steps' own interval is tight (each turn is constant), but the two halves of each
    row read 15 % apart: the 10.7 % lead and the 13.7 % margin to the 3 % line are within it."""
    measured = [row(4.0, turns(56.0, 15.0)), row(16.0, turns(62.0, 15.0)),
                row(40.0, turns(70.0, 15.0))]
    v = verdict(predicted(), measured, PROFILE, turn_steps=TURN)
    assert v["word"] == "CANNOT TELL" and v["proven"] is None and v["claim"] is None
    assert v["measured_best_mb"] == 4.0                    # the lowest median, all the same
    # the margin to the 3 % line: 3 % + the 10.7 % lead, short of the halves' 15 %
    assert v["verdict_margin_pct"] == pytest.approx(3 + 100 * (62 / 56 - 1), abs=0.05)
    assert v["spread_pct"] == pytest.approx(15.0) and v["spread_from"] == "split halves"
    assert leads_with_its_word(v) and "PROVEN" not in v["text"]


def test_a_small_regret_within_3_pct_is_proven_only_when_the_split_is_narrower():
    # 16 MB measures fastest; the recommended 4 MB is 1 % behind it
    for apart, word in ((1.0, f"PROVEN within {MARGIN_PCT:g} %"), (4.0, "CANNOT TELL")):
        measured = [row(4.0, turns(60.6, apart)), row(16.0, turns(60.0, apart)),
                    row(40.0, turns(70.0, apart))]
        v = verdict(predicted(), measured, PROFILE, turn_steps=TURN)
        assert v["word"] == word, v["text"]
        assert v["regret_pct"] == pytest.approx(1.0) and v["measured_best_mb"] == 16.0
        assert v["verdict_margin_pct"] == pytest.approx(2.0)
        assert v["spread_pct"] == pytest.approx(apart)
        assert (v["verdict_margin_pct"] > v["spread_pct"]) == (apart < 2)
        assert leads_with_its_word(v)


def test_a_regret_beyond_3_pct_and_the_split_is_refuted():
    measured = [row(4.0, turns(66.0, 2.0)), row(16.0, turns(60.0, 2.0)),
                row(40.0, turns(70.0, 2.0))]
    v = verdict(predicted(), measured, PROFILE, turn_steps=TURN)
    assert v["word"] == "REFUTED" and v["proven"] is False and v["claim"] == "refuted"
    assert v["regret_pct"] == pytest.approx(10.0)
    assert v["verdict_margin_pct"] == pytest.approx(7.0) and v["spread_pct"] == pytest.approx(2.0)
    # the same rows, split 12 % apart: the 7 % margin no longer clears
    measured = [row(4.0, turns(66.0, 12.0)), row(16.0, turns(60.0, 12.0)),
                row(40.0, turns(70.0, 12.0))]
    v = verdict(predicted(), measured, PROFILE, turn_steps=TURN)
    assert v["word"] == "CANNOT TELL" and v["claim"] is None and leads_with_its_word(v)
    assert v["verdict_margin_pct"] == pytest.approx(7.0)
    assert v["spread_pct"] == pytest.approx(12.0)


def test_one_layout_measured_is_not_judged():
    v = verdict(predicted(), [row(1.0, turns(56.0, 1.0)), row(4.0, turns(57.0, 1.0))],
                PROFILE, turn_steps=TURN)
    assert v["word"] == "NOT JUDGED" and v["proven"] is None and leads_with_its_word(v)
    assert v["same_layout_mb"] == [1.0, 4.0]     # both sizes measured: one layout
    assert "runner_up_mb" not in v and "claim" not in v


@pytest.mark.parametrize("regret, low, high, halves, claim", [
    (-8.0, -9.0, -7.0, 2.0, "fastest"),     # 8 % ahead, spread 2 %
    (-1.0, -1.5, -0.5, 2.0, "within"),      # ahead by less than the spread, inside 3 %
    (-1.0, -1.5, -0.5, 4.5, None),          # 3 % + 1 % margin < 4.5 % spread
    (2.0, 1.5, 2.5, 0.5, "within"),
    (2.0, 1.5, 4.0, 0.5, None),             # the interval reaches past 3 %: it decides
    (9.0, 8.0, 10.0, 5.0, "refuted"),
    (9.0, 8.0, 10.0, 7.0, None),
])
def test_judge_each_claim_needs_its_margin_to_clear_the_spread(regret, low, high, halves,
                                                               claim):
    j = judge(regret, low, high, halves)
    assert j["claim"] == claim
    assert (j["margin_pct"] > j["spread_pct"]) == (claim is not None)


def test_pooled_sizes_show_their_pooled_median_in_the_table_and_the_summary():
    """Issue 53 item 4: 4 MB is the table's fastest ddp row (73.46 ms), but 1 and 4 MB make
    the same buckets and pool to 74.38 ms, slower than 16 MB's 74.00: the pooled best is 16 MB.
    The summary and the table must say the same."""
    measured = [row(1.0, turns(75.29, 0.0)), row(4.0, turns(73.46, 0.0)),
                row(16.0, turns(74.0, 0.0)), row(40.0, turns(80.0, 0.0))]
    c = compare_results(predicted(), measured)   # no profile: equal predictions group them
    s = c.summary
    assert s.same_layout == ((1.0, 4.0),) and s.measured_best_bucket_mb == 16.0
    pooled = (73.46 + 75.29) / 2
    assert s.same_layout_ms == (pytest.approx(pooled),)
    assert s.measured_best_bucket_mbs == (16.0,)
    assert s.predicted_best_bucket_mbs == (1.0, 4.0)
    text = format_table(c)
    table = text.splitlines()[1:6]
    assert table[0].split()[-2:] == ["pooled", "ms"]
    by_mb = {line.split()[1]: line.split() for line in table[1:]}
    assert by_mb["1"][-1] == by_mb["4"][-1] == f"{pooled:.2f}"
    assert by_mb["16"][-1] == "30" and by_mb["4"][4] == "73.46"   # 16 MB: steps, no pool
    assert s.regret == pytest.approx(100 * (pooled / 74.0 - 1))   # judged on the pool
    # under the table, the one line that names the fastest single row gives its pool's median
    (single,) = [line for line in text.splitlines()[6:] if "73.46" in line]
    assert single.split()[-2:] == [f"{pooled:.2f}", "ms"]


def test_pooled_best_is_named_by_every_size_it_pools():
    measured = [row(1.0, turns(73.0, 0.0)), row(4.0, turns(74.0, 0.0)),
                row(16.0, turns(76.0, 0.0)), row(40.0, turns(80.0, 0.0))]
    c = compare_results(predicted(), measured)
    s = c.summary
    assert s.predicted_best_bucket_mbs == s.measured_best_bucket_mbs == (1.0, 4.0)
    assert s.same_layout_ms == (pytest.approx(73.5),) and s.regret == 0.0
    # no line under the table singles out 1 MB's row: it is in the pool the summary names
    below = format_table(c).splitlines()[6:]
    assert not any("73.00" in line for line in below)
    assert any("73.50" in line for line in below)
