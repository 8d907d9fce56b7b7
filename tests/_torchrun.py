"""Run a command under torchrun (2 local ranks) and judge it the one way every test does.

    done = torchrun(["-m", "realrun", "validate", ...], cwd=tmp_path, timeout_s=240)
    # done.returncode == 0 was asserted; done.stdout holds what the ranks printed

Every torchrun entry point here ends with realrun.launch.finish_torchrun (barrier, flush,
os._exit), so torch 2.13's Gloo cannot abort a rank in teardown after a successful run:
exit code 0 is required, with no tolerance for SIGABRT / exit -6 (issue 23 item 3).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def torchrun(args: list[str], *, cwd: Path | str = ROOT, timeout_s: float = 240,
             nproc: int = 2) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --standalone --nproc-per-node <nproc> <args>``, with
    the repository first on PYTHONPATH and Gloo on loopback; asserts it exited 0."""
    env = {k: v for k, v in os.environ.items() if k not in _TORCHRUN_VARS}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # --standalone: a free port for the rendezvous, not 29500, which other runs may hold
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", str(nproc), *args]
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout_s)
    # the ranks' own one-line errors come before torchrun's long ChildFailedError report,
    # which would push them out of the message's last 2000 characters
    said = [line for line in done.stderr.splitlines() if "error" in line.lower()
            and "ChildFailedError" not in line and "errors/__init__" not in line][:10]
    assert done.returncode == 0, (f"torchrun exited {done.returncode}\n"
                                  f"the ranks said: {said}\n"
                                  f"{done.stdout[-1000:]}\n{done.stderr[-2000:]}")
    return done
