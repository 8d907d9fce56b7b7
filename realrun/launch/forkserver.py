"""Rank processes forked from a server that has imported torch once, instead of each rank
starting a fresh interpreter that imports it again.

    server = fork_server(env)            # started on first use, kept for later worlds
    proc = server.start_rank(workdir, env, stdout_fd, stderr_fd)  # a forked
    proc.poll(); proc.wait(timeout=5)    # realrun.launch.worker.main(workdir), Popen-like

A fresh rank spends seconds importing torch and torch._dynamo in every world; a forked one
is ready at once (docs/FINDINGS.md#what-a-world-costs-before-its-first-step; docs/REALRUN.md,
Worlds, says which worlds fork). Each forked rank runs :func:`realrun.launch.worker.main` as a
spawned one does, with its own session, environment, directory, ``sys.path`` and streams.
One server per launcher and environment (some variables are read when torch loads). With a
command's ``--module FILE.py:FN`` the server forks a child that imports that file too; a
child whose import failed or started a thread (a fork beside a thread may inherit a held
lock) declines, and the plain server forks the ranks. No orphans: server and ranks ask for
SIGKILL when their parent dies (PR_SET_PDEATHSIG).

Protocol, one AF_UNIX SOCK_SEQPACKET message each: the server says ``{"ready": pid}`` once
its imports are in; the launcher sends ``{"workdir", "env", "cwd", "sys_path"}`` with the
rank's stdout and stderr descriptors; the server answers ``{"pid": n}``, later ``{"exit": n,
"code": c}`` (``c`` as Popen.returncode). ``{"preload": "FILE.py:FN"}`` with one end of a new
socket pair forks the child, which speaks the same protocol there (``{"error": why}`` when it
cannot serve). The server's side is :mod:`realrun.launch.forkserver_process`.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

# What every rank imports before its target runs: torch, its process groups, torch._dynamo
# (the first optimizer imports it) and the worker's own modules.
PRELOAD = ("torch", "torch.distributed", "torch._dynamo", "realrun.launch.run",
           "realrun.launch.finish")
# Not part of the environment a server is chosen by: set per rank by the launcher; PYTHONPATH,
# which a forked rank gets with its request (module_files checks the preloaded files); what only
# a shell or pytest reads; and TORCHINDUCTOR_CACHE_DIR, which importing torch._dynamo sets in
# the command itself (docs/FINDINGS.md#what-a-world-costs-before-its-first-step).
NOT_THE_SERVERS = frozenset({"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                             "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH", "PWD", "OLDPWD",
                             "PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR"})
_READY_TIMEOUT_S = 300.0  # importing torch on a slow disk; a rank would wait as long
MESSAGE_BYTES = 1 << 20   # the largest message either end reads
_POLL_S = 0.01  # how often a launcher waiting on a rank's exit looks again


def enabled() -> bool:
    """Whether forking ranks is on (REALRUN_FORKSERVER=0 turns it off)."""
    return os.environ.get("REALRUN_FORKSERVER", "1") != "0" and sys.platform.startswith("linux")


class ServerGone(RuntimeError):
    """The server could not be started, or stopped answering."""


class ForkedRank:
    """A rank forked by the server: the part of subprocess.Popen that the supervision uses
    (``pid``, ``poll()``, ``wait(timeout)``, ``returncode``)."""

    def __init__(self, server: "ForkServer", pid: int):
        self.server, self.pid, self.returncode = server, pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"forked rank {self.pid}", timeout)
            time.sleep(_POLL_S)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass


class ForkServer:
    """The launcher's end of one server process: started by the launcher (:meth:`spawn`), or
    forked by another server after importing the user's module too (:meth:`preloading`)."""

    def __init__(self, sock: socket.socket, proc, parent: "ForkServer | None" = None):
        self.sock, self.lock, self.exits = sock, threading.Lock(), {}
        # a Popen, or for a forked server a ForkedRank of its parent once it said ready
        self.proc, self.parent = proc, parent
        self.modules: dict | None = None  # what it preloaded, once it said it is ready

    @classmethod
    def spawn(cls, env: dict[str, str]) -> "ForkServer":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "realrun.launch.worker", "--fork-server",
                 str(theirs.fileno()), str(os.getpid())],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
        return cls(ours, proc)

    def preloading(self, user_module: str) -> "ForkServer":
        """A server this one forks, which imports ``user_module`` before it says ready (or
        says why it cannot); the request is queued, nothing waits here."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self.lock:
                socket.send_fds(self.sock, [json.dumps({"preload": user_module}).encode()],
                                [theirs.fileno()])
        except OSError as e:
            ours.close()
            raise ServerGone(f"the fork server stopped: {e}") from None
        finally:
            theirs.close()
        return ForkServer(ours, None, parent=self)

    def wait_ready(self) -> None:
        """Return once the server has imported PRELOAD; ServerGone if it never does."""
        if self.modules is not None:
            return
        try:
            ready = self._receive(_READY_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        if "ready" not in ready:
            self.close()
            raise ServerGone(f"the fork server did not start: {ready.get('error', ready)}")
        self.modules = ready["modules"]
        if self.proc is None:   # forked by self.parent, which reaps it
            self.proc = ForkedRank(self.parent, ready["ready"])

    def alive(self) -> bool:
        if self.proc is None:   # a forked one that has not said ready: while its parent lives
            return self.parent.alive()
        return self.proc.poll() is None

    def start_rank(self, workdir: Path, env: dict[str, str], stdout_fd: int,
                   stderr_fd: int) -> ForkedRank:
        request = json.dumps({"workdir": str(workdir), "env": env, "cwd": os.getcwd(),
                              "sys_path": [os.path.abspath(p or ".") for p in sys.path]})
        with self.lock:
            try:
                socket.send_fds(self.sock, [request.encode()], [stdout_fd, stderr_fd])
            except OSError as e:
                raise ServerGone(f"the fork server stopped: {e}") from None
            while True:
                reply = self._receive(_READY_TIMEOUT_S)
                if "pid" in reply:
                    return ForkedRank(self, reply["pid"])

    def exit_code(self, pid: int) -> int | None:
        """The rank's exit code once the server has reaped it, else None. A rank of a server
        that died died with it (its PR_SET_PDEATHSIG): -SIGKILL."""
        with self.lock:
            while True:
                try:
                    self._take(self.sock.recv(MESSAGE_BYTES, socket.MSG_DONTWAIT))
                except OSError:  # BlockingIOError: nothing more for now; else it hung up
                    break
        if pid not in self.exits and not self.alive():
            return -signal.SIGKILL
        return self.exits.pop(pid, None)

    def close(self) -> None:
        self.sock.close()  # the server sees end-of-file, kills what it forked and exits
        if self.proc is None:
            return  # a forked one still importing: its first send fails, and it exits
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def _receive(self, timeout_s: float) -> dict:
        """The next message that is not an exit report (those are kept for exit_code)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise ServerGone(f"the fork server did not answer within {timeout_s:g} s")
            data = self.sock.recv(MESSAGE_BYTES)
            if not data:
                code = None if self.proc is None else self.proc.wait(timeout=5)
                raise ServerGone(f"the fork server exited (code {code})")
            message = self._take(data)
            if message is not None:
                return message

    def _take(self, data: bytes) -> dict | None:
        if not data:
            raise OSError("the fork server hung up")
        message = json.loads(data)
        if "exit" in message:
            self.exits[message["exit"]] = message["code"]
            return None
        return message


