"""Predicted against measured timelines of a few configurations, span by span.

    python bench/timelines.py                         # default validate, bucketed at 1 and 40 MB
    python bench/timelines.py --configs bucketed:1,bucketed:40,ddp:1 --steps 30 --out out/tl

Runs ``realrun validate`` with its defaults (or the flags given: --model, --batch, --seq,
--bucket-mb), then clocks --timeline-steps steps of each configuration in --configs on rank 0
(realrun/step_clock.py: forward, backward and optimizer ends; each all-reduce from its
launch to its completion) and prints, per configuration, the predicted and measured times of
the moments that decide a step: backward end, each all-reduce's start and end, the step end,
and the compute time between the backward end and the step end (copies, waits). Writes a
two-panel Gantt per configuration (simddp/report/gantt.py) under --out.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from realrun.workflows.validate import ValidateSettings, measure_timeline, validate  # noqa: E402
from simddp.compare import find_result  # noqa: E402
from simddp.compare.plots import plot_timelines  # noqa: E402
from simddp.report.plots import figure_png  # noqa: E402
from simddp.io import write_atomic  # noqa: E402
from simddp.result import COMM, Result  # noqa: E402


def moments(result: Result) -> dict:
    """Backward end, the all-reduces (start, end) in order, step end; ms from the first span."""
    t0 = min(s.start_s for s in result.spans)
    ms = lambda t: (t - t0) * 1e3  # noqa: E731
    backward = [s for s in result.spans if s.kind == "backward"]
    comm = sorted((s for s in result.spans if s.lane == COMM), key=lambda s: s.start_s)
    return {"backward_end": ms(max(s.end_s for s in backward)) if backward else None,
            "comm": [(s.label, ms(s.start_s), ms(s.end_s)) for s in comm],
            "step": result.step_s * 1e3}


def show(name: str, predicted: Result, measured_spans) -> str:
    p = moments(predicted)
    m = moments(Result(**{**predicted.__dict__, "spans": measured_spans, "source": "measured",
                          "step_s": max(s.end_s for s in measured_spans)
                          - min(s.start_s for s in measured_spans)}))
    lines = [f"== {name}: predicted step {p['step']:.2f} ms, measured (one clocked step) "
             f"{m['step']:.2f} ms",
             f"   backward ends     predicted {p['backward_end']:8.2f}   measured "
             f"{m['backward_end']:8.2f} ms"]
    for k, (pc, mc) in enumerate(zip(p["comm"], m["comm"] + [None] * len(p["comm"]))):
        measured = "-" if mc is None else f"{mc[1]:8.2f} – {mc[2]:8.2f}"
        lines.append(f"   {pc[0]:<12} predicted {pc[1]:8.2f} – {pc[2]:8.2f}   measured {measured}"
                     f"   ({pc[2] - pc[1]:.2f} vs "
                     f"{'-' if mc is None else f'{mc[2] - mc[1]:.2f}'} ms)")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default="bucketed:1,bucketed:40")
    ap.add_argument("--model", default="mlp-8x1024")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=8)
    ap.add_argument("--bucket-mb", default="1,4,10,40")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--timeline-steps", type=int, default=9)
    ap.add_argument("--out", default="out/timelines")
    a = ap.parse_args()
    s = ValidateSettings(model=a.model, batch=a.batch, seq=a.seq, steps=a.steps,
                         timeline_steps=a.timeline_steps,
                         bucket_mbs=tuple(float(x) for x in a.bucket_mb.split(",")))
    report = validate(s, log=lambda msg: print(msg, file=sys.stderr))
    print(report.text())
    for spec in a.configs.split(","):
        strategy, _, mb = spec.partition(":")
        bucket_mb = float(mb) if mb else None
        predicted = find_result(report.predicted, strategy, bucket_mb)
        spans = measure_timeline(s, strategy, bucket_mb)
        print(show(spec, predicted, spans))
        measured = find_result(report.measured, strategy, bucket_mb)
        import dataclasses
        png = figure_png(plot_timelines(predicted, dataclasses.replace(measured, spans=spans)))
        write_atomic(os.path.join(a.out, f"timeline-{strategy}-{mb or 'none'}.png"), png)
    print(f"wrote {a.out}/timeline-*.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
