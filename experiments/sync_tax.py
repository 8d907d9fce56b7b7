"""Does a synced step's compute run slower than compute-only's? Parts of each, same rounds.

    python experiments/sync_tax.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32 [--strategies flat,bucketed \
        --bucket-mb 4]

(the model and world flags are realrun's, through experiments/_model_run.py; the strategies
default to flat,naive, the one bucket size to 16).

Why: net of the compute-only row, every grid cell's flat row was predicted 1-22 % fast
(medians -4 … -6 % over grids g25-g35), and so were most others; the simulator charges a
synced step the compute-only step's forward, backward and optimizer. One world of 2 Gloo
ranks holds compute-only and each strategy (realrun.DDP: flat, naive, overlap, bucketed),
warms each up 5 steps, then runs ``--steps`` steps of each round-robin in chunks of 5
(drift hits all alike); every step starts after a barrier. Each rank stamps forward,
backward, sync and optimizer ends (perf_counter). Printed, per configuration, medians over
steps (ms) of each part on the slower rank of that step and of the step (max over ranks).
"""
from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from experiments._model_run import model_run_args, run_ranks, stamped_step  # noqa: E402
from realrun.configs import bench_configs, label  # noqa: E402
from realrun.steps import Trainer  # noqa: E402
from realrun.workload import Workload  # noqa: E402
from simddp.commands.common import parse_positive_floats  # noqa: E402
from simddp.errors import InputError  # noqa: E402

PARTS = ("forward", "backward", "sync", "optimizer")
CHUNK = 5


def rank(payload: dict, ctx) -> dict[str, list[list[float]]]:
    """{config label: per step, [start, forward, backward, sync, optimizer ends]}."""
    torch.set_flush_denormal(True)
    configs = bench_configs(payload["strategies"].split(","), [payload["bucket_mb"]])
    workload = Workload(**payload["workload"])
    trainers = {label(c): Trainer(c, workload, ctx, payload) for c in configs}
    for t in trainers.values():
        for _ in range(5):
            t.step()
    stamps: dict[str, list[list[float]]] = {name: [] for name in trainers}
    names = list(trainers)
    for r, _ in enumerate(range(0, payload["steps"], CHUNK)):
        for k in range(len(names)):
            name = names[(k + r) % len(names)]
            stamps[name] += [stamped_step(trainers[name], ctx) for _ in range(CHUNK)]
    return stamps


def parts_ms(by_rank: list[dict]) -> dict[str, dict[str, float]]:
    """Per configuration, medians over steps (ms) of each part on the step's slower rank for
    that part, and of the step (max over ranks)."""
    out = {}
    for name in by_rank[0]:
        rows: dict[str, list[float]] = {}
        for per_rank in zip(*(r[name] for r in by_rank)):
            for i, part in enumerate(PARTS):
                rows.setdefault(part, []).append(max(s[i + 1] - s[i] for s in per_rank))
            rows.setdefault("step", []).append(max(s[4] - s[0] for s in per_rank))
        out[name] = {k: statistics.median(v) * 1e3 for k, v in rows.items()}
    return out


def main() -> int:
    args, workload, payload = model_run_args("sync_tax", __doc__, {"steps": 40},
                                             {"strategies": "flat,naive", "bucket-mb": "16"})
    try:
        payload["bucket_mb"] = parse_positive_floats(args.bucket_mb, "--bucket-mb")[0]
        bench_configs(args.strategies.split(","), [payload["bucket_mb"]])
    except InputError as e:   # bad flags: one line, exit 2
        print(f"sync_tax: {e}", file=sys.stderr)
        return 2
    ranks, load = run_ranks("sync_tax", args, payload)
    print(f"# {workload.name}, batch {args.batch} x seq {args.seq}, 2 ranks, {args.steps} "
          f"steps each; load {load:.2f} -> {os.getloadavg()[0]:.2f}; medians in ms")
    print(f"{'config':16}" + "".join(f"{p:>11}" for p in (*PARTS, "step")) + "  fwd+bwd+opt")
    for name, ms in parts_ms(ranks).items():
        compute = ms["forward"] + ms["backward"] + ms["optimizer"]
        print(f"{name:16}" + "".join(f"{ms[p]:11.2f}" for p in (*PARTS, "step"))
              + f"  {compute:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
