"""`python -m realrun bench`: argument checks, aggregation, failure handling, one real run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import weakref
from argparse import Namespace

import pytest

import realrun.bench as bench
from realrun.cli import main
from realrun.commands.bench import WARMUP_PER, format_table
from realrun.launch.allocator import held_models_note
from realrun.configs import bench_configs, label
from realrun.workload import Workload
from realrun.launch.errors import LaunchError
from simddp.result import load_results
from simddp.presets.models import parse_model
from simddp.planning.strategy import make_strategy
from tests._messages import assert_one_line

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = ["--model", "mlp-2x64", "--batch", "1", "--seq", "2"]


# Each line names the flag and the value at fault (and, where one exists, the flag to use).
@pytest.mark.parametrize("argv, names", [
    (["--strategies", "naive,bogus"], ("--strategies", "bogus")),
    (["--strategies", "naive,no_sync"], ("--strategies", "no_sync")),
    (["--bucket-mb", "1,0"], ("--bucket-mb", "0")),
    (["--bucket-mb", "ten"], ("--bucket-mb", "ten")),
    (["--steps", "0"], ("--steps", "0")),
    (["--warmup", "0"], ("--warmup", "0")),
    (["--warmup", "1"], ("--warmup", "1", "2")),          # torch DDP rebuilds on step 2
    (["--world-size", "0"], ("--world-size", "0")),
    (["--world-size", "1"], ("--world-size", "1", "--scaling")),
    (["--link-gbit", "1"], ("--link-gbit", "1", "--emulate-hosts")),
    (["--emulate-hosts", "3"], ("--emulate-hosts", "3", "--world-size", "2")),
    (["--timeout-s", "-1"], ("--timeout-s", "-1.0")),
    (["--d-ff", "8"], ("--d-ff", "mlp-2x64")),
    (["--model", "out/profile.json"], ("--model", "out/profile.json")),
    (["--backend", "mpi"], ("--backend", "mpi")),
    (["--steps", "three"], ("--steps", "three")),
])
def test_bad_args_exit_2_with_one_line_and_no_files(argv, names, tmp_path, capsys):
    out = tmp_path / "out"
    assert _exit_code(["bench", *TINY, *argv, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert_one_line(captured.err, *names)
    assert captured.out == "" and not out.exists()


def test_a_folder_of_another_commands_results_is_refused(tmp_path, capsys):
    # An earlier bench run is moved aside (tests/simddp/test_outdir.py); a sweep's is not
    # bench's to move.
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text("{}")
    assert _exit_code(["bench", *TINY, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert_one_line(err, "--out", str(out), "sweep.json")
    assert sorted(p.name for p in out.iterdir()) == ["sweep.json"]


def _notes(table: str) -> list[str]:
    """The table's caution notes ("# note: ...", each without that prefix)."""
    return [line.split(" ", 2)[2] for line in table.splitlines()
            if line.split()[:2] == ["#", "note:"]]


