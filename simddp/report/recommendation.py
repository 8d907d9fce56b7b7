"""The sentences a user reads after a sweep: which bucket_cap_mb, by how much, what is fastest.

    >>> from simddp import build_profile, get_link, parse_model, recommend, sweep
    >>> results = sweep(build_profile(parse_model("transformer-small")), get_link("eth-100g"),
    ...                 2, ["naive", "ddp"], [1, 10, 100])
    >>> print(recommendation_text(recommend(results), results[0]).splitlines()[0])
    Recommended bucket_cap_mb: 10 — ddp predicts 73.40 ms per step; the runner-up, 1 MB, is 2.40 ms (3.3%) slower (75.80 ms).

Used by ``simddp sweep`` and by ``realrun validate`` (which then says whether the measurement
proves it).
"""
from __future__ import annotations

from simddp.report.table import fmt_mb, fmt_ms, fmt_range
from simddp.result import Result
from simddp.strategy import ACCUM_BASELINE
from simddp.sweeps import Recommendation


def fastest_row(results: list[Result], rec: Recommendation | None) -> dict | None:
    """The fastest per-step configuration as JSON (sweep's ``fastest``); None if none."""
    per_step = [r for r in results if r.strategy not in ("no_sync", ACCUM_BASELINE)]
    best = rec.fastest if rec is not None else min(per_step, key=lambda r: r.step_s, default=None)
    if best is None:
        return None
    return {"strategy": best.strategy, "step_ms": best.step_s * 1e3,
            "bucket_mb": None if best.bucket_mb is None else round(best.bucket_mb, 6)}


def recommendation_text(rec: Recommendation | None, naive: Result | None = None) -> str:
    """The sentences users read: which bucket_cap_mb, by how much, and what is fastest."""
    if rec is None:
        return "No bucketed strategy (ddp, bucketed, no_sync) in this sweep: no bucket size " \
               "to recommend."
    per = "per step"
    if rec.strategy == "no_sync":
        per = "per optimizer step (with gradient accumulation; ddp was not swept)"
    text = (f"Recommended bucket_cap_mb: {fmt_mb(rec.bucket_mb)} — {rec.strategy} predicts "
            f"{fmt_ms(rec.step_s)} ms {per}")
    if rec.step_range_s is not None:
        text += f" (range {fmt_range(rec.step_range_s)} ms)"
    if rec.point_best_mb is not None:
        text += (f". At the point estimate {fmt_mb(rec.point_best_mb)} MB is faster "
                 f"({fmt_ms(rec.runner_up_step_s)} ms), but over the prediction ranges it can "
                 f"be {100 * rec.point_best_worst_regret:.1f}% slower than the best, while "
                 f"{fmt_mb(rec.bucket_mb)} MB stays within {100 * rec.worst_regret:.1f}%: "
                 f"recommended for the lowest worst-case regret.")
    elif rec.runner_up_mb is None:
        text += " (only one bucket size swept: try --bucket-mb 1,10,100)."
    else:
        margin_pct = 100 * rec.margin_s / max(rec.step_s, 1e-300)
        text += (f"; the runner-up, {fmt_mb(rec.runner_up_mb)} MB, is {fmt_ms(rec.margin_s)} ms "
                 f"({margin_pct:.1f}%) slower ({fmt_ms(rec.runner_up_step_s)} ms).")
        if round(margin_pct, 1) < 1:
            text += " A margin under 1% is within what a prediction can promise: either is fine."
        if rec.worst_regret is not None and round(100 * rec.worst_regret, 1) > 0:
            text += (f" Over the prediction ranges it stays within {100 * rec.worst_regret:.1f}% "
                     "of the best size.")
        elif rec.worst_regret is not None:
            text += " It stays the best size over the prediction ranges."
    if rec.edge is not None:
        text += (f" It is the {rec.edge} size swept; sizes beyond it might be faster still — "
                 f"extend --bucket-mb.")
    if rec.strategy == "ddp":
        # torch 2.13 keeps the 1 MiB first bucket only at the default cap (docs/CLI.md)
        mb = fmt_mb(rec.bucket_mb)
        text += (f"\nIn torch: DistributedDataParallel(model, bucket_cap_mb_list=[1, {mb}]) runs "
                 f"the ddp rows (torch 2.13, as realrun runs it; a torch without "
                 f"bucket_cap_mb_list takes bucket_cap_mb={mb}); on 2.13 a plain "
                 f"bucket_cap_mb={mb} makes the first bucket {mb} MB too (the bucketed rows).")
    f = rec.fastest
    if f is None or rec.strategy == "no_sync":  # per optimizer step: not comparable to a step
        return text
    if f.strategy == rec.strategy and f.bucket_mb == rec.bucket_mb:
        text += (f"\nThe recommended {rec.strategy} at {fmt_mb(rec.bucket_mb)} MB is also the "
                 "fastest configuration overall")
    else:
        where = f.strategy + (f" at {fmt_mb(f.bucket_mb)} MB" if f.bucket_mb is not None else "")
        text += f"\nFastest configuration overall: {where}, {fmt_ms(f.step_s)} ms per step"
    if naive is not None and f.step_s > 0 and f.strategy != "naive":
        text += f" ({naive.step_s / f.step_s:.2f}× faster than naive)."
    else:
        text += "."
    return text


