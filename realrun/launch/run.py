"""Start a torch.distributed world and call one function on every rank.

    from realrun.launch import run_world
    values = run_world("tests._launch_targets:allreduce_rank", {"n": 4}, world_size=2)
    # values[r] is what rank r's function returned; fn(payload, ctx) runs after init_process_group

The environment picks the mode:

    python script.py                                   # self-spawn: run_world starts world_size
                                                       # `python -m realrun.launch.worker`s
    torchrun --nproc-per-node 2 script.py              # torchrun: ranks exist already; rank 0
    torchrun --nnodes 2 --nproc-per-node 8 \\           # gets the list, other ranks get None
        --rdzv-endpoint HOST:29500 script.py

Under torchrun the process group stays up (a later call reuses it); end the script with
``finish_torchrun(code)`` (realrun.launch.finish). Self-spawn with ``emulate_hosts=2,
link_gbit=1.0`` puts the ranks in 2 network namespaces behind shaped links, host-major. A rank
that raises, dies or hangs ends the job with a one-line LaunchError naming it
(realrun.launch.supervise); no rank process outlives run_world.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist

from realrun.launch import forkserver
from realrun.launch.context import RankContext, init_group, make_context, require_gpus
from realrun.launch.env import is_torchrun, spawn_env
from realrun.launch.errors import LaunchError, PortTaken, describe_exception
from realrun.launch.netns import Cluster, bind_free_port, emulated_cluster
from realrun.launch.supervise import (clear_rank_files, kill_all, pid_alive, result_path,
                                      sigterm_as_interrupt, watch)
from realrun.launch.world import BACKENDS

_TARGET_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
_PORT_ATTEMPTS = 3  # the port found free by the parent can be taken before rank 0 binds it


def resolve_target(target: str) -> Callable[[dict, RankContext], Any]:
    """'package.module:function' -> the function; ValueError saying what is wrong otherwise."""
    if not isinstance(target, str) or not _TARGET_RE.match(target):
        raise ValueError(f"target={target!r}: expected 'package.module:function'")
    module_name, fn_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"target={target!r}: cannot import {module_name} "
                         f"({describe_exception(e)})") from e
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise ValueError(f"target={target!r}: {module_name} has no function {fn_name}")
    return fn


def as_json(value: Any) -> Any:
    """The value after a JSON round trip (tuples become lists), so both modes return the same."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as e:
        raise TypeError(f"target must return a JSON-able value; got {type(value).__name__} "
                        f"({e})") from e


def run_world(target: str, payload: dict, *, world_size: int = 2, backend: str = "gloo",
              threads_per_rank: int = 1, timeout_s: float = 60.0,
              emulate_hosts: int | None = None, link_gbit: float | None = None) -> list | None:
    """Call `target(payload, ctx)` on every rank; return all ranks' values, index = rank
    (None on torchrun ranks other than 0). ValueError for bad arguments (before starting
    anything), LaunchError when a rank fails, NetnsUnavailable when emulate_hosts can't be had."""
    _check_args(target, world_size, backend, threads_per_rank, timeout_s, emulate_hosts, link_gbit)
    if is_torchrun():
        if emulate_hosts is not None:
            raise ValueError(f"emulate_hosts={emulate_hosts}: needs self-spawn mode, but "
                             "torchrun already started the ranks; run without torchrun")
        return _run_under_torchrun(target, payload, world_size, backend, threads_per_rank,
                                   timeout_s)
    resolve_target(target)  # fail here, not in world_size children
    if backend == "nccl":
        require_gpus(world_size)
    job = {"target": target, "payload_json": _payload_text(payload), "backend": backend,
           "threads_per_rank": threads_per_rank, "timeout_s": timeout_s}
    with sigterm_as_interrupt():
        if emulate_hosts is None:
            return _spawn_world(job, world_size, None)
        with emulated_cluster(emulate_hosts, link_gbit) as cluster:
            return _spawn_world(job, world_size, cluster)


