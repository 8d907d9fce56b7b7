"""Compute, exposed communication, idle and HTA's overlap % of one rank's step, by hand.

Every case is on round milliseconds; the expected numbers are worked out in the comments.
The engine's toy (tests/simddp/test_report.py) with ``overlap`` reads::

    compute: forward 0–2 | l1 bwd 2–4 | l0 bwd 4–6 | (waits 6–7) | optimizer 7–8
    comm:                          all-reduce t1 4–5 |  t0 6–7

so compute 7 ms, comm 2 ms of which 1 ms (4–5) under compute: exposed 1 ms, overlap 50 %.
"""
from __future__ import annotations

import pytest

from simddp.sim.engine import simulate
from simddp.inputs.link import Link
from simddp.planning.plans import plan
from simddp.inputs.profile import Layer, ModelProfile
from simddp.report.overlap import (interval_union, overlap_of, overlap_table, side_by_side)
from simddp.result import Result, Span
from simddp.planning.strategy import make_strategy
from simddp.predict.resolve import resolve

MS = 1e-3
TOY = ModelProfile("toy", tuple(Layer(f"l{i}", (10**6,), 1e-3, 2e-3) for i in range(2)), 1e-3)
LINK = Link("unit", 0.0, 1.0)  # 1e6 bytes at p=2: 1 ms per all-reduce


def cp(a_ms: float, b_ms: float, kind: str = "backward") -> Span:
    return Span("compute", kind, a_ms * MS, b_ms * MS, kind)


def cm(a_ms: float, b_ms: float) -> Span:
    return Span("comm", "ar", a_ms * MS, b_ms * MS, "all-reduce")


def ms(o) -> list[float]:
    """step, compute, comm, overlapped, exposed comm, idle (ms), overlap %."""
    return [round(v / MS, 9) for v in (o.step_s, o.compute_s, o.comm_s, o.overlapped_s,
                                       o.exposed_comm_s, o.idle_s)] + [o.overlap_pct]


def test_nested_and_overlapping_spans_on_one_lane_count_once():
    # compute 0–10 holds 2–4 and 3–12 overlaps it: union 0–12 (12 ms). comm 1–3 and 2–5
    # (union 1–5, 4 ms) all under compute; comm 14–16 after it: comm 6, overlapped 4.
    spans = (cp(0, 10), cp(2, 4, "copy"), cp(3, 12), cm(1, 3), cm(2, 5), cm(14, 16))
    # step 0–16; busy 0–12 and 14–16: idle 12–14 = 2 ms
    expected = [16.0, 12.0, 6.0, 4.0, 2.0, 2.0, pytest.approx(100 * 4 / 6)]
    assert ms(overlap_of(spans)) == expected


def test_gaps_on_both_lanes_are_idle():
    # compute 0–2, 6–8; comm 3–4, 7–9: busy 0–2, 3–4, 6–9 = 6 of 9 ms; overlapped 7–8
    spans = (cp(0, 2), cp(6, 8), cm(3, 4), cm(7, 9))
    assert ms(overlap_of(spans)) == [9.0, 4.0, 3.0, 1.0, 2.0, 3.0, pytest.approx(100 / 3)]


def test_no_comm_has_no_overlap_pct():
    o = overlap_of((cp(5, 7), cp(8, 10, "optimizer")))  # the step starts at its first span: 5
    assert ms(o) == [5.0, 4.0, 0.0, 0.0, 0.0, 1.0, None]
    assert o.to_json()["overlap_pct"] is None


def test_comm_only_and_no_spans():
    assert ms(overlap_of((cm(0, 3),))) == [3.0, 0.0, 3.0, 0.0, 3.0, 0.0, 0.0]
    assert ms(overlap_of(())) == [0.0] * 6 + [None]


def test_interval_union_drops_empty_and_merges_touching():
    assert interval_union([(2, 2), (0, 1), (1, 2), (4, 3)]) == [(0, 2)]


def test_engine_toy_overlap_and_naive():
    result = simulate(plan(TOY, make_strategy("overlap")), resolve(TOY, LINK, world_size=2))
    assert ms(overlap_of(result.spans)) == [8.0, 7.0, 2.0, 1.0, 1.0, 0.0, 50.0]
    # naive: both all-reduces after the backward (6–8), none hidden
    naive = simulate(plan(TOY, make_strategy("naive")), resolve(TOY, LINK, world_size=2))
    o = overlap_of(naive.spans)
    assert (o.overlapped_s, o.exposed_comm_s / MS, o.overlap_pct) == (0, pytest.approx(2.0), 0.0)


def result(spans, source="predicted") -> Result:
    return Result("toy", "unit", "ddp", 25.0, 2, 0.01, 0.0, 2, source=source, spans=spans)


def test_side_by_side_and_table():
    pred = result((cp(0, 6), cp(8, 10), cm(4, 9)))             # overlap 3 of 5 ms: 60 %
    meas = result((cp(0, 6), cp(8, 10), cm(4, 12)), "measured")  # 4 of 8 ms: 50 %
    row = side_by_side(pred, meas)
    assert row["config"] == ["ddp", 25.0, 1] and row["comm_clocked"]
    assert row["predicted"]["overlap_pct"] == pytest.approx(60.0)
    assert row["measured"]["exposed_comm_ms"] == pytest.approx(4.0)
    assert overlap_table([("ddp:25", row)])[2].split() == [
        "ddp:25", "8.00", "/", "8.00", "2.00", "/", "4.00", "0.00", "/", "0.00", "60", "/", "50"]
    assert side_by_side(pred, None) is None
    assert side_by_side(pred, result((), "measured")) is None
    assert overlap_table([]) == []


def test_measured_without_comm_spans_compares_compute_only():
    # torch DDP clocked by validate: compute spans only, the sync wait 6–8 looks like idle
    pred = result((cp(0, 6), cp(8, 10), cm(4, 9)))
    row = side_by_side(pred, result((cp(0, 6), cp(8, 10)), "measured"))
    assert not row["comm_clocked"]
    assert row["measured"]["compute_ms"] == pytest.approx(8.0)
    unknown = ("exposed_comm_ms", "idle_ms", "overlap_pct")
    assert [row["measured"][k] for k in unknown] == [None] * 3
    lines = overlap_table([("ddp:25", row)])
    assert lines[2].split()[-3:] == ["60", "/", "-"]
    assert len(lines) == 4 and "comm" in lines[3]          # a note on the "-": no comm spans
