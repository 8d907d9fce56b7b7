"""Train with realrun.DDP: the training script a user writes, started by torchrun.

    torchrun --nproc-per-node 2 examples/train_ddp.py                     # 2 local ranks, Gloo
    torchrun --nproc-per-node 8 examples/train_ddp.py --backend nccl      # one GPU per rank
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint NODE0:29500 \\
        examples/train_ddp.py --backend nccl --strategy ddp --bucket-mb 25

The loop, with gradient accumulation over --accum micro-steps:

    model = realrun.DDP(net, strategy="bucketed", bucket_mb=25)  # after init_process_group
    for step in ...:
        for micro in range(accum):
            with model.no_sync() if micro < accum - 1 else nullcontext():   # no comm inside
                loss_fn(model(x), y).backward()
        model.finish_gradient_synchronization()   # REQUIRED: wait for the all-reduces and
        opt.step()                                 # leave the average in every p.grad
        opt.zero_grad(set_to_none=True)
    finish_torchrun(0)  # barrier, flush, os._exit(0): no teardown for Gloo to abort in

What differs from torch's DistributedDataParallel: torch DDP waits for its all-reduces
inside ``backward()``; realrun.DDP needs ``finish_gradient_synchronization()`` after each
synced backward (calling it inside ``no_sync()``, or twice, does nothing). A parameter no rank
used gets a zero gradient (torch DDP leaves it None). Buffers are broadcast from rank 0 once,
when wrapping (torch DDP re-broadcasts them every forward). The strategy is any of simddp's:
naive, flat, overlap, bucketed, ddp (torch's bucket rule), so this loop trains exactly the
plan ``python -m simddp sweep`` predicted. torch 2.13's Gloo can abort a process in its
teardown (destroy_process_group or interpreter exit: "terminate called without an active
exception") after the work is done, and torchrun then fails the job: so the script ends with
``finish_torchrun(0)`` (a barrier, a flush, ``os._exit(0)``), keeping that last line.
"""
from __future__ import annotations

import argparse
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch import nn

import realrun
from realrun.launch import finish_torchrun


def main() -> None:
    ap = argparse.ArgumentParser(description="train an MLP with realrun.DDP under torchrun")
    ap.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    ap.add_argument("--strategy", default="bucketed")
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--accum", type=int, default=2, help="micro-steps per optimizer step")
    args = ap.parse_args()

    dist.init_process_group(args.backend)  # torchrun set RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank = dist.get_rank()
    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
    torch.manual_seed(0)  # realrun.DDP broadcasts rank 0's weights anyway
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
    model = realrun.DDP(net, strategy=args.strategy, bucket_mb=args.bucket_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(rank)  # each rank its own samples

    for step in range(1, args.steps + 1):
        for micro in range(args.accum):
            x = torch.randn(16, 32, generator=data).to(device)
            y = x.sum(dim=1, keepdim=True)
            with model.no_sync() if micro < args.accum - 1 else nullcontext():
                loss = nn.functional.mse_loss(model(x), y) / args.accum
                loss.backward()
        model.finish_gradient_synchronization()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if rank == 0:
            print(f"step {step}: loss {loss.item() * args.accum:.4f}", flush=True)

    checksum = sum(p.double().sum().item() for p in net.parameters())
    print(f"rank {rank}: parameter checksum {checksum:.10f}", flush=True)
    finish_torchrun(0)  # barrier, flush, os._exit(0): no teardown for Gloo to abort in


if __name__ == "__main__":
    main()
