"""Predicted versus measured: match configurations, then error, rank agreement and regret.

Each measured configuration ``(strategy, bucket_mb, accum_steps)`` is paired with its
prediction; the pairs become a table and a few numbers that say whether the simulator can be
trusted to *pick* a strategy and a bucket size (docs/COMPARE.md)::

    >>> from simddp.result import Result
    >>> def r(src, bucket_mb, step_s):
    ...     return Result("toy", "eth", "bucketed", bucket_mb, 2, step_s, 0.0, 1, source=src)
    >>> c = compare_results([r("predicted", 10, 0.090), r("predicted", 25.0, 0.080)],
    ...                     [r("measured", 10, 0.100), r("measured", 25.000001, 0.125)])
    >>> [round(row.error_pct, 6) for row in c.rows], round(c.summary.median_ape, 6)
    ([-10.0, -36.0], 23.0)
    >>> s = c.summary   # the simulator picks 25 MB; measured, 25 MB is 25 % slower than 10 MB
    >>> s.predicted_best_bucket_mb, s.measured_best_bucket_mb, round(s.regret, 6)
    (25.000001, 10, 25.0)
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, replace

from simddp.compare.drift import net_of_compute
from simddp.compare.fidelity import overlap_rows, timeline_fidelity
from simddp.compare.inputs import check_result, check_unique, find_result, one_job
from simddp.predict.layouts import layout_key
from simddp.compare.metrics import Summary, summarize
from simddp.compare.noise import halves_apart_pct, halves_summary
from simddp.compare.text import config_label, config_list, config_sort_key
from simddp.errors import InputError
from simddp.inputs.profile import ModelProfile
from simddp.result import COMPUTE_ONLY, Result

# Every prediction carries compute-only as compute_s, and realrun bench measures it: compared
# too, it separates an error of the compute model from one of the communication model.


@dataclass(frozen=True)
class Row:
    """One matched configuration. Seconds inside; :meth:`to_json` and the table show ms."""

    strategy: str
    bucket_mb: float | None
    accum_steps: int
    predicted_s: float
    measured_s: float                 # the median step
    measured_p5_s: float | None
    measured_p95_s: float | None
    samples: int
    is_input: bool = False            # the prediction was set from this measurement: no score
    steps_s: tuple[float, ...] = ()   # the measured steps, when the file has them
    # the prediction's input scenarios (simddp/predict/scenarios.py), when the sweep computed them
    predicted_scenarios_s: dict[str, float] | None = None
    # what makes two bucket sizes one configuration (simddp/predict/layouts.py): rows with
    # the same layout are scored as one
    layout: tuple = ()
    # how far the medians of its odd and even turns read apart (simddp/compare/noise.py)
    halves_apart_pct: float | None = None

    @property
    def predicted_range_s(self) -> tuple[float, float] | None:
        if not self.predicted_scenarios_s:
            return None
        values = (self.predicted_s, *self.predicted_scenarios_s.values())
        return min(values), max(values)

    @property
    def in_range(self) -> bool | None:
        """Whether the measured median lies inside the predicted range (None: no range)."""
        r = self.predicted_range_s
        return None if r is None else r[0] <= self.measured_s <= r[1]

    @property
    def error_pct(self) -> float:
        """(predicted − measured) / measured · 100; negative: the simulator is optimistic."""
        return (self.predicted_s - self.measured_s) / self.measured_s * 100.0

    @property
    def config(self) -> tuple[str, float | None, int]:
        return (self.strategy, self.bucket_mb, self.accum_steps)

    @property
    def label(self) -> str:
        return config_label(*self.config)

    def to_json(self) -> dict:
        ms = lambda s: None if s is None else s * 1e3  # noqa: E731
        r = self.predicted_range_s
        return {"strategy": self.strategy, "bucket_mb": self.bucket_mb,
                "accum_steps": self.accum_steps, "predicted_ms": ms(self.predicted_s),
                "measured_ms": ms(self.measured_s), "measured_p5_ms": ms(self.measured_p5_s),
                "measured_p95_ms": ms(self.measured_p95_s), "error_pct": self.error_pct,
                "samples": self.samples, "input": self.is_input,
                "predicted_range_ms": None if r is None else [ms(v) for v in r],
                "in_range": self.in_range, "halves_apart_pct": self.halves_apart_pct}


@dataclass(frozen=True)
class Comparison:
    """Matched rows (table order), the summary, and both inputs (plots need curves and spans)."""

    rows: tuple[Row, ...]
    summary: Summary
    predicted: tuple[Result, ...]
    measured: tuple[Result, ...]
    instance_gap_pct: float | None = None   # the bench's twin models' distance (noise.py)
    cpu_note: str = ""   # the bench's ranks left Gloo's threads no cores (simddp/rig/cpu_share.py)
    turn_steps: int | None = None   # the bench's turn, when its rows were split (noise.py)

    def fidelity(self, timeline: str | None = None) -> dict | None:
        """Timeline fidelity of the configuration drawn as the timeline (simddp/compare/
        fidelity.py): predicted vs measured backward end and last all-reduce end."""
        return timeline_fidelity(*pick_timeline(self, timeline))

    def overlap(self) -> list[dict]:
        """Per row with spans on both sides: predicted vs measured overlap (fidelity.py)."""
        return overlap_rows((find_result(self.predicted, *r.config),
                             find_result(self.measured, *r.config)) for r in self.rows)

    def to_json(self, timeline: str | None = None) -> dict:
        """The ``--format json`` document (docs/COMPARE.md)."""
        net = net_of_compute(self.rows)   # drift.py
        halves = halves_summary(self.rows)   # noise.py
        return {"rows": [r.to_json() for r in self.rows], "summary": self.summary.to_json(),
                "timeline_fidelity": self.fidelity(timeline), "overlap": self.overlap(),
                "net_of_compute": None if net is None else net.to_json(),
                "instance_gap_pct": self.instance_gap_pct, "cpu_note": self.cpu_note or None,
                "halves": None if halves is None else {"turn_steps": self.turn_steps, **halves}}

    def split_halves(self, turn_steps: int | None) -> "Comparison":
        """This comparison with each row's odd and even turns of ``turn_steps`` steps
        compared (noise.py); unchanged without a turn length."""
        if turn_steps is None:
            return self
        rows = tuple(replace(r, halves_apart_pct=halves_apart_pct(r.steps_s, turn_steps))
                     for r in self.rows)
        return replace(self, rows=rows, turn_steps=turn_steps)

    def to_csv(self) -> str:
        out = io.StringIO()
        rows = []
        for r in self.rows:  # the range as two columns: a CSV cell holds one number
            row = r.to_json()
            low, high = row.pop("predicted_range_ms") or (None, None)
            in_range = row.pop("in_range")
            rows.append({**row, "predicted_low_ms": low, "predicted_high_ms": high,
                         "in_range": in_range})
        w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow({k: "" if v is None else str(v).lower() if isinstance(v, bool)
                        else f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()})
        return out.getvalue()


def compare_results(predicted: list[Result], measured: list[Result], *,
                    check_model: bool = True, where: tuple[str, str] = ("predicted", "measured"),
                    inputs: frozenset[str] = frozenset(),
                    profile: ModelProfile | None = None) -> Comparison:
    """Pair every measured result with its prediction and compute the summary.

    ``where`` names the two inputs in error messages. ``inputs``: strategies the prediction
    was built from the measurement of: tabled, marked, left out of the summary. ``profile``
    tells which bucket sizes make the same buckets (simddp/predict/layouts.py). InputError on
    mismatched inputs, a configuration unpredicted or listed twice, or nothing to compare.
    """
    wp, wm = where
    for results, src, w in ((predicted, "predicted", wp), (measured, "measured", wm)):
        if not results:
            raise InputError(f"{w}: no results to compare")
        wrong = sorted({r.source for r in results} - {src})
        if wrong:
            raise InputError(f"{w}: holds {wrong[0]!r} results, expected {src!r} "
                             "(are --predicted and --measured swapped?)")
        for r in results:
            check_result(r, w)
        check_unique(results, w)
    model_p, world_p = one_job(predicted, wp)
    model_m, world_m = one_job(measured, wm)
    # A preset's prediction is named "transformer-small@a100,b8s1024", realrun's module
    # "transformer-small": the part before "@" is the model.
    if check_model and model_p.split("@")[0] != model_m.split("@")[0]:
        raise InputError(f"model differs: {wp} has {model_p!r}, {wm} has {model_m!r} "
                         "(compare the same model, or pass --ignore-model)")
    if world_p != world_m:
        raise InputError(f"world size differs: {wp} has {world_p} ranks, {wm} has {world_m}")

    rows, used, added = [], set(), []
    for m in measured:
        p = find_result(predicted, *m.config)
        if p is not None:
            used.add(id(p))
        elif m.strategy == COMPUTE_ONLY and (p := _compute_only_prediction(predicted, m)):
            added.append(p)
        else:
            raise InputError(f"{wm}: measured config {config_label(*m.config)} has no prediction "
                             f"in {wp} (predicted: {config_list(predicted)})")
        rows.append(Row(m.strategy, m.bucket_mb, m.accum_steps, p.step_s, m.step_s,
                        m.step_p5_s, m.step_p95_s, m.samples, m.strategy in inputs,
                        m.steps_s, p.scenarios_s, layout_key(p, profile)))
    rows.sort(key=lambda r: config_sort_key(r.config))
    scored = [r for r in rows if not r.is_input]
    summary = summarize(scored, model=model_m if model_m == model_p else f"{model_p} / {model_m}",
                        world_size=world_m, predicted_link=_joined(r.link for r in predicted),
                        measured_link=_joined(r.link for r in measured),
                        unmeasured=len(predicted) - len(used))
    return Comparison(tuple(rows), summary, (*predicted, *added), tuple(measured))


def _compute_only_prediction(predicted: list[Result], m: Result) -> Result | None:
    """The compute baseline every prediction carries as ``compute_s``, as a Result."""
    accum_steps = m.accum_steps
    base = next((p for p in predicted if p.accum_steps == accum_steps and p.compute_s > 0), None)
    if base is None:
        return None
    return Result(model=base.model, link=base.link, strategy=COMPUTE_ONLY, bucket_mb=None,
                  world_size=base.world_size, step_s=base.compute_s, exposed_comm_s=0.0,
                  collectives=0, accum_steps=accum_steps, compute_s=base.compute_s)


def pick_timeline(comparison: Comparison, spec: str | None = None
                  ) -> tuple[Result, Result | None]:
    """The (predicted, measured-or-None) pair to draw as timelines: ``spec``
    (``strategy[:bucket_mb]``), else the measured-best configuration of the summary's bucket
    strategy, else the measured-best one."""
    c = comparison
    if spec is None:
        s = c.summary
        if s.bucket_strategy is not None:
            config = (s.bucket_strategy, s.measured_best_bucket_mb, s.bucket_accum_steps)
        else:
            config = min(c.rows, key=lambda r: r.measured_s).config
    else:
        strategy, _, bucket = spec.partition(":")
        try:
            bucket_mb = float(bucket) if bucket else None
        except ValueError:
            bucket_mb = -1.0
        if bucket_mb is not None and not (math.isfinite(bucket_mb) and bucket_mb > 0):
            raise InputError(f"--timeline-config: bucket {bucket!r} in {spec!r} is not a number "
                             "> 0 (expected strategy[:bucket_mb], e.g. ddp:25 or naive)")
        config = (strategy.strip(), bucket_mb, None)
    predicted = find_result(c.predicted, *config)
    if predicted is None:
        raise InputError(f"--timeline-config: no prediction for {spec!r}; choose from "
                         f"{config_list(c.predicted)}")
    return predicted, find_result(c.measured, *predicted.config)


def _joined(names) -> str:
    return ", ".join(sorted(set(names)))
