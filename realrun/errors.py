"""Failure handling for a world of rank processes: notice the first failure, name the rank
in one line, and leave no process behind.

    from realrun.launch import run_world, LaunchError
    try:
        run_world("tests._launch_targets:raise_on_rank", {"rank": 1}, world_size=2)
    except LaunchError as e:
        print(e)        # rank 1 failed: ValueError: boom on rank 1

How the culprit is found: each worker writes its exception (one line, wall time, whether it
was a timeout) to error-<rank>.json and exits 1; the parent polls its children. After the
first failure it waits _GRACE_S for the peers' follow-on errors, then sorts what it has:
- *primary* events are a rank's own error, or a death without a file (os._exit, a signal, a
  crash), dated by the last poll that saw it alive; the earliest primary is blamed.
- *secondary* events only report another rank's trouble: timeouts, "connection reset/closed
  by peer", and SIGABRT (NCCL's watchdog aborts a rank whose collective timed out). They are
  never blamed while a primary exists, since a dead rank's sockets can close before the
  parent can see the death. With only secondaries, a rank still running is the one that hung.
Then every rank's process group is SIGKILLed.

Also here: NetnsUnavailable (no root, no `ip`: tests turn it into a skip with its reason) and
`sigterm_as_interrupt`, which makes SIGTERM unwind the stack like Ctrl-C so that `finally`
blocks kill child processes and delete network namespaces.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

# Long enough for gloo's "Read error [10.71.0.2]:40836: Connection reset by peer. This is ..."
_MESSAGE_LIMIT_CHARS = 400
_CXX_LOCATION_RE = re.compile(r"^\[[^\]\s]+\.(?:cc|cpp|h|hpp):\d+\]\s*")
_POLL_S = 0.05  # the parent looks at its children 20 times a second: cheap, far below timeouts
# After a first failure, peers notice the closed sockets within milliseconds; 1 s lets their
# errors land so the earliest one can be picked, and bounds how long a hung rank is waited for.
_GRACE_S = 1.0
_KILL_WAIT_S = 5.0  # SIGKILL is not ignorable; this only bounds waiting for the kernel to reap


class LaunchError(RuntimeError):
    """A rank raised, died or hung; str(e) is one line: "rank 1 failed: ValueError: boom".

    `e.rank` is the rank blamed (None if unknown) and `e.traceback` its Python traceback
    when it raised one (for a --verbose flag; the one line is what users read first).
    """

    def __init__(self, message: str, *, rank: int | None = None, traceback: str = "") -> None:
        super().__init__(message)
        self.rank = rank
        self.traceback = traceback


class PortTaken(RuntimeError):
    """Rank 0 could not bind the master port the parent found free; the caller retries."""


class NetnsUnavailable(RuntimeError):
    """Network namespaces can't be made here (not root, not Linux, no `ip`); str(e) says why."""


