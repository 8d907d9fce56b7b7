"""Does torch's DDP copy a bucket of one gradient in and out, as it does a bucket of several?

    python experiments/torch_lone_buckets.py [--width 1024] [--layers 4] [--bucket-mb 1]

Why: the engine once reduced a one-gradient bucket in place for every implementation (no
copy-out), as realrun.DDP does; torch's reducer keeps a flat buffer per bucket. One process,
a 1-rank Gloo group, bias-free Linear layers of width x width fp32 (4 MiB each at 1024), torch
DDP with ``bucket_cap_mb`` small enough that each gradient is alone in its bucket; after 3
warm-up steps one step runs under torch.profiler. Printed: the buckets torch built, and per
reducer op (``reducer::mul_out``: the gradient copied into its bucket, scaled by 1/p;
``copy_bucket_to_grad``: the average copied back out) how many ran and their CPU ms.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import profile

OPS = ("torch::distributed::reducer::mul_out", "torch.distributed.ddp.reducer::copy_bucket_to_grad")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--bucket-mb", type=float, default=1.0)
    args = ap.parse_args()
    if args.width < 1 or args.layers < 1 or args.bucket_mb <= 0:
        print("torch_lone_buckets: --width, --layers and --bucket-mb must be > 0", file=sys.stderr)
        return 2
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29613")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        net = nn.Sequential(*(nn.Linear(args.width, args.width, bias=False)
                              for _ in range(args.layers)))
        model = DistributedDataParallel(net, bucket_cap_mb=args.bucket_mb)
        x = torch.randn(64, args.width)
        for _ in range(3):
            model(x).square().mean().backward()
        with profile() as prof:
            model(x).square().mean().backward()
        sizes = model._get_ddp_logging_data().get("rebuilt_bucket_sizes")
        print(f"# {args.layers} gradients of {args.width * args.width * 4 / 2**20:.2f} MiB, "
              f"bucket_cap_mb {args.bucket_mb}; buckets (bytes): {sizes}")
        for op in OPS:
            ms = [e.cpu_time_total / 1e3 for e in prof.events() if e.name == op]
            med = f"{statistics.median(ms):.3f}" if ms else "-"
            print(f"{op:52} {len(ms)} calls, median {med} ms, total {sum(ms):.3f} ms")
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