@contextmanager
def torchrun_group(backend: str, threads_per_rank: int, timeout_s: float) -> Iterator[bool]:
    """Under torchrun, one process group for the whole block (every run_world inside reuses
    it; :func:`share` agrees on values); yields whether this process leads. The group outlives
    the block, to :func:`realrun.launch.finish.finish_torchrun`: a destroy here is where
    torch 2.13's Gloo can abort. Outside torchrun it does nothing."""
    if not is_torchrun() or dist.is_initialized():
        yield not is_torchrun() or dist.get_rank() == 0
        return
    torch.set_num_threads(threads_per_rank)
    ctx = make_context(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]),
                       int(os.environ.get("LOCAL_RANK", "0")), backend)
    init_group(ctx, timeout_s)
    yield ctx.rank == 0
    ctx.barrier()  # finish together


def share(value: Any) -> Any:
    """Rank 0's ``value`` on every rank of the torchrun group; ``value`` itself otherwise."""
    if not (is_torchrun() and dist.is_initialized()):
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _run_under_torchrun(target: str, payload: dict, world_size: int, backend: str,
                        threads_per_rank: int, timeout_s: float) -> list | None:
    env_world = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    if env_world != world_size:
        raise LaunchError(f"torchrun started {env_world} ranks but world_size={world_size} "
                          f"was asked; pass world_size={env_world}")
    payload = json.loads(_payload_text(payload))  # the payload a spawned rank would see
    torch.set_num_threads(threads_per_rank)
    fn = resolve_target(target)
    ctx = make_context(rank, env_world, int(os.environ.get("LOCAL_RANK", "0")), backend)
    if not dist.is_initialized():
        # Left up for later calls and for finish_torchrun: destroying it is where Gloo can abort.
        init_group(ctx, timeout_s)
    try:
        value = as_json(fn(payload, ctx))
    except Exception as e:
        # torchrun's agent sees this process fail and stops the other ranks.
        raise LaunchError(f"rank {rank} failed: {describe_exception(e)}", rank=rank) from e
    values: list = [None] * env_world
    dist.all_gather_object(values, value)
    return values if rank == 0 else None


def _payload_text(payload: dict) -> str:
    try:
        return json.dumps(payload)
    except (TypeError, ValueError) as e:
        raise ValueError(f"payload must be JSON-able: {e}") from e


