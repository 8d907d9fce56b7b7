"""realrun.launch: argument checks (fast), real 2-rank gloo worlds (slow); the blame rules are
tests/realrun/test_blame.py.

    python -m pytest tests/realrun/test_launch.py -q            # all
    python -m pytest tests/realrun/test_launch.py -q -m "not slow"
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import torch

from realrun.launch.errors import LaunchError
from realrun.launch import RankContext, forkserver, make_context, run_world
from realrun.launch.finish import finish_torchrun
from realrun.launch.run import remove_stale_workdirs
from tests._messages import assert_names
from tests._torchrun import torchrun

REPO = Path(__file__).resolve().parents[2]
TARGETS = "tests._launch_targets"
TAG_VAR = "REALRUN_TEST_TAG"  # children inherit it, so /proc tells which processes are ours


# --- fast: no processes ----------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, fragment", [
    ({"world_size": 0}, "world_size=0: must be an int >= 1"),
    ({"backend": "mpi"}, "backend='mpi': expected one of gloo, nccl"),
    ({"threads_per_rank": 0}, "threads_per_rank=0"),
    ({"timeout_s": -1.0}, "timeout_s=-1.0"),
    ({"emulate_hosts": 3}, "emulate_hosts=3: must equal world_size=2"),
    ({"link_gbit": 1.0}, "link_gbit=1.0: shapes emulated hosts"),
    ({"emulate_hosts": 2, "link_gbit": 0.0}, "link_gbit=0.0: must be a rate"),
])
def test_bad_arguments_name_the_value(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")) as info:
        run_world(f"{TARGETS}:allreduce_rank", {}, **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("target, fragment", [
    ("no_colon", "expected 'package.module:function'"),
    ("a.b:c:d", "expected 'package.module:function'"),
    ("tests.no_such_module:fn", "cannot import tests.no_such_module"),
    (f"{TARGETS}:no_such_fn", "has no function no_such_fn"),
])
def test_bad_target_names_it(target, fragment):
    with pytest.raises(ValueError, match=fragment):
        run_world(target, {})


def test_payload_must_be_json():
    with pytest.raises(ValueError, match="payload must be JSON-able"):
        run_world(f"{TARGETS}:allreduce_rank", {"n": object()})


@pytest.mark.skipif(torch.cuda.is_available(), reason="this box has CUDA")
def test_nccl_without_cuda_fails_before_spawning():
    with pytest.raises(ValueError, match="backend nccl needs CUDA GPUs; none found"):
        run_world(f"{TARGETS}:allreduce_rank", {}, backend="nccl")


def test_finish_torchrun_does_nothing_outside_torchrun(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(name, raising=False)
    assert finish_torchrun(3) is None       # returned: the caller exits as usual


def test_finish_torchrun_flushes_and_exits_with_the_code():
    # buffered text with no newline comes out only if flushed before os._exit
    code = ("import sys; from realrun.launch.finish import finish_torchrun; "
            "sys.stdout.write('done'); finish_torchrun(3); print('not reached')")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "RANK": "0",
                                                      "WORLD_SIZE": "1",
                                                      "MASTER_ADDR": "127.0.0.1"})
    assert (done.returncode, done.stdout) == (3, "done"), done.stderr[-2000:]


def test_torchrun_world_mismatch_names_both_sizes(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.raises(LaunchError, match="torchrun started 4 ranks but world_size=2"):
        run_world(f"{TARGETS}:allreduce_rank", {}, world_size=2)
    with pytest.raises(ValueError, match="emulate_hosts=4: needs self-spawn mode"):
        run_world(f"{TARGETS}:allreduce_rank", {}, world_size=4, emulate_hosts=4)


def test_gloo_context_is_cpu_and_synchronize_is_a_no_op():
    ctx = make_context(rank=1, world_size=2, local_rank=1, backend="gloo")
    assert ctx == RankContext(1, 2, 1, "gloo", torch.device("cpu"), ctx.allocator)
    assert ctx.allocator  # says what was done to the host allocator, whatever it was
    ctx.synchronize()


# --- slow: real gloo worlds on this host -----------------------------------------------------

@pytest.fixture
def tag(monkeypatch) -> str:
    """For tests that start a launcher (or torchrun) as a process: a marker in its
    environment, which its ranks and its fork server inherit."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(TAG_VAR, value)
    return value


def pids_with(variable: str, value: str, but: set[int] = frozenset()) -> list[int]:
    """Processes (this one and ``but`` aside) whose environment has ``variable=value``."""
    needle = f"{variable}={value}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in {os.getpid(), *but}:
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue  # exited meanwhile
        if needle in environ.split(b"\0"):
            pids.append(int(entry))
    return pids


def ranks_left() -> list[int]:
    """Processes this process started as ranks and that are still running: a spawned rank has
    ``REALRUN_PARENT_PID`` = its launcher in its environment, and so has a forked one (its
    fork server was started with the launcher's); the fork server itself aside, which stays
    for the next world."""
    return pids_with("REALRUN_PARENT_PID", str(os.getpid()), set(forkserver.server_pids()))


def tagged_pids(tag: str) -> list[int]:
    """Processes whose environment carries this test's tag (a launcher we started, its fork
    server and its ranks)."""
    return pids_with(TAG_VAR, tag)


