"""How long a world of ranks takes to start and end, with nothing to do: fresh interpreters
(REALRUN_FORKSERVER=0) against ranks forked from the fork server (realrun/launch/forkserver.py).

    python bench/world_start.py --worlds 5     # from the repository root, on a quiet machine

Each mode runs ``--worlds`` 2-rank Gloo worlds of tests/_launch_targets.py's allreduce_rank
(4 floats) one after another in this process and prints each world's seconds, the median and
the range. The forked mode's first world includes the server's start (it imports torch and
torch._dynamo alone, where fresh ranks import torch two at once): a command hides most of it by
starting the server as soon as its flags are checked (WorldConfig.prestart), which this script
does not. Figures: docs/BENCHMARKS.md, "Ranks forked from a server".
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from realrun.launch import run_world  # noqa: E402 - after the checkout is on the path

TARGET = "tests._launch_targets:allreduce_rank"


def worlds(n: int, forked: bool) -> list[float]:
    os.environ["REALRUN_FORKSERVER"] = "1" if forked else "0"
    seconds = []
    for _ in range(n):
        start = time.perf_counter()
        run_world(TARGET, {"n": 4}, world_size=2)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worlds", type=int, default=5, help="worlds per mode (default 5)")
    args = p.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, {args.worlds} worlds a mode")
    for name, forked in (("fresh interpreters", False), ("forked", True)):
        s = worlds(args.worlds, forked)
        later = s[1:] or s
        print(f"{name:>18}: first {s[0]:.2f} s; later median {statistics.median(later):.2f} s "
              f"({min(later):.2f}-{max(later):.2f}); each {', '.join(f'{x:.2f}' for x in s)}")
    print(f"load {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