def _exit_code(argv: list[str]) -> int:
    """main's return value, or the code argparse exits with on a usage error."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def test_rank_failure_exits_1_naming_the_rank_and_writes_nothing(tmp_path, capsys, monkeypatch):
    failure = "rank 1 failed: RuntimeError: boom"
    def fail(*args, **kwargs):
        raise LaunchError(failure)
    monkeypatch.setattr(bench, "run_world", fail)
    out, traces = tmp_path / "out", tmp_path / "traces"
    assert main(["bench", *TINY, "--out", str(out), "--trace", str(traces)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.rstrip().endswith(failure)   # the rank's failure, as it was raised
    assert not out.exists() and not traces.exists()


def test_configs_compute_only_first_and_one_per_bucket_for_bucketed_strategies():
    """The grid is simddp's sweep grid (canonical order, sorted unique buckets): a benchmark
    measures exactly what a sweep predicts."""
    configs = bench_configs(["ddp", "naive", "bucketed"], [10.0, 1.0, 1.0])
    assert [{"strategy": c["strategy"], "bucket_mb": c["bucket_mb"]} for c in configs] == [
        {"strategy": "compute-only", "bucket_mb": None}, {"strategy": "naive", "bucket_mb": None},
        {"strategy": "bucketed", "bucket_mb": 1.0}, {"strategy": "bucketed", "bucket_mb": 10.0},
        {"strategy": "ddp", "bucket_mb": 1.0}, {"strategy": "ddp", "bucket_mb": 10.0}]
    # each row carries the Strategy it runs, serialised: ranks never rebuild it from a name
    assert [c["spec"] for c in configs] == [None] + [
        make_strategy(name, *mb).to_dict() for name, mb in (
            ("naive", ()), ("bucketed", (1.0,)), ("bucketed", (10.0,)), ("ddp", (1.0,)),
            ("ddp", (10.0,)))]
    assert label({"strategy": "ddp", "bucket_mb": 2.5}) == "ddp-2.5MB"


def _counting_run(monkeypatch, hold: str | None):
    """run_rank over configurations "a" and "b" (3 steps, chunks of 2, warmup 1) with a
    stand-in Trainer: the steps it ran as (config, timed?) in order, the models it built,
    and run_rank's output."""
    ran: list[tuple[str, bool]] = []       # (config, timed?) in order
    built: list[str] = []
    clock = {"timing": False}
    alive: set[int] = set()
    most = [0]    # the most models alive while one stepped

    class Counting:
        def __init__(self, config, workload, ctx, payload):
            self.name = config["strategy"]
            built.append(self.name)
            alive.add(id(self))
            weakref.finalize(self, alive.discard, id(self))

        def step(self):
            ran.append((self.name, clock["timing"]))
            most[0] = max(most[0], len(alive))

        def collectives(self):
            return 0

    def timed(ctx, step):
        clock["timing"] = True
        step()
        clock["timing"] = False
        return 0.001
    monkeypatch.setattr(bench, "Trainer", Counting)
    monkeypatch.setattr(bench, "timed", timed)
    ctx = Namespace(barrier=lambda: None, rank=0, world_size=2, allocator="")
    workload = Workload.preset(parse_model("mlp-2x64"), 1, 2).to_json()
    payload = {"workload": workload, "configs": [{"strategy": "a", "bucket_mb": None},
                                                 {"strategy": "b", "bucket_mb": None}],
               "steps": 3, "warmup": 1, "chunk": 2, **({"hold": hold} if hold else {})}
    out = bench.run_rank(payload, ctx)
    assert out["steps_s"] == [[0.001] * 3, [0.001] * 3]
    assert out["models_held"] == most[0]     # what it reports is what was alive
    return ran, built, out


def test_by_default_each_turn_builds_its_model_afresh_and_warms_it_up(monkeypatch):
    """One model held at a time, as in a training job: a turn whose configuration is not held
    builds it and runs ``warmup`` untimed steps first; a turn that continues the held one
    (b, across the round's end) does not. The starting configuration rotates each round."""
    ran, built, out = _counting_run(monkeypatch, None)
    assert ran == [("a", False), ("a", True), ("a", True),   # round 0: a built, warmed, timed
                   ("b", False), ("b", True), ("b", True),   # b replaces a
                   ("b", True),                              # round 1 starts with b, still held
                   ("a", False), ("a", True)]                # a built again
    assert built == ["a", "b", "a"] and out["models_held"] == 1


def test_holding_all_warms_each_once_then_starts_each_chunk_with_an_untimed_step(monkeypatch):
    """``hold: all``: every model built and warmed up once and kept; each chunk first runs one
    untimed step, as the caches still hold the previous configuration's model."""
    ran, built, out = _counting_run(monkeypatch, "all")
    assert ran == [("a", False), ("b", False),                           # warm-up
                   ("a", False), ("a", True), ("a", True), ("b", False), ("b", True), ("b", True),
                   ("b", False), ("b", True), ("a", False), ("a", True)]  # rotated
    assert built == ["a", "b"] and out["models_held"] == 2


