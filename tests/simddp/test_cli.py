"""``python -m simddp`` sweep, simulate, models, links: what users read, and every bad input.

Commands run in-process through ``simddp.cli.main.main`` (fast, output via capsys); one test runs
the real entry point in a subprocess. Bad input must end in exit code 2, exactly one line on
stderr, no traceback, nothing on stdout and no output file.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pytest

from simddp.cli.links import LINE_WIDTH
from simddp.cli.main import main
from simddp.inputs.io import link_to_json, profile_to_json, save_json
from simddp.result import load_results
from simddp.inputs.link import Link
from simddp.inputs.profile import Layer, ModelProfile
from simddp.planning.strategy import STRATEGIES
from simddp.presets.links import get_link

ROOT = Path(__file__).resolve().parents[2]
BUCKETS = "1,10,100,1000"
ROW_KEYS = {"strategy", "bucket_mb", "step_ms", "exposed_comm_ms", "collectives", "accum_steps"}


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run one command in-process: (exit code, stdout, stderr); argparse exits count too."""
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def quiet(err: str) -> bool:
    """Nothing on stderr but, on a very slow machine, the progress bar's one final line."""
    return all(line.startswith("simulating") for line in err.splitlines())


def table_rows(out: str, strategy: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.split()[:1] == [strategy]]


# --- sweep ----------------------------------------------------------------------------------

def test_sweep_table_lists_every_strategy_and_recommends_a_bucket(capsys):
    code, out, err = cli(capsys, "sweep", "--bucket-mb", BUCKETS)
    assert code == 0 and quiet(err)
    setup = out.splitlines()[0].split()    # the whole text: tests/data/snapshots/sweep-default
    assert setup[:3] == ["model", "transformer-small@a100,b8s1024:", "111"]
    assert "eth-100g:" in setup
    for name in ("naive", "flat", "overlap"):        # no buckets: once, bucket "-"
        rows = table_rows(out, name)
        assert len(rows) == 1 and rows[0][1] == "-"
    for name in ("bucketed", "ddp"):
        assert [r[1] for r in table_rows(out, name)] == ["1", "10", "100", "1000"]
    assert table_rows(out, "naive")[0][-1] == "1.00×"
    # the recommendation is the fastest ddp row's size, and the summary gives its speedup
    best = min(table_rows(out, "ddp"), key=lambda r: float(r[3]))
    (recommended,) = [line for line in out.splitlines() if line.startswith("Recommended")]
    assert recommended.split()[2] == best[1]
    (fastest,) = [line for line in out.splitlines() if "fastest" in line]
    assert best[-1] in fastest


def test_sweep_reports_no_sync_per_optimizer_step_next_to_sync_each(capsys):
    code, out, _ = cli(capsys, "sweep", "--bucket-mb", BUCKETS, "--accum-steps", "3")
    assert code == 0
    title, = [line for line in out.splitlines() if line.startswith("gradient accumulation")]
    assert "K=3" in title
    sync_each, no_sync = table_rows(out, "sync_each"), table_rows(out, "no_sync")
    assert [r[1] for r in sync_each] == [r[1] for r in no_sync] == ["1", "10", "100", "1000"]
    for se, ns in zip(sync_each, no_sync):
        assert int(se[2]) == 3 * int(ns[2])            # K syncs vs one per optimizer step
        assert float(ns[3]) < float(se[3])
        assert se[-1] == "1.00×"                       # the accumulation table's baseline


def test_sweep_json_is_one_document_with_the_rows_and_the_recommendation(capsys):
    code, out, err = cli(capsys, "sweep", "--bucket-mb", BUCKETS, "--format", "json")
    assert code == 0 and quiet(err)
    doc = json.loads(out)
    rows = doc["rows"]
    assert all(ROW_KEYS <= set(row) for row in rows)
    assert {row["strategy"] for row in rows} == set(STRATEGIES) | {"sync_each"}
    assert all(row["bucket_mb"] is None for row in rows
               if row["strategy"] in ("naive", "flat", "overlap"))
    ddp = [row for row in rows if row["strategy"] == "ddp"]
    assert doc["recommended_bucket_mb"] == min(ddp, key=lambda r: r["step_ms"])["bucket_mb"]
    assert {row["accum_steps"] for row in rows if row["strategy"] == "no_sync"} == {4}


