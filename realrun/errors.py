"""How a failure travels from a rank to the caller: as one line that names the rank.

    from realrun.launch import run_world, LaunchError
    try:
        run_world("tests._launch_targets:raise_on_rank", {"rank": 1}, world_size=2)
    except LaunchError as e:
        print(e)        # rank 1 failed: ValueError: boom on rank 1

Also here: NetnsUnavailable (no root, no `ip`: tests turn it into a skip with its reason) and
`sigterm_as_interrupt`, which makes SIGTERM unwind the stack like Ctrl-C so that `finally`
blocks kill child processes and delete network namespaces.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

_MESSAGE_LIMIT_CHARS = 400  # long enough for gloo's "[file:line] Timed out waiting 5000ms ..." lines


class LaunchError(RuntimeError):
    """A rank raised, died or hung; str(e) is one line: "rank 1 failed: ValueError: boom"."""


class NetnsUnavailable(RuntimeError):
    """Network namespaces can't be made here (not root, not Linux, no `ip`); str(e) says why."""


def one_line(text: str, limit_chars: int = _MESSAGE_LIMIT_CHARS) -> str:
    """Collapse whitespace and newlines and cut to `limit_chars`, so a message fits one line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit_chars else flat[: limit_chars - 3] + "..."


def describe_exception(exc: BaseException) -> str:
    """'ValueError: boom' -- the type name and the first lines of the message, on one line."""
    message = one_line(str(exc))
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def is_timeout(exc: BaseException) -> bool:
    """True for errors that mean "a peer didn't answer in time" rather than a bug of this rank.

    Gloo says "Timed out waiting 5000ms for recv operation"; the TCP store raises
    DistStoreError "Timed out after 5 seconds waiting for clients"; NCCL's watchdog says
    "Watchdog caught collective operation timeout".
    """
    if isinstance(exc, TimeoutError):
        return True
    text = f"{type(exc).__name__} {exc}".lower()
    return "timed out" in text or "timeout" in text


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
