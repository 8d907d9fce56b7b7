"""realrun.launch's verdicts: which rank a failed or hung job names, from the ranks' exit codes
and error records (supervise._blame), and how an error reads in one line (errors)."""
from __future__ import annotations

import json
import signal
from pathlib import Path

from realrun.launch import errors, supervise
from tests._messages import assert_names


def _error_file(workdir: Path, rank: int, time_s: float, message: str, timeout: bool) -> None:
    record = {"message": message, "time": time_s, "timeout": timeout}
    supervise.error_path(workdir, rank).write_text(json.dumps(record))


def test_blame_a_silent_death_before_the_peer_error_it_caused(tmp_path):
    # Rank 1 exited 3. Its sockets closed before the parent could see the exit, so rank 0's
    # error (9.99) is dated before rank 1 was last seen alive (10.0); rank 1 is still the cause.
    _error_file(tmp_path, 0, 9.99, "RuntimeError: Connection closed by peer [10.0.0.2]:1", False)
    e = supervise._blame([1, 3], [10.05, 10.0], tmp_path, timeout_s=5)
    assert (e.rank, e.traceback) == (1, "")    # no Python error of its own
    assert_names(str(e), "3")                  # its exit code


def test_blame_the_earliest_own_error_not_follow_on_errors(tmp_path):
    _error_file(tmp_path, 0, 10.2, "ValueError: also bad", False)
    _error_file(tmp_path, 1, 10.0, "RuntimeError: Connection reset by peer", False)
    _error_file(tmp_path, 2, 10.1, "ValueError: boom", False)
    e = supervise._blame([1, 1, 1], [10.3, 10.3, 10.3], tmp_path, timeout_s=5)
    assert (str(e), e.rank) == ("rank 2 failed: ValueError: boom", 2)


def test_blame_the_rank_still_running_when_a_peer_timed_out(tmp_path):
    _error_file(tmp_path, 0, 15.0, "RuntimeError: Timed out waiting 5000ms for recv", True)
    e = supervise._blame([1, None, None], [15.0, 16.0, 16.0], tmp_path, timeout_s=5)
    assert str(e) == ("rank 1 failed: stuck, no reply within timeout_s=5 s (rank 0 gave up "
                      "waiting: RuntimeError: Timed out waiting 5000ms for recv) "
                      "(also still running: ranks 2)")
    # NCCL's watchdog aborts the waiting rank instead of raising: same verdict.
    supervise.error_path(tmp_path, 0).unlink()
    e = supervise._blame([-signal.SIGABRT, None], [15.0, 16.0], tmp_path, timeout_s=5,
                         backend="nccl")
    assert str(e) == ("rank 1 failed: stuck, no reply within timeout_s=5 s (rank 0 gave up "
                      "waiting: killed by SIGABRT)")


def test_blame_the_hung_rank_when_a_peer_loss_was_written_before_the_timeout(tmp_path):
    # Four ranks on two emulated hosts, rank 3 hung (tests/realrun/test_netns.py): rank 1
    # timed out and closed its sockets; rank 0's "closed by peer" got stamped first (2026-11-26).
    _error_file(tmp_path, 0, 15.01, "RuntimeError: Connection closed by peer [10.82.137.1]:1",
                False)
    _error_file(tmp_path, 1, 15.02, "RuntimeError: Timed out waiting 5000ms for recv", True)
    _error_file(tmp_path, 2, 15.03, "RuntimeError: Timed out waiting 5000ms for send", True)
    e = supervise._blame([1, 1, 1, None], [15.0, 15.0, 15.0, 16.0], tmp_path, timeout_s=5)
    assert (str(e), e.rank) == ("rank 3 failed: stuck, no reply within timeout_s=5 s (rank 1 "
                                "gave up waiting: RuntimeError: Timed out waiting 5000ms for "
                                "recv)", 3)


def test_blame_a_gloo_abort_before_reporting_not_one_after(tmp_path):
    # Gloo has no watchdog: a SIGABRT before the result is the rank's own crash...
    e = supervise._blame([-signal.SIGABRT, None], [15.0, 16.0], tmp_path, timeout_s=5)
    assert (str(e), e.rank) == ("rank 0 failed: killed by SIGABRT", 0)
    # ...and after it (torch 2.13's Gloo aborting in teardown) no failure at all: rank 1,
    # which never reported, is the one blamed.
    supervise.result_path(tmp_path, 0).write_text("0")
    e = supervise._blame([-signal.SIGABRT, 1], [15.0, 16.0], tmp_path, timeout_s=5)
    assert e.rank == 1 and "SIGABRT" not in str(e)


def test_blame_a_signal_and_a_straggler(tmp_path):
    assert str(supervise._blame([-9, 1], [3.0, 4.0], tmp_path, 5)) == (
        "rank 0 failed: killed by SIGKILL")
    # Rank 0 left without a value (os._exit(0)) while rank 1 kept running.
    assert str(supervise._blame([0, None], [3.0, 9.0], tmp_path, 5)) == (
        "rank 0 failed: exited with code 0 before returning a value (os._exit(0) in the target?)")
    supervise.result_path(tmp_path, 0).write_text("1")
    assert str(supervise._blame([0, None], [3.0, 9.0], tmp_path, 5)) == (
        "rank 1 failed: stuck, still running 5 s after rank 0 finished")


def test_is_timeout_and_one_line():
    assert errors.is_timeout(RuntimeError("[x.cc:78] Timed out waiting 5000ms for recv"))
    assert errors.is_timeout(RuntimeError("Watchdog caught collective operation timeout: ..."))
    assert not errors.is_timeout(ValueError("timeout_s=-1 is not a timeout"))
    assert errors.describe_exception(ValueError("a\n  b")) == "ValueError: a b"
    gloo = RuntimeError("[/__w/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read "
                        "error [127.0.0.1]:40836: Connection reset by peer.")
    assert errors.describe_exception(gloo) == (
        "RuntimeError: Read error [127.0.0.1]:40836: Connection reset by peer.")
