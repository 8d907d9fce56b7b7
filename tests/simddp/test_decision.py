"""The sweep's answer as a user acts on it: four short lines, the stakes as data, one number
per question (the closed form under the rows' contention, a faster row named for what runs
it, validate's bucketed row found where it was swept)."""
from __future__ import annotations

import json

from simddp.cli.main import main
from simddp.predict.recommend import NEAR_PCT, recommend, stakes
from simddp.report.recommendation import DECISION_WIDTH, _bucketed_step_s, decision_text
from simddp.result import Result
from simddp.analytic.optimum_gap import GRID_FACTOR
from simddp.compare.verdict import verdict
from tests.simddp.golden import MEASURED


def _row(strategy: str, mb: float | None, step_s: float) -> Result:
    return Result("m", "l", strategy, mb, 2, step_s, 0.0, 1)


def _decision(capsys, *args: str) -> list[str]:
    assert main(["sweep", *args]) == 0
    out = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("Recommended"))
    return out[start:start + 4]


def test_the_default_sweep_decides_in_four_short_lines(capsys):
    lines = _decision(capsys, "--bucket-mb", "1,10,100,1000")
    assert all(len(line) <= DECISION_WIDTH for line in lines)
    assert lines[0].split()[2] == "10"                          # the decision first
    assert "DistributedDataParallel(model," in lines[2]         # then how to set it
    assert "--explain" in lines[3]


def test_stakes_name_the_sizes_as_good_and_what_the_worst_costs():
    rows = [_row("ddp", mb, s) for mb, s in ((1, 0.105), (10, 0.100), (25, 0.1003),
                                             (100, 0.1006), (1000, 0.130))]
    st = stakes(recommend(rows), rows)
    assert st.near_mb == (10.0, 25.0, 100.0) and st.near_is_a_run
    assert st.worst_mb == 1000.0 and round(st.worst_pct, 6) == 30.0
    assert st.faster is None


def test_a_faster_row_of_another_strategy_is_named_with_what_runs_it():
    rows = [_row("ddp", mb, s) for mb, s in ((1, 0.125), (40, 0.120))] + \
           [_row("overlap", None, 0.107)]
    rec = recommend(rows)
    st = stakes(rec, rows)
    assert st.faster is rows[-1]
    assert 100 * (1 - 0.107 / 0.120) > NEAR_PCT
    last = decision_text(rec, st, rows).splitlines()[-1]
    assert "overlap" in last and "107.00" in last and "realrun.DDP" in last


def test_under_one_percent_nothing_is_called_faster():
    rows = [_row("ddp", 10, 0.100), _row("overlap", None, 0.0995)]
    assert stakes(recommend(rows), rows).faster is None


def test_the_closed_form_answers_under_the_rows_contention(capsys):
    assert main(["sweep", "--bucket-mb", "1,10,100,1000", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    opt = doc["closed_form_optimum"]
    assert opt["contention"] == [1.189, 2.22]                  # the published default, as the rows
    best = min((r for r in doc["rows"] if r["strategy"] == "bucketed"),
               key=lambda r: r["step_ms"])
    assert abs(opt["overhead_ms"] / best["exposed_comm_ms"] - 1) < 0.05
    assert opt["differs_from_simulator"] is None


def test_one_size_with_another_exposed_time_gives_both_times(capsys):
    # host costs the closed form leaves out: the same size, another exposed time
    assert main(["sweep", "--model", f"{MEASURED}/profile.json", "--link", f"{MEASURED}/link.json",
                 "--host", f"{MEASURED}/profile.json", "--bucket-mb", "1,4,10,40",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    opt = doc["closed_form_optimum"]
    best = min((r for r in doc["rows"] if r["strategy"] == "bucketed"),
               key=lambda r: r["step_ms"])
    assert 1 / GRID_FACTOR <= best["bucket_mb"] / opt["bucket_mb"] <= GRID_FACTOR
    gap = opt["differs_from_simulator"]
    assert f"{best['exposed_comm_ms']:.2f}" in gap and f"{opt['overhead_ms']:.2f}" in gap


def test_validate_finds_the_bucketed_row_it_swept():
    # result files keep 6 decimals of a size that came back from whole bytes
    rows = [_row("ddp", 9.999999, 0.100), _row("bucketed", 9.999999, 0.103)]
    assert _bucketed_step_s(rows, 10.0) == 0.103
    text = verdict(rows, rows)["recommendation"]
    assert "103.00" in text


def test_decision_for_a_profile_says_torch_ddp(capsys):
    lines = _decision(capsys, "--model", f"{MEASURED}/profile.json", "--link",
                      f"{MEASURED}/link.json", "--bucket-mb", "1,4,10,40")
    assert "torch DDP" in lines[0] and all(len(x) <= DECISION_WIDTH for x in lines)


def test_no_bucketed_strategy_gives_one_line():
    assert decision_text(None, None).count("\n") == 0