def _spawn_world(job: dict, world_size: int, cluster: Cluster | None) -> list:
    remove_stale_workdirs()
    workdir = Path(tempfile.mkdtemp(prefix=f"realrun-{os.getpid()}-"))
    try:
        (workdir / "job.json").write_text(json.dumps(job))
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                return _spawn_once(workdir, job, world_size, cluster)
            except PortTaken as e:
                if attempt == _PORT_ATTEMPTS:
                    raise LaunchError(f"rank 0 failed: the master port was taken "
                                      f"{_PORT_ATTEMPTS} times in a row ({e})") from None
                clear_rank_files(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def remove_stale_workdirs(tmp: str | None = None) -> list[Path]:
    """Delete the ``realrun-<launcher pid>-<random>`` folders of launchers that no longer
    exist (killed, no ``finally`` ran); returns the removed."""
    removed = []
    for path in Path(tmp or tempfile.gettempdir()).glob("realrun-*-*"):
        pid = path.name.split("-")[1]
        if not pid.isdigit() or pid_alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _spawn_once(workdir: Path, job: dict, world_size: int, cluster: Cluster | None) -> list:
    if cluster is None:
        master_addr = "127.0.0.1"
        master_port = bind_free_port(master_addr)
    else:
        master_addr, master_port = cluster.hosts[0].ip, cluster.free_port(0)
    procs: list = []
    try:
        for rank in range(world_size):
            env = _rank_env(rank, world_size, master_addr, master_port, job, cluster)
            procs.append(_start_rank(rank, workdir, env, job, cluster, world_size))
        watch(procs, workdir, job["timeout_s"], job["backend"])
        return [_read_result(workdir, rank) for rank in range(world_size)]
    finally:
        kill_all(procs)


def _start_rank(rank: int, workdir: Path, env: dict[str, str], job: dict,
                cluster: Cluster | None, world_size: int):
    """One rank's process, forked from the fork server where it serves, else a fresh
    interpreter. Only rank 0 prints to stdout; every rank leads its own session, so Ctrl-C
    reaches only the parent, which then kills each rank's whole group."""
    if forkserver.serves(job["backend"], None if cluster is None else len(cluster.hosts)):
        try:
            server = forkserver.fork_server(env)
            if server is not None:   # None: it failed earlier in this process, and said why
                with open(os.devnull, "wb") as devnull:
                    return server.start_rank(workdir, env,
                                             1 if rank == 0 else devnull.fileno(), 2)
        except forkserver.ServerGone as e:
            print(f"realrun.launch: {e}; starting the ranks as new processes",
                  file=sys.stderr)
    argv = [sys.executable, "-m", "realrun.launch.worker", str(workdir)]
    if cluster is not None:
        argv = cluster.exec_argv(rank // (world_size // len(cluster.hosts)), argv)
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                            stdout=None if rank == 0 else subprocess.DEVNULL,
                            start_new_session=True)


def _read_result(workdir: Path, rank: int) -> Any:
    try:
        return json.loads(result_path(workdir, rank).read_text())
    except FileNotFoundError:
        raise LaunchError(f"rank {rank} failed: exited with code 0 before returning a value",
                          rank=rank) from None


def _rank_env(rank: int, world_size: int, master_addr: str, master_port: int, job: dict,
              cluster: Cluster | None) -> dict[str, str]:
    env = spawn_env(job["threads_per_rank"], emulated=cluster is not None)
    env.update(RANK=str(rank), WORLD_SIZE=str(world_size), MASTER_ADDR=master_addr,
               MASTER_PORT=str(master_port))
    if cluster is None:
        env.update(LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world_size))
    else:
        # Host-major; a host's ranks share its NIC and reach each other over loopback, unshaped.
        per_host = world_size // len(cluster.hosts)
        env.update(LOCAL_RANK=str(rank % per_host), LOCAL_WORLD_SIZE=str(per_host),
                   **cluster.env(rank // per_host))
        if job["backend"] == "nccl":  # a host sees its ranks' GPUs; cuda:LOCAL_RANK is one
            visible = env.get("CUDA_VISIBLE_DEVICES")
            devices = visible.split(",") if visible else [str(i) for i in range(world_size)]
            first = rank - rank % per_host
            env["CUDA_VISIBLE_DEVICES"] = ",".join(devices[first:first + per_host])
    return env


def _check_args(target: str, world_size: int, backend: str, threads_per_rank: int,
                timeout_s: float, emulate_hosts: int | None, link_gbit: float | None) -> None:
    if not isinstance(target, str) or not _TARGET_RE.match(target):
        raise ValueError(f"target={target!r}: expected 'package.module:function'")
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size={world_size!r}: must be an int >= 1")
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: expected one of {', '.join(BACKENDS)}")
    if not isinstance(threads_per_rank, int) or threads_per_rank < 1:
        raise ValueError(f"threads_per_rank={threads_per_rank!r}: must be an int >= 1")
    if not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s={timeout_s!r}: must be a number of seconds > 0")
    if emulate_hosts is not None and (not isinstance(emulate_hosts, int) or emulate_hosts < 1
                                      or world_size % emulate_hosts):
        raise ValueError(f"emulate_hosts={emulate_hosts!r}: must equal world_size="
                         f"{world_size} or divide it (the same number of ranks on every "
                         "emulated host)")
    if link_gbit is not None:
        if emulate_hosts is None:
            raise ValueError(f"link_gbit={link_gbit!r}: shapes emulated hosts; "
                             "pass emulate_hosts=world_size too")
        if not isinstance(link_gbit, (int, float)) or not link_gbit > 0:
            raise ValueError(f"link_gbit={link_gbit!r}: must be a rate in gbit/s > 0")
