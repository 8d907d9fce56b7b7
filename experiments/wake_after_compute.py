"""What the first all-reduce after compute costs, and the one after it.

    python experiments/wake_after_compute.py                  # 2 ranks on Gloo, 30 repeats

Per repeat, on every rank, for each size and each compute length C (0, 2, 5, 20, 50 ms): a
barrier, C ms of 256 x 256 matmuls (as calibrate's sequence step computes), then two
all-reduces of the size, each waited for and clocked. With C = 0 both follow the barrier:
the back-to-back time. A step's first collective after its backward is the first after
compute; simddp charges what it takes over the second as ``Link.idle_wake_s`` (calibrate
measures it after 20 ms: calibrate/ranks/sequence.py). Prints per size and C, over repeats
of each repeat's slower rank, the median and the mean of each call, in ms: the samples have
two modes, one a scheduler tick later, so the two differ.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from realrun.launch import run_world  # noqa: E402

SIZES_BYTES = (65536, 2 ** 20, 9445888, 32 * 2 ** 20)   # 9.4 MB: the grid's transformer
COMPUTE_MS = (0, 2, 5, 20, 50)


def rank(payload: dict, ctx) -> dict:
    """Rank side: per "size/C", (first_s, second_s) of each repeat."""
    matrix = torch.ones(256, 256)

    def compute(ms: float) -> None:
        end_s = time.perf_counter() + ms / 1e3
        while time.perf_counter() < end_s:
            torch.mm(matrix, matrix)
    rows: dict[str, list] = {}
    for n in SIZES_BYTES:
        first, second = torch.zeros(n // 4), torch.zeros(n // 4)
        dist.all_reduce(first)   # connections and buffers, untimed
        dist.all_reduce(second)
        for c_ms in COMPUTE_MS:
            key = f"{n}/{c_ms}"
            rows[key] = []
            for _ in range(payload["repeats"]):
                ctx.barrier()
                compute(c_ms)
                t0 = time.perf_counter()
                dist.all_reduce(first)
                t1 = time.perf_counter()
                dist.all_reduce(second)
                rows[key].append((t1 - t0, time.perf_counter() - t1))
    dist.barrier()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    a = ap.parse_args()
    if a.repeats < 1:
        print("wake_after_compute: --repeats must be >= 1", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    ranks = run_world("experiments.wake_after_compute:rank", {"repeats": a.repeats},
                      world_size=2, timeout_s=600)
    print(f"# {a.repeats} repeats, 2 ranks, CPUs {len(os.sched_getaffinity(0))}, load "
          f"{load:.2f} -> {os.getloadavg()[0]:.2f}; each repeat's slower rank, ms")
    print(f"{'bytes':>9} {'compute':>8} {'first med':>10} {'mean':>7} {'second med':>11} "
          f"{'mean':>7}")
    for n in SIZES_BYTES:
        for c_ms in COMPUTE_MS:
            key = f"{n}/{c_ms}"
            per = [[max(r[key][i][k] for r in ranks) * 1e3 for i in range(a.repeats)]
                   for k in range(2)]
            print(f"{n:>9} {c_ms:>6} ms {statistics.median(per[0]):>10.2f} "
                  f"{statistics.mean(per[0]):>7.2f} {statistics.median(per[1]):>11.2f} "
                  f"{statistics.mean(per[1]):>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
