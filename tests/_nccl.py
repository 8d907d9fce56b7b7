"""What `--backend nccl` with 2 local ranks is refused with on this host (issue 20: the
suite also runs on the one-GPU device machine, where the refusal names the count)."""
from __future__ import annotations

import pytest
import torch


def nccl_refusal_for_two_ranks() -> str:
    """The words of the one-line error; skips where this host can run 2 NCCL ranks."""
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if found >= 2:
        pytest.skip(f"{found} GPUs here: 2 NCCL ranks are not bad input")
    return "nccl needs CUDA GPUs" if found == 0 else "nccl needs 2 GPUs on this host"