@pytest.mark.slow
def test_two_ranks_all_reduce_in_rank_order():
    values = run_world(f"{TARGETS}:allreduce_rank", {"n": 3}, world_size=2, threads_per_rank=2,
                       timeout_s=30)
    assert [v["rank"] for v in values] == [0, 1]
    assert [v["sum"] for v in values] == [[3.0, 3.0, 3.0]] * 2  # (0 + 1) + (1 + 1)
    assert [v["threads"] for v in values] == [2, 2]
    assert [v["local_rank"] for v in values] == [0, 1]
    assert len({v["pid"] for v in values} | {os.getpid()}) == 3
    assert ranks_left() == []


@pytest.mark.slow
@pytest.mark.parametrize("target, names", [
    ("raise_on_rank", ("ValueError",)),   # the rank's own exception
    ("exit_on_rank", ("3",)),             # its exit code
])
def test_failing_rank_is_named(target, names):
    with pytest.raises(LaunchError) as info:
        run_world(f"{TARGETS}:{target}", {"rank": 1}, world_size=2, timeout_s=20)
    assert "\n" not in str(info.value)
    assert info.value.rank == 1
    assert_names(str(info.value), *names)
    if target == "raise_on_rank":  # the full traceback travels along for --verbose output
        assert "raise_on_rank" in info.value.traceback
    else:
        assert info.value.traceback == ""
    assert ranks_left() == []


@pytest.mark.slow
def test_a_rank_that_aborts_after_reporting_is_done(capfd):
    # Every rank aborts at exit after its result is written: judged by the result, not the
    # signal (issue 23: tests/realrun/test_beyond_ddp.py failed "killed by SIGABRT").
    values = run_world(f"{TARGETS}:abort_after_reporting", {}, world_size=2, timeout_s=20)
    assert values == [0, 1]
    printed = [line.split()[:3] for line in capfd.readouterr().out.splitlines()]
    assert ["rank", "0", "printed"] in printed     # flushed in time
    assert ranks_left() == []


@pytest.mark.slow
def test_a_rank_that_hangs_after_reporting_is_done_and_killed():
    start_s = time.monotonic()
    assert run_world(f"{TARGETS}:hang_after_reporting", {}, world_size=2, timeout_s=20) == [0, 1]
    assert time.monotonic() - start_s < 20  # the grace after the results, not the timeout
    assert ranks_left() == []


@pytest.mark.slow
def test_a_rank_that_aborts_before_reporting_fails_clearly():
    start_s = time.monotonic()
    with pytest.raises(LaunchError) as info:
        run_world(f"{TARGETS}:abort_on_rank", {"rank": 1}, world_size=2, timeout_s=20)
    assert (str(info.value), info.value.rank) == ("rank 1 failed: killed by SIGABRT", 1)
    assert time.monotonic() - start_s < 20 + 10  # within its timeout, not after it
    assert ranks_left() == []


@pytest.mark.slow
def test_hanging_rank_is_named_within_bounded_time():
    timeout_s = 5.0
    start_s = time.monotonic()
    with pytest.raises(LaunchError, match=r"^rank 1 failed: stuck, no reply within timeout_s=5 s"):
        run_world(f"{TARGETS}:hang_on_rank", {"rank": 1}, world_size=2, timeout_s=timeout_s)
    # ~3 s to start two torch processes, 5 s gloo timeout, 1 s grace: 3x timeout is generous.
    assert time.monotonic() - start_s < 3 * timeout_s + 10
    assert ranks_left() == []


@pytest.mark.slow
def test_torchrun_mode_gathers_on_rank_0(tag):
    # torchrun sets RANK/WORLD_SIZE/MASTER_ADDR; run_world then must not spawn but gather.
    done = torchrun(["-m", "tests._torchrun_gather"], cwd=REPO, timeout_s=120)
    values = json.loads(done.stdout.strip().splitlines()[-1])
    assert [(v["rank"], v["sum"]) for v in values] == [(0, [3.0] * 3), (1, [3.0] * 3)]
    assert tagged_pids(tag) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_killing_the_launcher_ends_its_ranks(tag, signum):
    code = (f"from realrun.launch import run_world\n"
            f"run_world('{TARGETS}:hang_on_rank', {{'rank': 0}}, world_size=2, timeout_s=600)")
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    launcher = subprocess.Popen([sys.executable, "-c", code], cwd=REPO,
                                env={**os.environ, "PYTHONPATH": path},   # prepend
                                stderr=subprocess.DEVNULL)
    # the launcher, its fork server (realrun/launch/forkserver.py) and 2 ranks
    processes = 4 if forkserver.enabled() else 3
    try:
        deadline_s = time.monotonic() + 60
        while len(tagged_pids(tag)) < processes and time.monotonic() < deadline_s:
            time.sleep(0.1)  # signal as soon as the ranks exist
        assert len(tagged_pids(tag)) == processes
        launcher.send_signal(signum)
        launcher.wait(timeout=30)
        deadline_s = time.monotonic() + 10
        while tagged_pids(tag) and time.monotonic() < deadline_s:
            time.sleep(0.1)
        assert tagged_pids(tag) == []
        # SIGKILL runs no cleanup: its work folder stays until the next launch removes it
        left = list(Path(tempfile.gettempdir()).glob(f"realrun-{launcher.pid}-*"))
        assert len(left) == (1 if signum == signal.SIGKILL else 0)
        assert set(remove_stale_workdirs()) >= set(left)
        assert not any(p.exists() for p in left)
    finally:
        launcher.kill()
        for pid in tagged_pids(tag):
            os.kill(pid, signal.SIGKILL)
