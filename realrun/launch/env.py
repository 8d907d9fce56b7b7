"""Was this process started by torchrun? The one check, and the environment a rank realrun
spawns starts from; importable without torch.

    >>> is_torchrun({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "node0"})
    True
"""
from __future__ import annotations

import os
import sys

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR")


def is_torchrun(environ=None) -> bool:
    """True when torchrun (or a launcher setting its variables) started this process."""
    environ = os.environ if environ is None else environ
    return all(name in environ for name in TORCHRUN_VARS)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: taskset, a cgroup's cpuset), else the
    machine's count. A CPU quota (cgroup cpu.max) is not counted."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def ranks_on_this_cpu(world_size: int, environ=None) -> int:
    """How many ranks share this process's CPU: all of them when realrun spawned the ranks
    (``REALRUN_PARENT_PID``; emulated hosts are namespaces on one machine too), else
    torchrun's ``LOCAL_WORLD_SIZE``.

    >>> ranks_on_this_cpu(4, {"REALRUN_PARENT_PID": "1", "LOCAL_WORLD_SIZE": "1"})
    4
    >>> ranks_on_this_cpu(16, {"LOCAL_WORLD_SIZE": "8"})
    8
    """
    environ = os.environ if environ is None else environ
    if "REALRUN_PARENT_PID" in environ:
        return world_size
    return int(environ.get("LOCAL_WORLD_SIZE", world_size))


def spawn_env(threads_per_rank: int, emulated: bool = False) -> dict[str, str]:
    """What every rank realrun spawns starts from: this environment, sys.path as PYTHONPATH
    (children import what the parent can), intra-op threads pinned, ``REALRUN_PARENT_PID``,
    and unless ``emulated`` Gloo on loopback, the one interface sure to reach every rank."""
    threads = str(threads_per_rank)
    env = dict(os.environ)
    paths = [os.path.abspath(p or ".") for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads,
               REALRUN_PARENT_PID=str(os.getpid()))
    if not emulated:
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return env