def test_sweep_out_writes_csv_json_and_png(capsys, tmp_path):
    out_dir = tmp_path / "sweep"
    code, out, err = cli(capsys, "sweep", "--bucket-mb", BUCKETS, "--out", str(out_dir),
                         "--strategies", "naive,ddp,no_sync", "--format", "json")
    assert code == 0 and "wrote" in err
    assert sorted(p.name for p in out_dir.iterdir()) == ["sweep.csv", "sweep.json", "sweep.png"]
    rows = json.loads(out)["rows"]
    with open(out_dir / "sweep.csv", newline="") as f:
        assert [r["strategy"] for r in csv.DictReader(f)] == [r["strategy"] for r in rows]
    data = json.loads((out_dir / "sweep.json").read_text())
    assert data["rows"] == rows and data["recommended_bucket_mb"] is not None
    results = load_results(out_dir / "sweep.json")     # the simddp.results/1 format
    assert [r.strategy for r in results] == [r["strategy"] for r in rows]
    img = matplotlib.image.imread(out_dir / "sweep.png")
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100


def test_sweep_without_naive_still_states_its_baseline(capsys):
    code, out, _ = cli(capsys, "sweep", "--bucket-mb", "5,25", "--strategies", "ddp")
    assert code == 0
    assert not table_rows(out, "naive") and len(table_rows(out, "ddp")) == 2
    code, doc, _ = cli(capsys, "sweep", "--bucket-mb", "5,25", "--strategies", "ddp",
                       "--format", "json")
    naive_ms = json.loads(doc)["setup"]["naive_step_ms"]
    # the baseline is simulated aside, its step printed under the table, and the speedups
    # are against it
    aside = [line for line in out.splitlines() if "naive" in line and f"{naive_ms:.2f}" in line]
    assert len(aside) == 1
    for row in table_rows(out, "ddp"):
        assert row[-1] == f"{naive_ms / float(row[3]):.2f}×"


