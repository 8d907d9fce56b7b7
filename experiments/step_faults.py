"""What a plain step costs the kernel: minor page faults and system time, per rank and world.

    python experiments/step_faults.py --batch 4 --seq 16                  # mlp-8x1024, 5+5 worlds
    python experiments/step_faults.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32 --worlds 4

Fresh 2-rank Gloo worlds, alternately with the allocator realrun sets (realrun/launch/
allocator.py: glibc's mmap and trim thresholds pinned) and with glibc as it comes
(``REALRUN_ALLOCATOR=default``). In each world every rank runs ``--steps`` plain steps
(zero_grad, forward, backward, SGD), each after a barrier, as realrun bench and realrun
profile time them, and records per step its wall time, minor faults and user and system
CPU time (getrusage). Per world it prints the median step (the max over ranks per step), the
worst rank's median faults and system ms per step; per allocator the spread of the world
medians. Numbers from this 2-vCPU VM: docs/results/2026-11-25-allocator.md.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from realrun.commands.common import add_model_args, require_int, resolve_workload  # noqa: E402
from realrun.configs import config_of  # noqa: E402
from realrun.launch import run_world  # noqa: E402
from realrun.launch.allocator import OPT_OUT  # noqa: E402
from realrun.steps import Trainer  # noqa: E402
from realrun.workload import Workload  # noqa: E402
from simddp.errors import InputError  # noqa: E402

WARMUP = 3


def rank(payload: dict, ctx) -> dict:
    """Plain steps after a barrier; per step (wall s, minor faults, user s, system s)."""
    torch.set_flush_denormal(True)
    trainer = Trainer(config_of(None), Workload(**payload["workload"]), ctx, payload)
    for _ in range(WARMUP):
        trainer.step()
    steps = []
    for _ in range(payload["steps"]):
        ctx.barrier()
        before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        trainer.step()
        wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
        steps.append((wall, after.ru_minflt - before.ru_minflt,
                      after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime))
    return {"allocator": ctx.allocator, "steps": steps}


def world_row(ranks: list[dict]) -> dict:
    """The world's median step (max over ranks per step) and its worst rank's medians."""
    per_rank = [np.asarray(r["steps"], dtype=float) for r in ranks]
    step = np.max([a[:, 0] for a in per_rank], axis=0)
    return {"allocator": ranks[0]["allocator"], "median_ms": float(np.median(step)) * 1e3,
            "p95_over_median": float(np.percentile(step, 95) / np.median(step)),
            "faults": max(float(np.median(a[:, 1])) for a in per_rank),
            "system_ms": max(float(np.median(a[:, 3])) for a in per_rank) * 1e3}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(ap)   # realrun's --model, shrink flags, --batch, --seq (its defaults)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--worlds", type=int, default=5, help="per allocator, alternating")
    args = ap.parse_args()
    try:
        workload = resolve_workload(args)
        require_int("--steps", args.steps)
        require_int("--worlds", args.worlds)
    except InputError as e:   # bad flags: one line, exit 2
        print(f"step_faults: {e}", file=sys.stderr)
        return 2
    payload = {"workload": workload.to_json(), "steps": args.steps, "seed": args.seed,
               "optimizer": args.optimizer, "precision": args.precision}
    load = os.getloadavg()[0]
    rows: dict[str, list[dict]] = {"pinned": [], "default": []}
    for _ in range(args.worlds):
        for mode in rows:
            env = os.environ.pop(OPT_OUT, None)
            if mode == "default":
                os.environ[OPT_OUT] = "default"
            try:
                ranks = run_world("experiments.step_faults:rank", payload,
                                  threads_per_rank=args.threads)
            finally:
                os.environ.pop(OPT_OUT, None)
                if env is not None:
                    os.environ[OPT_OUT] = env
            rows[mode].append(world_row(ranks))
            r = rows[mode][-1]
            print(f"{mode:8} {r['median_ms']:7.1f} ms  p95/median {r['p95_over_median']:.2f}  "
                  f"worst rank: {r['faults']:6.0f} faults, {r['system_ms']:5.1f} ms system a step"
                  f"  ({r['allocator']})", flush=True)
    print(f"# {workload.name}, batch {args.batch} x seq {args.seq}, 2 ranks, {args.steps} "
          f"steps a world; load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    for mode, rs in rows.items():
        meds = [r["median_ms"] for r in rs]
        print(f"# {mode}: world medians {', '.join(f'{m:.1f}' for m in meds)} ms (CV "
              f"{statistics.pstdev(meds) / statistics.mean(meds) * 100:.1f} %); worlds with "
              f"a rank faulting > 100 times a step: {sum(r['faults'] > 100 for r in rs)} "
              f"of {len(rs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
