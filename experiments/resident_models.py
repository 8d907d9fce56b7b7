"""Compute-only step time against the number of models each rank holds.

    python experiments/resident_models.py                               # 1, 4, 14 models; 3 rounds
    python experiments/resident_models.py --models 1,14 --rounds 5 --chunk 30
    python experiments/resident_models.py --models 1,14 --hold both     # the bench's one model a turn
    GLIBC_TUNABLES=glibc.malloc.hugetlb=1 python experiments/resident_models.py   # heap on 2 MiB pages

``realrun bench --hold all`` keeps one model per configuration alive in each rank and
times them round-robin (the workflow grid's transformer cell: 14 configurations and the
twin); ``--hold one``, the default, builds a turn's model afresh and drops the last. Here
every configuration is compute-only, so the only difference between the worlds is how many
models each rank holds, and how. Each round launches one fresh 2-rank world per count (and
hold), in the order given; a step's time is the max over ranks, as in the bench. The transformer is
bench/workflow_grid.py's. Results: docs/results/2026-11-27-resident-models.md.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from realrun.bench import run_bench  # noqa: E402
from realrun.configs import config_of  # noqa: E402
from realrun.workload import Workload  # noqa: E402
from simddp.presets.models import parse_model  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="1,4,14", help="models per rank, comma-separated")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--chunk", type=int, default=5, help="timed steps per turn (bench's 5)")
    p.add_argument("--hold", default="all", choices=("all", "one", "both"),
                   help="all (each rank keeps every model), one (a turn builds its model "
                        "afresh: the bench's default), or both (each count twice)")
    a = p.parse_args()
    counts = [int(n) for n in a.models.split(",")]
    spec = parse_model("transformer-small").shrunk(layers=8, d_model=128, d_ff=512, heads=4,
                                                   vocab=1024)
    payload = {"workload": Workload.preset(spec, 2, 32).to_json(), "precision": "fp32",
               "steps": a.steps, "warmup": 3, "chunk": a.chunk, "seed": 0, "optimizer": "sgd",
               "trace_dir": None, "trace_steps": 0, "timeline_steps": 0, "progress": False,
               "extras": []}
    print(f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '')!r} (the ranks inherit it)")
    holds = ("all", "one") if a.hold == "both" else (a.hold,)
    worlds = [(n, h) for n in counts for h in holds]
    ms: dict[tuple, list[float]] = {w: [] for w in worlds}
    for r in range(a.rounds):
        for n, hold in worlds:  # model 0's steps: the first configuration's median
            run = run_bench({**payload, "hold": hold, "configs": [config_of(None)] * n})
            ms[n, hold].append(run.stats[0]["median_s"] * 1e3)
        print(f"round {r}: " + " | ".join(f"{n}-{h} {ms[n, h][-1]:.2f} ms" for n, h in worlds),
              flush=True)
    base = np.array(ms[worlds[0]])
    for n, hold in worlds:
        rel = (np.array(ms[n, hold]) / base - 1) * 100
        print(f"{n:3d} models, hold {hold}: median {np.median(ms[n, hold]):.2f} ms, vs "
              f"{worlds[0][0]}-{worlds[0][1]} in the same round {rel.min():+.1f} … "
              f"{rel.max():+.1f} % (median {np.median(rel):+.1f} %)")


if __name__ == "__main__":
    main()
