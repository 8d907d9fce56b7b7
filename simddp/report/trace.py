"""Chrome trace JSON of a step: two named tracks, compute and comm, that open in Perfetto.

Drop the file on https://ui.perfetto.dev (or chrome://tracing) to scroll and zoom a step::

    save_trace("trace.json", result)     # result from simulate(..., record=True)

The file is the Trace Event Format: one ``"X"`` (complete) event per span with ``ts``/``dur``
in microseconds and the span's kind as its category, on pid 1 with tid 1 = compute and
tid 2 = comm, named by ``"M"`` metadata events (process_name, thread_name,
thread_sort_index). A measured Result gives the same file.
"""
from __future__ import annotations

import json
import os

from simddp.errors import InputError
from simddp.inputs.io import write_atomic
from simddp.result import COMM, COMPUTE, Result

TRACKS = {COMPUTE: 1, COMM: 2}  # tid per lane; compute on top
TRACK_NAMES = {COMPUTE: "compute (forward, backward, optimizer)",
               COMM: "comm (all-reduce, reduce-scatter, all-gather)"}


def describe(result: Result) -> str:
    """A short configuration name: 'ddp 25 MB, K=4 · transformer-small@a100 · eth-100g ×2'."""
    what = result.strategy
    if result.bucket_mb is not None:
        what += f" {round(result.bucket_mb, 6):g} MB"
    if result.accum_steps > 1:
        what += f", K={result.accum_steps}"
    return f"{what} · {result.model} · {result.link} ×{result.world_size} ({result.source})"


def trace_events(result: Result) -> dict:
    """The trace as a JSON-ready dict; raises InputError if the result has no spans."""
    if not result.spans:
        raise InputError(f"{describe(result)}: no timeline to trace (spans are empty)")
    pid = 1
    events: list[dict] = [
        {"ph": "M", "pid": pid, "tid": 0, "name": "process_name",
         "args": {"name": describe(result)}}]
    for lane, tid in TRACKS.items():
        events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                       "args": {"name": TRACK_NAMES[lane]}})
        events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                       "args": {"sort_index": tid}})
    for span in result.spans:
        if span.lane not in TRACKS:
            raise InputError(f"span {span.label!r}: unknown lane {span.lane!r}")
        events.append({"ph": "X", "pid": pid, "tid": TRACKS[span.lane], "name": span.label,
                       "cat": span.kind, "ts": span.start_s * 1e6,
                       "dur": span.duration_s * 1e6})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"strategy": result.strategy, "bucket_mb": result.bucket_mb,
                          "accum_steps": result.accum_steps, "model": result.model,
                          "link": result.link, "world_size": result.world_size,
                          "source": result.source, "step_ms": result.step_ms,
                          "exposed_comm_ms": result.exposed_comm_s * 1e3}}


def save_trace(path: str | os.PathLike, result: Result) -> None:
    write_atomic(path, json.dumps(trace_events(result)) + "\n")
