"""Timelines and results, one type for predictions and measurements.

A :class:`Span` is one interval on a lane ("compute" or "comm") of one *kind* (forward,
backward, optimizer, copy, all-reduce, …); a :class:`Result` is one configuration's step time
with the spans that explain it. ``source`` says whether it was predicted by the simulator or
measured by realrun, so one plot function draws both::

    >>> r = Result(model="toy", link="eth", strategy="naive", bucket_mb=None, world_size=2,
    ...            step_s=0.1, exposed_comm_s=0.02, collectives=3)
    >>> round(r.step_ms, 3)
    100.0
    >>> round(Span("compute", "l3 bwd", 0.0, 0.002, BACKWARD).duration_s * 1e3, 3)
    2.0
"""
from __future__ import annotations

from dataclasses import dataclass, field

import os
from typing import Any

from simddp.errors import InputError
from simddp.inputs.io import body_of, build, plain, read_json
from simddp.kinds import Lane, SpanKind
from simddp.planning.strategy import Strategy, strategy_of

COMPUTE, COMM = Lane.COMPUTE, Lane.COMM
# What a span is (simddp/kinds.py): compute lane, the model's phases and the DDP
# implementation's host work (hooks and gradient copies, "copy"); comm lane, the collectives.
FORWARD, BACKWARD, OPTIMIZER, COPY, OTHER = (SpanKind.FORWARD, SpanKind.BACKWARD,
                                             SpanKind.OPTIMIZER, SpanKind.COPY, SpanKind.OTHER)
REDUCE_SCATTER, ALL_GATHER = SpanKind.REDUCE_SCATTER, SpanKind.ALL_GATHER
KINDS = tuple(SpanKind)
# The configuration realrun bench always measures first: no gradient sync at all. Every
# prediction carries its time as ``compute_s``, so compare scores it too.
COMPUTE_ONLY = "compute-only"


@dataclass(frozen=True)
class Span:
    lane: str
    label: str
    start_s: float
    end_s: float
    kind: str          # one of KINDS

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def _spans(spans) -> tuple[Span, ...]:
    """Spans, from Spans or their dicts (a results file)."""
    return tuple(s if isinstance(s, Span) else Span(**s) for s in spans)


@dataclass(frozen=True)
class Result:
    """One configuration's step (per optimizer step): predicted or measured."""

    model: str
    link: str
    strategy: str
    bucket_mb: float | None
    world_size: int
    step_s: float                    # predicted, or the median of measured steps
    exposed_comm_s: float            # step time not covered by compute
    collectives: int                 # per optimizer step
    accum_steps: int = 1
    compute_s: float = 0.0           # forward + backward + optimizer, without any sync
    source: str = "predicted"        # or "measured"
    step_p5_s: float | None = None   # measured spread (None for predictions)
    step_p95_s: float | None = None
    samples: int = 0                 # measured steps behind the median
    spans: tuple[Span, ...] = ()
    # Measured step times (each the max over ranks), in the order they ran; () for predictions.
    steps_s: tuple[float, ...] = ()
    # Predicted step seconds in each input scenario; None when no ranges were computed.
    scenarios_s: dict[str, float] | None = None
    # The configuration itself, so no one parses ``strategy`` back; rebuilt from the name once,
    # here, for files without it.
    spec: Strategy | None = field(default=None, compare=False)
    # Measured with --timelines on several ranks: every rank's spans of the same step, and
    # which rank ``spans`` is (the last to end its backward); () and None otherwise.
    rank_spans: tuple[tuple[Span, ...], ...] = ()
    spans_rank: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.spec, dict):
            object.__setattr__(self, "spec", Strategy.from_dict(self.spec))
        elif self.spec is None:
            object.__setattr__(self, "spec", strategy_of(self.strategy, self.bucket_mb,
                                                         self.accum_steps))
        object.__setattr__(self, "spans", _spans(self.spans))
        object.__setattr__(self, "rank_spans", tuple(_spans(r) for r in self.rank_spans))
        object.__setattr__(self, "steps_s", tuple(self.steps_s))

    @property
    def step_ms(self) -> float:
        return self.step_s * 1e3

    @property
    def step_range_s(self) -> tuple[float, float] | None:
        """(low, high) predicted step seconds over the scenarios and the point; None if none."""
        if not self.scenarios_s:
            return None
        values = (self.step_s, *self.scenarios_s.values())
        return min(values), max(values)

    @property
    def config(self) -> tuple[str, float | None, int]:
        """What identifies a configuration across predicted and measured files."""
        return (self.strategy, self.bucket_mb, self.accum_steps)


RESULTS_FORMAT = "simddp.results/1"


def results_to_json(results: list[Result], **extra: Any) -> dict:
    return {"format": RESULTS_FORMAT, **extra, "results": [plain(r) for r in results]}


def results_from_json(data: dict, where: str = "results") -> list[Result]:
    body = body_of(data, RESULTS_FORMAT, where)
    if _spans_without_kind(body.get("results")):
        raise InputError(f"{where}: an early simddp.results/1 file (spans without a kind); "
                         "re-run simddp sweep --out or realrun bench for a current file")
    return build(where, lambda: [Result(**{**r, "spans": tuple(Span(**s) for s in r.get("spans", ()))})
                                  for r in body["results"]])


def _spans_without_kind(results: Any) -> bool:
    """Whether a span has no kind, as in results written before spans had one."""
    rows = [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
    return any(isinstance(s, dict) and "kind" not in s
               for r in rows for s in (r.get("spans") if isinstance(r.get("spans"), list) else ()))


def load_results(path: str | os.PathLike) -> list[Result]:
    return results_from_json(read_json(path), str(path))
