"""Predict every strategy at every bucket size and recommend a bucket_cap_mb.

    python -m simddp sweep                                     # documented defaults
    python -m simddp sweep --bucket-mb 1,10,100,1000
    python -m simddp sweep --model transformer-xl --link ib-hdr --world-size 16
    python -m simddp sweep --strategies ddp,no_sync --accum-steps 8 --format json
    python -m simddp sweep --model profile.json --link link.json --out out/sweep
    python -m simddp sweep --strategies ddp,fsdp,zero2 --comm-hook fp16,powersgd:2

Prints one setup line, the prediction ranges' inputs (on a GPU with no contention measured:
the published GPU contention the point takes, docs/FINDINGS.md#gpu-contention-under-overlap),
a table (strategy, bucket MB, collectives per step, step ms, exposed
communication ms, speedup vs naive), a second table for gradient accumulation (no_sync vs
sync_each, per optimizer step of K micro-steps) and the recommended bucket size with its
margin over the runner-up. With sharded strategies (fsdp, zero2) or --comm-hook rows, it also
says whether one of them beats plain DDP, and the model states per rank each holds.
--format json prints one JSON document and nothing else on stdout.
--out DIR writes sweep.csv, sweep.json (simddp.results/1 plus the rows) and sweep.png.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import sys

from simddp.analytic.optimal_bucket import closed_form_optimum, format_optimum
from simddp.analytic.optimum_gap import gap_line
from simddp.analytic.states import FP32_ADAM, PerParam, state_bytes
from simddp.cli.args import (add_beyond_ddp_args, compute_device, add_host_args,
                                    add_link_args, add_model_args, add_precision_arg, casts_of,
                                    parse_hooks, parse_names,
                                    parse_positive_floats, resolve_cpu_note, resolve_host,
                                    resolve_link, resolve_model, resolve_world, topology_text)
from simddp.rig.gloo_cpu import split_contention
from simddp.inputs.contention import contention_for, default_contention, with_contention
from simddp.inputs.host import Host
from simddp.inputs.io import write_atomic
from simddp.result import results_to_json
from simddp.report.outdir import check_out_dir
from simddp.inputs.link import Link
from simddp.predict.scenarios import range_sources
from simddp.report.progress import Progress
from simddp.planning.plans import plan
from simddp.inputs.profile import ModelProfile
from simddp.report.recommendation import fastest_row, recommendation_text, strategy_text
from simddp.report.table import (fmt_mb, fmt_ms, fmt_speedup, host_line, render_table,
                                 setup_line)
from simddp.result import Result
from simddp.report.levels import levels_line, topology_json
from simddp.planning.registry import ALWAYS, ON_REQUEST, TWO_LEVEL, Name, help_lines, names
from simddp.planning.strategy import STRATEGIES, SWEEPABLE
from simddp.predict.sweep import (
    DEFAULT_ACCUM_STEPS,
    DEFAULT_BUCKET_MB,
    Recommendation,
    StrategyPick,
    accumulates,
    naive_of,
    recommend,
    recommend_strategy,
    sweep,
    sweep_rows,
    sweep_strategies,
)

HELP = "predict every strategy at every bucket size; recommend bucket_cap_mb"
# what --strategies lists: the strategies all sweeps, then those only asked for by name (the
# two-level ones are named where --nodes makes them one of all's)
LISTED = names(offered=(ALWAYS, ON_REQUEST))
CSV_FIELDS = ("strategy", "bucket_mb", "accum_steps", "collectives", "step_ms", "step_ms_low",
              "step_ms_high",
              "exposed_comm_ms", "compute_ms", "speedup", "speedup_vs", "source")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sweep")
    g.add_argument("--bucket-mb", default=",".join(f"{mb:g}" for mb in DEFAULT_BUCKET_MB),
                   metavar="LIST", help="bucket sizes in MB (2^20 bytes, like torch's "
                                        "bucket_cap_mb), comma-separated (default %(default)s)")
    g.add_argument("--strategies", default="all", metavar="LIST",
                   help=f"comma-separated from {', '.join(LISTED)}, or all "
                        f"(= {', '.join(STRATEGIES)}; default all)")
    g.add_argument("--accum-steps", type=int, default=DEFAULT_ACCUM_STEPS, metavar="K",
                   help="micro-steps per optimizer step for no_sync and its sync_each baseline "
                        "(default %(default)s)")
    g.add_argument("--format", choices=("table", "json"), default="table",
                   help="table for people, json (one document on stdout) for scripts")
    g.add_argument("--out", metavar="DIR", help="also write sweep.csv, sweep.json, sweep.png here")
    g.add_argument("--force", action="store_true",
                   help="replace an earlier sweep's files in --out (default: move them "
                        "into --out/earlier-<time>/)")
    add_precision_arg(g)
    add_beyond_ddp_args(p)
    add_model_args(p)
    add_link_args(p)
    add_host_args(p)
    p.epilog = help_lines(SWEEPABLE)


def run(args: argparse.Namespace) -> int:
    # Everything is checked before anything is simulated or written.
    bucket_mbs = parse_positive_floats(args.bucket_mb, "--bucket-mb")
    topology = resolve_world(args)
    strategies = _strategies(args.strategies, topology)
    hooks = parse_hooks(args.comm_hook)
    sweep_strategies(strategies, bucket_mbs, args.accum_steps, hooks, args.shard_unit_mb)
    profile = resolve_model(args)
    link = resolve_link(args)
    host = resolve_host(args)
    device = compute_device(args)
    cast_gbps, casts = casts_of(args, host)
    out_dir = check_out_dir(args.out, files=("sweep.json", "sweep.csv", "sweep.png"),
                            force=args.force)  # last: it moves an earlier sweep aside

    with Progress("simulating", delay_s=1.0) as progress:
        # Spans are kept only for --out: sweep.json then holds every predicted timeline,
        # which `simddp compare` draws next to a measured one.
        results = sweep(profile, link, args.world_size, strategies, bucket_mbs,
                        args.accum_steps, host=host, on_progress=progress.update,
                        record=out_dir is not None, ranges=True, comm_hooks=hooks,
                        shard_unit_mb=args.shard_unit_mb, topology=topology, device=device,
                        precision=args.precision, cast_gbps=cast_gbps)
    naive = naive_of(results)
    if naive is None:  # the speedup column is always "vs naive": simulate the baseline anyway
        naive = sweep(profile, link, args.world_size, [Name.NAIVE], host=host,
                      topology=topology, device=device)[0]
    rows = sweep_rows(results, naive)
    rec = recommend(results)
    pick = recommend_strategy(results)
    states = pick_states(pick, profile, args)
    setup = _setup(profile, link, host, args, hooks, naive, device)
    mixed = _mixed_precision(results, args.precision, cast_gbps, casts)
    if mixed:   # only where a sharded row takes it: an fp32 sweep's JSON is as before
        setup["precision"] = {"precision": args.precision, "cast_gbps": cast_gbps, "note": mixed}
    setup["contention_split"] = _split(profile, link, host, args.world_size, topology)
    setup["cpu_note"] = resolve_cpu_note(args) or None   # simddp/rig/cpu_share.py
    if topology is not None:
        setup["topology"] = topology_json(topology, link, profile, rec, results)
    summary = {"recommended_bucket_mb": None if rec is None else round(rec.bucket_mb, 6),
               "recommended_from": None if rec is None else rec.strategy,
               "fastest": fastest_row(results, rec),
               "recommended_strategy": pick_json(pick, states),
               "closed_form_optimum": closed_form_optimum(profile, link, args.world_size)}
    # the reasons name the contention the rows were predicted under (a default included)
    gap = gap_line(profile, *with_contention(link, host, default_contention(link, host, device)),
                   summary["closed_form_optimum"], results)
    summary["closed_form_optimum"]["differs_from_simulator"] = gap

    if out_dir is not None:  # render everything in memory first: no partial output on error
        files = _out_files(results, rows, setup, summary, rec)
        for name, payload in files.items():
            write_atomic(out_dir / name, payload)
        print(f"wrote {', '.join(str(out_dir / n) for n in files)}", file=sys.stderr)

    if args.format == "json":
        print(json.dumps({"rows": rows, **summary, "setup": setup}, indent=1))
    else:
        print(setup_line(profile, link, args.world_size) + topology_text(topology))
        if topology is not None:
            print(levels_line(setup["topology"]))
        if host is not None:
            print(f"host costs charged ({host.name}): {host_line(host)}")
        if mixed:
            print(mixed)
        if setup["contention_split"]:
            print("contention split (a collective's α part, its bytes): "
                  "x{alpha:.2f}, x{bytes:.2f} (the link's)".format(**setup["contention_split"]))
        print(f"prediction ranges, step ms (low–high): {setup['ranges']}")
        print()
        print(render_report(results, rows, rec, naive, profile))
        charged = host is not None and host.costs("torch").copy_gbps is not None
        _print_verdicts(strategy_text(pick, states, hook_compute_charged=charged,
                                      results=results),
                        summary["closed_form_optimum"], gap)
        if setup["cpu_note"]:  # once, with the summary it qualifies (issue 53)
            print(f"note: profiled with {setup['cpu_note']}")
    return 0


def _print_verdicts(strategy_line: str, optimum: dict, gap: str | None) -> None:
    """The strategy pick, then the α–β closed form beside the simulated optimum (issue 6;
    docs/ACCOUNT.md says where they part: tensors are never split, uneven gradient
    readiness, the first bucket)."""
    if strategy_line:
        print(strategy_line)
    print(format_optimum(optimum))
    if gap:
        print(gap)


def _strategies(text: str, topology) -> list[str]:
    """--strategies; "all" is every DDP strategy, and hierarchical on a two-level cluster."""
    if text.strip() != "all":
        return parse_names(text, SWEEPABLE, "--strategies")
    two_level = topology is not None and topology.two_level
    return list(names(offered=(ALWAYS, TWO_LEVEL) if two_level else ALWAYS))



def _setup(profile: ModelProfile, link: Link, host: Host | None, args: argparse.Namespace,
           hooks: list, naive: Result, device: str | None = None) -> dict:
    """The inputs of the sweep, as sweep.json's ``setup`` records them."""
    return {"model": profile.name, "tensors": profile.n_tensors,
            "grad_bytes": profile.grad_total_bytes, "forward_ms": profile.forward_s * 1e3,
            "backward_ms": profile.backward_s * 1e3, "optimizer_ms": profile.optimizer_s * 1e3,
            "link": link.name, "alpha_us": link.alpha_s * 1e6, "busbw_gbps": link.busbw_gbps,
            "world_size": args.world_size, "accum_steps": args.accum_steps,
            "host_costs": None if host is None else host.name,
            "ranges": range_sources(profile, link, host, device),
            "naive_step_ms": naive.step_s * 1e3,
            "comm_hooks": [h.name for h in hooks], "shard_unit_mb": args.shard_unit_mb}


