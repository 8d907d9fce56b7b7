"""Supervising a world of rank processes: notice the first failure, name the rank in one
line, and leave no process behind.

A rank is done once it has written result-<rank>.json (after the final barrier): how its
process ends after that does not count, as torch 2.13's Gloo can abort a rank in teardown
after its value is in.

The culprit: a failing worker writes its error (one line, wall time, whether a timeout) to
error-<rank>.json. After the first failure the parent waits _GRACE_S for the peers' errors:
- *primary* events are a rank's own error, or a death without a file, dated by the last poll
  that saw it alive; the earliest primary is blamed.
- *secondary* events only report another rank's trouble: timeouts, a peer's closed
  connection, and on NCCL a watchdog's SIGABRT. They are never blamed while a primary exists
  (a dead rank's sockets can close before its death is seen); with only secondaries, a rank
  still running is the one that hung.
Then every rank's process group is SIGKILLed.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from realrun.launch.errors import (LaunchError, PortTaken, describe_exception, is_peer_loss,
                                   is_timeout)

_POLL_S = 0.05  # the parent polls its children 20 times a second: cheap, far below timeouts
# After a first failure: time for the peers' errors to land, and the wait for a hung rank.
_GRACE_S = 1.0
_KILL_WAIT_S = 5.0  # SIGKILL cannot be ignored; this only bounds waiting for the reaping
_PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>


def die_with_parent(parent_pid: int | None) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies, even by kill -9; exit at
    once if ``parent_pid`` is already gone. Survives `ip netns exec` (it execs, not setuid)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)  # the parent died before prctl took effect


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt, so `finally` blocks kill ranks and
    delete namespaces (a no-op off the main thread, where handlers cannot be set)."""
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


def watch(procs: list[subprocess.Popen], workdir: Path, timeout_s: float,
          backend: str = "gloo") -> None:
    """Return when every rank has reported its result; else raise LaunchError (or PortTaken)
    naming one rank. A rank fails by exiting without a result, or by running on timeout_s +
    _GRACE_S after another reported (ranks end with a barrier, so report together)."""
    last_alive_time = [time.time()] * len(procs)
    first_failure_s = first_report_s = all_reported_s = None
    while True:
        now_wall, now_s = time.time(), time.monotonic()
        codes = [p.poll() for p in procs]
        # Read after polling: a rank writes its result before it exits, so an exited rank
        # that reported is seen as reported.
        reported = [result_path(workdir, rank).exists() for rank in range(len(procs))]
        for rank, code in enumerate(codes):
            if code is None:
                last_alive_time[rank] = now_wall
        if all(reported):
            # Let teardown finish on its own (rank 0 may still be exiting); kill_all ends a
            # rank stuck in it, which cannot undo its result.
            all_reported_s = all_reported_s or now_s
            if None not in codes or now_s - all_reported_s >= _GRACE_S:
                return
        elif any(code is not None and not done for code, done in zip(codes, reported)):
            first_failure_s = first_failure_s or now_s
            if None not in codes or now_s - first_failure_s >= _GRACE_S:
                break
        elif any(reported):
            first_report_s = first_report_s or now_s
            if now_s - first_report_s >= timeout_s + _GRACE_S:
                break
        time.sleep(_POLL_S)
    raise _blame(codes, last_alive_time, workdir, timeout_s, backend)


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


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (anyone's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def clear_rank_files(workdir: Path) -> None:
    for path in list(workdir.glob("error-*.json")) + list(workdir.glob("result-*.json")):
        path.unlink(missing_ok=True)


def _blame(codes: list, last_alive_time: list[float], workdir: Path,
           timeout_s: float, backend: str = "gloo") -> Exception:
    reported = [result_path(workdir, rank).exists() for rank in range(len(codes))]
    alive = [rank for rank, code in enumerate(codes) if code is None and not reported[rank]]
    # Only NCCL's watchdog aborts a rank for a peer's trouble (see the module docstring).
    watchdog = backend == "nccl"
    primary, secondary = [], []  # (time, rank, message, is_timeout, traceback)
    for rank, code in enumerate(codes):
        if code is None or reported[rank]:
            continue  # running, or done: an exit after reporting is no failure
        try:
            record = json.loads(error_path(workdir, rank).read_text())
            event = (record["time"], rank, record["message"], record["timeout"],
                     record.get("traceback", ""))
            follow_on = event[3] or is_peer_loss(event[2])
        except (OSError, ValueError, KeyError):
            follow_on = watchdog and code == -signal.SIGABRT
            event = (last_alive_time[rank], rank, _describe_exit(code), follow_on, "")
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
        done = [rank for rank in range(len(codes)) if reported[rank]]
        return LaunchError(f"rank {alive[0]} failed: stuck, still running {timeout_s:g} s "
                           f"after rank {done[0]} finished{also}", rank=alive[0])
    # A rank that timed out is why its peers lost their connection, even where a peer's
    # error was stamped first.
    timeouts = [e for e in secondary if e[3]]
    if timeouts and alive:
        _, rank, message, _, _ = min(timeouts)
        return LaunchError(f"rank {alive[0]} failed: stuck, no reply within timeout_s="
                           f"{timeout_s:g} s (rank {rank} gave up waiting: {message}){also}",
                           rank=alive[0])
    _, rank, message, _, trace = min(secondary)
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
