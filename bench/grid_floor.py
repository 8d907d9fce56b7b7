"""What a perfect prediction would score against single runs of the workflow grid.

    python bench/grid_floor.py out/grid1 out/grid2 out/grid3 ...   # folders of workflow_grid.py

The "oracle" predicts each row of each cell by that row's median over all the given runs of
the grid: the best any simulator can do for a step whose measured time moves from run to run.
Scoring it against each run as ``simddp compare`` scores a prediction (|error| over the
measured median, per cell the median and max over rows, then the mean of the cells' medians)
gives the floor that run's noise puts under the grid's targets: on a box whose measured rows
move by ±10 % between runs, no prediction scores below it except by luck. Needs ≥ 3 runs.

A second table scores each run's own prediction (its calibrate, profile and sweep) against
the same reference, the rows' medians over all runs, instead of against its one bench run:
what is left is the prediction's own error and noise, with the single bench run's noise
taken out.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def measured(run: Path) -> dict[str, dict[tuple, float]]:
    """{cell: {(strategy, bucket_mb): measured median step s}} of one workflow_grid folder."""
    out = {}
    for bench in sorted(run.glob("*/bench/bench.json")):
        rows = json.loads(bench.read_text())["results"]
        out[bench.parent.parent.name] = {(r["strategy"], r["bucket_mb"]): r["step_s"]
                                         for r in rows}
    return out


def predicted(run: Path) -> dict[str, dict[tuple, float]]:
    """{cell: {(strategy, bucket_mb): predicted step s}} of one workflow_grid folder."""
    out = {}
    for path in sorted(run.glob("*/workflow.json")):
        rows = json.loads(path.read_text())["rows"]
        out[path.parent.name] = {(r["strategy"], r["bucket_mb"]): r["predicted_ms"] / 1e3
                                 for r in rows if r.get("predicted_ms")}
    return out


def reference(runs: list[dict]) -> dict[str, dict[tuple, float]]:
    """Each row's median over the runs (the oracle), for the cells every run has."""
    cells = sorted(set.intersection(*(set(r) for r in runs)))
    return {c: {k: statistics.median(r[c][k] for r in runs if k in r[c])
                for k in runs[0][c]} for c in cells}


def score(guess: dict, truth: dict) -> dict:
    """Each cell's median and max |guess − truth| / truth over its rows, the mean of the
    medians and the worst max (cells and rows both have)."""
    per_cell = {}
    for c in truth:
        errors = [abs(guess[c][k] - v) / v * 100 for k, v in truth[c].items()
                  if k in guess.get(c, {})]
        if errors:
            per_cell[c] = (statistics.median(errors), max(errors))
    return {"cells": per_cell, "mean_median": statistics.mean(m for m, _ in per_cell.values()),
            "worst_max": max(x for _, x in per_cell.values())}


def floor(runs: list[dict]) -> list[dict]:
    """Per run: each cell's median and max |error| of the oracle, the mean of the medians."""
    oracle = reference(runs)
    return [score(oracle, run) for run in runs]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="workflow_grid.py --out folders")
    a = p.parse_args()
    runs = [measured(Path(r)) for r in a.runs]
    if len(runs) < 3 or not all(runs):
        print("grid_floor: give at least 3 workflow_grid folders with bench results",
              file=sys.stderr)
        return 2
    print("The oracle (each row's median over these runs) against each run's bench:")
    table(a.runs, floor(runs))
    oracle = reference(runs)
    print("\nEach run's own prediction against the oracle (its bench run's noise taken out):")
    table(a.runs, [score(predicted(Path(r)), oracle) for r in a.runs])
    return 0


def table(paths: list[str], scores: list[dict]) -> None:
    cells = list(scores[0]["cells"])
    print("| run | " + " | ".join(cells) + " | mean of medians | worst max |")
    print("|---" * (len(cells) + 3) + "|")
    for path, s in zip(paths, scores):
        cell_text = " | ".join(f"{m:.1f} / {x:.1f} %" for m, x in s["cells"].values())
        print(f"| {path} | {cell_text} | {s['mean_median']:.1f} % | {s['worst_max']:.1f} % |")


if __name__ == "__main__":
    sys.exit(main())