# One server at a time (each holds torch's memory): the environment it serves, and it
_current: tuple[tuple, ForkServer] | None = None
# The server it forked for the command's --module: (that module, the forked server)
_preloading: tuple[str, ForkServer] | None = None
# Environments whose server did not start in this process; (environment, module) for the
# forked one of a module
_failed: set[tuple] = set()
_servers_lock = threading.Lock()
_user_module: str | None = None   # the command's --module, as prestart was told it


def serves(backend: str, emulate_hosts: int | None) -> bool:
    """Whether a self-spawned world forks its ranks: Gloo on this host only (an emulated host's
    rank must start inside its namespace; forking is untried on GPUs)."""
    return enabled() and backend == "gloo" and emulate_hosts is None


def prestart(env: dict[str, str], user_module: str | None = None) -> None:
    """Start this environment's server now, without waiting, so it imports torch while the
    command starts up; with ``user_module`` (``--module FILE.py:FN``) the worlds are served by
    a child that imported that file too."""
    global _user_module
    if importlib.util.find_spec("torch") is None:
        return   # the command says it needs torch
    _user_module = _absolute(user_module)
    try:
        fork_server(env, wait=False)
    except (OSError, ServerGone):
        pass  # the first world says why, and starts fresh processes


def fork_server(env: dict[str, str], wait: bool = True) -> ForkServer | None:
    """The server for ranks of this environment, started on first use; ServerGone if it
    cannot start, None once it could not (ranks then start fresh). A child that could not
    preload the --module is silently left for the plain server."""
    key = tuple(sorted((k, v) for k, v in env.items() if k not in NOT_THE_SERVERS))
    with _servers_lock:
        if key in _failed:
            return None
        try:
            server = _server(key, env, wait)
        except ServerGone:
            _failed.add(key)
            raise
        if _user_module is None or (key, _user_module) in _failed:
            _drop_preloading()   # no longer asked for: it holds the module's memory
            return server
        try:
            return _preloaded(server, _user_module, wait)
        except ServerGone:
            _failed.add((key, _user_module))
            return server