def test_sweep_reads_profile_and_link_files(capsys, tmp_path):
    profile = ModelProfile("toy", tuple(Layer(f"l{i}", (2**20,), 1e-3, 2e-3) for i in range(4)),
                           1e-3)
    link = Link("toylink", 10e-6, 1.0, world_size=2, backend="gloo")
    save_json(tmp_path / "p.json", profile_to_json(profile))
    save_json(tmp_path / "l.json", link_to_json(link))
    code, out, _ = cli(capsys, "sweep", "--model", str(tmp_path / "p.json"), "--link",
                       str(tmp_path / "l.json"), "--bucket-mb", "1,2", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["setup"]["model"] == "toy" and doc["setup"]["link"] == "toylink"


# --- simulate, models, links --------------------------------------------------------------

def test_simulate_prints_step_exposed_comm_collectives_and_compute(capsys):
    code, out, _ = cli(capsys, "simulate", "--strategy", "ddp", "--bucket-mb", "25")
    assert code == 0
    for key in ("step", "compute only", "exposed comm", "collectives"):
        assert any(line.split()[:len(key.split())] == key.split() for line in out.splitlines())
    code, out, _ = cli(capsys, "simulate", "--strategy", "no_sync", "--format", "json")
    doc = json.loads(out)
    assert doc["accum_steps"] == 4 and doc["bucket_mb"] == 25.0
    assert doc["step_ms"] == pytest.approx(doc["compute_ms"] + doc["exposed_comm_ms"])


def test_simulate_writes_trace_and_plot(capsys, tmp_path):
    trace, plot = tmp_path / "t.json", tmp_path / "g.png"
    code, _, err = cli(capsys, "simulate", "--strategy", "overlap", "--trace", str(trace),
                       "--plot", str(plot))
    assert code == 0 and "wrote" in err
    names = {e["args"]["name"] for e in json.loads(trace.read_text())["traceEvents"]
             if e["name"] == "thread_name"}
    assert len(names) == 2
    assert matplotlib.image.imread(plot).shape[2] in (3, 4)


def test_models_and_links_list_the_presets(capsys):
    code, out, _ = cli(capsys, "models", "--device", "h100")
    assert code == 0
    for name in ("transformer-small", "transformer-xl", "transformer-2.7b", "a100", "cpu"):
        assert name in out
    xl, = table_rows(out, "transformer-xl")
    assert xl[1:3] == ["48", "435"]
    code, out, _ = cli(capsys, "links")
    assert code == 0
    for name in ("nvlink-a100", "ib-hdr", "eth-100g", "eth-10g"):
        assert name in out
    assert table_rows(out, "eth-100g")[0][1:5] == ["*", "40", "11", "nccl"]
    assert max(len(line) for line in out.splitlines()[1:]) <= LINE_WIDTH
    # one preset: its whole source, word for word
    code, one, _ = cli(capsys, "links", "nvlink-a100")
    assert code == 0 and " ".join(one.split("source:", 1)[1].split()) == \
        " ".join(get_link("nvlink-a100").source.split())


# --- bad input: exit 2, one line, no traceback, no output ---------------------------------

@pytest.fixture
def bad_files(tmp_path):
    (tmp_path / "corrupt.json").write_text("{not json")
    save_json(tmp_path / "link4.json", link_to_json(Link("cal", 1e-5, 1.0, world_size=4)))
    return tmp_path


BAD_SWEEPS = {
    "bucket zero": ["--bucket-mb", "0,10"],
    "bucket negative": ["--bucket-mb=-5"],
    "bucket nan": ["--bucket-mb", "nan"],
    "bucket inf": ["--bucket-mb", "1,inf"],
    "bucket word": ["--bucket-mb", "ten"],
    "bucket empty item": ["--bucket-mb", "1,,10"],
    "unknown model": ["--model", "transformer-huge"],
    "a torch model's file": ["--model", "my_model.py:build"],
    "nodes without gpus per node": ["--nodes", "2"],
    "unknown strategy": ["--strategies", "ddp,zero3"],
    "unknown device": ["--device", "tpu"],
    "unknown link": ["--link", "carrier-pigeon"],
    "missing model file": ["--model", "{tmp}/missing.json"],
    "corrupt model file": ["--model", "{tmp}/corrupt.json"],
    "corrupt link file": ["--link", "{tmp}/corrupt.json"],
    "link at another world size": ["--link", "{tmp}/link4.json", "--world-size", "2"],
    "world size one": ["--world-size", "1"],
    "accum steps zero": ["--accum-steps", "0"],
    "accum steps not int": ["--accum-steps", "two"],
    "format": ["--format", "yaml"],
}


@pytest.mark.parametrize("argv", BAD_SWEEPS.values(), ids=BAD_SWEEPS.keys())
def test_bad_sweep_input_is_one_line_and_exit_2_with_no_output(capsys, bad_files, argv):
    out_dir = bad_files / "out"
    argv = [a.replace("{tmp}", str(bad_files)) for a in argv]
    code, out, err = cli(capsys, "sweep", *argv, "--out", str(out_dir))
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out_dir.exists()


def test_a_calibrated_link_sets_the_world_size_when_none_is_given(capsys, bad_files):
    code, out, _ = cli(capsys, "sweep", "--link", str(bad_files / "link4.json"),
                       "--bucket-mb", "10", "--format", "json")
    assert code == 0 and json.loads(out)["setup"]["world_size"] == 4


BAD_SIMULATES = {
    "unknown strategy": ["--strategy", "zero3"],
    "bucket list": ["--bucket-mb", "1,10"],
    "bucket zero": ["--bucket-mb", "0"],
    "accum steps zero": ["--strategy", "no_sync", "--accum-steps", "0"],
    "world size one": ["--world-size", "1"],
    "plot is a directory": ["--plot", "{tmp}"],
}


@pytest.mark.parametrize("argv", BAD_SIMULATES.values(), ids=BAD_SIMULATES.keys())
def test_bad_simulate_input_is_one_line_and_exit_2_with_no_output(capsys, tmp_path, argv):
    trace = tmp_path / "trace.json"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = cli(capsys, "simulate", *argv, "--trace", str(trace))
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not trace.exists()


def test_out_that_is_a_file_is_refused_before_simulating(capsys, tmp_path):
    target = tmp_path / "file"
    target.write_text("keep me")
    code, out, err = cli(capsys, "sweep", "--bucket-mb", "10", "--out", str(target))
    assert (code, out) == (2, "") and len(err.splitlines()) == 1
    assert target.read_text() == "keep me"


# --- the real entry point, once ----------------------------------------------------------

def test_python_m_simddp_sweep_runs_on_the_defaults():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    proc = subprocess.run([sys.executable, "-m", "simddp", "sweep", "--bucket-mb", BUCKETS],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Recommended bucket_cap_mb: " in proc.stdout
    assert quiet(proc.stderr)


def test_sweep_out_twice_keeps_the_earlier_run_without_force(tmp_path, capsys):
    # Issue 23: rerunning a command into its folder used to stop with "pass --force".
    out = tmp_path / "pred"
    assert main(["sweep", "--bucket-mb", "10", "--out", str(out)]) == 0
    before = (out / "sweep.json").read_text()
    capsys.readouterr()
    assert main(["sweep", "--bucket-mb", "25", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    (kept,) = out.glob("earlier-*")
    assert str(kept) in err and sorted(p.name for p in kept.iterdir()) == [
        "sweep.csv", "sweep.json", "sweep.png"]
    assert (kept / "sweep.json").read_text() == before
    assert (out / "sweep.json").read_text() != before
    assert main(["sweep", "--bucket-mb", "25", "--out", str(out), "--force"]) == 0
    assert len(list(out.glob("earlier-*"))) == 1  # --force replaces in place


def test_top_level_help_is_for_users_not_developers(capsys):
    # issue 53 item 6: the help ended with notes on where subcommands live
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "simddp/cli/" not in out and "add_arguments" not in out
    # it shows the commands, and an example to copy
    assert all(command in out for command in ("sweep", "simulate", "account", "compare"))
    assert "--bucket-mb" in out and "1,10,100,1000" in out
