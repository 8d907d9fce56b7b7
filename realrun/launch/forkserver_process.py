"""The fork server's own process (realrun/launch/forkserver.py is the launcher's end, and
says why and how): it imports PRELOAD, says ready, then forks ranks, or a child server that
imports a user's --module, one per request, and reports their exits.

    python -m realrun.launch.worker --fork-server FD LAUNCHER_PID    # calls serve()
"""
from __future__ import annotations

import gc
import importlib
import importlib.util
import json
import os
import select
import signal
import socket
import sys
from pathlib import Path

from realrun.launch.forkserver import MESSAGE_BYTES, PRELOAD, module_files
from realrun.launch.supervise import die_with_parent

PRELOADED = "_realrun_preloaded_user_module"  # a user's file while it is preloaded


def serve(fd: int, launcher_pid: int, rank_main) -> None:
    """The server process (``python -m realrun.launch.worker --fork-server FD PID``): import
    PRELOAD, say ready, then fork a rank per request, which runs ``rank_main(workdir)``, until
    the launcher hangs up; then kill every rank still running (they would get SIGKILL from the
    kernel anyway when this process exits: each asked for it)."""
    die_with_parent(launcher_pid)
    sock = socket.socket(fileno=fd)
    try:
        for name in PRELOAD:
            importlib.import_module(name)
    except Exception as e:  # the launcher says it in one line and starts fresh processes
        sock.send(json.dumps({"error": f"importing {name}: {type(e).__name__}: {e}"}).encode())
        return
    _serve(sock, rank_main)


def _serve(sock: socket.socket, rank_main) -> None:
    """Say ready, then fork what each request asks for (a rank, or a server that preloads a
    user's module) until the launcher hangs up."""
    gc.freeze()  # the imports' objects: out of the collector's sight in every rank too
    # Asleep until a request or a rank's exit: SIGCHLD writes a byte to `woken` (no polling)
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    running: set[int] = set()
    try:
        sock.send(json.dumps({"ready": os.getpid(), "modules": module_files()}).encode())
        while True:
            _reap(sock, running)
            readable = select.select([sock, woken], [], [])[0]
            if woken in readable:
                os.read(woken, 4096)
            if sock not in readable:
                continue
            data, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 2)
            if not data:
                return
            request, servers = json.loads(data), (sock, woken, wake)
            try:
                if "preload" in request:  # it says ready (or why not) on its own socket
                    running.add(_fork(servers, lambda: _preloading_server(
                        request["preload"], fds[0], rank_main)))
                    continue
                pid = _fork(servers, lambda: _run_rank(request, fds, rank_main))
            finally:
                for fd in fds:
                    os.close(fd)
            running.add(pid)
            sock.send(json.dumps({"pid": pid}).encode())
    except OSError:
        return   # the launcher is gone
    finally:
        for pid in running:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def _preloading_server(user_module: str, fd: int, rank_main) -> None:
    """In a forked child: import the user's module, then serve on socket ``fd`` as the
    server does (or say why not, and end)."""
    sock = socket.socket(fileno=fd)
    refused = _preload_user_module(user_module)
    if refused:
        try:
            sock.send(json.dumps({"error": refused}).encode())
        except OSError:
            pass   # the launcher no longer asks
        return
    _serve(sock, rank_main)


def _preload_user_module(target: str) -> str | None:
    """Import the user's ``FILE.py:FN`` (or ``package.module:FN``) for what it imports, then
    forget the module itself, so each rank still runs its top level as a fresh rank would
    (realrun.workload.load_fn); this process's stdout and stderr are muted meanwhile (the
    command's own check already showed what it prints). Why it cannot be preloaded, else
    None."""
    source = target.rpartition(":")[0]
    threads = _thread_count()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        if source.endswith(".py"):
            spec = importlib.util.spec_from_file_location(PRELOADED, source)
            module = importlib.util.module_from_spec(spec)
            sys.modules[PRELOADED] = module   # dataclasses look their module up by name
            spec.loader.exec_module(module)
        else:
            importlib.import_module(source)
    except Exception as e:  # noqa: BLE001 - the ranks import it themselves and say why
        return f"importing {target}: {type(e).__name__}: {e}"
    finally:
        sys.modules.pop(PRELOADED if source.endswith(".py") else source, None)
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)
    started = _thread_count() - threads
    if started > 0:
        return f"importing {target} started {started} thread(s); a fork beside them is unsafe"
    return None


def _thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def _reap(sock: socket.socket, running: set[int]) -> None:
    while running:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        running.discard(pid)
        sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


def _fork(servers: tuple, child_main) -> int:
    """Fork a child that runs ``child_main()`` and ends; return its pid once it leads its
    own session (so the launcher can kill its process group from the first moment).
    ``servers``: the server's own socket and wake-up pipe, which the child closes."""
    server_pid = os.getpid()
    started_r, started_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(started_r)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            sock, woken, wake = servers
            sock.close()
            os.close(woken)
            os.close(wake)
            os.setsid()  # its own process group: the launcher kills the rank's whole group
            die_with_parent(server_pid)
            os.close(started_w)
            child_main()
            os._exit(0)
        except BaseException:  # noqa: BLE001 - nothing above a rank may run on
            import traceback
            traceback.print_exc()
        os._exit(1)
    os.close(started_w)
    os.read(started_r, 1)  # end-of-file once the rank closed its end: it has its session
    os.close(started_r)
    return pid


def _run_rank(request: dict, fds: list[int], rank_main) -> None:
    _become_rank(request, fds)
    rank_main(Path(request["workdir"]))   # ends the process


def _become_rank(request: dict, fds: list[int]) -> None:
    """In the forked child: the streams, environment, directory and path a spawned rank would
    have."""
    stdout_fd, stderr_fd = fds
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    for fd in (devnull, stdout_fd, stderr_fd):
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[:] = request["sys_path"]
    sys.argv = [sys.executable, "-m", "realrun.launch.worker", request["workdir"]]
