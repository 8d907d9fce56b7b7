"""Every collective of a real step, from its launch to its end, on both ranks: the evidence
behind the small-collective law (issue 19).

    python -m realrun bench MODEL --strategies overlap,bucketed --bucket-mb 0.25 \\
        --steps 10 --trace traces/ --trace-steps 3
    python experiments/collective_timeline.py traces/overlap          # rank0 and rank1 traces

``realrun bench --trace`` runs a few steps of each configuration under torch.profiler on every
rank. On Gloo a collective shows three times in such a trace: ``c10d::allreduce_`` on the
training thread when it is launched, then ``gloo:all_reduce`` on one of the process group's
worker threads from when a worker takes it to when it is done (ProcessGroupGloo runs 2 worker
threads by default: ``ProcessGroupGloo._Options()._threads``). The ``forward``, ``backward``,
``sync`` and ``optimizer`` ranges (realrun/timing.py) give the compute lane.

Per step and rank this prints: the backward, the launches, how many collectives were in flight
when each started (the distribution), how long each took from start to end while the backward
ran and after it, how long each waited for a worker (start − launch), and the tail: how long
the step waited for communication after the backward (``sync``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

PHASES = ("forward", "backward", "sync", "optimizer")
LAUNCH, RUN = "c10d::allreduce_", "gloo:all_reduce"


def load(path: Path) -> list[dict]:
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]


def steps(events: list[dict]) -> list[dict]:
    """Per step: phase (start, end) in µs, launches (µs), runs (start, end, worker thread)."""
    phases = sorted((e for e in events if e["name"] in PHASES), key=lambda e: e["ts"])
    starts = [e["ts"] for e in phases if e["name"] == "forward"] + [float("inf")]
    out = []
    for a, b in zip(starts, starts[1:]):
        step = {e["name"]: (e["ts"], e["ts"] + e["dur"]) for e in phases if a <= e["ts"] < b}
        step["launches"] = sorted(e["ts"] for e in events if e["name"] == LAUNCH and a <= e["ts"] < b)
        step["runs"] = sorted((e["ts"], e["ts"] + e["dur"], e["tid"]) for e in events
                              if e["name"] == RUN and a <= e["ts"] < b)
        out.append(step)
    return out


def describe(step: dict) -> dict:
    """The figures of one step (ms)."""
    bwd_start, bwd_end = step["backward"]
    runs, launches = step["runs"], step["launches"]
    in_flight = [sum(1 for s, e, _ in runs if s <= start < e) for start, _, _ in runs]
    during = [(e - s) / 1e3 for s, e, _ in runs if e <= bwd_end]
    after = [(e - s) / 1e3 for s, e, _ in runs if s >= bwd_end]
    waits = [(s - l) / 1e3 for (s, _, _), l in zip(runs, launches)]
    sync = step.get("sync", (bwd_end, bwd_end))
    return {"collectives": len(runs), "workers": len({t for _, _, t in runs}),
            "backward_ms": (bwd_end - bwd_start) / 1e3,
            "in_flight": {k: in_flight.count(k) for k in sorted(set(in_flight))},
            "run_ms_during_backward": _med(during), "n_during": len(during),
            "run_ms_after_backward": _med(after), "n_after": len(after),
            "wait_for_worker_ms": _med(waits),
            "last_end_after_backward_ms": ((max(e for _, e, _ in runs) - bwd_end) / 1e3
                                           if runs else 0.0),
            "sync_ms": (sync[1] - sync[0]) / 1e3}


def _med(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix", help="trace path without .rank<r>.json, e.g. traces/overlap")
    ap.add_argument("--ranks", type=int, default=2)
    a = ap.parse_args()
    for rank in range(a.ranks):
        path = Path(f"{a.prefix}.rank{rank}.json")
        if not path.is_file():
            print(f"collective_timeline: no trace {path}", file=sys.stderr)
            return 2
        for k, step in enumerate(steps(load(path))):
            if "backward" in step:
                print(f"rank {rank} step {k}: {json.dumps(describe(step))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
