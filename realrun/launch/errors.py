"""The errors of a world of rank processes, each one line a user can read.

    from realrun.launch import run_world, LaunchError
    try:
        run_world("tests._launch_targets:raise_on_rank", {"rank": 1}, world_size=2)
    except LaunchError as e:
        print(e)        # rank 1 failed: ValueError: boom on rank 1

:class:`LaunchError` (a rank raised, died or hung), :class:`PortTaken` (the launcher retries),
:class:`NetnsUnavailable` (no root or no ``ip``: tests turn it into a skip with its reason),
and the helpers that make an exception one line and tell a peer's trouble from a rank's own.
Who gets blamed, and how ranks are stopped, is :mod:`realrun.launch.supervise`.
"""
from __future__ import annotations

import re

# Long enough for gloo's "Read error [10.71.0.2]:40836: Connection reset by peer. This is ..."
_MESSAGE_LIMIT_CHARS = 400
_CXX_LOCATION_RE = re.compile(r"^\[[^\]\s]+\.(?:cc|cpp|h|hpp):\d+\]\s*")


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


def is_peer_loss(message: str) -> bool:
    """Errors that a rank raises because a peer went away, e.g. gloo's
    "Connection closed by peer [10.71.0.2]:41234" or the store's "Connection reset by peer"."""
    text = message.lower()
    return any(phrase in text for phrase in (
        "closed by peer", "reset by peer", "broken pipe", "connection refused"))