def _server(key: tuple, env: dict[str, str], wait: bool) -> ForkServer:
    """The running server of ``key`` if alive and preloaded the files this process would
    import, else a new one (and no other)."""
    global _current
    server = _current[1] if _current is not None and _current[0] == key else None
    if server is not None and server.alive() and server.modules is None and wait:
        server.wait_ready()
    if (server is None or not server.alive()
            or (server.modules is not None and server.modules != module_files())):
        _drop_preloading()
        if _current is not None:
            _current[1].close()
        server = ForkServer.spawn(env)
        _current = (key, server)
    if wait:
        server.wait_ready()
    return server


def _preloaded(server: ForkServer, user_module: str, wait: bool) -> ForkServer:
    """The child ``server`` forked to import ``user_module``, made on first use; one at a time."""
    global _preloading
    if _preloading is not None and (_preloading[1].parent is not server
                                    or _preloading[0] != user_module
                                    or not _preloading[1].alive()):
        _drop_preloading()
    if _preloading is None:
        _preloading = (user_module, server.preloading(user_module))
    child = _preloading[1]
    if wait:
        try:
            child.wait_ready()
        except ServerGone:
            _preloading = None
            raise
    return child


def _drop_preloading() -> None:
    global _preloading
    if _preloading is not None:
        _preloading[1].close()
        _preloading = None


def _absolute(user_module: str | None) -> str | None:
    """``FILE.py:FN`` with FILE made absolute: the server may import it from another directory."""
    if user_module is None:
        return None
    source, sep, fn_name = user_module.rpartition(":")
    return (f"{os.path.abspath(source)}:{fn_name}" if sep and source.endswith(".py")
            else user_module)


def module_files() -> dict[str, str | None]:
    """Where each PRELOAD module is found from this process: a server whose files differ would
    hand its ranks other code than a fresh rank would import."""
    files = {}
    for name in PRELOAD:
        module = sys.modules.get(name)
        spec = module.__spec__ if module is not None else importlib.util.find_spec(name)
        files[name] = spec.origin if spec is not None else None
    return files


def server_pids() -> list[int]:
    """The pids of this process's running fork servers (kept for the next world)."""
    with _servers_lock:
        servers = [s for _, s in filter(None, [_current, _preloading])]
        return [s.proc.pid for s in servers if s.proc is not None and s.alive()]
