"""realrun validate prints and writes, for the clocked configuration, predicted vs measured
compute, exposed comm, idle and HTA's overlap % (simddp/report/overlap.py); no torch run.

Predicted ddp:25: compute 0–6 and 8–10 ms, all-reduce 4–9 (3 of 5 ms hidden: 60 %).
Measured: the same compute, all-reduce 4–12 (4 of 8 ms hidden: 50 %, 4 ms exposed).
"""
from __future__ import annotations

import pytest

from realrun.workflows.validate.report import Prediction, ValidationReport
from realrun.workflows.validate.settings import ValidateSettings
from simddp.compare import compare_results
from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile
from simddp.inputs.profile import Layer, ModelProfile
from simddp.result import Result, Span

MS = 1e-3


def spans(comm_end_ms: float) -> tuple[Span, ...]:
    return (Span("compute", "backward", 0.0, 6 * MS, "backward"),
            Span("compute", "optimizer", 8 * MS, 10 * MS, "optimizer"),
            Span("comm", "b0", 4 * MS, comm_end_ms * MS, "all-reduce"))


def result(source: str, bucket_mb: float, step_s: float, sp=()) -> Result:
    return Result("m", "l", "ddp", bucket_mb, 2, step_s, 0.0, 1, source=source, spans=sp,
                  samples=0 if source == "predicted" else 10)


def report() -> ValidationReport:
    predicted = [result("predicted", 1.0, 0.011, spans(9)),
                 result("predicted", 25.0, 0.010, spans(9))]
    measured = [result("measured", 1.0, 0.013),                 # not clocked: no spans
                result("measured", 25.0, 0.012, spans(12))]
    s = ValidateSettings(strategies=("ddp",), bucket_mbs=(1.0, 25.0))
    profile = ModelProfile("m", (Layer("l", (512 << 10,) * 8, 0.003, 0.003),))
    link = LinkFile(Link("l", 1e-4, 1.0))
    before = Prediction("before running", link, None, profile, predicted,
                        compare_results(predicted, measured))
    return ValidationReport(s, None, None, measured, before, None, [], "ddp:25", "",
                            (0.0, 0.0), 1.0)


def test_text_has_one_overlap_row_for_the_clocked_configuration():
    lines = report().text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("overlap, predicted"))
    assert "HTA" in lines[at]
    assert lines[at + 1].split()[:3] == ["config", "compute", "ms"]
    assert lines[at + 2].split() == ["ddp:25", "8.00", "/", "8.00", "2.00", "/", "4.00",
                                     "0.00", "/", "0.00", "60", "/", "50"]
    assert not any(line.startswith("ddp:1 ") for line in lines[at:])


def test_json_has_the_same_numbers():
    doc = report().to_json()
    (row,) = doc["overlap"]
    assert row["config"] == ["ddp", 25.0, 1] and row["comm_clocked"]
    assert row["predicted"]["overlap_pct"] == pytest.approx(60.0)
    assert row["measured"]["overlap_pct"] == pytest.approx(50.0)
    assert row["measured"]["exposed_comm_ms"] == pytest.approx(4.0)
    assert row["measured"]["idle_ms"] == pytest.approx(0.0)
