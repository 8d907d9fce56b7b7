"""Predicted versus measured: match configurations, then error, rank agreement and regret.

Picture two result files of the same job: the simulator's sweep and realrun's measurements,
maybe taken on a GPU cluster. Each measured configuration ``(strategy, bucket_mb,
accum_steps)`` is paired with its prediction; the pairs become a table and a few numbers
that say whether the simulator can be trusted to *pick* a strategy and a bucket size::

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

Pure functions, no files and no plots: :mod:`simddp.compare_plots` draws a
:class:`Comparison`, ``python -m simddp compare`` and ``python -m realrun validate`` print it.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field

import numpy as np

from simddp.errors import InputError
from simddp.result import Result
from simddp.strategy import ACCUM_BASELINE, BUCKETED, STRATEGIES

# Bucket sizes travel as MB floats: a sweep stores int(mb * 2**20) / 2**20, so 0.1 MB comes back
# as 0.09999943 (a relative error of 6e-6). 1e-3 relative is far above that rounding and far
# below any step between two bucket sizes anyone sweeps.
BUCKET_REL_TOL = 1e-3
# realrun bench always measures a run without any gradient sync first: the compute baseline.
# A sweep does not list it, but every prediction carries it as compute_s, so it is compared
# too: it separates an error of the compute model from an error of the communication model.
COMPUTE_ONLY = "compute-only"
STRATEGY_ORDER = (COMPUTE_ONLY,) + STRATEGIES + (ACCUM_BASELINE,)


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
        return {"strategy": self.strategy, "bucket_mb": self.bucket_mb,
                "accum_steps": self.accum_steps, "predicted_ms": ms(self.predicted_s),
                "measured_ms": ms(self.measured_s), "measured_p5_ms": ms(self.measured_p5_s),
                "measured_p95_ms": ms(self.measured_p95_s), "error_pct": self.error_pct,
                "samples": self.samples, "input": self.is_input}


@dataclass(frozen=True)
class Summary:
    """Percentages are in %: ``median_ape`` 4.0 and ``regret`` 1.5 mean 4 % and 1.5 %."""

    model: str
    world_size: int
    predicted_link: str
    measured_link: str
    configs: int                      # matched configurations (= measured results)
    unmeasured_predictions: int       # predicted configurations nobody measured (not compared)
    median_ape: float
    max_ape: float
    spearman: float | None            # None: fewer than 2 configs, or one side all equal
    spearman_by_strategy: dict[str, float | None] = field(default_factory=dict)
    bucket_strategy: str | None = None  # whose buckets the best-bucket numbers are about
    bucket_accum_steps: int | None = None
    predicted_best_bucket_mb: float | None = None
    measured_best_bucket_mb: float | None = None
    regret: float | None = None       # % slower, measured, at the predicted-best bucket

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Comparison:
    """Matched rows (table order), the summary, and both inputs (plots need curves and spans)."""

    rows: tuple[Row, ...]
    summary: Summary
    predicted: tuple[Result, ...]
    measured: tuple[Result, ...]

    def to_json(self) -> dict:
        """The ``--format json`` document: ``{"rows": [...], "summary": {...}}``."""
        return {"rows": [r.to_json() for r in self.rows], "summary": self.summary.to_json()}

    def to_csv(self) -> str:
        out = io.StringIO()
        rows = [r.to_json() for r in self.rows]
        w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow({k: "" if v is None else str(v).lower() if isinstance(v, bool)
                        else f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()})
        return out.getvalue()


def compare_results(predicted: list[Result], measured: list[Result], *,
                    check_model: bool = True, where: tuple[str, str] = ("predicted", "measured"),
                    inputs: frozenset[str] = frozenset()) -> Comparison:
    """Pair every measured result with its prediction and compute the summary.

    ``where`` names the two inputs in error messages (the command passes the file paths).
    ``inputs``: strategies whose measurement the prediction was built from (realrun validate
    sets the compute total from the compute-only row): tabled, marked, left out of the summary.
    Raises :class:`InputError` on mismatched inputs (model, world size, sources), a measured
    configuration with no prediction, a configuration listed twice, or nothing to compare.
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
            _check_result(r, w)
        _check_unique(results, w)
    model_p, world_p = _one_job(predicted, wp)
    model_m, world_m = _one_job(measured, wm)
    # A preset's prediction is named "transformer-small@a100,b8s1024" (where its times came
    # from), realrun names the module "transformer-small": the part before "@" is the model.
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
                             f"in {wp} (predicted: {_config_list(predicted)})")
        rows.append(Row(m.strategy, m.bucket_mb, m.accum_steps, p.step_s, m.step_s,
                        m.step_p5_s, m.step_p95_s, m.samples, m.strategy in inputs))
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