def _mixed_precision(results: list[Result], precision: str, cast_gbps: float | None,
                     casts: str) -> str:
    """The line saying which rows run FSDP2's mixed precision and how their casts are timed;
    "" where none does."""
    rows = sorted({r.spec.name for r in results if r.spec is not None and r.spec.param_dtype})
    if not rows:
        return ""
    dtype = next(r.spec.param_dtype for r in results if r.spec is not None and r.spec.param_dtype)
    return (f"precision {precision}: {', '.join(rows)} under FSDP2's MixedPrecisionPolicy "
            f"({dtype} all-gathers, fp32 reduce-scatters), casts "
            f"{'at ' if cast_gbps else ''}{casts}")


def _split(profile: ModelProfile, link: Link, host: Host | None, world_size: int,
           topology) -> dict | None:
    """The comm factors of a collective's α part and bytes part, where the model's own was
    split (simddp/rig/gloo_cpu.py ``split_contention``); None where one factor slows it all (as
    on a topology: each level's collectives at the one factor)."""
    if topology is not None:
        return None
    c = split_contention(contention_for(link, host), profile, link, world_size)
    return None if c.comm_bytes is None else {"alpha": c.comm, "bytes": c.comm_bytes}


def pick_states(pick: StrategyPick | None, profile: ModelProfile,
                args: argparse.Namespace) -> dict[str, dict[str, int]]:
    """Model states per rank of the strategy pick and the plain configuration it is weighed
    against, from their plans (simddp/analytic/states.py), by strategy name."""
    if pick is None:
        return {}
    per = FP32_ADAM if args.optimizer == "adam" else PerParam(optimizer=0)  # SGD: no state
    out = {}
    for r in (pick.best, pick.versus):
        if r is not None:
            out[r.strategy] = state_bytes(plan(profile, r.spec), args.world_size, per)
    return out


