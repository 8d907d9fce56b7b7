"""End a torchrun rank's process once its work is done, without the teardown that can abort.

    code = run_my_command()          # every rank; rank 0 printed and wrote its files
    finish_torchrun(code)            # under torchrun: barrier, flush, os._exit(code)
    return code                      # reached only outside torchrun

torch 2.13's Gloo sometimes aborts a process in teardown, after the work is done, and
torchrun can only read exit codes, so every torchrun entry point ends here: the process group
is left as it is (docs/REALRUN.md, Use it in your training script). Importable without torch.
"""
from __future__ import annotations

import os
import sys

from realrun.launch.env import is_torchrun


def finish_torchrun(code: int = 0) -> None:
    """Under torchrun, end this process now with exit ``code``; outside it, return at once.
    With ``code == 0`` and a group up, wait at a barrier first (a failed one makes the code 1,
    with one line on stderr); a failing code skips it, as torchrun's agent stops the others."""
    if not is_torchrun():
        return
    if code == 0:
        code = _barrier_if_grouped()
    exit_now(code)


def exit_now(code: int) -> None:
    """Flush stdout and stderr, then ``os._exit(code)``, skipping the interpreter's slow
    teardown (docs/FINDINGS.md#what-a-world-costs-before-its-first-step): no project code
    registers atexit handlers, and ``finally`` blocks have already cleaned up."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed (`| head`) or detached: nothing more to say
            pass
    os._exit(code)


def _barrier_if_grouped() -> int:
    dist = sys.modules.get("torch.distributed")  # never imported: no group to wait on
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return 0
    try:
        if dist.get_backend() == "nccl":
            import torch
            dist.barrier(device_ids=[torch.cuda.current_device()])  # else NCCL guesses
        else:
            dist.barrier()
    except Exception as e:  # a peer died or hung: this rank's work is done, the job's is not
        print(f"rank {os.environ.get('RANK', '?')}: the final barrier failed: "
              f"{str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 1
    return 0