def one_line(text: str, limit_chars: int = _MESSAGE_LIMIT_CHARS) -> str:
    """Collapse whitespace and newlines and cut to `limit_chars`, so a message fits one line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit_chars else flat[: limit_chars - 3] + "..."


def describe_exception(exc: BaseException) -> str:
    """'ValueError: boom' -- the type name and the message on one line, without the C++
    source location gloo puts first ("[.../gloo/transport/tcp/pair.cc:537] ")."""
    message = one_line(_CXX_LOCATION_RE.sub("", str(exc).lstrip()))
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def is_timeout(exc: BaseException) -> bool:
    """True for errors that mean "a peer didn't answer in time" rather than a bug of this rank.

    Gloo says "Timed out waiting 5000ms for recv operation"; the TCP store raises
    DistStoreError "Timed out after 5 seconds waiting for clients"; NCCL's watchdog says
    "Watchdog caught collective operation timeout".
    """
    if isinstance(exc, TimeoutError):
        return True
    # Phrases, not the bare word: a user's ValueError("bad timeout_s") is this rank's own bug.
    text = str(exc).lower()
    return any(phrase in text for phrase in ("timed out", "timing out", "operation timeout"))


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt so cleanup in `finally` runs.

    Python's default for SIGTERM is to die at once, skipping `finally`; that would leave
    rank processes and namespaces behind. Signal handlers can only be set from the main
    thread, so elsewhere this does nothing (the caller's own handling applies).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"received {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        # signal.signal returns None when the old handler was set outside Python.
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def error_path(workdir: Path, rank: int) -> Path:
    return workdir / f"error-{rank}.json"


def result_path(workdir: Path, rank: int) -> Path:
    return workdir / f"result-{rank}.json"


def write_error(workdir: Path, rank: int, exc: BaseException) -> None:
    """Called by a failing worker: record its error for the parent (atomically, via rename)."""
    record = {"message": describe_exception(exc), "time": time.time(), "timeout": is_timeout(exc),
              "traceback": "".join(traceback.format_exception(exc))}
    tmp = workdir / f".error-{rank}.tmp"
    tmp.write_text(json.dumps(record))
    os.replace(tmp, error_path(workdir, rank))


def watch(procs: list[subprocess.Popen], workdir: Path, timeout_s: float) -> None:
    """Return when every rank exited 0; else raise LaunchError (or PortTaken) naming one rank.

    Also catches a rank still running timeout_s + _GRACE_S after another finished cleanly,
    since ranks end with a barrier and so finish together.
    """
    last_alive_time = [time.time()] * len(procs)
    first_failure_s = first_success_s = None
    while True:
        now_wall, now_s = time.time(), time.monotonic()
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code is None:
                last_alive_time[rank] = now_wall
        if all(code == 0 for code in codes):
            return
        if any(code not in (None, 0) for code in codes):
            first_failure_s = first_failure_s or now_s
            if None not in codes or now_s - first_failure_s >= _GRACE_S:
                break
        elif 0 in codes:
            first_success_s = first_success_s or now_s
            if now_s - first_success_s >= timeout_s + _GRACE_S:
                break
        time.sleep(_POLL_S)
    raise _blame(codes, last_alive_time, workdir, timeout_s)


def kill_all(procs: list[subprocess.Popen]) -> None:
    """SIGKILL each rank's process group (the rank and anything it started), then reap."""
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # group already gone
    for proc in procs:
        try:
            proc.wait(timeout=_KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            pass


def clear_rank_files(workdir: Path) -> None:
    for path in list(workdir.glob("error-*.json")) + list(workdir.glob("result-*.json")):
        path.unlink(missing_ok=True)


def is_peer_loss(message: str) -> bool:
    """Errors that a rank raises because a peer went away, e.g. gloo's
    "Connection closed by peer [10.71.0.2]:41234" or the store's "Connection reset by peer"."""
    text = message.lower()
    return any(phrase in text for phrase in (
        "closed by peer", "reset by peer", "broken pipe", "connection refused"))


def _blame(codes: list, last_alive_time: list[float], workdir: Path,
           timeout_s: float) -> Exception:
    alive = [rank for rank, code in enumerate(codes) if code is None]
    primary, secondary = [], []  # (time, rank, message, is_timeout, traceback)
    for rank, code in enumerate(codes):
        if code is None or (code == 0 and result_path(workdir, rank).exists()):
            continue
        try:
            record = json.loads(error_path(workdir, rank).read_text())
            event = (record["time"], rank, record["message"], record["timeout"],
                     record.get("traceback", ""))
            follow_on = event[3] or is_peer_loss(event[2])
        except (OSError, ValueError, KeyError):
            event = (last_alive_time[rank], rank, _describe_exit(code), code == -signal.SIGABRT, "")
            follow_on = code == -signal.SIGABRT
        (secondary if follow_on else primary).append(event)
    also = (f" (also still running: ranks {', '.join(map(str, alive[1:]))})"
            if len(alive) > 1 else "")
    if primary:
        _, rank, message, _, trace = min(primary)
        lowered = message.lower()
        if rank == 0 and ("address already in use" in lowered or "eaddrinuse" in lowered):
            return PortTaken(message)
        return LaunchError(f"rank {rank} failed: {message}", rank=rank, traceback=trace)
    if not secondary:
        done = [rank for rank, code in enumerate(codes) if code == 0]
        return LaunchError(f"rank {alive[0]} failed: stuck, still running {timeout_s:g} s "
                           f"after rank {done[0]} finished{also}", rank=alive[0])
    _, rank, message, timed_out, trace = min(secondary)
    if timed_out and alive:
        return LaunchError(f"rank {alive[0]} failed: stuck, no reply within timeout_s="
                           f"{timeout_s:g} s (rank {rank} gave up waiting: {message}){also}",
                           rank=alive[0])
    return LaunchError(f"rank {rank} failed: {message}", rank=rank, traceback=trace)


def _describe_exit(code: int) -> str:
    if code == 0:
        return "exited with code 0 before returning a value (os._exit(0) in the target?)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return (f"exited with code {code} without a Python error (os._exit, a crash or a failed "
            "start; see its stderr)")
