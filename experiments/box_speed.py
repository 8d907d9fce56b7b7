"""How steady is this box? The same fixed work, timed over and over, in 5-second windows.

    python experiments/box_speed.py --seconds 40 & python experiments/box_speed.py --seconds 40; wait

Each process runs 200 matmuls of 256 x 256 fp32 on one intra-op thread (torch), times each
batch of them on perf_counter until ``--seconds`` have passed, and prints the median, p5 and
p95 of a batch and the median of each 5-second window. Two at once load both cores of this
2-vCPU VM, as two ranks do. On 2026-11-26 (05:05, load 0.5 → 1.5) the windows ran 82–101 ms
in both processes, unrelated to each other: a step measured in one window and predicted
from another can be ±10 % apart with nothing else changed (docs/results/
2026-11-26-drift-and-naive.md).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

WINDOW_S = 5.0


def batch_ms(a: torch.Tensor, b: torch.Tensor) -> float:
    t0 = time.perf_counter()
    for _ in range(200):
        a @ b
    return (time.perf_counter() - t0) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=40.0)
    args = ap.parse_args()
    if not args.seconds > 2 * WINDOW_S:
        ap.error(f"--seconds must be over {2 * WINDOW_S:g} (two windows)")
    torch.set_num_threads(1)
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    times, windows, window, window_ms = [], [], [], 0.0
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        ms = batch_ms(a, b)
        times.append(ms)
        window.append(ms)
        window_ms += ms
        if window_ms >= WINDOW_S * 1e3:
            windows.append(statistics.median(window))
            window, window_ms = [], 0.0
    q = statistics.quantiles(times, n=20)
    print(f"{len(times)} batches: median {statistics.median(times):.2f} ms, p5 {q[0]:.2f}, "
          f"p95 {q[-1]:.2f}; 5 s windows: " + " ".join(f"{w:.1f}" for w in windows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