def summarize(rows: list[Row], *, model: str = "", world_size: int = 0,
              predicted_link: str = "", measured_link: str = "", unmeasured: int = 0) -> Summary:
    """APE, Spearman ρ and the best-bucket regret of matched rows (at least one)."""
    if not rows:
        raise InputError("no matched configurations to compare (empty grid)")
    ape = [abs(r.error_pct) for r in rows]
    by_strategy = {}
    for s in sorted({r.strategy for r in rows}, key=lambda s: config_sort_key((s, None, 1))):
        mine = [r for r in rows if r.strategy == s]
        if len(mine) >= 3:  # two points always rank-agree or disagree: ±1 says nothing
            by_strategy[s] = spearman([r.predicted_s for r in mine], [r.measured_s for r in mine])
    best = best_bucket(rows)
    return Summary(model=model, world_size=world_size, predicted_link=predicted_link,
                   measured_link=measured_link, configs=len(rows),
                   unmeasured_predictions=unmeasured,
                   median_ape=float(np.median(ape)), max_ape=float(max(ape)),
                   spearman=spearman([r.predicted_s for r in rows], [r.measured_s for r in rows]),
                   spearman_by_strategy=by_strategy, **best)


def best_bucket(rows: list[Row]) -> dict:
    """Predicted-best and measured-best bucket of one bucketed strategy, and the regret in %.

    The strategy is "bucketed" if measured, else "ddp", else "no_sync"; with several
    accumulation settings the smallest is used. Only measured buckets are candidates, since the
    regret needs the measured time at the predicted-best bucket.
    """
    for s in BUCKETED:
        mine = [r for r in rows if r.strategy == s and r.bucket_mb is not None]
        if mine:
            accum = min(r.accum_steps for r in mine)
            mine = [r for r in mine if r.accum_steps == accum]
            pred_best = min(mine, key=lambda r: (r.predicted_s, r.bucket_mb))
            meas_best = min(mine, key=lambda r: (r.measured_s, r.bucket_mb))
            return {"bucket_strategy": s, "bucket_accum_steps": accum,
                    "predicted_best_bucket_mb": pred_best.bucket_mb,
                    "measured_best_bucket_mb": meas_best.bucket_mb,
                    "regret": (pred_best.measured_s / meas_best.measured_s - 1.0) * 100.0}
    return {}


def rank_average(values) -> np.ndarray:
    """Ranks 1..n, ties sharing their average rank: [10, 20, 20, 30] -> [1, 2.5, 2.5, 4]."""
    x = np.asarray(values, dtype=float)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + 1 + ends) / 2.0)[inverse.ravel()]


def spearman(x, y) -> float | None:
    """Spearman ρ: Pearson correlation of the average ranks. None when undefined (n < 2, or
    one side has a single distinct value)."""
    if len(x) != len(y):
        raise ValueError(f"spearman: {len(x)} vs {len(y)} values")
    if len(x) < 2:
        return None
    rx, ry = rank_average(x), rank_average(y)
    dx, dy = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return None if denom == 0 else float(dx @ dy) / denom


def same_bucket(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=BUCKET_REL_TOL, abs_tol=1e-9)


def find_result(results, strategy: str, bucket_mb: float | None, accum_steps: int | None = None
                ) -> Result | None:
    """The result of that configuration (closest bucket within tolerance), or None.
    ``accum_steps=None`` accepts any, preferring the smallest."""
    hits = [r for r in results if r.strategy == strategy and same_bucket(r.bucket_mb, bucket_mb)
            and (accum_steps is None or r.accum_steps == accum_steps)]
    if not hits:
        return None
    return min(hits, key=lambda r: (r.accum_steps,
                                    0.0 if bucket_mb is None else abs(r.bucket_mb - bucket_mb)))


def pick_timeline(comparison: Comparison, spec: str | None = None
                  ) -> tuple[Result, Result | None]:
    """The (predicted, measured-or-None) pair to draw as timelines.

    ``spec`` is ``strategy[:bucket_mb]`` ("ddp:25", "naive"); the default is the measured-best
    configuration of the summary's bucket strategy, else the measured-best configuration.
    """
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
                         f"{_config_list(c.predicted)}")
    return predicted, find_result(c.measured, *predicted.config)


