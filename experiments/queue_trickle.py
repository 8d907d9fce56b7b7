"""What a queued all-reduce costs when launches trickle in, as a backward launches them.

    python experiments/queue_trickle.py                                   # 2 Gloo ranks, loopback
    python experiments/queue_trickle.py --emulate-hosts 2 --link-gbit 2   # two shaped hosts (root)
    python experiments/queue_trickle.py --threads 1 --sizes 1048576       # one Gloo worker, not two

Each repeat on every rank: barrier, 5 ms of matmuls, then ``--count`` async all-reduces of
one size, launched one every ``--gaps-ms`` of matmuls (0: all at once), each one's launch and
completion (the work's future callback) on this host's one clock. Per size and gap it prints
the medians over repeats of the launch interval and of the completion slope (the last
completions' spacing, after the first 3: what the queue costs a collective at the margin),
against the lone law the link file would charge (``--link``: α + bytes/busbw). A slope at
the wire's bytes/busbw with α ≥ 0 charged on top means collectives overlap one's α with the
previous one's bytes (Gloo runs ``--threads`` collectives at once, 2 by default in torch);
a slope near the launch interval means launches, not the link, set the pace.

Numbers from this 2-vCPU VM: docs/results/2026-11-25-queues-and-drift.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from realrun.launch import run_world  # noqa: E402


def _group(threads: int):
    """The default group, or a Gloo group with ``threads`` workers on the same interface."""
    if threads == 2:
        return None
    opts = dist.ProcessGroupGloo._Options()
    opts._threads, opts._timeout = threads, datetime.timedelta(seconds=120)
    iface = os.environ.get("GLOO_SOCKET_IFNAME")
    opts._devices = [dist.ProcessGroupGloo.create_device(interface=iface) if iface
                     else dist.ProcessGroupGloo.create_default_device()]
    store = dist.PrefixStore(f"threads{threads}", dist.distributed_c10d._get_default_store())
    return dist.ProcessGroupGloo(store, dist.get_rank(), dist.get_world_size(), opts)


def _spin(matrix: torch.Tensor, until_s: float) -> None:
    while time.perf_counter() < until_s:
        matrix @ matrix  # a torch op releases the GIL: the future callbacks run meanwhile


def rank(payload: dict, ctx) -> dict:
    """Rank function: launches and completions per (size, gap) and repeat."""
    pg = _group(payload["threads"])
    matrix, count, out = torch.randn(96, 96), payload["count"], {}
    for nbytes in payload["sizes"]:
        tensors = [torch.zeros(max(1, nbytes // 4)) for _ in range(count)]
        for t in tensors:  # connect and warm every buffer once
            dist.all_reduce(t, group=pg)
        for gap_ms in payload["gaps_ms"]:
            reps = []
            for _ in range(payload["repeats"]):
                ctx.barrier()
                _spin(matrix, time.perf_counter() + 0.005)
                launches, ends, futures = [], [0.0] * count, []
                for i, t in enumerate(tensors):
                    launches.append(time.perf_counter())
                    work = dist.all_reduce(t, group=pg, async_op=True)
                    futures.append(work.get_future().then(
                        lambda _, i=i: ends.__setitem__(i, time.perf_counter())))
                    _spin(matrix, time.perf_counter() + gap_ms / 1e3)
                torch.futures.wait_all(futures)
                reps.append((launches, ends))
            out[f"{nbytes}/{gap_ms:g}"] = reps
    return {"threads": len(os.listdir("/proc/self/task")), "runs": out}


def report(ranks: list[dict], law=None) -> list[str]:
    """One line per (size, gap): launch interval, completion slope, lone law (ms)."""
    lines, med = [], statistics.median
    for key in ranks[0]["runs"]:
        interval, slope = [], []
        for reps in zip(*(r["runs"][key] for r in ranks)):
            launch = [max(x) for x in zip(*(rep[0] for rep in reps))]   # the later rank's
            end = [max(x) for x in zip(*(rep[1] for rep in reps))]
            interval.append((launch[-1] - launch[0]) / (len(launch) - 1))
            slope.append((end[-1] - end[3]) / (len(end) - 4))
        nbytes, gap = key.split("/")
        lone = f"{law(int(nbytes)) * 1e3:5.2f}" if law else "   - "
        lines.append(f"{int(nbytes) // 1024:>6} KiB  gap {gap:>4} ms  launch every "
                     f"{med(interval) * 1e3:5.2f}  completion slope {med(slope) * 1e3:5.2f} "
                     f"(p25–p75 {sorted(slope)[len(slope) // 4] * 1e3:.2f}–"
                     f"{sorted(slope)[3 * len(slope) // 4] * 1e3:.2f})  lone law {lone}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4096,131072,524288,1048576", help="bytes, comma-separated")
    ap.add_argument("--gaps-ms", default="0,0.5,1,2", help="matmuls between launches")
    ap.add_argument("--count", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="Gloo worker threads (torch: 2)")
    ap.add_argument("--emulate-hosts", type=int, default=None)
    ap.add_argument("--link-gbit", type=float, default=None)
    ap.add_argument("--link", help="a link.json (python -m calibrate) for the lone law column")
    ap.add_argument("--out", help="write the raw launches and completions here (JSON)")
    args = ap.parse_args()
    payload = {"sizes": [int(s) for s in args.sizes.split(",")], "threads": args.threads,
               "gaps_ms": [float(g) for g in args.gaps_ms.split(",")],
               "count": args.count, "repeats": args.repeats}
    kw = {"emulate_hosts": args.emulate_hosts, "link_gbit": args.link_gbit} \
        if args.emulate_hosts else {}
    load = os.getloadavg()[0]
    ranks = run_world("experiments.queue_trickle:rank", payload, world_size=2, timeout_s=600, **kw)
    law = None
    if args.link:
        from simddp.io import load_link
        link = load_link(args.link)
        law = lambda n: link.allreduce_s(n, 2)  # noqa: E731
    print(f"# {args.count} all-reduces per repeat, {args.repeats} repeats, Gloo threads "
          f"{args.threads} (OS threads per rank {ranks[0]['threads']}), "
          f"{'emulated ' + str(args.link_gbit) + ' Gbit/s' if kw else 'loopback'}, "
          f"load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    print("\n".join(report(ranks, law)))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(ranks, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
