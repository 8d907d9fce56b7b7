"""The user's workflow, timed and scored: predict before running, then measure and compare.

    python bench/workflow_grid.py                          # the 4 cells, ~12 min on 2 cores
    python bench/workflow_grid.py --cells mlp-loopback --steps 30 --out out/workflow
    python bench/workflow_grid.py --cells tfm-2gbit --timelines   # + each row's overlap, span by span

Each cell runs exactly what a user runs, with the defaults (docs/VALIDATION.md, "The user's
workflow"), as separate commands:

1. ``python -m calibrate --out D/cal``                   (the link: α, busbw, contention, spread)
2. ``python -m realrun profile MODEL --out D/prof.json``  (every rank at once; host costs)
3. ``python -m simddp sweep --model D/prof.json --link D/cal/link.json --bucket-mb B --out D/pred``
4. ``python -m realrun bench MODEL --bucket-mb B --steps S --out D/bench``
5. ``python -m simddp compare --predicted D/pred/sweep.json --measured D/bench/bench.json``

Emulated cells add ``--emulate-hosts 2 --link-gbit 2`` to steps 1, 2 and 4 (root). Per cell it
prints the compare summary (median and max APE, Spearman ρ, regret, measured medians inside
their predicted range; the compute-only row's miss and the errors net of it, which separate the
box's drift from the communication model: simddp/compare/drift.py; the link's α, and whether
calibrate took it from the lone samples' fast mode: calibrate/rig/lone_alpha.py) and the wall
time of predicting (1+2+3) against measuring every configuration (4), and writes D/workflow.json; the last line is a markdown table for the docs.
The load average before and after each cell is recorded: figures from a busy box are not
figures.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MLP = ["--model", "mlp-8x1024", "--batch", "4", "--seq", "16"]
TFM = ["--model", "transformer-small", "--layers", "8", "--d-model", "128", "--d-ff", "512",
       "--heads", "4", "--vocab", "1024", "--batch", "2", "--seq", "32"]
EMU = ["--emulate-hosts", "2", "--link-gbit", "2"]
CELLS = {  # name: (model flags, bucket sizes, emulation flags)
    "mlp-loopback": (MLP, "1,4,10,40", []),
    "tfm-loopback": (TFM, "0.25,1,2,4,16", []),
    "mlp-2gbit": (MLP, "1,4,10,40", EMU),
    "tfm-2gbit": (TFM, "0.25,1,2,4,16", EMU),
}
STRATEGIES = "naive,flat,overlap,bucketed,ddp"  # what realrun bench runs


def run(cmd: list[str], log) -> float:
    """Run one command from the repo root; its wall seconds. Output goes to the cell's log."""
    print("$ " + " ".join(cmd), file=log, flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise SystemExit(f"workflow_grid: failed ({proc.returncode}): {' '.join(cmd)}; "
                         f"see {log.name}")
    return time.perf_counter() - start


def cell(name: str, out: Path, steps: int, timelines: bool = False) -> dict:
    model, buckets, emu = CELLS[name]
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    py = [sys.executable, "-m"]
    load_before = os.getloadavg()[0]
    with open(d / "log.txt", "w") as log:
        wall = {
            "calibrate_s": run(py + ["calibrate", *emu, "--out", str(d / "cal"), "--force"],
                               log),
            "profile_s": run(py + ["realrun", "profile", *model, *emu,
                                   "--out", str(d / "prof.json"), "--force"], log),
            "sweep_s": run(py + ["simddp", "sweep", "--model", str(d / "prof.json"),
                                 "--link", str(d / "cal" / "link.json"), "--bucket-mb", buckets,
                                 "--strategies", STRATEGIES, "--out", str(d / "pred"),
                                 "--force"], log),
            "bench_s": run(py + ["realrun", "bench", *model, *emu, "--bucket-mb", buckets,
                                 "--steps", str(steps), "--out", str(d / "bench"), "--force",
                                 *(["--timelines"] if timelines else [])],
                           log),
        }
        cmp = subprocess.run(py + ["simddp", "compare", "--predicted",
                                   str(d / "pred" / "sweep.json"), "--measured",
                                   str(d / "bench" / "bench.json"), "--format", "json"],
                             cwd=ROOT, capture_output=True, text=True, check=True)
        text = subprocess.run(py + ["simddp", "compare", "--predicted",
                                    str(d / "pred" / "sweep.json"), "--measured",
                                    str(d / "bench" / "bench.json"), "--out", str(d / "compare"),
                                    "--force"],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout
    doc = json.loads(cmp.stdout)
    s = doc["summary"]
    result = {"cell": name, "steps": steps, **wall,
              "predict_s": wall["calibrate_s"] + wall["profile_s"] + wall["sweep_s"],
              "median_ape": s["median_ape"], "max_ape": s["max_ape"], "spearman": s["spearman"],
              "regret": s["regret"], "in_range": s["in_range"], "with_range": s["with_range"],
              "predicted_best_mb": s["predicted_best_bucket_mb"],
              "measured_best_mb": s["measured_best_bucket_mb"], "regret_ci": s["regret_ci"],
              "load_before_after": [load_before, os.getloadavg()[0]],
              "rows": doc["rows"], "timeline_fidelity": doc["timeline_fidelity"],
              "overlap": doc.get("overlap") or [],
              "net_of_compute": doc.get("net_of_compute"),  # simddp/compare/drift.py
              "instance_gap_pct": doc.get("instance_gap_pct"),   # realrun/twin.py
              "cpu_note": doc.get("cpu_note"),   # simddp/rig/cpu_share.py
              "halves": doc.get("halves"),   # the bench against itself: simddp/compare/noise.py
              **link_alpha(d / "cal")}
    (d / "workflow.json").write_text(json.dumps(result, indent=1) + "\n")
    (d / "compare.txt").write_text(text)
    print(f"== {name}\n{text}predict {result['predict_s']:.0f} s (calibrate "
          f"{wall['calibrate_s']:.0f} + profile {wall['profile_s']:.0f} + sweep "
          f"{wall['sweep_s']:.1f}) vs measure {wall['bench_s']:.0f} s; load "
          f"{load_before:.2f} -> {result['load_before_after'][1]:.2f}", flush=True)
    return result


def link_alpha(cal: Path) -> dict:
    """The link's overlapped α and whether calibrate took it from the lone samples' fast
    mode, their median being unresolved (``alpha_modes`` kept: calibrate/rig/lone_alpha.py)."""
    link = json.loads((cal / "link.json").read_text())
    run = json.loads((cal / "allreduce.json").read_text())["runs"][0]
    return {"alpha_us": round(link["alpha_s"] * 1e6),
            "alpha_from_fast_mode": "alpha_modes" in (run.get("sequence") or {})}


def markdown(results: list[dict]) -> str:
    head = ("| cell | median APE | max APE | Spearman ρ | regret | in range | compute-only | "
            "net of it: median / max APE | twins apart | halves apart: max | misses beyond "
            "their halves | α µs | predict s | measure s |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in results:
        rho = "n/a" if r["spearman"] is None else f"{r['spearman']:.2f}"
        net = r.get("net_of_compute")
        alpha = f"{r.get('alpha_us', 'n/a')}" + (" (fast mode)" if r.get("alpha_from_fast_mode")
                                                 else "")
        net_text = ("n/a | n/a" if net is None else
                    f"{net['compute_error_pct']:+.1f} % | {net['median_ape']:.1f} / "
                    f"{net['max_ape']:.1f} % ({net['max_config']})")
        gap = r.get("instance_gap_pct")
        twins = "n/a" if gap is None else f"{gap:.1f} %"
        h = r.get("halves")
        halves = ("n/a | n/a" if h is None else f"{h['max_pct']:.1f} % ({h['max_config']}) | "
                  f"{len(h['beyond'])}/{h['rows']}")
        lines.append(f"| {r['cell']} | {r['median_ape']:.1f} % | {r['max_ape']:.1f} % | {rho} | "
                     f"{r['regret']:.1f} % | {r['in_range']}/{r['with_range']} | {net_text} | "
                     f"{twins} | {halves} | {alpha} | {r['predict_s']:.0f} | "
                     f"{r['bench_s']:.0f} |")
    n = len(results)
    inside = sum(r["in_range"] for r in results)
    ranged = sum(r["with_range"] for r in results)
    lines.append(f"\nmean of median APE {sum(r['median_ape'] for r in results) / n:.1f} %, "
                 f"worst max APE {max(r['max_ape'] for r in results):.1f} %, worst regret "
                 f"{max(r['regret'] for r in results):.1f} %, inside range {inside}/{ranged} "
                 f"({100 * inside / max(ranged, 1):.0f} %)")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cells", default=",".join(CELLS), help="comma list of " + ", ".join(CELLS))
    p.add_argument("--steps", type=int, default=30, help="realrun bench --steps (default 30)")
    p.add_argument("--out", default="out/workflow", help="folder (default out/workflow)")
    p.add_argument("--timelines", action="store_true",
                   help="realrun bench --timelines: each row's measured compute, exposed comm "
                        "and overlap %% beside the prediction's (not the user's default)")
    a = p.parse_args()
    names = [c.strip() for c in a.cells.split(",") if c.strip()]
    bad = [c for c in names if c not in CELLS]
    if bad:
        print(f"workflow_grid: unknown cell {bad[0]!r}; choose from {', '.join(CELLS)}",
              file=sys.stderr)
        return 2
    out = Path(a.out)
    results = [cell(name, out, a.steps, a.timelines) for name in names]
    (out / "workflow.json").write_text(json.dumps(results, indent=1) + "\n")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
