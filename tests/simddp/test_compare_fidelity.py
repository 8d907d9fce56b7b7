"""simddp compare's timeline fidelity: a clocked step's backward end, last all-reduce end
and step, predicted against measured, and the warning when the step agrees by cancelling
errors. The Results and the 8 ms timeline are test_compare's, hand-timed there."""
from __future__ import annotations

import dataclasses

import pytest

from simddp.compare import compare_results, format_table
from simddp.result import Span
from tests.simddp.test_compare import meas, res, timeline


def test_a_predicted_copy_out_is_not_the_backward_end():
    # the engine's copy-out after bucket1 (7-7.5 ms) is host work once the collective is
    # done; a measured backward ends before it, so the predicted backward still ends at 6 ms
    copy_out = Span("compute", "bucket1 copy-out", 5 + 0.007, 5 + 0.0075, "copy")
    c = compare_results([res("bucketed", 10, 8, spans=timeline(1.0) + (copy_out,))],
                        [meas("bucketed", 10, 8, spans=timeline(1.0))])
    assert c.fidelity()["backward_end_ms"] == pytest.approx([6.0, 6.0])


def test_timeline_fidelity_flags_cancelling_errors():
    # predicted: backward ends 6 ms, last all-reduce 7 ms, step 8 ms. Measured (from t0 = 5 s):
    # the same step length, but the backward ends at 7.2 ms and the comm at 7.2 ms too.
    late_backward = tuple(dataclasses.replace(s, end_s=5 + 0.0072) if s.label == "l0 bwd"
                          else dataclasses.replace(s, start_s=5 + 0.0052, end_s=5 + 0.0072)
                          if s.label == "bucket1" else s for s in timeline(1.0))
    c = compare_results([res("bucketed", 10, 8, spans=timeline(1.0))],
                        [meas("bucketed", 10, 8, spans=late_backward)])
    f = c.fidelity()
    assert f["backward_end_ms"] == pytest.approx([6.0, 7.2])
    assert f["backward_end_error_pct"] == pytest.approx(-15.0)   # 1.2 ms of an 8 ms step
    assert f["last_all_reduce_end_ms"] == pytest.approx([7.0, 7.2])
    assert f["step_error_pct"] == pytest.approx(0.0) and f["cancelling"]
    assert "WARNING" in format_table(c)
    # the same spans on both sides: nothing to flag
    same = compare_results([res("bucketed", 10, 8, spans=timeline(1.0))],
                           [meas("bucketed", 10, 8, spans=timeline(1.0))])
    assert not same.fidelity()["cancelling"] and "WARNING" not in format_table(same)
    # no measured spans: n/a, and the text says nothing about it
    bare = compare_results([res("bucketed", 10, 8, spans=timeline(1.0))],
                           [meas("bucketed", 10, 8)])
    assert bare.fidelity() is None and "fidelity" not in format_table(bare)
