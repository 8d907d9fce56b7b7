"""python -m simddp compare: predicted vs measured compute, exposed comm, idle and HTA's
overlap % (simddp/report/overlap.py) for each configuration with spans on both sides.

The grid of tests/simddp/test_compare.py: only bucketed:100 has spans on both sides.
Predicted: forward 0–2, backward 2–6, comm 3–7, optimizer 7–8 ms, so compute 7 ms, comm 4 ms
of which 3 (3–6) under compute: exposed 1 ms, idle 0, overlap 75 %. Measured: the same times
1.1 (compute 7.7 ms, exposed 1.1 ms, overlap still 75 %).
"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from simddp.cli.main import main
from simddp.compare import compare_results, format_table
from simddp.compare.text import fidelity_text
from tests.simddp.test_compare import grid, meas, res, timeline, write_pair


def test_text_has_one_overlap_row(tmp_path, capsys):
    p, m = write_pair(tmp_path, *grid())
    assert main(["compare", "--predicted", p, "--measured", m]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("overlap, predicted"))
    assert "HTA" in lines[at] and len(lines) == at + 3
    assert lines[at + 2].split() == ["bucketed:100", "7.00", "/", "7.70", "1.00", "/", "1.10",
                                     "0.00", "/", "0.00", "75", "/", "75"]


def test_json_has_the_same_numbers(tmp_path, capsys):
    p, m = write_pair(tmp_path, *grid())
    assert main(["compare", "--predicted", p, "--measured", m, "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["overlap"]
    assert row["config"] == ["bucketed", 100, 1] and row["comm_clocked"]
    for side, scale in (("predicted", 1.0), ("measured", 1.1)):
        got = row[side]
        assert [got[k] for k in ("step_ms", "compute_ms", "comm_ms", "overlapped_ms",
                                 "exposed_comm_ms", "idle_ms")] == pytest.approx(
            [8 * scale, 7 * scale, 4 * scale, 3 * scale, 1 * scale, 0.0])
        assert got["overlap_pct"] == pytest.approx(75.0)


def test_no_spans_no_overlap_lines():
    c = compare_results([res("ddp", 10, 50, spans=timeline(1.0))], [meas("ddp", 10, 50)])
    assert c.to_json()["overlap"] == []
    assert not any(line.startswith("overlap") for line in format_table(c).splitlines())


def test_every_clocked_rank_gets_a_row_the_one_that_ended_the_step_last_first(tmp_path, capsys):
    """Measured on two ranks: rank 0 as the grid's 1.1 timeline, rank 1 at 1.5 (compute 10.5
    ms, comm 6 of which 4.5 under compute: exposed 1.5 ms, overlap 75 %), which ended the
    step last: its spans are the result's, its row comes first, and the fidelity says so."""
    predicted, measured = grid()
    slow = timeline(1.5)
    measured[3] = replace(meas("bucketed", 100, 100, spans=slow),
                          rank_spans=(timeline(1.1), slow), spans_rank=1)
    p, m = write_pair(tmp_path, predicted, measured)
    assert main(["compare", "--predicted", p, "--measured", m,
                 "--timeline-config", "bucketed:100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("overlap"))
    assert len(lines) == at + 4       # the header, its rule, one row per clocked rank
    assert lines[at + 2].split() == ["bucketed:100", "rank", "1*", "7.00", "/", "10.50", "1.00",
                                     "/", "1.50", "0.00", "/", "0.00", "75", "/", "75"]
    assert lines[at + 3].split()[:6] == ["bucketed:100", "rank", "0", "7.00", "/", "7.70"]
    c = compare_results(predicted, measured)
    f = c.fidelity("bucketed:100")     # against rank 1, the one whose backward ended last
    assert f["measured_rank"] == 1 and f["step_ms"] == pytest.approx((8.0, 12.0))
    assert fidelity_text(f).splitlines()[0] in lines
    (row,) = c.to_json()["overlap"]
    assert row["measured_rank"] == 1 and row["measured"] == row["measured_ranks"][1]
    assert row["measured_ranks"][0]["compute_ms"] == pytest.approx(7.7)