def test_summary_takes_the_max_over_ranks_per_step_then_the_median():
    spec = parse_model("mlp-2x4")
    payload = {"workload": Workload.preset(spec, 1, 2).to_json(),
               "configs": bench_configs(["bucketed"], [1.0])}
    ranks = [{"steps_s": [[0.010, 0.030, 0.020], [0.015, 0.040, 0.050]], "collectives": [0, 2]},
             {"steps_s": [[0.020, 0.010, 0.020], [0.045, 0.030, 0.035]], "collectives": [0, 2]}]
    run = bench.summarize(ranks, payload, link="loopback")
    results, stats = run.results, run.stats
    assert run.extras == {}
    assert stats[0]["steps_s"] == [0.020, 0.030, 0.020] and stats[0]["median_s"] == 0.020
    assert stats[1]["steps_s"] == [0.045, 0.040, 0.050] and stats[1]["median_s"] == 0.045
    compute, bucketed = results
    assert (compute.strategy, compute.collectives, compute.exposed_comm_s) == ("compute-only", 0, 0)
    assert bucketed.exposed_comm_s == pytest.approx(0.025)
    assert (compute.spec, bucketed.spec) == (None, make_strategy("bucketed", 1.0))  # spec=
    assert (bucketed.source, bucketed.samples, bucketed.model, bucketed.world_size,
            bucketed.collectives, bucketed.link) == ("measured", 3, "mlp-2x4", 2, 2, "loopback")
    assert results[0].spans == () and results[1].spans == ()      # no --timelines
    def step(step_s, end_s, lane="compute"):   # one clocked step of one rank
        return {"step_s": step_s, "spans": [[lane, "x", 0, end_s, "forward"]]}
    # every rank's clocked steps per config; bucketed's steps by their slower rank: 0.05,
    # 0.06, 0.07 -> the second, which rank 1 ended last
    ranks[0]["timelines"] = [[step(0.02, 0.01)], [step(0.05, 0.01, "comm"), step(0.04, 0.02),
                                                  step(0.07, 0.03)]]
    ranks[1]["timelines"] = [[step(0.03, 0.02)], [step(0.04, 0.04, "comm"), step(0.06, 0.05),
                                                  step(0.01, 0.06)]]
    compute_t, bucketed_t = bench.summarize(ranks, payload, link="loopback").results
    assert (compute_t.spans_rank, [sp.end_s for sp in compute_t.spans]) == (1, [0.02])
    assert bucketed_t.spans_rank == 1 and [sp.end_s for sp in bucketed_t.spans] == [0.05]
    assert [[sp.end_s for sp in spans] for spans in bucketed_t.rank_spans] == [[0.02], [0.05]]
    table = format_table(Namespace(what="batch 1 x seq 2 per rank", optimizer="sgd",
                                   precision="fp32", backend="gloo", threads=1,
                                   steps=3, warmup=1, chunk=2, hold="one", out="o",
                                   trace=None, timelines=False),
                         results, stats, None)
    assert "bucketed" in table and table.count("\n") == 5
    assert WARMUP_PER["one"] in table   # the header says what each warm-up was per
    # --hold all: a Gloo rank that held several models on 4 KiB pages, one caution line
    held = Namespace(**vars(Namespace(what="w", optimizer="sgd", precision="fp32",
                                      backend="gloo", threads=1, steps=3, warmup=1, chunk=2,
                                      hold="all", out="o", trace=None, timelines=False)),
                     host={"models_held": 3, "allocator": "glibc: ..., no trim, 4 KiB pages"})
    table = format_table(held, results, stats, None)
    assert WARMUP_PER["all"] in table
    assert _notes(table) == [held_models_note("gloo", 3, held.host["allocator"])]
    held.host["allocator"] = "glibc: ..., heap on huge pages"
    assert _notes(format_table(held, results, stats, None)) == []


