"""A sweep's answer as a person reads it: the setup, the tables, the recommendation, the why.

Everything here renders a :class:`simddp.predict.answer.SweepAnswer`, as
simddp/report/sweep_json.py renders it as data: the two cannot disagree.
"""
from __future__ import annotations

from simddp.predict.answer import SweepAnswer
from simddp.predict.scenarios import range_sources
from simddp.predict.sweep import accumulates, naive_of
from simddp.analytic.optimal_bucket import format_optimum
from simddp.report.levels import levels_line, topology_json, topology_text
from simddp.report.recommendation import decision_text, recommendation_text, strategy_text
from simddp.report.table import (contention_line, fmt_mb, fmt_ms, fmt_speedup, host_line,
                                 render_table, setup_line)


def answer_text(a: SweepAnswer, explain: bool = False) -> str:
    """What ``simddp sweep`` prints: the setup lines, the tables, the decision; ``explain``:
    the reasoning instead of the decision, and the closed form."""
    inputs = a.inputs
    host, topology = inputs.host, inputs.topology
    lines = [setup_line(inputs.profile, a.link_file, inputs.world_size)
             + topology_text(topology), contention_line(inputs.contention)]
    if topology is not None:
        lines.append(levels_line(topology_json(topology, a.link_file, inputs.profile,
                                               a.recommendation, a.results)))
    if host is not None:
        lines.append(f"host costs charged ({host.name}): {host_line(host)}")
    if a.mixed_precision:
        lines.append(a.mixed_precision)
    if a.grad_dtype_note:
        lines.append(a.grad_dtype_note)
    if a.split:
        lines.append("contention split (a collective's α part, its bytes): "
                     "x{alpha:.2f}, x{bytes:.2f} (the link's)".format(**a.split))
    lines += [f"prediction ranges, step ms (low–high): {range_sources(inputs)}", "",
              tables_and_recommendation(a, explain)]
    charged = host is not None and host.costs("torch").copy_gbps is not None
    pick = strategy_text(a.pick, a.states, hook_compute_charged=charged, results=a.results,
                         brief=not explain)
    if pick:
        lines.append(pick)
    if explain:
        lines.append(format_optimum(a.optimum))
        if a.gap:
            lines.append(a.gap)
    if a.request.cpu_note:  # once, with the summary it qualifies
        lines.append(f"note: profiled with {a.request.cpu_note}")
    return "\n".join(lines)


def tables_and_recommendation(a: SweepAnswer, explain: bool = False) -> str:
    """The tables and the recommendation (its decision, or with ``explain`` its reasoning), as
    printed under the setup line."""
    def cells(row: dict) -> list[str]:
        step = f"{row['step_ms']:.2f}"
        low, high = row.get("step_ms_range") or (0.0, 0.0)
        if f"{low:.2f}" != f"{high:.2f}":  # a row no input uncertainty moves shows no range
            step += f" ({low:.2f}–{high:.2f})"
        return [row["strategy"], fmt_mb(row["bucket_mb"]), str(row["collectives"]), step,
                f"{row['exposed_comm_ms']:.2f}", fmt_speedup(row["speedup"])]

    results = a.results
    pairs = list(zip(a.rows, results))   # one row per result, in order
    per_step = [row for row, r in pairs if not accumulates(r)]
    # at each size, sync_each (the baseline) above no_sync
    accum = [row for row, r in sorted(((row, r) for row, r in pairs if accumulates(r)),
                                      key=lambda p: (p[0]["bucket_mb"], not p[1].spec.is_baseline))]
    parts = []
    if per_step:
        parts.append(render_table(
            ["strategy", "bucket MB", "collectives/step", "step ms", "exposed comm ms",
             "speedup vs naive"], [cells(row) for row in per_step]))
    if per_step and naive_of(results) is None:
        parts.append(f"(naive, the speedup baseline: {fmt_ms(a.naive.step_s)} ms per step)")
    if accum:
        k = accum[0]["accum_steps"]
        parts.append(render_table(
            ["strategy", "bucket MB", "collectives/opt step", "opt step ms", "exposed comm ms",
             "speedup vs sync_each"], [cells(row) for row in accum],
            title=f"gradient accumulation, K={k} micro-steps per optimizer step "
                  "(no_sync: sync the last only; sync_each: sync every one)"))
    parts.append(recommendation_text(a.recommendation, a.naive, results=results,
                                     profile=a.inputs.profile) if explain else
                 decision_text(a.recommendation, a.stakes, results, a.inputs.profile,
                               a.naive))
    return "\n\n".join(parts)
