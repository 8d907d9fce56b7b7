"""``python -m simddp collectives``: nccl-tests' table by simddp's law, and a log beside it."""
from __future__ import annotations

import json
import subprocess
import sys
import types
from dataclasses import dataclass

import pytest

from simddp.cli.main import main
from simddp.cli.collectives import DEFAULT_SIZES, parse_sizes
from simddp.errors import InputError


def run_cli(capsys, *argv) -> str:
    assert main(["collectives", *argv]) == 0
    return capsys.readouterr().out


def test_rows_are_the_law_with_nccl_tests_bandwidths(capsys):
    out = json.loads(run_cli(capsys, "--link", "nvlink-h100", "--world-size", "8",
                             "--sizes", "1M,1G", "--format", "json"))
    small, big = out["rows"]
    # α 30 µs, busbw 370 GB/s, 8 ranks: t = 30e-6 + 1.75·n/370e9
    assert small["time_us"] == pytest.approx(30 + 1.75 * 2**20 / 370e9 * 1e6)
    assert big["bytes"] == 2**30 and big["count"] == 2**28
    assert big["algbw_gbps"] == pytest.approx(2**30 / (big["time_us"] * 1e-6) / 1e9)
    assert big["busbw_gbps"] == pytest.approx(big["algbw_gbps"] * 1.75)


def test_default_sizes_and_the_table_layout(capsys):
    assert DEFAULT_SIZES[0] == 8 and DEFAULT_SIZES[-1] == 8 * 2**30 and len(DEFAULT_SIZES) == 31
    text = run_cli(capsys, "--link", "ib-hdr", "--world-size", "4", "--kind", "all_gather")
    lines = text.splitlines()
    assert lines[1].split()[1:] == ["size", "count", "type", "redop", "time", "algbw", "busbw"]
    first = lines[3].split()
    assert first[:4] == ["8", "0", "float", "none"]      # all_gather counts per rank
    assert len(lines) == 3 + 31


def test_two_levels(capsys):
    out = json.loads(run_cli(capsys, "--link", "ib-hdr", "--nodes", "2", "--gpus-per-node",
                             "8", "--intra-link", "nvlink-h100", "--sizes", "64M",
                             "--algorithm", "hierarchical", "--format", "json"))
    assert out["world_size"] == 16 and out["nodes"] == 2 and out["algorithm"] == "hierarchical"
    ring = json.loads(run_cli(capsys, "--link", "ib-hdr", "--nodes", "2", "--gpus-per-node",
                              "8", "--intra-link", "nvlink-h100", "--sizes", "64M",
                              "--format", "json"))
    assert out["rows"][0]["time_us"] < ring["rows"][0]["time_us"]


def test_sizes_parse_and_refuse():
    assert parse_sizes("8,1K,1M,8G") == [8, 1024, 2**20, 8 * 2**30]
    for bad in ("", "1T", "0", "-8", "1.5M", "8,,16"):
        with pytest.raises(InputError, match="--sizes"):
            parse_sizes(bad)


@pytest.mark.parametrize("argv, says", [
    (["--sizes", "1X"], "--sizes"), (["--kind", "broadcast"], "--kind")])
def test_bad_input_one_line_exit_2(argv, says):
    r = subprocess.run([sys.executable, "-m", "simddp", "collectives", *argv],
                       capture_output=True, text=True)
    assert r.returncode == 2 and says in r.stderr and r.stderr.strip().count("\n") == 0


@dataclass
class _Row:
    bytes: int
    time_us: float
    busbw_gbps: float


@dataclass
class _Log:
    kind: str
    ranks: int
    nodes: int
    rows: list


def test_measured_adds_the_log_time_and_error(capsys, tmp_path, monkeypatch):
    """Against parse_nccl_tests(text, source) -> NcclTestsLog (simddp/ingest/nccl_tests.py); where
    that reader is installed its own parse is used, else a stand-in with its signature."""
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(
        "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: "
        "5 iters: 20 agg iters: 1 validation: 1 graph: 0\n"
        "#  Rank  0 Group  0 Pid 1 on host1 device  0 [0x00] NVIDIA H100\n"
        "#  Rank  1 Group  0 Pid 2 on host1 device  1 [0x00] NVIDIA H100\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)       \n"
        "     1048576        262144     float     sum      -1    100.0   10.49   10.49      0"
        "    100.0   10.49   10.49      0\n"
        "     2097152        524288     float     sum      -1    150.0   13.98   13.98      0"
        "    150.0   13.98   13.98      0\n")
    try:
        import simddp.ingest.nccl_tests  # noqa: F401
    except ImportError:
        def parse(text, source):
            rows = [_Row(int(f[0]), float(f[5]), float(f[7])) for f in
                    (line.split() for line in text.splitlines() if line and line[0] != "#")]
            return _Log("all_reduce", 2, 1, rows)
        monkeypatch.setitem(sys.modules, "simddp.ingest.nccl_tests",
                            types.SimpleNamespace(parse_nccl_tests=parse))
    out = json.loads(run_cli(capsys, "--link", "eth-100g", "--measured", str(log),
                             "--format", "json"))
    assert out["world_size"] == 2 and [r["bytes"] for r in out["rows"]] == [2**20, 2**21]
    r = out["rows"][0]
    assert r["measured_time_us"] == 100.0
    assert r["error_pct"] == pytest.approx((r["time_us"] - 100.0) / 100.0 * 100)
    text = run_cli(capsys, "--link", "eth-100g", "--measured", str(log))
    assert "measured" in text.splitlines()[2] and "error over 2 sizes" in text