@pytest.mark.slow
def test_bench_end_to_end_json_trace_and_scaling(tmp_path):
    out, traces = tmp_path / "out", tmp_path / "traces"
    argv = [sys.executable, "-m", "realrun", "bench", *TINY, "--strategies", "naive,bucketed,ddp",
            "--bucket-mb", "0.01", "--steps", "3", "--warmup", "2", "--chunk", "2",
            "--format", "json", "--out", str(out), "--trace", str(traces), "--trace-steps", "1",
            "--comm-hook", "fp16", "--scaling", "--timelines", "--timeout-s", "30"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)                    # stdout is exactly one JSON document
    rows = doc["rows"]
    # the compute-only twin (realrun/twin.py): timed as an extra, not a row, and no trace
    gap = doc["instance_gap"]
    assert gap["apart_pct"] == pytest.approx(
        100 * abs(gap["twin_ms"] - gap["compute_only_ms"])
        / min(gap["twin_ms"], gap["compute_only_ms"]), abs=0.01)
    assert gap["compute_only_ms"] == pytest.approx(rows[0]["median_ms"])
    written = json.loads((out / "bench.json").read_text())
    assert written["instance_gap"] == gap
    # rank 0's CPUs and the ranks sharing them, for compare's caution (simddp/rig/cpu_share.py)
    assert written["bench"]["cpus"] == len(os.sched_getaffinity(0))
    assert written["bench"]["ranks_on_host"] == 2
    # one model held at a time (a turn builds its own), and the allocator
    assert written["bench"]["models_held"] == 1
    assert written["bench"]["allocator"].startswith(("glibc:", "left"))
    assert [(r["strategy"], r["bucket_mb"]) for r in rows] == [
        ("compute-only", None), ("naive", None), ("bucketed", 0.01), ("bucketed+fp16", 0.01),
        ("ddp", 0.01), ("ddp+fp16", 0.01)]
    assert all(set(r) == {"strategy", "bucket_mb", "median_ms", "p95_ms", "steps"} for r in rows)
    assert all(r["steps"] == 3 and r["p95_ms"] >= r["median_ms"] > 0 for r in rows)

    results = load_results(out / "bench.json")
    assert {r.source for r in results} == {"measured"} and results[0].model == "mlp-2x64"
    # 0.01 MiB caps hold one 16 KiB tensor each: two all-reduces for bucketed; torch DDP keeps
    # its 1 MiB first bucket (simddp's ddp plan), which holds both tensors: one all-reduce
    assert [r.collectives for r in results] == [0, 2, 2, 2, 1, 1]
    assert (out / "bench.csv").read_text().count("\n") == 7
    scaling = json.loads((out / "bench.json").read_text())["scaling"]
    assert scaling[-1]["strategy"] == "single-process" and scaling[-1]["ranks"] == 1

    # --timelines: every rank's clocked spans, the step's slower rank's as its spans;
    # collectives where realrun.DDP launches them and torch DDP's through a clocking comm
    # hook, not where DDP runs a comm hook of its own
    assert all(len(r.rank_spans) == 2 and r.spans == r.rank_spans[r.spans_rank]
               for r in results)
    for rank in (0, 1):
        lanes = [{sp.lane for sp in r.rank_spans[rank]} for r in results]
        assert lanes == [{"compute"}, {"compute", "comm"}, {"compute", "comm"}, {"compute"},
                         {"compute", "comm"}, {"compute"}]
        assert [sum(sp.lane == "comm" for sp in r.rank_spans[rank])
                for r in results] == [0, 2, 2, 0, 1, 0]
    assert all(0 <= sp.start_s <= sp.end_s for r in results for spans in r.rank_spans
               for sp in spans)

    names = sorted(p.name for p in traces.iterdir())
    assert names == sorted(f"{c}.rank{r}.json" for r in (0, 1)
                           for c in ("compute-only", "naive", "bucketed-0.01MB",
                                     "bucketed+fp16-0.01MB", "ddp-0.01MB", "ddp+fp16-0.01MB"))
    trace = json.loads((traces / "bucketed-0.01MB.rank0.json").read_text())
    ranges = {event.get("name") for event in trace["traceEvents"]}
    assert {"forward", "backward", "sync", "optimizer"} <= ranges
