"""Small rank functions for tests/realrun/test_launch.py and tests/realrun/test_netns.py.

    run_world("tests._launch_targets:allreduce_rank", {"n": 4}, world_size=2)

Under torchrun, tests/_torchrun_gather.py gathers allreduce_rank the same way.
"""
from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist


def allreduce_rank(payload: dict, ctx) -> dict:
    """Sum (rank + 1) over ranks in an n-element tensor; report who ran where with what."""
    tensor = torch.full((payload["n"],), float(ctx.rank + 1), device=ctx.device)
    dist.all_reduce(tensor)
    ctx.synchronize()
    return {"rank": ctx.rank, "world_size": ctx.world_size, "local_rank": ctx.local_rank,
            "sum": tensor.tolist(), "threads": torch.get_num_threads(),
            "device": str(ctx.device), "pid": os.getpid()}


def raise_on_rank(payload: dict, ctx) -> int:
    """The chosen rank raises before the collective that the others wait in."""
    if ctx.rank == payload["rank"]:
        raise ValueError(f"boom on rank {ctx.rank}")
    dist.all_reduce(torch.ones(1))
    return ctx.rank


def exit_on_rank(payload: dict, ctx) -> int:
    """The chosen rank vanishes without a Python error, like a segfault or the OOM killer."""
    if ctx.rank == payload["rank"]:
        os._exit(3)
    dist.all_reduce(torch.ones(1))
    return ctx.rank


def hang_on_rank(payload: dict, ctx) -> int:
    """The chosen rank never reaches the collective; the others wait for it."""
    if ctx.rank == payload["rank"]:
        while True:
            time.sleep(1.0)
    dist.all_reduce(torch.ones(1))
    return ctx.rank


def abort_on_rank(payload: dict, ctx) -> int:
    """The chosen rank aborts (SIGABRT, like a C++ terminate) before reporting its value."""
    dist.all_reduce(torch.ones(1))
    if ctx.rank == payload["rank"]:
        os.abort()
    return ctx.rank


def abort_after_reporting(payload: dict, ctx) -> int:
    """Every rank reports its value and then aborts in teardown, as torch 2.13's Gloo can
    ("terminate called without an active exception"): the run still succeeded. The worker
    leaves the group after writing its result, then exits with os._exit (no atexit handler
    runs), so the abort goes where Gloo's happens: in destroy_process_group."""
    import torch.distributed as dist

    print(f"rank {ctx.rank} printed before returning", flush=False)
    dist.destroy_process_group = lambda *args, **kwargs: os.abort()
    return ctx.rank


def hang_after_reporting(payload: dict, ctx) -> int:
    """Every rank reports its value and then hangs in teardown (a destroy_process_group that
    never returns)."""
    import torch.distributed as dist

    dist.destroy_process_group = lambda *args, **kwargs: time.sleep(3600)
    return ctx.rank


def timed_allreduce(payload: dict, ctx) -> dict:
    """Wall seconds of `repeats` all-reduces of `n_bytes` of float32 after one warm-up, and
    the reduced value, which must be 1 + 2 + ... + world_size."""
    tensor = torch.empty(payload["n_bytes"] // 4, device=ctx.device)
    dist.all_reduce(tensor)  # warm-up: connections and buffers
    seconds = []
    for _ in range(payload["repeats"]):
        tensor.fill_(float(ctx.rank + 1))
        dist.barrier()
        start_s = time.perf_counter()
        dist.all_reduce(tensor)
        ctx.synchronize()
        seconds.append(time.perf_counter() - start_s)
    return {"seconds": seconds, "sum": tensor[-1].item(), "local_rank": ctx.local_rank}


def allreduce_seconds(payload: dict, ctx) -> list[float]:
    """Only the seconds of timed_allreduce."""
    return timed_allreduce(payload, ctx)["seconds"]


def where_am_i(payload: dict, ctx) -> dict:
    """What the rank was started with (tests/realrun/test_forkserver.py): its parents, working
    directory, an environment variable, sys.path, session and which of the payload's
    ``modules`` it found imported; rank 0 prints a line."""
    import sys
    if ctx.rank == 0:
        print(payload["say"], flush=True)
    return {"pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(),
            "var": os.environ.get(payload["var"]), "sys_path": sys.path,
            "session": os.getsid(0), "omp": os.environ.get("OMP_NUM_THREADS"),
            "threads": torch.get_num_threads(),
            "modules": [n for n in payload.get("modules", ()) if n in sys.modules]}
