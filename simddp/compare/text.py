"""The compare report as text, and how configurations are named and ordered.

    >>> config_label("ddp", 25.0), config_label("no_sync", 25.0, 4)
    ('ddp:25', 'no_sync:25 (accum 4)')
"""
from __future__ import annotations

from simddp.compare.drift import net_of_compute, net_text
from simddp.compare.fidelity import AGREE_PCT, OFF_PCT
from simddp.predict.layouts import sizes_text
from simddp.compare.noise import halves_summary, halves_text, noise_text
from simddp.report.overlap import overlap_table
from simddp.result import COMPUTE_ONLY
from simddp.planning.strategy import ACCUM_BASELINE, STRATEGIES

STRATEGY_ORDER = (COMPUTE_ONLY,) + STRATEGIES + (ACCUM_BASELINE,)


def format_table(comparison, timeline: str | None = None) -> str:
    """The text report: one line per configuration, then the summary, in ms and %; then the
    timeline fidelity of ``timeline`` (default: the measured-best bucket) if it has spans, and
    the overlap per rank of every configuration with spans on both sides."""
    c, s = comparison, comparison.summary
    lines = [f"compare: {s.model}, {s.world_size} ranks; predicted on {s.predicted_link}, "
             f"measured on {s.measured_link}; {s.configs} configs"]
    pooled = pooled_ms(s)   # rows scored as one configuration: their pooled median
    head = ("strategy", "bucket MB", "accum", "pred ms", "meas ms", "p95 ms", "error %", "steps")
    head += ("pooled ms",) if pooled else ()
    table = [head] + [(r.strategy, "-" if r.bucket_mb is None else f"{r.bucket_mb:g}",
                       str(r.accum_steps), f"{r.predicted_s * 1e3:.2f}",
                       f"{r.measured_s * 1e3:.2f}",
                       "-" if r.measured_p95_s is None else f"{r.measured_p95_s * 1e3:.2f}",
                       "input" if r.is_input else f"{r.error_pct:+.1f}", str(r.samples))
                      + ((_pooled_cell(pooled, r),) if pooled else ())
                      for r in c.rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(head))]
    for t in table:  # names left-aligned, numbers right-aligned, as nccl-tests prints
        lines.append("  ".join([t[0].ljust(widths[0])]
                               + [v.rjust(w) for v, w in zip(t[1:], widths[1:])]).rstrip())
    rho = "n/a" if s.spearman is None else f"{s.spearman:.3f}"
    lines.append(f"|error|: median {s.median_ape:.1f} %, max {s.max_ape:.1f} %; "
                 f"Spearman rho {rho} over {s.configs} configs")
    if s.with_range:
        lines.append(f"measured medians inside their predicted range: {s.in_range} of "
                     f"{s.with_range} ({100 * s.in_range / s.with_range:.0f} %)")
    lines += halves_text(halves_summary(c.rows), c.turn_steps)
    lines += net_text(net_of_compute(c.rows))
    if c.cpu_note:
        lines.append(f"note: measured with {c.cpu_note}")
    if s.spearman_by_strategy:
        lines.append("  rho per strategy: " + ", ".join(
            f"{k} {'n/a' if v is None else f'{v:.3f}'}" for k, v in s.spearman_by_strategy.items()))
    if s.bucket_strategy is not None:
        lines += best_bucket_text(c)
    else:
        lines.append("best bucket: n/a (no bucketed or ddp configs measured)")
    for r in c.rows:
        if r.is_input:
            lines.append(f"({r.label}: an input — the predictions' compute was set from this "
                         "measurement — so not scored)")
    if s.unmeasured_predictions:
        lines.append(f"({s.unmeasured_predictions} predicted configs were not measured; "
                     "not compared)")
    fidelity = comparison.fidelity(timeline)
    if fidelity is not None:
        lines.append(fidelity_text(fidelity))
    lines += overlap_table([(config_label(*row["config"]), row) for row in comparison.overlap()])
    return "\n".join(lines)


