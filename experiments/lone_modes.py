"""Why calibrate's lone small all-reduces are bimodal on this VM (issue 19).

    python experiments/lone_modes.py                 # 2 ranks on Gloo, 200 repeats of each pattern

calibrate's sequence step times lone 4 KiB all-reduces each straight after a barrier
(calibrate/ranks/sequence.py) and takes the median as the link's α. Here, in turn on every
rank, patterns that differ only in what the CPU did just before the all-reduce:

- ``barrier``: barrier, clock, all-reduce, clock (calibrate's);
- ``busy``: barrier, 2 ms of matmuls, clock, all-reduce, clock (the CPU awake, as in a
  backward that launches an overlapped collective);
- ``sleep``: barrier, 2 ms asleep, clock, all-reduce, clock (the CPU idle before it).

Each sample is its slowest rank's (as calibrate takes it); the ranks share this host's
monotonic clock, so the skew of their starts is printed too. Prints per pattern the
median, the share of samples above 2 ms and the medians of the two sides of that split.
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
from realrun.launch import run_world  # noqa: E402

PATTERNS = ("barrier", "busy", "sleep")
SPLIT_S = 0.002   # between the two modes seen in 22 calibrations: 0.5-0.9 ms and 3.2-4.0 ms


def rank(payload: dict, ctx) -> dict:
    """Rank side: (start, end) of each pattern's all-reduce, per repeat."""
    t, m = torch.zeros(1024), torch.randn(256, 256)
    for _ in range(20):
        dist.all_reduce(t)
    rows = {p: [] for p in PATTERNS}
    for _ in range(payload["repeats"]):
        for p in PATTERNS:
            dist.barrier()
            if p == "busy":
                end = time.perf_counter() + 0.002
                while time.perf_counter() < end:
                    m @ m
            elif p == "sleep":
                time.sleep(0.002)
            t0 = time.perf_counter()
            dist.all_reduce(t)
            rows[p].append((t0, time.perf_counter()))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200)
    a = ap.parse_args()
    ranks = run_world("experiments.lone_modes:rank", {"repeats": a.repeats}, timeout_s=300)
    print(f"load {os.getloadavg()[0]:.2f}; {a.repeats} samples per pattern, 2 ranks, 4 KiB")
    for p in PATTERNS:
        starts = np.array([[s for s, _ in ranks[r][p]] for r in (0, 1)])
        ends = np.array([[e for _, e in ranks[r][p]] for r in (0, 1)])
        slowest = (ends - starts).max(axis=0) * 1e6
        skew = np.abs(starts[0] - starts[1]) * 1e6
        fast, slow = slowest[slowest < SPLIT_S * 1e6], slowest[slowest >= SPLIT_S * 1e6]
        slow_ms = np.median(slow) if len(slow) else 0
        fast_ms = np.median(fast) if len(fast) else 0
        print(f"{p:8s} median {np.median(slowest):6.0f} µs; above 2 ms "
              f"{len(slow) / len(slowest):4.0%} (median {slow_ms:5.0f}), below: median "
              f"{fast_ms:4.0f} µs; start skew median {np.median(skew):4.0f} µs, p90 "
              f"{np.percentile(skew, 90):5.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
