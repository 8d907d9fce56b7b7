"""python -m simddp compare and the bench's own noise floor: how far apart realrun bench's two
identical compute-only models read (instance_gap, realrun/twin.py; simddp/compare/noise.py),
and whether its ranks left Gloo's threads cores of their own (simddp/cpu_share.py)."""
from __future__ import annotations

import json

from simddp.cli import main
from tests.simddp.test_compare import grid, write_pair


def test_the_benchs_twin_distance_is_reported_and_a_bad_one_refused(tmp_path, capsys):
    """realrun bench writes how far apart two identical compute-only models read
    (instance_gap, realrun/twin.py); compare says it under the best bucket, and in JSON."""
    p, m = write_pair(tmp_path, *grid())
    doc = json.loads(open(m).read())
    json.dump({**doc, "instance_gap": {"compute_only_ms": 50.0, "twin_ms": 52.0,
                                       "apart_pct": 4.0}}, open(m, "w"))
    assert main(["compare", "--predicted", p, "--measured", m]) == 0
    out = capsys.readouterr().out
    assert "two identical compute-only models in the bench read 4.0 % apart" in out
    assert main(["compare", "--predicted", p, "--measured", m, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["instance_gap_pct"] == 4.0
    json.dump({**doc, "instance_gap": {"apart_pct": -1}}, open(m, "w"))
    assert main(["compare", "--predicted", p, "--measured", m]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "instance_gap must hold apart_pct" in err[0]


def test_a_bench_whose_ranks_filled_the_cpus_gets_a_caution(tmp_path, capsys):
    """realrun bench records its CPUs and the ranks sharing them; where the ranks' training
    threads and Gloo's 3 threads each outnumber the CPUs, compare says so under the errors,
    and in JSON; with CPUs to spare, or on NCCL, or in an older file, it says nothing."""
    p, m = write_pair(tmp_path, *grid())
    doc = json.loads(open(m).read())
    host = {"backend": "gloo", "threads": 1, "ranks_on_host": 2}
    for cpus, backend, noted in ((2, "gloo", True), (4, "gloo", True), (8, "gloo", False),
                                 (2, "nccl", False), (None, "gloo", False)):
        extra = {} if cpus is None else {"cpus": cpus}
        json.dump({**doc, "bench": {**host, "backend": backend, **extra}}, open(m, "w"))
        assert main(["compare", "--predicted", p, "--measured", m]) == 0
        out = capsys.readouterr().out
        assert (f"note: measured with 2 ranks x (1 training thread + 3 of Gloo) on {cpus} "
                "CPUs: collectives that overlap compute wait for a core" in out) == noted
        assert main(["compare", "--predicted", p, "--measured", m, "--format", "json"]) == 0
        note = json.loads(capsys.readouterr().out)["cpu_note"]
        assert (note is not None) == noted
