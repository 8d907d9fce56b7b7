"""simddp/ingest/nccl_tests.py on real published logs (tests/data/nccl-tests/SOURCES.md) and the
shapes real logs take: launcher prefixes, interleaved NCCL INFO, K/M/G sizes, failed rows."""
from __future__ import annotations

from pathlib import Path

import pytest

from simddp.errors import InputError
from simddp.ingest.nccl_tests import choose, parse_nccl_tests, read_nccl_tests, read_tables

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


@pytest.mark.parametrize("text", ["hello\nworld 1 2 3\n", "",
                                  HEAD + "# Out of bounds values : 0 OK\n"])
def test_what_is_not_a_log_is_refused_in_one_line(text):
    with pytest.raises(InputError, match="not an nccl-tests log") as e:
        parse_nccl_tests(text, "x.log")
    assert "\n" not in str(e.value)


def test_other_collectives_are_refused():
    with pytest.raises(InputError, match="a broadcast_perf log"):
        parse_nccl_tests("./build/broadcast_perf -b 8 -e 1M\n" + HEAD + _row(1024, 256, 10),
                         "bcast")


# --- logs as they are published (tests/data/nccl-tests/SOURCES.md cites each) ---

LOGS = sorted(p for p in DATA.iterdir() if p.name != "SOURCES.md")


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_every_published_log_reads(path):
    tables = read_tables(path)
    assert tables and all(len(t.rows) >= 3 and t.ranks >= 2 and t.ranks % t.nodes == 0
                          for t in tables)
    for t in tables:   # what the log says of busbw, the reader agrees with
        row = max(t.rows, key=lambda r: r.bytes)
        assert row.bytes / row.time_us / 1e3 == pytest.approx(row.algbw_gbps, abs=0.02)


def test_the_fixtures_cover_what_users_bring():
    assert len(LOGS) >= 10
    tables = [t for p in LOGS for t in read_tables(p)]
    assert {t.kind for t in tables} == {"all_reduce", "all_gather", "reduce_scatter",
                                         "all_to_all"}
    assert max(t.ranks for t in tables) >= 64


def test_rccl_device_lines_without_a_group_count_every_rank():
    t = read_nccl_tests(DATA / "hisohara-2x8xMI300X-all_reduce.log")
    assert (t.kind, t.ranks, t.nodes, t.notes) == ("all_reduce", 16, 2, ())


def test_a_log_without_header_takes_its_ranks_from_busbw_over_algbw():
    t = read_nccl_tests(DATA / "awsome-2x8xH100-all_reduce.log")
    assert (t.ranks, t.nodes) == (16, 1)
    assert any("busbw/algbw" in note for note in t.notes)
    given = read_nccl_tests(DATA / "awsome-2x8xH100-all_reduce.log", ranks=16, nodes=2)
    assert (given.ranks, given.nodes) == (16, 2)


def test_rows_of_size_zero_are_skipped_and_said():
    t = read_nccl_tests(DATA / "superbench-1x8xA100-all_gather.log")
    assert t.kind == "all_gather" and t.rows[0].bytes == 32
    assert any("size 0" in note for note in t.notes)


def test_several_tables_in_one_file_are_read_each():
    tables = read_tables(DATA / "hisohara-MI325X-1to8x8-all_reduce-egrep.log")
    assert [(t.ranks, t.nodes) for t in tables] == [(8, 1), (16, 2), (32, 4), (64, 8)]
    runs = read_tables(DATA / "rocmblogs-1x8xMI300X-all_reduce.md")
    assert len(runs) == 2
    used = read_nccl_tests(DATA / "rocmblogs-1x8xMI300X-all_reduce.md")
    assert used.source.endswith("#2") and any("#1" in note for note in used.notes)
    with pytest.raises(InputError, match="several tables") as e:
        read_nccl_tests(DATA / "hisohara-MI325X-1to8x8-all_reduce-egrep.log")
    assert "--world-size" in str(e.value)
    assert choose(tables, "all_reduce", "egrep", ranks=32) is tables[2]


def test_a_cut_header_counts_ranks_from_its_last_device_line():
    tables = read_tables(DATA / "coreweave-18to360x4xGB200-all_reduce.md")
    assert [t.ranks for t in tables] == [72, 144, 1440]


def test_alltoall_reads_as_all_to_all():
    t = read_nccl_tests(DATA / "alibaba-2x8xMI355X-alltoall.log")
    assert (t.kind, t.ranks) == ("all_to_all", 16)


def test_a_log_that_cannot_tell_its_ranks_asks_for_them():
    pasted = "".join(_row(n, n // 4, 10.0).replace("1.00", "0.00") for n in (64, 128, 256))
    with pytest.raises(InputError, match="--ranks N") as e:
        parse_nccl_tests(pasted, "pasted")
    assert "\n" not in str(e.value)
    assert parse_nccl_tests(pasted, "pasted", ranks=8).ranks == 8
