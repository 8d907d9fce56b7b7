"""How long a lone all-reduce takes when it is launched as the ranks start computing.

    python experiments/wake_under_compute.py                  # 2 ranks on Gloo, 30 repeats
    python experiments/wake_under_compute.py --nice 10        # the training thread niced

Per repeat, on every rank and each after a barrier, for each size: the all-reduce alone,
waited for; then the same all-reduce launched (async) just before a forward + backward of the
grid's transformer (``transformer-small --layers 8 --d-model 128 --d-ff 512 --heads 4
--vocab 1024 --batch 2 --seq 32``), its end stamped by its completion callback. Where the
ranks' training threads fill the CPUs, Gloo's threads wait for the scheduler to give them a
core (simddp/cpu_share.py). ``--nice N`` lowers the training thread's priority only (Gloo's
threads keep theirs), to show that what it waits for is the scheduler. Prints per size the
medians (of each repeat's slower rank) alone and under compute, and the compute's own time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from realrun.launch import run_world  # noqa: E402
from realrun.models import build_model, make_batch  # noqa: E402
from simddp.presets.models import ModelSpec  # noqa: E402

SIZES_BYTES = (4096, 512 * 1024, 1024 * 1024)


def rank(payload: dict, ctx) -> dict:
    """Rank side: per size, (alone_s, under_s, compute_s) of each repeat."""
    if payload["nice"]:   # this thread only: Gloo's threads, started with the group, keep 0
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), payload["nice"])
    torch.manual_seed(0)
    spec = ModelSpec("transformer", 8, 128, 512, 4, 1024, "transformer-small")
    model = build_model(spec)
    x, y = make_batch(spec, 2, 32, 0)

    def compute() -> None:
        model.zero_grad(set_to_none=True)
        model(x, y).backward()
    bufs = {n: torch.zeros(n // 4) for n in SIZES_BYTES}
    for _ in range(3):
        compute()
        for b in bufs.values():
            dist.all_reduce(b)
    rows = {str(n): [] for n in SIZES_BYTES}   # str keys: what the parent reads back
    for _ in range(payload["repeats"]):
        for n, buf in bufs.items():
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            alone_s = time.perf_counter() - t0
            dist.barrier()
            ends: list[float] = []
            t0 = time.perf_counter()
            fut = dist.all_reduce(buf, async_op=True).get_future().then(
                lambda _f: ends.append(time.perf_counter()))
            compute()
            compute_s = time.perf_counter() - t0
            fut.wait()
            rows[str(n)].append((alone_s, ends[0] - t0, compute_s))
    dist.barrier()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--nice", type=int, default=0, help="the training thread's niceness")
    a = ap.parse_args()
    if a.repeats < 1 or not 0 <= a.nice <= 19:
        print("wake_under_compute: --repeats must be >= 1 and --nice 0..19", file=sys.stderr)
        return 2
    ranks = run_world("experiments.wake_under_compute:rank", {"repeats": a.repeats, "nice": a.nice},
                      world_size=2, timeout_s=600)
    print(f"# {a.repeats} repeats, 2 ranks, training thread nice {a.nice}, CPUs "
          f"{len(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.2f}; each repeat's "
          "slower rank, medians in ms")
    print(f"{'bytes':>8} {'alone':>7} {'under compute':>14} {'compute':>8}")
    for n in SIZES_BYTES:
        per = [[max(r[str(n)][i][k] for r in ranks) for i in range(a.repeats)]
               for k in range(3)]
        alone, under, comp = (statistics.median(v) * 1e3 for v in per)
        print(f"{n:>8} {alone:>7.2f} {under:>14.2f} {comp:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
