"""Where a step's time goes, phase by phase, on every rank, over many clocked steps.

    python experiments/step_phases.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32 --strategies ddp,bucketed \
        --bucket-mb 4,16 [--emulate-hosts 2 --link-gbit 2]

One world of 2 Gloo ranks (on loopback, or on the emulated link with the world flags);
compute-only and each configuration (as ``realrun bench`` builds them) clocked round-robin,
``--rounds`` turns of 3 steps each, every step after a barrier (realrun/step_clock.py:
realrun.DDP's collectives through its launch hook, torch DDP's through a clocking comm
hook). Per configuration and rank, the medians of: forward, backward's compute (to the
last launch for torch DDP, whose ``backward()`` also waits), the wait and sync after it,
the optimizer, the step. Per collective, from both ranks' clocks (``time.perf_counter`` is
CLOCK_MONOTONIC: one clock for every process of a host): how far apart the ranks launched
it, and how long it took from the later launch, which is the collective's own time (the
earlier rank's includes waiting for the other); per step, the step by realrun bench's rule
(the longest rank's own), rank 0's, and from the later start, and how far apart the ranks
left the barrier. ``--json PATH`` keeps every rank's clocked steps (perf_counter seconds)
for a closer look.
Numbers from this 2-vCPU VM: docs/results/2026-11-25-allocator.md, section 4.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from experiments._model_run import model_run_args, run_ranks  # noqa: E402
from realrun.configs import bench_configs, label  # noqa: E402
from realrun.step_clock import (backward_end, clock_collectives, clock_torch_ddp,  # noqa: E402
                                clocked_step)
from realrun.steps import Trainer  # noqa: E402
from realrun.workload import Workload  # noqa: E402
from simddp.commands.common import parse_positive_floats  # noqa: E402
from simddp.errors import InputError  # noqa: E402
from simddp.io import write_atomic  # noqa: E402

STEPS_PER_TURN, WARMUP = 3, 3


def rank(payload: dict, ctx) -> dict:
    """{label: [{"t": [start, forward, backward compute, sync, optimizer ends], "comm":
    [[label, launch, end, bytes], ...]}, ...]} on this rank's perf_counter."""
    torch.set_flush_denormal(True)
    workload = Workload(**payload["workload"])
    trainers, comms, torch_clocked = {}, {}, {}
    for config in payload["configs"]:
        name = label(config)
        trainer = trainers[name] = Trainer(config, workload, ctx, payload)
        comm = comms[name] = []
        if trainer.sync is not None:
            clock_collectives(trainer.model, comm, time.perf_counter)
        torch_clocked[name] = (trainer.torch_ddp is not None
                               and clock_torch_ddp(trainer.torch_ddp, comm, time.perf_counter))
        for _ in range(WARMUP):
            trainer.step()
    steps: dict[str, list] = {name: [] for name in trainers}
    for _ in range(payload["rounds"]):
        for name, trainer in trainers.items():
            for _ in range(STEPS_PER_TURN):
                t = clocked_step(trainer, ctx, comms[name], time.perf_counter)
                t[2] = backward_end(t[1], t[2], comms[name], torch_clocked[name])
                steps[name].append({"t": t, "comm": [list(e) for e in comms[name]]})
    return steps


def phases_ms(step: dict) -> dict:
    """One rank's step in phases (ms): forward, backward's compute, wait+sync, optimizer."""
    t0, t1, t2, t3, t4 = step["t"]
    return {"forward": (t1 - t0) * 1e3, "backward": (t2 - t1) * 1e3,
            "wait+sync": (t3 - t2) * 1e3, "optimizer": (t4 - t3) * 1e3,
            "step": (t4 - t0) * 1e3}


def collectives_ms(steps_by_rank: list[list[dict]]) -> list[tuple[float, float]]:
    """Per collective (in launch order), medians over steps of (launch skew between ranks,
    time from the later launch to the later end), from every rank's clock."""
    out = []
    n = min(len(s["comm"]) for rank_steps in steps_by_rank for s in rank_steps)
    for j in range(n):
        skew, own = [], []
        for per_rank in zip(*steps_by_rank):
            launches = [s["comm"][j][1] for s in per_rank]
            ends = [s["comm"][j][2] or s["t"][3] for s in per_rank]
            skew.append((max(launches) - min(launches)) * 1e3)
            own.append((max(ends) - max(launches)) * 1e3)
        out.append((statistics.median(skew), statistics.median(own)))
    return out


def step_bases_ms(steps_by_rank: list[list[dict]]) -> dict:
    """Medians over steps (ms) of the step by three rules, and how far apart the ranks left
    the barrier: "max" = the longest rank's own step (realrun bench's rule), "rank0" =
    rank 0's (the clocked timeline's), "later" = from the later start to the later end."""
    out: dict[str, list[float]] = {"max": [], "rank0": [], "later": [], "start skew": []}
    for per_rank in zip(*steps_by_rank):
        starts, ends = [s["t"][0] for s in per_rank], [s["t"][4] for s in per_rank]
        out["max"].append(max(e - b for b, e in zip(starts, ends)) * 1e3)
        out["rank0"].append((ends[0] - starts[0]) * 1e3)
        out["later"].append((max(ends) - max(starts)) * 1e3)
        out["start skew"].append((max(starts) - min(starts)) * 1e3)
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> int:
    args, workload, payload = model_run_args("step_phases", __doc__, {"rounds": 10},
                                             {"strategies": "ddp,bucketed", "bucket-mb": "4,16",
                                              "json": ""})
    try:
        mbs = parse_positive_floats(args.bucket_mb, "--bucket-mb")
        payload["configs"] = bench_configs(args.strategies.split(","), mbs)
    except InputError as e:   # bad flags: one line, exit 2
        print(f"step_phases: {e}", file=sys.stderr)
        return 2
    ranks, load = run_ranks("step_phases", args, payload)
    if args.json:   # every rank's clocked steps, for a look span by span
        write_atomic(args.json, json.dumps(ranks))
    print(f"# {workload.name}, batch {args.batch} x seq {args.seq}, 2 ranks, "
          f"{args.rounds * STEPS_PER_TURN} clocked steps each; load {load:.2f} -> "
          f"{os.getloadavg()[0]:.2f}; medians in ms")
    for name in ranks[0]:
        for r, steps in enumerate(ranks):
            ph = [phases_ms(s) for s in steps[name]]
            print(f"{name:14} rank {r}  " + "  ".join(
                f"{k} {statistics.median(p[k] for p in ph):6.1f}" for k in ph[0]))
        bases = step_bases_ms([rk[name] for rk in ranks])
        print(f"{'':14} step " + "  ".join(f"{k} {v:5.1f}" for k, v in bases.items()))
        for j, (skew, own) in enumerate(collectives_ms([rk[name] for rk in ranks])):
            print(f"{'':14} collective {j}: launched {skew:4.1f} ms apart, {own:5.1f} ms "
                  "from the later launch")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
