"""Waited-for all-reduces of a model's own gradient sizes, call by call, beside calibrate's.

    python experiments/blocking_sizes.py --model transformer-small --layers 8 --d-model 128 \
        --d-ff 512 --heads 4 --vocab 1024 --batch 2 --seq 32 --emulate-hosts 2 --link-gbit 2

calibrate's blocking α comes from 32 waited-for 64 KiB all-reduces after 20 ms of matmuls
(calibrate/ranks/sequence.py). A naive step waits for one all-reduce per gradient, of the
model's sizes, in about its ready order (the parameters reversed). Here, in each of
``--repeats`` repeats on every rank, in turn: a barrier, 20 ms of matmuls, then the model's
sizes, each waited for and clocked; the same for 32 x 64 KiB. Printed: each sequence's total
(over repeats of the slower rank's), and per size class of its calls their median, p90 and
mean, the share a scheduler tick (2 ms) or more over the median, and what simddp charges
one (``--link FILE``: its blocking α + bytes at busbw). A sequence's total follows its
calls' mean, not their median. ``--json FILE`` keeps every call of every rank; ``--gap-us
N`` spins N µs on the training thread before each call, as a naive step's per-tensor work
does (~70 µs: its in-place 1/p and its loop, ``experiments/naive_parts.py``); ``--bulk-mb M``
all-reduces M MB three times before each repeat's compute, as another configuration's
buckets run before a bench's naive steps.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from experiments._model_run import model_run_args, run_ranks  # noqa: E402
from calibrate.ranks.sequence import BUSY_S, busy  # noqa: E402
from calibrate.settings import SEQUENCE_BYTES, SEQUENCE_COUNT  # noqa: E402
from simddp.law import ALL_REDUCE, bytes_s as law_bytes_s  # noqa: E402


def clocked(tensors, gap_s: float = 0.0) -> list[float]:
    """Seconds of each blocking all-reduce, in turn, ``gap_s`` of spinning before each."""
    out = []
    for t in tensors:
        end = time.perf_counter() + gap_s
        while time.perf_counter() < end:
            pass
        t0 = time.perf_counter()
        dist.all_reduce(t)
        out.append(time.perf_counter() - t0)
    return out


def rank(payload: dict, ctx) -> dict:
    """Rank side: {"model": [per repeat, each call's s], "seq": [...]}."""
    sizes = payload["sizes"]
    model_t = [torch.zeros(n // 4) for n in sizes]
    seq_t = [torch.zeros(SEQUENCE_BYTES // 4) for _ in range(SEQUENCE_COUNT)]
    for t in model_t + seq_t:
        dist.all_reduce(t)
    runs = {"model": [], "seq": []}
    bulk = torch.zeros(int(payload["bulk_mb"] * 1e6) // 4) if payload["bulk_mb"] else None
    for _ in range(payload["repeats"]):
        for name, ts in (("model", model_t), ("seq", seq_t)):
            ctx.barrier()
            if bulk is not None:   # another configuration's buckets before this one's step
                for _ in range(3):
                    dist.all_reduce(bulk)
            busy(BUSY_S, ctx)
            runs[name].append(clocked(ts, payload["gap_us"] * 1e-6))
    return runs


def size_class(n: int) -> str:
    """The class of a call of ``n`` bytes in the printed table."""
    for top, name in ((4096, "<=4 KiB"), (65536, "4-64 KiB"), (262144, "64-256 KiB")):
        if n <= top:
            return name
    return ">256 KiB"


def slow_share(times_s: list[float]) -> float:
    """The share of calls 2 ms or more over the class's median: the scheduler-tick mode."""
    med = statistics.median(times_s)
    return sum(t > med + 0.002 for t in times_s) / len(times_s)


def main() -> None:
    args, workload, payload = model_run_args("blocking_sizes", __doc__, {"repeats": 20},
                                             {"link": "", "json": "", "gap-us": "0", "bulk-mb": "0"})
    for flag, unit in (("gap-us", "microseconds"), ("bulk-mb", "megabytes")):
        text = getattr(args, flag.replace("-", "_"))
        try:
            payload[flag.replace("-", "_")] = value = float(text)
            if not value >= 0:
                raise ValueError
        except ValueError:
            print(f"blocking_sizes: --{flag} must be {unit} >= 0, got {text!r}",
                  file=sys.stderr)
            raise SystemExit(2) from None
    model = workload.build(0, 0, torch.device("cpu"))[0]
    sizes = [p.numel() * 4 for p in reversed(list(model.parameters())) if p.requires_grad]
    payload["sizes"] = sizes
    ranks, load = run_ranks("blocking_sizes", args, payload)
    slower = {name: [[max(r[name][i][j] for r in ranks) for j in range(len(ranks[0][name][i]))]
                     for i in range(len(ranks[0][name]))] for name in ("model", "seq")}
    link = json.load(open(args.link)) if args.link else None
    if args.json:   # every call of every repeat on every rank, for a closer look
        with open(args.json, "w") as f:
            json.dump({"sizes": sizes, "ranks": ranks}, f)
    print(f"# {len(sizes)} gradients, {sum(sizes) / 1e6:.2f} MB; load {load:.2f} -> "
          f"{os.getloadavg()[0]:.2f}; per call: median over repeats of the slower rank's, µs")
    for name, ns in (("model", sizes), ("seq", [SEQUENCE_BYTES] * SEQUENCE_COUNT)):
        totals = [sum(rep) for rep in slower[name]]
        print(f"{name}: total median {statistics.median(totals) * 1e3:.2f} ms "
              f"(p10 {sorted(totals)[len(totals) // 10] * 1e3:.2f}, max {max(totals) * 1e3:.2f})")
        classes: dict[str, list[float]] = {}
        for j, n in enumerate(ns):
            classes.setdefault(size_class(n), []).extend(rep[j] for rep in slower[name])
        for cls, ts in classes.items():
            count = sum(1 for n in ns if size_class(n) == cls)
            mean_n = statistics.mean(n for n in ns if size_class(n) == cls)
            charged = ""
            if link:
                a = link.get("blocking_alpha_s") or link["alpha_s"]
                bytes_s = law_bytes_s(ALL_REDUCE, mean_n, args.world.world_size,
                                      link["busbw_gbps"])
                charged = f", charged {(a + bytes_s) * 1e6:.0f}"
            p90 = sorted(ts)[int(len(ts) * 0.9)]
            print(f"  {cls:>10}: {count:3d} calls of {mean_n / 1024:7.1f} KiB mean: median "
                  f"{statistics.median(ts) * 1e6:6.0f} µs, p90 {p90 * 1e6:6.0f}, mean "
                  f"{statistics.mean(ts) * 1e6:6.0f}, a tick (2 ms) over the median: "
                  f"{slow_share(ts):4.0%}{charged}")


if __name__ == "__main__":
    main()
