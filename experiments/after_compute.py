"""What an all-reduce costs lone, and launched right after compute with the ranks apart.

    python experiments/after_compute.py                          # 1, 4, 8 MiB; 2 Gloo ranks
    python experiments/after_compute.py --compute-ms 40 --skew-ms 5 --sizes 8388608

Each repeat on both ranks, alternately: a barrier then the all-reduce ("lone", as calibrate
times it), and a barrier, ``--compute-ms`` of matmuls (rank r spins ``r * --skew-ms`` more,
as two ranks end a backward apart), then the all-reduce ("after"). Both ranks stamp launch
and end on the host's one clock (perf_counter: CLOCK_MONOTONIC); the table gives, per size,
the median time from the later launch to the later end (the collective's own time; the
earlier rank's includes waiting for the other) with its p25–p75. Numbers from this 2-vCPU
VM: docs/results/2026-11-25-allocator.md, section 4.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from realrun.launch import run_world  # noqa: E402

MODES = ("lone", "after")


def rank(payload: dict, ctx) -> dict:
    """{size: {mode: [[launch_s, end_s], ...]}} on this rank's perf_counter."""
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    spin_s = (payload["compute_ms"] + ctx.rank * payload["skew_ms"]) / 1e3
    out = {}
    for nbytes in payload["sizes"]:
        x = torch.ones(nbytes // 4)
        stamps: dict[str, list] = {mode: [] for mode in MODES}
        for _ in range(payload["repeats"]):
            for mode in MODES:
                ctx.barrier()
                if mode == "after":
                    until = time.perf_counter() + spin_s
                    while time.perf_counter() < until:
                        torch.mm(a, b)
                launch = time.perf_counter()
                dist.all_reduce(x, async_op=True).wait()
                stamps[mode].append([launch, time.perf_counter()])
        out[str(nbytes)] = stamps
    return out


def own_ms(stamps_by_rank: list[list[list[float]]]) -> list[float]:
    """Per repeat: the later end less the later launch, ms."""
    return [(max(s[1] for s in per) - max(s[0] for s in per)) * 1e3
            for per in zip(*stamps_by_rank)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1048576,4194304,8388608", help="bytes, comma-separated")
    ap.add_argument("--compute-ms", type=float, default=30.0)
    ap.add_argument("--skew-ms", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 4 or args.repeats < 1 or args.compute_ms < 0 or args.skew_ms < 0:
        print(f"after_compute: --sizes must be byte counts >= 4 (got {args.sizes!r}), "
              "--repeats >= 1, --compute-ms and --skew-ms >= 0", file=sys.stderr)
        return 2
    payload = {"sizes": sizes, "repeats": args.repeats,
               "compute_ms": args.compute_ms, "skew_ms": args.skew_ms}
    load = os.getloadavg()[0]
    ranks = run_world("experiments.after_compute:rank", payload, timeout_s=600)
    print(f"# 2 Gloo ranks, {args.repeats} repeats; after: {args.compute_ms:g} ms of matmuls, "
          f"rank 1 {args.skew_ms:g} ms more; load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    for nbytes in payload["sizes"]:
        cells = []
        for mode in MODES:
            t = sorted(own_ms([r[str(nbytes)][mode] for r in ranks]))
            cells.append(f"{mode} {statistics.median(t):5.1f} ms (p25–p75 {t[len(t) // 4]:.1f}–"
                         f"{t[3 * len(t) // 4]:.1f})")
        print(f"{nbytes / 2**20:g} MiB: " + ";  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
