"""Was this process started by torchrun? The one check, importable without torch.

    >>> is_torchrun({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "node0"})
    True
"""
from __future__ import annotations

import os

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR")


def is_torchrun(environ=None) -> bool:
    """True when torchrun (or a launcher setting its variables) started this process."""
    environ = os.environ if environ is None else environ
    return all(name in environ for name in TORCHRUN_VARS)
