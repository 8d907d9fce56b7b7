"""realrun's naive step, part by part: what each lone gradient costs the host in place.

    python experiments/naive_parts.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32

One world of 2 Gloo ranks runs realrun.DDP "naive" (every gradient noted by its hook, then
after the backward, tensor by tensor: scaled by 1/p in place, one blocking all-reduce) beside
plain steps, round-robin (4 warm-up steps each, then ``--turns`` turns of 3 steps, each after
a barrier). Each bucket's fill (the in-place scale), launch (fill plus the blocking
all-reduce call) and finish, and the whole sync, are clocked per step on perf_counter.
Printed, medians over steps of the slower rank (ms): the step, its sync, the launches, the
fills, and per tensor the fill, the all-reduce call (launch − fill) and the loop around them
(sync − launches − finishes). simddp charges a lone gradient launched after the backward
``hook_after_backward_s`` + its bytes at ``scale_gbps`` + ``launch_s`` on the compute lane
and the call as ``blocking_alpha_s`` + bytes on the link (simddp/hostwork.py).
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

from experiments._model_run import model_run_args, run_ranks  # noqa: E402
from realrun.configs import config_of  # noqa: E402
from realrun.steps import Trainer  # noqa: E402
from realrun.workload import Workload  # noqa: E402
from simddp.strategy import make_strategy  # noqa: E402

PARTS = ("fill", "launch", "finish", "sync")


def rank(payload: dict, ctx) -> dict:
    """{"tensors": N, "steps": per timed step {"name", "step", "fill", "launch", "finish",
    "sync"} seconds}."""
    torch.set_flush_denormal(True)
    workload = Workload(**payload["workload"])
    naive = Trainer(config_of(make_strategy("naive")), workload, ctx, payload)
    plain = Trainer(config_of(None), workload, ctx, payload)
    spent = dict.fromkeys(PARTS, 0.0)

    def clocked(fn, part: str):
        def run(*args):
            t0 = time.perf_counter()
            out = fn(*args)
            spent[part] += time.perf_counter() - t0
            return out
        return run
    for bucket in naive.model._flat:
        bucket._fill = clocked(bucket._fill, "fill")
        bucket.launch = clocked(bucket.launch, "launch")
        bucket.finish = clocked(bucket.finish, "finish")
    naive.sync = clocked(naive.sync, "sync")
    for _ in range(4):
        naive.step()
        plain.step()
    steps = []
    for _ in range(payload["turns"]):
        for name, trainer in (("plain", plain), ("naive", naive)):
            for _ in range(3):
                spent.update(dict.fromkeys(PARTS, 0.0))
                ctx.barrier()
                t0 = time.perf_counter()
                trainer.step()
                steps.append({"name": name, "step": time.perf_counter() - t0, **spent})
    return {"tensors": len(naive.model._flat), "steps": steps}


def main() -> int:
    args, workload, payload = model_run_args("naive_parts", __doc__, {"turns": 8})
    ranks, load = run_ranks("naive_parts", args, payload)
    steps = [r["steps"] for r in ranks]
    ms = {}
    for name in ("plain", "naive"):
        mine = [i for i, s in enumerate(steps[0]) if s["name"] == name]
        ms[name] = {k: statistics.median(max(r[i][k] for r in steps) for i in mine) * 1e3
                    for k in ("step", *PARTS)}
    n = ranks[0]["tensors"]   # naive: one bucket a tensor
    m = ms["naive"]
    print(f"# {workload.name}, batch {args.batch} x seq {args.seq}, naive, {n} tensors, "
          f"2 ranks; load {load:.2f} -> {os.getloadavg()[0]:.2f}; medians of the slower "
          "rank, ms")
    print(f"plain step {ms['plain']['step']:.2f}; naive step {m['step']:.2f}, sync "
          f"{m['sync']:.2f}, launches {m['launch']:.2f}, fills {m['fill']:.2f}, finishes "
          f"{m['finish']:.2f}")
    loop = m["sync"] - m["launch"] - m["finish"]
    print(f"per tensor: fill {m['fill'] / n * 1e3:.0f} µs, all-reduce call "
          f"{(m['launch'] - m['fill']) / n * 1e3:.0f} µs, loop {loop / n * 1e3:.0f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
