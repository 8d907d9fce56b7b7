"""One large blocking all-reduce as calibrate times it, and as a flat step issues it (issue 19).

    python experiments/big_allreduce.py                          # loopback, 9.4 MB, 20 repeats
    python experiments/big_allreduce.py --emulate-hosts 2 --link-gbit 2

calibrate's sweep times each size straight after a barrier, again and again; a flat step
issues its one all-reduce after the backward and the copy into its bucket. On the emulated
2 Gbit/s link a flat step's all-reduce of the transformer's 9.4 MB took ~50 ms where the
sweep says ~40 (docs/results/2026-11-26-lone-alpha-modes.md, section 7). In turn in each
repeat on every rank, after a barrier:

- ``sweep``: clock, all-reduce, clock (calibrate's);
- ``compute``: 40 ms of matmuls, clock, all-reduce, clock (a backward before it);
- ``sleep``: 40 ms asleep, clock, all-reduce, clock;
- ``copied``: the buffer written from another tensor (a bucket's copy-in), clock,
  all-reduce, clock.

Per pattern: the median over repeats of the slower rank's time, and of the time from the
later rank's start to the later rank's end (the ranks share this host's clock), which
leaves out one rank waiting for the other.
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

PATTERNS = ("sweep", "compute", "sleep", "copied")


def rank(payload: dict, ctx) -> dict:
    """Rank side: (start, end) of each pattern's all-reduce, per repeat."""
    buf = torch.zeros(payload["bytes"] // 4)
    src, m = torch.randn(buf.numel()), torch.randn(256, 256)
    for _ in range(3):
        dist.all_reduce(buf)
    out = {p: [] for p in PATTERNS}
    for _ in range(payload["repeats"]):
        for p in PATTERNS:
            dist.barrier()
            if p == "compute":
                end = time.perf_counter() + 0.040
                while time.perf_counter() < end:
                    m @ m
            elif p == "sleep":
                time.sleep(0.040)
            elif p == "copied":
                buf.copy_(src)
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            out[p].append((t0, time.perf_counter()))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=int, default=9445888, help="the transformer's gradients")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--emulate-hosts", type=int, default=None)
    ap.add_argument("--link-gbit", type=float, default=None)
    a = ap.parse_args()
    load = os.getloadavg()[0]
    ranks = run_world("experiments.big_allreduce:rank", {"bytes": a.bytes, "repeats": a.repeats},
                      timeout_s=600, emulate_hosts=a.emulate_hosts, link_gbit=a.link_gbit)
    link = f"{a.link_gbit:g} Gbit/s emulated" if a.link_gbit else "loopback"
    print(f"load {load:.2f}; {a.bytes} B all-reduce, 2 Gloo ranks, {link}, {a.repeats} repeats")
    for p in PATTERNS:
        pairs = list(zip(ranks[0][p], ranks[1][p]))
        slower = [max(e0 - s0, e1 - s1) for (s0, e0), (s1, e1) in pairs]
        joint = [max(e0, e1) - max(s0, s1) for (s0, e0), (s1, e1) in pairs]
        print(f"{p:8s} slower rank {statistics.median(slower) * 1e3:6.2f} ms, from the later "
              f"start {statistics.median(joint) * 1e3:6.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
