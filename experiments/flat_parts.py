"""realrun's flat step, part by part, on both ranks' clocks: what its host work costs in place.

    python experiments/flat_parts.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32

One world of 2 Gloo ranks runs realrun.DDP "flat" (every gradient noted by its hook, then
after the backward copied into one bucket scaled by 1/p, one blocking all-reduce, the
average copied back out): 5 warm-up steps, then ``--steps`` steps after a barrier. Each
rank stamps its forward, backward, copy-in (the bucket's fill), copy-out (its finish) and
sync ends on the host's one clock (perf_counter: CLOCK_MONOTONIC). Printed, medians over
steps (ms): each rank's forward and backward (the backward holds the noting hooks), how far
apart the ranks leave the step's barrier and end the backward, the copy-in and copy-out (the slower rank's), the
all-reduce from the later copy-in's end, and the step (max over ranks). ``realrun profile``
charges the same work at ``copy_gbps`` plus ``hook_after_backward_s`` a gradient (simddp
HostCosts). Numbers from this 2-vCPU VM: docs/results/2026-11-26-flat-host.md.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from experiments._model_run import model_run_args, run_ranks, stamped_step  # noqa: E402
from realrun.configs import bench_configs  # noqa: E402
from realrun.steps import Trainer  # noqa: E402
from realrun.workload import Workload  # noqa: E402


def rank(payload: dict, ctx) -> list[dict]:
    """Per step: {"t": [start, forward, backward, sync, optimizer ends], "fill": [a, b],
    "finish": [a, b]} on this rank's perf_counter."""
    torch.set_flush_denormal(True)
    (config,) = [c for c in bench_configs(["flat"], [25.0]) if c["strategy"] == "flat"]
    trainer = Trainer(config, Workload(**payload["workload"]), ctx, payload)
    (bucket,) = trainer.model._flat
    stamps: dict[str, list[float]] = {}

    def clocked(name: str, fn):
        def run(*args):
            a = time.perf_counter()
            out = fn(*args)
            stamps[name] = [a, time.perf_counter()]
            return out
        return run
    bucket._fill = clocked("fill", bucket._fill)
    bucket.finish = clocked("finish", bucket.finish)
    for _ in range(5):
        trainer.step()
    steps = []
    for _ in range(payload["steps"]):
        steps.append({"t": stamped_step(trainer, ctx), **stamps})
    return steps


def parts_ms(steps_by_rank: list[list[dict]]) -> dict[str, float]:
    """Medians over steps, in ms, of each part (see the module's docstring)."""
    out: dict[str, list[float]] = {}
    for per_rank in zip(*steps_by_rank):
        row = {f"rank {r} forward": s["t"][1] - s["t"][0] for r, s in enumerate(per_rank)}
        row |= {f"rank {r} backward": s["t"][2] - s["t"][1] for r, s in enumerate(per_rank)}
        starts, ends = [s["t"][0] for s in per_rank], [s["t"][2] for s in per_rank]
        row["ranks leave the barrier apart"] = max(starts) - min(starts)
        copy_out = max(s["finish"][1] - s["finish"][0] for s in per_rank)
        row |= {"backward ends apart": max(ends) - min(ends),
                "copy-in": max(s["fill"][1] - s["fill"][0] for s in per_rank),
                "all-reduce from the later copy-in": max(s["t"][3] for s in per_rank)
                - max(s["fill"][1] for s in per_rank) - copy_out,
                "copy-out": copy_out,
                "step (max over ranks)": max(s["t"][4] - s["t"][0] for s in per_rank)}
        for k, v in row.items():
            out.setdefault(k, []).append(v * 1e3)
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> int:
    args, workload, payload = model_run_args("flat_parts", __doc__, {"steps": 30})
    ranks, load = run_ranks("flat_parts", args, payload)
    print(f"# {workload.name}, batch {args.batch} x seq {args.seq}, flat, 2 ranks, "
          f"{args.steps} steps; load {load:.2f} -> {os.getloadavg()[0]:.2f}; medians in ms")
    for name, ms in parts_ms(ranks).items():
        print(f"{name:36} {ms:7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