def format_table(comparison: Comparison) -> str:
    """The text report: one line per configuration, then the summary, in ms and %."""
    c, s = comparison, comparison.summary
    lines = [f"compare: {s.model}, {s.world_size} ranks; predicted on {s.predicted_link}, "
             f"measured on {s.measured_link}; {s.configs} configs"]
    head = ("strategy", "bucket MB", "accum", "pred ms", "meas ms", "p95 ms", "error %", "steps")
    table = [head] + [(r.strategy, "-" if r.bucket_mb is None else f"{r.bucket_mb:g}",
                       str(r.accum_steps), f"{r.predicted_s * 1e3:.2f}",
                       f"{r.measured_s * 1e3:.2f}",
                       "-" if r.measured_p95_s is None else f"{r.measured_p95_s * 1e3:.2f}",
                       "input" if r.is_input else f"{r.error_pct:+.1f}", str(r.samples))
                      for r in c.rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    for t in table:  # names left-aligned, numbers right-aligned, as nccl-tests prints
        lines.append("  ".join([t[0].ljust(widths[0])]
                               + [v.rjust(w) for v, w in zip(t[1:], widths[1:])]))
    rho = "n/a" if s.spearman is None else f"{s.spearman:.3f}"
    lines.append(f"|error|: median {s.median_ape:.1f} %, max {s.max_ape:.1f} %; "
                 f"Spearman rho {rho} over {s.configs} configs")
    if s.spearman_by_strategy:
        lines.append("  rho per strategy: " + ", ".join(
            f"{k} {'n/a' if v is None else f'{v:.3f}'}" for k, v in s.spearman_by_strategy.items()))
    if s.bucket_strategy is not None:
        accum = f", accum {s.bucket_accum_steps}" if s.bucket_accum_steps != 1 else ""
        lines.append(f"best bucket ({s.bucket_strategy}{accum}): predicted "
                     f"{s.predicted_best_bucket_mb:g} MB, measured {s.measured_best_bucket_mb:g} "
                     f"MB; regret {s.regret:.1f} % (measured, at the predicted-best bucket)")
    else:
        lines.append("best bucket: n/a (no bucketed or ddp configs measured)")
    for r in c.rows:
        if r.is_input:
            lines.append(f"({r.label}: an input — the predictions' compute was set from this "
                         "measurement — so not scored)")
    if s.unmeasured_predictions:
        lines.append(f"({s.unmeasured_predictions} predicted configs were not measured; "
                     "not compared)")
    return "\n".join(lines)


def config_label(strategy: str, bucket_mb: float | None, accum_steps: int | None = 1) -> str:
    """'ddp:25', 'naive', 'no_sync:25 (accum 4)': the --timeline-config spelling."""
    text = strategy if bucket_mb is None else f"{strategy}:{bucket_mb:g}"
    return text if accum_steps in (None, 1) else f"{text} (accum {accum_steps})"


def config_sort_key(config) -> tuple:
    strategy, bucket_mb, accum = config
    order = STRATEGY_ORDER.index(strategy) if strategy in STRATEGY_ORDER else len(STRATEGY_ORDER)
    return (order, strategy, accum, -1.0 if bucket_mb is None else bucket_mb)


def _check_result(r: Result, where: str) -> None:
    """Values the arithmetic below relies on; a hand-edited or truncated file fails here."""
    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    what = f"{where}: {r.strategy!r}"
    if not isinstance(r.strategy, str):
        raise InputError(f"{what}: strategy must be a name like 'ddp'")
    if r.bucket_mb is not None and not (number(r.bucket_mb) and r.bucket_mb > 0):
        raise InputError(f"{what}: bucket_mb {r.bucket_mb!r} must be null or a number > 0")
    if not (isinstance(r.accum_steps, int) and r.accum_steps >= 1):
        raise InputError(f"{what}: accum_steps {r.accum_steps!r} must be an integer >= 1")
    what = f"{where}: {config_label(*r.config)}"
    if not (number(r.step_s) and r.step_s > 0):
        raise InputError(f"{what} has step_s {r.step_s!r}, expected a time > 0 s")
    for name in ("step_p5_s", "step_p95_s"):
        v = getattr(r, name)
        if v is not None and not (number(v) and v >= 0):
            raise InputError(f"{what} has {name} {v!r}, expected null or a time >= 0 s")


def _check_unique(results: list[Result], where: str) -> None:
    seen: list[Result] = []
    for r in results:
        if find_result(seen, *r.config) is not None:
            raise InputError(f"{where}: config {config_label(*r.config)} is listed twice "
                             "(expected one result per configuration)")
        seen.append(r)


def _one_job(results: list[Result], where: str) -> tuple[str, int]:
    for name, values in (("models", {r.model for r in results}),
                         ("world sizes", {r.world_size for r in results})):
        if len(values) > 1:
            raise InputError(f"{where}: mixes {name} {', '.join(map(str, sorted(values)))}; "
                             "compare one job at a time")
    return results[0].model, results[0].world_size


def _joined(names) -> str:
    return ", ".join(sorted(set(names)))


def _config_list(results) -> str:
    """'naive, ddp:{1,25,100}, no_sync:{25} (accum 4)': every config, grouped, on one line."""
    groups: dict[tuple[str, int], list[float]] = {}
    for r in sorted(results, key=lambda r: config_sort_key(r.config)):
        groups.setdefault((r.strategy, r.accum_steps), [])
        if r.bucket_mb is not None:
            groups[(r.strategy, r.accum_steps)].append(r.bucket_mb)
    parts = []
    for (strategy, accum), buckets in groups.items():
        text = strategy + (":{" + ",".join(f"{b:g}" for b in buckets) + "}" if buckets else "")
        parts.append(text if accum == 1 else f"{text} (accum {accum})")
    return ", ".join(parts)