def pick_json(pick: StrategyPick | None, states: dict[str, dict[str, int]]) -> dict | None:
    """The strategy recommendation as JSON (sweep's ``recommended_strategy``)."""
    if pick is None:
        return None

    def row(r: Result) -> dict:
        return {"strategy": r.strategy, "step_ms": r.step_s * 1e3,
                "bucket_mb": None if r.bucket_mb is None else round(r.bucket_mb, 6),
                "model_state_bytes": states.get(r.strategy)}

    return {**row(pick.best), "faster": pick.faster, "gain": pick.gain,
            "versus": None if pick.versus is None else row(pick.versus)}


def render_report(results: list[Result], rows: list[dict], rec: Recommendation | None,
                  naive: Result, profile: ModelProfile | None = None) -> str:
    """The tables and the recommendation, as printed under the setup line."""
    def cells(row: dict) -> list[str]:
        step = f"{row['step_ms']:.2f}"
        low, high = row.get("step_ms_range") or (0.0, 0.0)
        if f"{low:.2f}" != f"{high:.2f}":  # a row no input uncertainty moves shows no range
            step += f" ({low:.2f}–{high:.2f})"
        return [row["strategy"], fmt_mb(row["bucket_mb"]), str(row["collectives"]), step,
                f"{row['exposed_comm_ms']:.2f}",
                fmt_speedup(row["speedup"])]

    pairs = list(zip(rows, results))   # rows = sweep_rows(results): one per result, in order
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
        parts.append(f"(naive, the speedup baseline: {fmt_ms(naive.step_s)} ms per step)")
    if accum:
        k = accum[0]["accum_steps"]
        parts.append(render_table(
            ["strategy", "bucket MB", "collectives/opt step", "opt step ms", "exposed comm ms",
             "speedup vs sync_each"], [cells(row) for row in accum],
            title=f"gradient accumulation, K={k} micro-steps per optimizer step "
                  "(no_sync: sync the last only; sync_each: sync every one)"))
    parts.append(recommendation_text(rec, naive, results=results, profile=profile))
    return "\n\n".join(parts)


def _out_files(results: list[Result], rows: list[dict], setup: dict, summary: dict,
               rec: Recommendation | None) -> dict[str, bytes | str]:
    from simddp.report.sweep_plot import (  # matplotlib only when asked
        figure_png,
        sweep_figure,
    )

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        low, high = row.get("step_ms_range") or (None, None)
        writer.writerow({**{k: ("" if v is None else v) for k, v in row.items()},
                         "step_ms_low": "" if low is None else low,
                         "step_ms_high": "" if high is None else high})
    doc = results_to_json(results, rows=rows, setup=setup, **summary)
    png = figure_png(sweep_figure(results, None if rec is None else (rec.strategy, rec.bucket_mb)))
    return {"sweep.csv": buf.getvalue(), "sweep.json": json.dumps(doc, indent=1) + "\n",
            "sweep.png": png}
