"""Where one rank's step goes: compute, exposed communication, idle, and the overlap %.

Communication under compute is *overlapped*, the rest *exposed*; time neither lane is busy
is *idle*. The **overlap %** is Holistic Trace Analysis's: overlapped ÷ communication
(docs/COMPARE.md). Each lane is an interval union first, since a real run's spans may
overlap. Compute 0–6 ms and 8–10 ms, communication 4–9 ms::

    compute  ██████··████      (0–6, 8–10)
    comm         █████         (4–9)

    >>> from simddp.result import Span
    >>> spans = (Span("compute", "fwd+bwd", 0.0, 0.006, "backward"),
    ...          Span("compute", "opt", 0.008, 0.010, "optimizer"),
    ...          Span("comm", "ar", 0.004, 0.009, "all-reduce"))
    >>> o = overlap_of(spans)
    >>> [round(v * 1e3, 3) for v in (o.step_s, o.compute_s, o.comm_s, o.overlapped_s,
    ...                               o.exposed_comm_s, o.idle_s)]
    [10.0, 8.0, 5.0, 3.0, 2.0, 0.0]
    >>> round(o.overlap_pct, 1)
    60.0

Predicted against measured, per configuration (:func:`side_by_side`, :func:`overlap_table`),
as ``simddp compare`` and ``realrun validate`` print it::

    >>> row = side_by_side(Result("m", "l", "ddp", 25.0, 2, 0.010, 0.002, 1, spans=spans),
    ...                    Result("m", "l", "ddp", 25.0, 2, 0.012, 0.004, 1, spans=spans[:2]
    ...                           + (Span("comm", "ar", 0.004, 0.012, "all-reduce"),),
    ...                           source="measured"))
    >>> print("\\n".join(overlap_table([("ddp:25", row)])))
    overlap, predicted / measured (one rank; overlap % = comm under compute / comm, as HTA):
    config   compute ms  exposed comm ms      idle ms  overlap %
    ddp:25  8.00 / 8.00      2.00 / 4.00  0.00 / 0.00    60 / 50
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from simddp.result import COMM, COMPUTE, Result, Span

Interval = tuple[float, float]


def interval_union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same time (touching ones merged).

    >>> interval_union([(5, 7), (0, 2), (1, 3), (3, 4), (6, 6.5)])
    [(0, 4), (5, 7)]
    """
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def intersection_s(a: list[Interval], b: list[Interval]) -> float:
    """Seconds covered by both of two sorted, disjoint interval lists.

    >>> intersection_s([(0, 4), (5, 7)], [(3, 6)])
    2
    """
    total, i, j = 0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _length_s(intervals: list[Interval]) -> float:
    return sum(end - start for start, end in intervals)


@dataclass(frozen=True)
class Overlap:
    """One rank's step split by lane (seconds). ``exposed_comm_s`` is communication not
    covered by compute (comm − overlapped), ``idle_s`` the step covered by neither lane."""

    step_s: float           # first span's start to last span's end
    compute_s: float        # union of the compute lane
    comm_s: float           # union of the comm lane
    overlapped_s: float     # both lanes busy at once

    @property
    def exposed_comm_s(self) -> float:
        return self.comm_s - self.overlapped_s

    @property
    def idle_s(self) -> float:
        busy_s = self.compute_s + self.comm_s - self.overlapped_s
        return max(0.0, self.step_s - busy_s)

    @property
    def overlap_pct(self) -> float | None:
        """HTA's comm-compute overlap: overlapped ÷ communication · 100; None without comm."""
        return None if self.comm_s <= 0 else 100.0 * self.overlapped_s / self.comm_s

    def to_json(self) -> dict:
        """Milliseconds (and the %), as the reports show them."""
        return {"step_ms": self.step_s * 1e3, "compute_ms": self.compute_s * 1e3,
                "comm_ms": self.comm_s * 1e3, "overlapped_ms": self.overlapped_s * 1e3,
                "exposed_comm_ms": self.exposed_comm_s * 1e3, "idle_ms": self.idle_s * 1e3,
                "overlap_pct": self.overlap_pct}


