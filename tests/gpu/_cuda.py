"""What every gpu-tier test module marks itself with (docs/CONTRIBUTING-GPU.md says how to run them)::

    pytestmark = GPU        # the ``gpu`` marker, and a skip with the reason where no CUDA
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
GPU = [pytest.mark.gpu, pytest.mark.timeout(540),   # a device call is at most 10 minutes
       pytest.mark.skipif(not torch.cuda.is_available(),
                          reason="needs a CUDA GPU (torch.cuda.is_available() is False); "
                                 "docs/CONTRIBUTING-GPU.md runs this tier on the device machine")]
# GPU-bound on an H100 (~10 ms forward in fp32), so host-side hooks and the profiler's own
# cost stay off the GPU's timeline: 4 blocks of width 1024, 8 x 512 tokens
BIG_DIMS = {"layers": 4, "d_model": 1024, "d_ff": 4096, "heads": 16, "vocab": 8192}
BATCH, SEQ = 8, 512
BIG = ["--model", "transformer-small", "--batch", str(BATCH), "--seq", str(SEQ),
       *(w for k, v in BIG_DIMS.items() for w in (f"--{k.replace('_', '-')}", str(v)))]


def big_workload():
    """The BIG preset as realrun builds it (realrun.workload.Workload)."""
    from realrun.workload import Workload
    from simddp.presets.models import parse_model
    return Workload.preset(parse_model("transformer-small").shrunk(**BIG_DIMS), BATCH, SEQ)


def env() -> dict:
    """The caller's environment with the checkout first on PYTHONPATH (prepended: the GPU
    box's torch stack may come from the caller's own path)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}


def run(argv: list[str], timeout_s: float = 480) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env(), capture_output=True,
                          text=True, timeout=timeout_s)


def peak_used_mib(argv: list[str], timeout_s: float = 480) -> tuple[float, str]:
    """(peak GPU memory in use while ``python argv`` ran, over what was in use before, MiB;
    its stderr). Polls cudaMemGetInfo every 10 ms: the caching allocator keeps what a process
    reserved until it exits, so a peak lasts and polling sees it."""
    free, total = torch.cuda.mem_get_info()
    base, peak, done = total - free, [0], threading.Event()

    def poll() -> None:
        while not done.is_set():
            free_now, _ = torch.cuda.mem_get_info()
            peak[0] = max(peak[0], total - free_now - base)
            time.sleep(0.01)
    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    try:
        proc = run(argv, timeout_s)
    finally:
        done.set()
        watcher.join()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return peak[0] / 2**20, proc.stderr
