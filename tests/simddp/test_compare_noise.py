"""python -m simddp compare and the bench's own noise floor: how far apart realrun bench's two
identical compute-only models read (instance_gap, realrun/twin.py; simddp/compare/noise.py),
how far each row's odd and even turns read apart (noise.py), and whether its ranks left
Gloo's threads cores of their own (simddp/rig/cpu_share.py)."""
from __future__ import annotations

import dataclasses
import json
import math

from simddp.cli.main import main
from simddp.compare.noise import noise_text
from simddp.rig.cpu_share import starved_note
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
    assert noise_text(4.0) in out.splitlines()         # the line saying it, with its 4.0 %
    assert main(["compare", "--predicted", p, "--measured", m, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["instance_gap_pct"] == 4.0
    json.dump({**doc, "instance_gap": {"apart_pct": -1}}, open(m, "w"))
    assert main(["compare", "--predicted", p, "--measured", m]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "instance_gap" in err[0] and "apart_pct" in err[0]
    assert "-1" in err[0] and m in err[0]                # the bad value, and where


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
        notes = [line for line in out.splitlines() if line.startswith("note:")]
        assert main(["compare", "--predicted", p, "--measured", m, "--format", "json"]) == 0
        note = json.loads(capsys.readouterr().out)["cpu_note"]
        assert (note is not None) == noted == bool(notes)
        if noted:   # the caution for what the bench recorded: 2 ranks x 1 thread on its CPUs
            assert note == starved_note("gloo", 2, 1, cpus) and notes[0].endswith(note)


def with_steps(measured):
    """Each measured row's steps: naive's turns alternate 90 and 110 ms (its median 100 ms);
    every other row's steps all read its median."""
    out = []
    for r in measured:
        ms = [90.0, 90.0, 110.0, 110.0] * 2 if r.strategy == "naive" else [r.step_s * 1e3] * 8
        out.append(dataclasses.replace(r, steps_s=tuple(t / 1e3 for t in ms), samples=len(ms)))
    return out


def test_the_bench_split_into_odd_and_even_turns_is_each_rows_own_noise(tmp_path, capsys):
    """realrun bench runs a row's steps in turns of ``chunk`` (its bench section); compare
    splits them into odd and even turns and names the rows that miss by more than their own
    halves read apart: naive's 90 and 110 ms are 20 % of its 100 ms apart, so its −10 % is
    inside it; the other rows read 0 % apart and only ddp:10 (0 %) is not beyond."""
    predicted, measured = grid()
    p, m = write_pair(tmp_path, predicted, with_steps(measured))
    doc = json.loads(open(m).read())
    json.dump({**doc, "bench": {"chunk": 2}}, open(m, "w"))
    assert main(["compare", "--predicted", p, "--measured", m]) == 0
    text = capsys.readouterr().out
    assert main(["compare", "--predicted", p, "--measured", m, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    halves = out["halves"]
    assert math.isclose(halves.pop("max_pct"), 20.0)
    assert halves == {"turn_steps": 2, "median_pct": 0.0, "max_config": "naive", "rows": 5,
                      "beyond": ["bucketed:1", "bucketed:10", "bucketed:100"]}
    assert [round(r["halves_apart_pct"], 9) for r in out["rows"]] == [20.0, 0, 0, 0, 0]
    # the text says the same: one line names the widest split and the rows beyond their own
    (line,) = [x for x in text.splitlines() if "(naive);" in x]
    assert "20.0" in line and line.endswith(", ".join(halves["beyond"]))


def test_no_turns_no_split_and_a_bad_turn_is_refused(tmp_path, capsys):
    """Without the bench's turn length (validate's files, older benches) or with one turn
    only, compare splits nothing; a malformed one is one line and exit 2."""
    predicted, measured = grid()
    p, m = write_pair(tmp_path, predicted, with_steps(measured))
    doc = json.loads(open(m).read())
    for bench in ({}, {"chunk": 8}):     # no turn length; one turn of all 8 steps
        json.dump({**doc, "bench": bench}, open(m, "w"))
        assert main(["compare", "--predicted", p, "--measured", m, "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["halves"] is None
    for bad in (0, "5", True):
        json.dump({**doc, "bench": {"chunk": bad}}, open(m, "w"))
        assert main(["compare", "--predicted", p, "--measured", m]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "bench.chunk" in err[0] and repr(bad) in err[0]
