"""Compare predicted and measured step times: a table, error, rank agreement, best-bucket regret.

    python -m simddp compare --predicted pred.json --measured meas.json
    python -m simddp compare --predicted pred.json --measured meas.json --format json
    python -m simddp compare --predicted pred.json --measured meas.json --out cmp/ \\
        --timeline-config ddp:25

Both files are simddp.results/1: predictions from ``python -m simddp sweep --out``, measurements
from ``python -m realrun bench --out`` (no torch needed here: measure on the cluster, compare on
a laptop). Every measured configuration (strategy, bucket MB, accum steps) must have a
prediction; predictions nobody measured are skipped. error % = (predicted − measured) / measured
· 100, so negative means the simulator is optimistic. regret = how much slower (measured) the
predicted-best bucket is than the measured-best one. Configurations with spans on both sides
also get one rank's compute, exposed comm, idle (ms) and overlap % (HTA's: comm under compute /
comm), predicted / measured (simddp/report/overlap.py). ``--out DIR`` writes compare_scatter.png,
compare_buckets.png, compare_timeline.png, compare.json and compare.csv. See docs/COMPARE.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from simddp.compare import compare_results, format_table, pick_timeline
from simddp.compare.noise import instance_gap_pct, turn_steps
from simddp.rig.cpu_share import section_note
from simddp.inputs.io import read_json
from simddp.result import load_results, results_from_json
from simddp.report.outdir import check_out_dir

HELP = "predicted vs measured: table, error, Spearman rho, best-bucket regret, plots"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--predicted", required=True, metavar="FILE",
                   help="simddp.results/1 file of predictions (python -m simddp sweep --out)")
    p.add_argument("--measured", required=True, metavar="FILE",
                   help="simddp.results/1 file of measurements (python -m realrun bench --out)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: a table and a summary; json: one document "
                        '{"rows": [...], "summary": {...}} (default %(default)s)')
    p.add_argument("--out", metavar="DIR",
                   help="also write the three PNGs, compare.json and compare.csv into DIR")
    p.add_argument("--force", action="store_true",
                   help="replace an earlier comparison's files in --out (default: move "
                        "them into --out/earlier-<time>/)")
    p.add_argument("--timeline-config", metavar="STRATEGY[:BUCKET_MB]", default=None,
                   help="configuration whose timelines --out draws, e.g. ddp:25 or naive "
                        "(default: the measured-best bucketed config)")
    p.add_argument("--inputs", metavar="STRATEGIES", default="",
                   help="comma list of measured strategies the prediction was built from, "
                        "shown but not scored (realrun validate's files: compute-only)")
    p.add_argument("--ignore-model", action="store_true",
                   help="compare even if the two files name different models "
                        "(e.g. a preset's prediction against a measured profile)")


def run(args: argparse.Namespace) -> int:
    predicted = load_results(args.predicted)
    measured_doc = read_json(args.measured)   # once: its results and the bench's twin gap
    measured = results_from_json(measured_doc, args.measured)
    comparison = compare_results(predicted, measured, check_model=not args.ignore_model,
                                 where=(args.predicted, args.measured),
                                 inputs=frozenset(x.strip() for x in args.inputs.split(",")
                                                  if x.strip()))
    gap_pct = instance_gap_pct(measured_doc, args.measured)
    settings = measured_doc.get("bench") if isinstance(measured_doc, dict) else None
    comparison = dataclasses.replace(comparison, instance_gap_pct=gap_pct,
                                     cpu_note=section_note(settings))
    comparison = comparison.split_halves(turn_steps(measured_doc, args.measured))
    if args.timeline_config is not None:
        pick_timeline(comparison, args.timeline_config)  # a bad spec is an error either way
    # After the inputs: an earlier comparison in --out is moved aside only for a good run.
    check_out_dir(args.out, files=("compare.json",), force=args.force)
    written = []
    if args.out is not None:
        # imported here: matplotlib is slow to import, and a table needs none of it
        from simddp.compare.plots import write_compare_files
        written = write_compare_files(comparison, args.out, args.timeline_config)
    if args.format == "json":
        print(json.dumps(comparison.to_json(args.timeline_config), indent=1))
    else:
        print(format_table(comparison, args.timeline_config))
    for path in written:  # stderr, so --format json keeps stdout one document
        print(f"wrote {path}", file=sys.stderr)
    return 0
