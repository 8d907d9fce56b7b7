"""How fast a model's step computes right after something else ran on its ranks.

    python experiments/compute_after_comm.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32

``realrun profile`` scales its layers to back-to-back compute-only steps; in a step that
communicates, the forward starts right after the last step's all-reduces and optimizer.
Here, in each of ``--repeats`` repeats on every rank, for each variant in turn: a barrier,
the variant, a barrier, then one step (zero_grad, forward, backward, the optimizer's step) with each
phase clocked, and the CPU time the rank's other threads (Gloo's) used during the forward
(``/proc/self/task/*/schedstat``). Variants:

- ``none``: nothing (back-to-back steps, as the profile times them);
- ``flat``: one all-reduce of every gradient's bytes, waited for;
- ``per-tensor``: one all-reduce per gradient, all queued, then waited for (the contention
  probe's stream, which the probe's compute alone follows);
- ``per-tensor+sleep``: the same, then 20 ms asleep (whether it passes with time);
- ``copy``: a 64 MiB copy (a cache's worth of other data, no threads);
- ``sleep``: 10 ms asleep; ``spin``: 10 ms of a Python loop on the training thread.

Prints per variant the medians of the slower rank's forward, backward and optimizer, and
their sum over ``none``'s. simddp's ``Host.compute_after_comm`` is the same ratio for
``per-tensor``, measured by the profile's contention probe.
"""
from __future__ import annotations

import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from experiments._model_run import model_run_args, run_ranks  # noqa: E402
from realrun.configs import config_of  # noqa: E402
from realrun.steps import Trainer  # noqa: E402
from realrun.workload import Workload  # noqa: E402

VARIANTS = ("none", "flat", "per-tensor", "per-tensor+sleep", "copy", "sleep", "spin")


def other_threads_s() -> float:
    """CPU seconds the process's other threads have run (schedstat's first field, ns)."""
    me, total = threading.get_native_id(), 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) != me:
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:   # a thread that ended meanwhile
                pass
    return total * 1e-9


def variants(grads: list[torch.Tensor]) -> dict:
    flat = torch.zeros(sum(g.numel() for g in grads))
    src, dst = torch.ones(16 << 20), torch.empty(16 << 20)   # 64 MiB of float32

    def per_tensor() -> None:
        for work in [dist.all_reduce(g, async_op=True) for g in grads]:
            work.wait()

    def spin() -> None:
        end = time.perf_counter() + 0.010
        while time.perf_counter() < end:
            pass
    return {"none": lambda: None, "flat": lambda: dist.all_reduce(flat),
            "per-tensor": per_tensor,
            "per-tensor+sleep": lambda: (per_tensor(), time.sleep(0.020)),
            "copy": lambda: dst.copy_(src), "sleep": lambda: time.sleep(0.010), "spin": spin}


def rank(payload: dict, ctx) -> dict:
    """Rank side: per variant, per repeat (forward, backward, optimizer, other threads) s."""
    trainer = Trainer(config_of(None), Workload(**payload["workload"]), ctx, payload)
    grads = [torch.zeros(p.numel()) for p in trainer.model.parameters() if p.requires_grad]
    runs = variants(grads)
    for _ in range(3):   # warm: connections, allocator, autograd
        for run in runs.values():
            run()
        trainer.step()
    rows: dict[str, list] = {name: [] for name in VARIANTS}
    for _ in range(payload["repeats"]):
        for name in VARIANTS:
            ctx.barrier()
            runs[name]()
            ctx.barrier()
            c0, t0 = other_threads_s(), time.perf_counter()
            trainer.optimizer.zero_grad(set_to_none=True)
            loss = trainer.loss()
            t1, c1 = time.perf_counter(), other_threads_s()
            loss.backward()
            t2 = time.perf_counter()
            trainer.optimizer.step()
            rows[name].append((t1 - t0, t2 - t1, time.perf_counter() - t2, c1 - c0))
    ctx.barrier()
    return rows


def main() -> int:
    args, workload, payload = model_run_args("compute_after_comm", __doc__, {"repeats": 30})
    ranks, load = run_ranks("compute_after_comm", args, payload)
    print(f"# {workload.name}, {args.repeats} repeats, {len(ranks)} ranks, CPUs "
          f"{len(os.sched_getaffinity(0))}, load {load:.2f} -> {os.getloadavg()[0]:.2f}; "
          "medians of each repeat's slower rank, ms")
    print(f"{'after':>17} {'forward':>8} {'backward':>9} {'optimizer':>10} {'sum':>7} "
          f"{'x none':>7} {'Gloo CPU in fwd':>16}")
    base = None
    for name in VARIANTS:
        n = len(ranks[0][name])
        per = [[max(r[name][i][k] for r in ranks) for i in range(n)] for k in range(4)]
        fwd, bwd, opt, others = (statistics.median(v) * 1e3 for v in per)
        total = fwd + bwd + opt
        base = total if base is None else base
        print(f"{name:>17} {fwd:8.2f} {bwd:9.2f} {opt:10.2f} {total:7.2f} "
              f"{total / base:7.3f} {others:13.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