def overlap_of(spans: Iterable[Span]) -> Overlap:
    """The :class:`Overlap` of one rank's spans (a :class:`~simddp.result.Result`'s
    ``spans``); all zeros when there are none."""
    spans = tuple(spans)
    if not spans:
        return Overlap(0.0, 0.0, 0.0, 0.0)
    compute = interval_union((s.start_s, s.end_s) for s in spans if s.lane == COMPUTE)
    comm = interval_union((s.start_s, s.end_s) for s in spans if s.lane == COMM)
    step_s = max(s.end_s for s in spans) - min(s.start_s for s in spans)
    return Overlap(step_s, _length_s(compute), _length_s(comm), intersection_s(compute, comm))


def side_by_side(predicted: Result, measured: Result | None) -> dict | None:
    """Predicted vs measured :class:`Overlap` of one configuration, in ms; None without
    spans on both sides. ``"measured_rank"`` is the rank of ``measured.spans``;
    ``"measured_ranks"`` holds every clocked rank's (``rank_spans``), in rank order.
    A measured timeline without comm spans (FSDP2, a comm hook) is ``"comm_clocked": false``,
    its exposed comm, idle and overlap % None.
    """
    if measured is None or not predicted.spans or not measured.spans:
        return None
    p = overlap_of(predicted.spans)
    clocked = overlap_of(measured.spans).comm_s > 0 or p.comm_s == 0

    def meas(spans) -> dict:
        out = overlap_of(spans).to_json()
        if not clocked:
            out.update(comm_ms=None, overlapped_ms=None, exposed_comm_ms=None, idle_ms=None,
                       overlap_pct=None)
        return out
    row = {"config": list(predicted.config), "predicted": p.to_json(),
           "measured": meas(measured.spans), "comm_clocked": clocked,
           "measured_rank": measured.spans_rank}
    if len(measured.rank_spans) > 1:
        row["measured_ranks"] = [meas(spans) for spans in measured.rank_spans]
    return row


def overlap_table(rows: list[tuple[str, dict]]) -> list[str]:
    """Text lines: a heading, then per (label, :func:`side_by_side` dict) one row, or one
    per clocked rank (the last to end its backward first, marked *), each value
    "predicted / measured"; [] without rows."""
    if not rows:
        return []

    def pair(p: dict, m: dict, key: str, fmt: str) -> str:
        return " / ".join("-" if v is None else format(v, fmt) for v in (p[key], m[key]))

    def lines_of(label: str, d: dict) -> list[tuple[str, dict]]:
        ranks = d.get("measured_ranks")
        if not ranks:
            return [(label, d["measured"])]
        first = d["measured_rank"] if d.get("measured_rank") is not None else 0
        order = [first] + [k for k in range(len(ranks)) if k != first]
        return [(f"{label} rank {k}{'*' if k == first else ''}", ranks[k]) for k in order]

    head = ("config", "compute ms", "exposed comm ms", "idle ms", "overlap %")
    table = [head] + [(name, pair(d["predicted"], m, "compute_ms", ".2f"),
                       pair(d["predicted"], m, "exposed_comm_ms", ".2f"),
                       pair(d["predicted"], m, "idle_ms", ".2f"),
                       pair(d["predicted"], m, "overlap_pct", ".0f"))
                      for label, d in rows for name, m in lines_of(label, d)]
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    per_rank = any(d.get("measured_ranks") for _, d in rows)
    lines = ["overlap, predicted / measured (" + ("per rank, * the one whose backward ended "
                                                  "last" if per_rank else "one rank")
             + "; overlap % = comm under compute / comm, as HTA):"]
    lines += ["  ".join([t[0].ljust(widths[0])] + [v.rjust(w) for v, w in zip(t[1:], widths[1:])])
              for t in table]
    lines += [f"  ({label}: no comm spans measured — FSDP2 and a DDP comm hook of its own "
              "leave no room for ours — so only compute is compared)"
              for label, d in rows if not d["comm_clocked"]]
    return lines
