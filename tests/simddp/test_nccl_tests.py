"""simddp/ingest/nccl_tests.py on real published logs (tests/data/nccl-tests/SOURCES.md) and the
shapes real logs take: launcher prefixes, interleaved NCCL INFO, K/M/G sizes, failed rows."""
from __future__ import annotations

from pathlib import Path

import pytest

from simddp.errors import InputError
from simddp.ingest.nccl_tests import parse_nccl_tests, read_nccl_tests

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
A3MEGA = DATA / "a3mega-2x8xH100-all_reduce.md"


def test_a3mega_all_reduce_log():
    log = read_nccl_tests(A3MEGA)
    assert (log.kind, log.ranks, log.nodes, log.placement) == ("all_reduce", 16, 2,
                                                                "out-of-place")
    assert len(log.rows) == 31 and log.rows[0].bytes == 8 and log.rows[-1].bytes == 8 << 30
    r = log.rows[17]                                   # 1 MiB
    assert (r.bytes, r.count, r.time_us, r.algbw_gbps, r.busbw_gbps) == (
        1048576, 262144, 203.2, 5.16, 9.68)


def test_in_place_columns_on_request():
    log = read_nccl_tests(A3MEGA, in_place=True)
    assert log.placement == "in-place" and log.rows[17].time_us == 207.2


def test_dranet_all_gather_log_told_by_its_redop():
    log = read_nccl_tests(DATA / "dranet-2x8xB200-all_gather.log")
    assert (log.kind, log.ranks, log.nodes) == ("all_gather", 16, 2)
    assert (log.rows[0].bytes, log.rows[0].count, log.rows[0].time_us) == (1024, 16, 280.4)


def test_srun_prefixed_log_with_unchecked_rows():
    log = read_nccl_tests(DATA / "nccl-tests-290-2x8xH100-srun.log")   # validation: 0, N/A
    assert (log.kind, log.ranks, log.nodes, len(log.rows)) == ("all_reduce", 16, 2, 11)
    assert log.rows[0].wrong == "N/A" and log.rows[-1].time_us == 103530.0


def test_mpirun_tagged_output_and_interleaved_nccl_info():
    lines = A3MEGA.read_text().splitlines()
    tagged = []
    for i, line in enumerate(lines):
        tagged.append(f"[1,0]<stdout>:{line}")
        if i % 7 == 0:
            tagged.append("ztan-mig-235z:6899:6950 [0] NCCL INFO Channel 00/32 : 0 1 2 3")
    log = parse_nccl_tests("\n".join(tagged), "tagged")
    assert (log.ranks, log.nodes, len(log.rows)) == (16, 2, 31)
    assert [r.time_us for r in log.rows] == [r.time_us for r in read_nccl_tests(A3MEGA).rows]


HEAD = ("# nThread 1 nGpus 2 minBytes 1 maxBytes 1 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0\n"
        "#  Rank  0 Group  0 Pid 1 on hostA device  0 [0x00] GPU\n"
        "#  Rank  1 Group  0 Pid 1 on hostA device  1 [0x00] GPU\n")


def _row(size, count, time_us, wrong="0", redop="sum"):
    return (f"{size:>12} {count:>12}     float {redop:>6}      -1 {time_us:8.1f}   1.00   1.00"
            f" {wrong:>6} {time_us:8.1f}   1.00   1.00      0\n")


def test_k_m_g_sizes():
    log = parse_nccl_tests(HEAD + _row("1K", 256, 10) + _row("4M", 1 << 20, 50)
                           + _row("1G", 1 << 28, 5000), "sizes")
    assert [r.bytes for r in log.rows] == [1024, 4 << 20, 1 << 30]


def test_reduce_scatter_told_by_its_per_rank_count():
    log = parse_nccl_tests(HEAD + _row(1 << 20, (1 << 18) // 2, 30), "rs")
    assert log.kind == "reduce_scatter"


@pytest.mark.parametrize("wrong", ["3", "N/A"])
def test_rows_with_wrong_results_are_refused(wrong):
    with pytest.raises(InputError, match=r"line \d+: size 2048 has") as e:
        parse_nccl_tests(HEAD + _row(1024, 256, 10) + _row(2048, 512, 11, wrong), "bad")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text, match", [
    ("hello\nworld 1 2 3\n", "not nccl-tests output"),
    ("", "not nccl-tests output"),
    (HEAD + "# Out of bounds values : 0 OK\n", "without result rows"),
])
def test_not_a_log_or_no_rows(text, match):
    with pytest.raises(InputError, match=match) as e:
        parse_nccl_tests(text, "x.log")
    assert "\n" not in str(e.value)


def test_other_collectives_are_refused():
    with pytest.raises(InputError, match="a broadcast_perf log"):
        parse_nccl_tests("./build/broadcast_perf -b 8 -e 1M\n" + HEAD + _row(1024, 256, 10),
                         "bcast")
