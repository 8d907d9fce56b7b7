"""Timeline fidelity: does the predicted step agree with the measured one for the right reason?

Two errors can cancel and give the right step from the wrong timeline; this compares the two
moments that decide a DDP step, the backward's end and the last all-reduce's, predicted
against measured (docs/COMPARE.md)::

    >>> from simddp.result import Result, Span
    >>> def r(src, bwd_end, ar_end):
    ...     spans = (Span("compute", "backward", 0.0, bwd_end, "backward"),
    ...              Span("comm", "ar", bwd_end - 0.005, ar_end, "all-reduce"),
    ...              Span("compute", "optimizer", ar_end, ar_end + 0.002, "optimizer"))
    ...     return Result("m", "l", "ddp", 4.0, 2, ar_end + 0.002, 0, 1, source=src, spans=spans)
    >>> f = timeline_fidelity(r("predicted", 0.030, 0.060), r("measured", 0.045, 0.061))
    >>> f["backward_end_ms"], f["last_all_reduce_end_ms"], f["cancelling"]
    ([30.0, 45.0], [60.0, 61.0], True)
"""
from __future__ import annotations

from collections.abc import Iterable

from simddp.kinds import SpanKind
from simddp.report.overlap import side_by_side
from simddp.result import BACKWARD, COPY, KINDS, Result

# A step error this small (in % of the measured step) counts as "agrees"...
AGREE_PCT = 5.0
# ...and a span end off by this much of the measured step, meanwhile, means errors cancel.
OFF_PCT = 10.0


def _end(result: Result, kinds: tuple[str, ...]) -> float | None:
    """The last end of a span of ``kinds``, from the step's first span; a copy-out is not
    the backward's (a measured backward ends before it)."""
    ends = [s.end_s for s in result.spans
            if s.kind in kinds and not s.label.endswith(" copy-out")]
    return max(ends) - min(s.start_s for s in result.spans) if ends else None


def timeline_fidelity(predicted: Result, measured: Result | None) -> dict | None:
    """Predicted vs measured step, backward end and last all-reduce end of one configuration
    (ms, and the error in % of the measured step), and whether the step agrees while a span
    end does not (``cancelling``); None without spans on both sides. The measured step is
    the clocked one, not the bench median."""
    if measured is None or not measured.spans or not predicted.spans:
        return None
    step_p, step_m = (_end(r, KINDS) for r in (predicted, measured))
    out = {"config": list(predicted.config), "step_ms": [step_p * 1e3, step_m * 1e3],
           "step_error_pct": 100 * (step_p - step_m) / step_m,
           "measured_rank": measured.spans_rank if len(measured.rank_spans) > 1 else None}
    off = []
    for name, kinds in (("backward_end", (BACKWARD, COPY)),
                        ("last_all_reduce_end", (SpanKind.ALL_REDUCE,))):
        p, m = _end(predicted, kinds), _end(measured, kinds)
        if p is None or m is None:  # FSDP2, hooked DDP: no measured comm spans
            out[f"{name}_ms"] = out[f"{name}_error_pct"] = None
            continue
        out[f"{name}_ms"] = [p * 1e3, m * 1e3]
        out[f"{name}_error_pct"] = 100 * (p - m) / step_m
        if abs(out[f"{name}_error_pct"]) >= OFF_PCT:
            off.append(name)
    out["cancelling"] = abs(out["step_error_pct"]) <= AGREE_PCT and bool(off)
    out["off"] = off
    return out


def overlap_rows(pairs: Iterable[tuple[Result | None, Result | None]]) -> list[dict]:
    """Predicted vs measured compute, exposed comm, idle and overlap % (ms, %:
    :func:`simddp.report.overlap.side_by_side`) of each (predicted, measured) pair with spans
    on both sides, in the pairs' order."""
    rows = []
    for predicted, measured in pairs:
        row = None if predicted is None else side_by_side(predicted, measured)
        if row is not None:
            rows.append(row)
    return rows
