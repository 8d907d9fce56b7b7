"""The self-check's pieces that need only torch: what each rank is, the environment, steps.

``python -m realrun selfcheck`` (realrun/commands/selfcheck.py) runs five steps and writes one
bundle; this module holds its pieces that need neither calibrate nor validate::

    ranks = run_world("realrun.workflows.selfcheck:init_rank", {}, world_size=2)   # who is where
    env = environment("gloo", ranks)    # python, torch, CUDA, NCCL, GPUs, env vars, host
    step = run_step("init", lambda: ({"ranks": 2}, []))   # Step: ok, seconds, figures, files

A step never raises: :func:`run_step` records a failure as one line and the bundle goes on.
"""
from __future__ import annotations

import math
import os
import platform
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.distributed as dist

from realrun.launch.env import is_torchrun

# Environment variables a cluster report needs: the collective libraries' and torch's knobs,
# and which devices and threads each rank got.
ENV_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "MALLOC_")
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT",
             "LOCAL_WORLD_SIZE", "LD_PRELOAD", "GLIBC_TUNABLES", "REALRUN_ALLOCATOR")


def env_vars() -> dict[str, str]:
    """This process's NCCL_*/GLOO_*/TORCH_*/MALLOC_* variables and a few launch and
    allocator ones, sorted."""
    return {k: v for k, v in sorted(os.environ.items())
            if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def versions(ask_cuda: bool = True) -> dict:
    """python, torch, CUDA and NCCL versions (None where absent); ``ask_cuda`` False asks the
    CUDA runtime nothing, as a Gloo rank must not touch CUDA."""
    nccl = None
    if ask_cuda and torch.cuda.is_available():
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # a build without NCCL: say so in the bundle, do not fail
            nccl = None
    return {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "nccl": nccl}


def init_rank(payload: dict, ctx) -> dict:
    """Rank function: who this rank is, where, on what device, and a checked all-reduce (of
    rank + 1: the sum must be p(p+1)/2, so a wrong group or transport shows here)."""
    x = torch.full((4,), float(ctx.rank + 1), device=ctx.device)
    ctx.synchronize()
    start = time.perf_counter()
    dist.all_reduce(x)
    ctx.synchronize()
    allreduce_s = time.perf_counter() - start
    expected = ctx.world_size * (ctx.world_size + 1) / 2
    gpu = None
    if ctx.device.type == "cuda":
        props = torch.cuda.get_device_properties(ctx.device)
        gpu = {"name": props.name, "memory_gib": round(props.total_memory / 2 ** 30, 1),
               "capability": f"{props.major}.{props.minor}"}
    return {"rank": ctx.rank, "local_rank": ctx.local_rank, "hostname": socket.gethostname(),
            "device": str(ctx.device), "gpu": gpu, "allreduce_ok": bool(
                torch.all(x == expected).item()), "allreduce_ms": allreduce_s * 1e3,
            "threads": torch.get_num_threads(), "allocator": ctx.allocator,
            "versions": versions(gpu is not None),
            "env": env_vars()}


def environment(backend: str, world_size: int, ranks: list[dict] | None) -> dict:
    """The bundle's environment: this (lead) process's host and versions, plus each rank's
    host, device and GPU from the init step (``ranks``; None when it failed). Rank 0's
    environment variables are ``rank0_env``; another rank's are listed only where they
    differ."""
    gpus = None
    if ranks:
        gpus = [r["gpu"]["name"] for r in ranks if r.get("gpu")]
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    # under torchrun this process is rank 0: on Gloo it keeps off CUDA, as its rank did
    ask_cuda = backend == "nccl" or not is_torchrun()
    out = {**versions(ask_cuda), "platform": platform.platform(), "hostname": socket.gethostname(),
           "cpu_count": os.cpu_count(), "cpus_usable": cpus, "world_size": world_size,
           "backend": backend, "gpu_names": gpus, "env": env_vars(),
           "argv": [os.path.basename(sys.executable), *sys.argv]}
    if ask_cuda and torch.cuda.is_available():
        out["local_gpus"] = [torch.cuda.get_device_name(i)
                             for i in range(torch.cuda.device_count())]
    if ranks:  # what the ranks saw (a launcher sets some), rank 0's in full
        base = out["rank0_env"] = ranks[0]["env"]
        out["ranks"] = [{k: r.get(k) for k in ("rank", "local_rank", "hostname", "device",
                                               "gpu", "threads", "allocator")}
                        | ({"env": r["env"]} if r["env"] != base else {}) for r in ranks]
    return out


@dataclass
class Step:
    """One step of the self-check: ``status`` ok, failed or skipped, its seconds, the key
    figures, the files it wrote (relative to the bundle) and, if not ok, why (one line)."""

    name: str
    status: str = "ok"
    seconds: float = 0.0
    figures: dict = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "seconds": round(self.seconds, 2),
                "figures": finite(self.figures), "files": self.files, "error": self.error}


def finite(value):
    """``value`` with NaN and infinities as None (a held-out error of no sizes is NaN), so
    selfcheck.json is strict JSON that jq and browsers read.

    >>> finite({"a": [1.0, float("nan")], "b": (2, float("inf"))})
    {'a': [1.0, None], 'b': [2, None]}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def run_step(name: str, fn: Callable[[], tuple[dict, list[str]]]) -> Step:
    """Run ``fn`` (returning figures and files) as step ``name``; any exception becomes a
    failed Step with its first line, so the steps after it and the bundle still happen."""
    start = time.perf_counter()
    try:
        figures, files = fn()
        return Step(name, "ok", time.perf_counter() - start, figures, files)
    except Exception as e:  # noqa: BLE001 - a self-check reports every failure, never dies
        text = (str(e).strip().splitlines() or [""])[0]
        return Step(name, "failed", time.perf_counter() - start,
                    error=f"{type(e).__name__}: {text}" if text else type(e).__name__)


def skipped(name: str, why: str) -> Step:
    return Step(name, "skipped", error=why)
