"""Ranks forked from the fork server (realrun/launch/forkserver.py) start as a fresh rank
would: the launcher's working directory, environment, sys.path and stdout, their own session;
a server is reused while the environment is the same, restarted when it died, and
REALRUN_FORKSERVER=0 starts fresh interpreters instead. A command's --module is imported by a
server forked for it, unless that import fails or starts a thread.

test_launch.py's failure, hang and kill tests run through the server as well (it is on by
default), and test_netns.py's worlds without it (emulated hosts start each rank inside its
namespace).
"""
from __future__ import annotations

import os
import signal
import sys
import time
import uuid

import pytest

from realrun.launch import forkserver, run_world
from realrun.launch.env import spawn_env
from realrun.launch.forkserver_process import PRELOADED

TARGET = "tests._launch_targets:where_am_i"
pytestmark = pytest.mark.skipif(not forkserver.enabled(), reason="REALRUN_FORKSERVER=0")


def _world(monkeypatch, tmp_path, threads: int = 1, modules: tuple = ()) -> list[dict]:
    monkeypatch.chdir(tmp_path)
    return run_world(TARGET, {"say": "hello from rank 0", "var": "OLDPWD", "modules": modules},
                     world_size=2, threads_per_rank=threads, timeout_s=60)


@pytest.mark.slow
def test_with_it_off_each_rank_is_a_fresh_interpreter(monkeypatch, tmp_path):
    monkeypatch.setenv("REALRUN_FORKSERVER", "0")
    ranks = _world(monkeypatch, tmp_path)
    assert [r["ppid"] for r in ranks] == [os.getpid()] * 2
    assert all(r["cwd"] == str(tmp_path) for r in ranks)


@pytest.mark.slow
def test_the_server_a_command_prestarts_is_the_one_its_worlds_use(monkeypatch, tmp_path):
    """WorldConfig.prestart (called once a command's flags are checked) must start the server
    of exactly the environment run_world's ranks get, or the command would start two."""
    from realrun.launch.world import WorldConfig
    WorldConfig(world_size=2).prestart(1)
    (server,) = forkserver.server_pids()
    ranks = _world(monkeypatch, tmp_path)
    assert forkserver.server_pids() == [server] and ranks[0]["ppid"] == server


@pytest.mark.slow
def test_a_variable_torch_sets_as_the_command_imports_it_starts_no_second_server(
        monkeypatch, tmp_path):
    """Importing torch._dynamo sets TORCHINDUCTOR_CACHE_DIR when it is unset: a command whose
    --module check imported it after the prestart used to start a second server."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    from realrun.launch.world import WorldConfig
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)  # as a command starts
    WorldConfig(world_size=2).prestart(1)
    (server,) = forkserver.server_pids()
    cache_dir()   # what importing torch._dynamo does
    ranks = _world(monkeypatch, tmp_path)
    assert forkserver.server_pids() == [server] and ranks[0]["ppid"] == server


MODULES = {  # what a user's --module file does when imported; `wave`: nothing else imports it
    "imports": "import wave\n",
    "starts a thread": "import wave, threading\n"
                       "threading.Thread(target=threading.Event().wait, daemon=True).start()\n",
    "fails": "import wave\nraise ImportError('no such package')\n",
}
BUILD = "def build():\n    raise AssertionError('not called by these worlds')\n"


@pytest.mark.slow
@pytest.mark.parametrize("does", list(MODULES))
def test_a_commands_module_is_preloaded_by_a_forked_server_only_if_that_is_safe(
        monkeypatch, tmp_path, does):
    """The ranks of a command given --module find what it imports already imported (by a
    server the plain one forked), but not the module itself, whose top level each rank runs;
    a module whose import failed or started a thread (a fork beside it is unsafe) leaves them
    to the plain server, which is still the one the command started."""
    from realrun.launch.world import WorldConfig
    monkeypatch.setattr(forkserver, "_user_module", forkserver._user_module)  # restored after
    (tmp_path / "model.py").write_text(MODULES[does] + BUILD)
    monkeypatch.chdir(tmp_path)
    WorldConfig(world_size=2).prestart(1, "model.py:build")   # relative, as typed
    ranks = _world(monkeypatch, tmp_path, modules=("wave", PRELOADED))
    servers = forkserver.server_pids()
    if does == "imports":
        plain, forked = servers
        assert [r["ppid"] for r in ranks] == [forked, forked]
        assert all(r["modules"] == ["wave"] for r in ranks)
        assert _ppid(forked) == plain
        forkserver.prestart(spawn_env(1))   # the next command has no --module: it ends
        assert _world(monkeypatch, tmp_path)[0]["ppid"] == plain
        assert forkserver.server_pids() == [plain]
    else:
        assert [r["ppid"] for r in ranks] == servers * 2 and len(servers) == 1
        assert all(r["modules"] == [] for r in ranks)


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.slow
def test_forked_ranks_start_as_fresh_ones_and_a_server_serves_one_environment(
        monkeypatch, tmp_path, capfd):
    ranks = _world(monkeypatch, tmp_path)   # the suite's server if it has one, else a new one
    (server,) = forkserver.server_pids()
    assert [r["ppid"] for r in ranks] == [server, server]      # forked, not exec'd by us
    assert all(r["cwd"] == str(tmp_path) for r in ranks)
    assert all(r["session"] == r["pid"] for r in ranks)       # each leads its own session
    launcher_path = [os.path.abspath(p or ".") for p in sys.path]
    assert all(r["sys_path"] == launcher_path for r in ranks)
    assert capfd.readouterr().out.count("hello from rank 0") == 1   # rank 1's stdout is quiet
    # A variable no server is chosen by (a shell's), set after the server started: the same
    # server, and its ranks get the launcher's environment of now, not the server's
    value = uuid.uuid4().hex
    monkeypatch.setenv("OLDPWD", value)
    again = _world(monkeypatch, tmp_path)
    assert forkserver.server_pids() == [server] and again[0]["ppid"] == server
    assert [r["var"] for r in again] == [value, value]
    # OMP_NUM_THREADS is read when torch loads: another thread count, another server
    two = _world(monkeypatch, tmp_path, threads=2)
    assert [r["omp"] for r in ranks] == ["1", "1"] and [r["omp"] for r in two] == ["2", "2"]
    assert [r["threads"] for r in two] == [2, 2]
    (other,) = forkserver.server_pids()
    assert other != server and two[0]["ppid"] == other
    os.kill(other, signal.SIGKILL)              # a dead server is replaced
    deadline_s = time.monotonic() + 10
    while forkserver.server_pids() and time.monotonic() < deadline_s:
        time.sleep(0.05)
    after = _world(monkeypatch, tmp_path, threads=2)
    (replaced,) = forkserver.server_pids()
    assert replaced != other and after[0]["ppid"] == replaced
