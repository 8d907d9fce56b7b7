"""What a queue of small all-reduces costs on Gloo, measured two ways (issue 19).

    python bench/queue_alpha.py                    # 2 ranks, 32 x 64 KiB, 30 repeats
    python bench/queue_alpha.py --threads 1        # Gloo with one worker thread, not two

Each repeat on every rank: barrier, 20 ms of matmuls, [a barrier], clock, 32 all-reduces
queued (async), waited for, clock. Patterns ``today`` (no barrier after the compute),
``barrier`` and ``after-blocking`` (the same 32 all-reduces issued blocking just before, as
calibrate's sequence step interleaves them until 2026-11-25) alternate. Ranks share this host's monotonic clock
(perf_counter), so besides each rank's own figure (what calibrate takes: the slowest rank's)
it prints the queue's true length, from the later rank's start to the last end, and the
skew between the ranks' ends of compute. ``--threads`` sets ProcessGroupGloo's worker
threads (2 by default in torch), i.e. how many collectives may be in flight at once.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

PATTERNS = ("today", "barrier", "after-blocking")


def _group(threads: int):
    """The default group with ``threads`` Gloo workers (torch's default is 2)."""
    if threads == 2:
        return None
    opts = dist.ProcessGroupGloo._Options()
    opts._threads, opts._timeout = threads, datetime.timedelta(seconds=60)
    opts._devices = [dist.ProcessGroupGloo.create_default_device()]
    store = dist.PrefixStore(f"threads{threads}", dist.distributed_c10d._get_default_store())
    return dist.ProcessGroupGloo(store, dist.get_rank(), dist.get_world_size(), opts)


def _rank(rank: int, world: int, args, out) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    pg = _group(args.threads)
    tensors = [torch.zeros(args.kib * 256) for _ in range(args.count)]
    for t in tensors:
        (pg or dist.distributed_c10d._get_default_group()).allreduce([t]).wait()
    matrix = torch.randn(256, 256)
    rows = {p: [] for p in PATTERNS}
    for _ in range(args.repeats):
        for pattern in PATTERNS:
            if pattern == "after-blocking":  # calibrate's order: a blocking sequence first
                dist.barrier()
                for t in tensors:
                    dist.all_reduce(t, group=pg)
            dist.barrier()
            end_s = time.perf_counter() + 0.020
            while time.perf_counter() < end_s:
                matrix @ matrix
            compute_end_s = time.perf_counter()
            if pattern == "barrier":
                dist.barrier()
            start_s = time.perf_counter()
            for w in [dist.all_reduce(t, group=pg, async_op=True) for t in tensors]:
                w.wait()
            rows[pattern].append((compute_end_s, start_s, time.perf_counter()))
    got = [None] * world
    dist.all_gather_object(got, rows)
    if rank == 0:
        out.put(got)
    dist.barrier()
    dist.destroy_process_group()


def _report(got: list, count: int) -> None:
    med = statistics.median
    for pattern in PATTERNS:
        n = len(got[0][pattern])
        own = [max(r[pattern][i][2] - r[pattern][i][1] for r in got) * 1e3 for i in range(n)]
        true = [(max(r[pattern][i][2] for r in got) - max(r[pattern][i][1] for r in got)) * 1e3
                for i in range(n)]
        skew = [abs(got[0][pattern][i][0] - got[1][pattern][i][0]) * 1e3 for i in range(n)]
        print(f"{pattern:8} slowest rank's own clock {med(own):6.2f} ms (α {med(own) / count * 1e3:4.0f}"
              f" µs) | true queue {med(true):6.2f} ms (α {med(true) / count * 1e3:4.0f} µs), "
              f"p10–p90 {sorted(true)[n // 10]:.1f}–{sorted(true)[n - 1 - n // 10]:.1f} | "
              f"compute-end skew median {med(skew):.2f} ms, max {max(skew):.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2, help="Gloo worker threads (torch: 2)")
    ap.add_argument("--count", type=int, default=32)
    ap.add_argument("--kib", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--port", type=int, default=29655)
    args = ap.parse_args()
    out = mp.get_context("spawn").SimpleQueue()
    ctx = mp.spawn(_rank, args=(2, args, out), nprocs=2, join=False)
    got = out.get()
    print(f"# {args.count} x {args.kib} KiB, Gloo threads {args.threads}, {args.repeats} "
          f"repeats, load {os.getloadavg()[0]:.2f}")
    _report(got, args.count)
    try:
        ctx.join()
    except Exception:  # Gloo may abort a rank at exit after it reported (torch 2.13)
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
