"""A lone small all-reduce against one in a queue that outlasts the compute, side by side.

    python experiments/tail_vs_lone.py                  # 2 ranks on Gloo (loopback), 30 repeats

calibrate takes the α of overlapped all-reduces from lone 4 KiB ones (calibrate/lone_alpha.py);
a step's all-reduces are launched during the backward and most complete after it, one after
another. Here, in turn in each repeat on every rank:

- ``lone``: 4 x (barrier, clock, all-reduce 4 KiB, clock): the slower rank's time;
- ``tail``: barrier, then N chunks of ~0.5 ms of matmuls, each followed by an async
  all-reduce of N 64 KiB tensors (a backward launching per-parameter all-reduces); clock the
  compute's end, then wait for each in order: (last completion − compute's end) / the number
  completing after it, on the slower rank.

Measured at the same minutes, the two say whether a queue's tail costs what a lone one
does, or whether a lone α and a step's queue only differ because the box's speed moved
between a calibration and a bench (docs/results/2026-11-26-lone-alpha-modes.md, section 3).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from calibrate.lone_alpha import median_interval, two_modes  # noqa: E402
from realrun.launch import run_world  # noqa: E402


def rank(payload: dict, ctx) -> tuple[list[float], list]:
    """Rank side: the lone all-reduces' seconds, and per repeat (compute's end, each
    queued all-reduce's completion)."""
    lone, m = torch.zeros(1024), torch.randn(256, 256)
    queue = [torch.zeros(16384) for _ in range(payload["count"])]
    for t in [lone, *queue]:
        dist.all_reduce(t)
    lone_s, tail = [], []
    for _ in range(payload["repeats"]):
        for _ in range(4):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(lone)
            lone_s.append(time.perf_counter() - t0)
        dist.barrier()
        works = []
        for t in queue:
            end = time.perf_counter() + 0.0005
            while time.perf_counter() < end:
                m @ m
            works.append(dist.all_reduce(t, async_op=True))
        compute_end = time.perf_counter()
        done = []
        for w in works:
            w.wait()
            done.append(time.perf_counter())
        tail.append((compute_end, done))
    return lone_s, tail


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--count", type=int, default=32, help="all-reduces in the queue")
    a = ap.parse_args()
    ranks = run_world("experiments.tail_vs_lone:rank", {"repeats": a.repeats, "count": a.count},
                      timeout_s=600)
    lone = np.maximum(ranks[0][0], ranks[1][0])
    fast, slow = two_modes(lone)
    low, high = median_interval(lone)
    per = []
    for (end0, done0), (end1, done1) in zip(ranks[0][1], ranks[1][1]):
        end, done = max(end0, end1), np.maximum(done0, done1)   # the slower rank's
        after = done[done > end]
        if len(after):
            per.append((after[-1] - end) / len(after))
    print(f"load {os.getloadavg()[0]:.2f}; {a.repeats} repeats, 2 ranks, loopback Gloo")
    print(f"lone 4 KiB: median {np.median(lone) * 1e6:.0f} µs (p5–p95 of the median "
          f"{low * 1e6:.0f}–{high * 1e6:.0f}); fast mode {np.median(fast) * 1e6:.0f} µs, "
          f"slow {np.median(slow) * 1e6:.0f} µs for {len(slow) / len(lone):.0%}")
    print(f"queue of {a.count} x 64 KiB after the compute: {np.median(per) * 1e6:.0f} µs a "
          f"collective (median of {len(per)} repeats; p25–p75 "
          f"{np.percentile(per, 25) * 1e6:.0f}–{np.percentile(per, 75) * 1e6:.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