def best_bucket_text(comparison) -> list[str]:
    """The best-bucket line and what stands under it: the bench's noise, and each group of
    sizes scored as one configuration with the pooled median it is judged on, so the line
    and the table agree (docs/COMPARE.md: a pooled size must not read as the best beside a
    faster row of its own pool).
    """
    c, s = comparison, comparison.summary
    accum = f", accum {s.bucket_accum_steps}" if s.bucket_accum_steps != 1 else ""
    ci = ("" if s.regret_ci is None else
          f", 95 % interval {s.regret_ci[0]:+.1f} … {s.regret_ci[1]:+.1f} %")
    named = lambda mb, mbs: sizes_text(mbs) if len(mbs) > 1 else f"{mb:g} MB"  # noqa: E731
    pooled = dict(zip(s.same_layout, s.same_layout_ms))
    meas_mbs = tuple(s.measured_best_bucket_mbs) or (s.measured_best_bucket_mb,)
    at = (f" (pooled median {pooled[meas_mbs]:.2f} ms)" if meas_mbs in pooled else "")
    lines = [f"best bucket ({s.bucket_strategy}{accum}): predicted "
             f"{named(s.predicted_best_bucket_mb, s.predicted_best_bucket_mbs)}, measured "
             f"{named(s.measured_best_bucket_mb, s.measured_best_bucket_mbs)}{at}; regret "
             f"{s.regret:.1f} % (measured, at the predicted-best bucket{ci})"]
    mine = [r for r in c.rows if r.strategy == s.bucket_strategy and r.bucket_mb is not None
            and r.accum_steps == s.bucket_accum_steps and not r.is_input]
    fastest = min(mine, key=lambda r: (r.measured_s, r.bucket_mb), default=None)
    if fastest is not None and not any(_same_mb(fastest.bucket_mb, mb) for mb in meas_mbs):
        group = next((mbs for mbs in pooled if any(_same_mb(fastest.bucket_mb, mb)
                                                    for mb in mbs)), None)
        if group is not None:
            others = [mb for mb in group if not _same_mb(mb, fastest.bucket_mb)]
            lines.append(f"  the fastest single row, {fastest.bucket_mb:g} MB "
                         f"({fastest.measured_s * 1e3:.2f} ms), makes the same buckets as "
                         f"{sizes_text(others)}: one configuration, pooled "
                         f"{pooled[group]:.2f} ms")
    if c.instance_gap_pct is not None:
        lines.append(noise_text(c.instance_gap_pct))
    for sizes, ms in pooled.items():  # a difference between them is noise, not a verdict
        lines.append(f"  {sizes_text(sizes)} make the same buckets here: one "
                     f"configuration, their measured steps pooled: median {ms:.2f} ms (the "
                     "pooled ms column)")
    return lines


def pooled_ms(summary) -> dict:
    """{(strategy, accum, bucket_mb): pooled median ms} of the rows the summary scored as
    one configuration with others (empty when none were)."""
    s = summary
    return {(s.bucket_strategy, s.bucket_accum_steps, mb): ms
            for mbs, ms in zip(s.same_layout, s.same_layout_ms) for mb in mbs}


def _pooled_cell(pooled: dict, row) -> str:
    ms = next((v for (st, acc, mb), v in pooled.items()
               if st == row.strategy and acc == row.accum_steps and row.bucket_mb is not None
               and _same_mb(mb, row.bucket_mb)), None)
    return "" if ms is None or row.is_input else f"{ms:.2f}"


def _same_mb(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-3 * max(abs(a), abs(b))


def config_label(strategy: str, bucket_mb: float | None, accum_steps: int | None = 1) -> str:
    """'ddp:25', 'naive', 'no_sync:25 (accum 4)': the --timeline-config spelling."""
    text = strategy if bucket_mb is None else f"{strategy}:{bucket_mb:g}"
    return text if accum_steps in (None, 1) else f"{text} (accum {accum_steps})"


def config_sort_key(config) -> tuple:
    strategy, bucket_mb, accum = config
    order = STRATEGY_ORDER.index(strategy) if strategy in STRATEGY_ORDER else len(STRATEGY_ORDER)
    return (order, strategy, accum, -1.0 if bucket_mb is None else bucket_mb)


def config_list(results) -> str:
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


def fidelity_text(f: dict | None) -> str:
    """Two lines for the report: the span ends, and a warning when errors cancel."""
    if f is None:
        return "timeline fidelity: n/a (no measured timeline with spans)"
    parts = [f"step {f['step_ms'][0]:.1f} vs {f['step_ms'][1]:.1f} ms"]
    for name, words in (("backward_end", "backward ends"),
                        ("last_all_reduce_end", "last all-reduce ends")):
        if f[f"{name}_ms"] is None:
            parts.append(f"{words}: not measured")
        else:
            p, m = f[f"{name}_ms"]
            parts.append(f"{words} {p:.1f} vs {m:.1f} ms ({f[f'{name}_error_pct']:+.1f} % "
                         "of the step)")
    on = ("" if f.get("measured_rank") is None else
          f" on rank {f['measured_rank']}, the one whose backward ended last")
    text = (f"timeline fidelity, {config_label(*f['config'])} (predicted vs measured{on}): "
            + "; ".join(parts))
    if f["cancelling"]:
        text += (f"\nWARNING: errors cancel — the step agrees within {AGREE_PCT:g} % while the "
                 f"{' and '.join(n.replace('_', ' ') for n in f['off'])} is off by "
                 f"{OFF_PCT:g} % of the step or more; other configurations may not agree.")
    return text
