"""Issue 53, items 2 and 7: every summary line is computed from the rows it summarises.

    python -m pytest tests/simddp/test_summary_text.py -q      # no processes, a few seconds

- the naive baseline, simulated aside and printed under the table, counts when it is faster
  ("naive is fastest"), and a speedup that rounds to 1.00× is said in percent;
- configurations tied to the fastest are all named, so the strategy pick cannot contradict it;
- "extend --bucket-mb" only where a cap beyond the swept ones makes other buckets;
- the "not faster" sentence names the kinds that were swept (the hierarchical all-reduce is
  neither sharding nor a hook);
- the CPU caution is printed once, after the summary.

The toy model: 4 gradients of 4 MiB (16 MiB), ready one per layer.
"""
from __future__ import annotations

import json
from pathlib import Path

from simddp.cli.main import main
from simddp.planning.hooks import parse_comm_hook
from simddp.inputs.profile import Layer, ModelProfile
from simddp.report.recommendation import (cap_changes_plan, fastest_text, recommendation_text,
                                          strategy_text)
from simddp.result import Result
from simddp.planning.strategy import make_strategy
from simddp.predict.recommend import StrategyPick, recommend

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "tests/data/validate-default-2026-11-23/profile.json"
TOY = ModelProfile("toy", tuple(Layer(f"l{i}", (4 << 20,), 1e-3, 2e-3) for i in range(4)))


def row(name: str, mb: float | None, step_ms: float, **kw) -> Result:
    spec = make_strategy(name) if mb is None else make_strategy(name, mb, **kw)
    return Result("toy", "l", spec.name, mb, 2, step_ms / 1e3, 0.0, 4, spec=spec)


def test_naive_printed_aside_and_faster_is_the_fastest():
    # the case: naive 447.65 ms beside a best swept row of 449.49 ms
    swept = [row("bucketed", 1, 449.49), row("bucketed", 4, 452.0), row("ddp", 1, 449.49),
             row("ddp", 4, 451.0)]
    naive = row("naive", None, 447.65)
    text = recommendation_text(recommend(swept), naive, results=swept)
    last = text.splitlines()[-1]
    assert last == ("naive is fastest: 447.65 ms per step (the speedup baseline); no swept "
                    "configuration beats it — the fastest, bucketed at 1 MB and ddp at 1 MB, "
                    "takes 449.49 ms "
                    "(1.84 ms, 0.4% more).")
    assert "Fastest configuration overall" not in text and "faster than naive" not in text


def test_naive_swept_and_fastest_names_the_next():
    rows = [row("naive", None, 100.0), row("overlap", None, 104.0), row("ddp", 1, 102.0)]
    assert fastest_text(recommend(rows), rows[0], rows) == (
        "naive is fastest: 100.00 ms per step; the next, ddp at 1 MB, takes 102.00 ms "
        "(2.00 ms, 2.0% more).")


def test_a_speedup_that_rounds_to_one_is_said_in_percent():
    rows = [row("naive", None, 100.0), row("ddp", 1, 99.7), row("ddp", 4, 100.5)]
    line = fastest_text(recommend(rows), rows[0], rows)
    assert line == ("The recommended ddp at 1 MB is also the fastest configuration overall "
                    "(0.3% less time than naive).")
    rows[1] = row("ddp", 1, 99.99)
    assert fastest_text(recommend(rows), rows[0], rows).endswith(
        "(the same as naive to 0.1%).")
    rows[1] = row("ddp", 1, 50.0)
    assert fastest_text(recommend(rows), rows[0], rows).endswith("(2.00× faster than naive).")


def test_tied_fastest_rows_are_all_named():
    rows = [row("naive", None, 120.0), row("ddp", 1, 80.0), row("ddp", 4, 90.0),
            row("hierarchical", 1, 62.93), row("hierarchical", 2, 62.93),
            row("hierarchical", 4, 63.5)]
    line = fastest_text(recommend(rows), rows[0], rows)
    assert line == ("Fastest configuration overall: hierarchical at 1 and 2 MB, 62.93 ms per "
                    "step (1.91× faster than naive).")
    # without the rows (realrun validate's call), the one fastest row recommend() kept
    assert fastest_text(recommend(rows), rows[0]).startswith(
        "Fastest configuration overall: hierarchical at 1 MB, 62.93 ms")


def test_extend_bucket_mb_only_where_a_larger_cap_makes_other_buckets():
    # ddp at 16 MB: the 1 MiB first bucket takes one 4 MiB gradient, the other 12 MiB fit
    # one bucket already; bucketed at 8 MB makes two buckets, a larger cap would make one.
    ddp16, bucketed8 = make_strategy("ddp", 16), make_strategy("bucketed", 8)
    assert not cap_changes_plan(TOY, ddp16, "largest")
    assert cap_changes_plan(TOY, bucketed8, "largest")
    assert not cap_changes_plan(TOY, make_strategy("bucketed", 1), "smallest")  # one each

    ddp = [row("ddp", 1, 30.0), row("ddp", 8, 20.0), row("ddp", 16, 10.0)]
    rec = recommend(ddp)
    assert rec.edge == "largest"
    assert "extend --bucket-mb" in recommendation_text(rec)             # no profile: can't tell
    assert "extend --bucket-mb" not in recommendation_text(rec, profile=TOY)

    bucketed = [row("bucketed", 2, 30.0), row("bucketed", 8, 10.0)]
    text = recommendation_text(recommend(bucketed), profile=TOY)
    assert "It is the largest size swept; sizes beyond it might be faster still" in text

    small = [row("bucketed", 1, 10.0), row("bucketed", 8, 30.0)]
    assert recommend(small).edge == "smallest"
    assert "extend --bucket-mb" not in recommendation_text(recommend(small), profile=TOY)


def test_the_not_faster_sentence_names_what_was_swept():
    versus = row("overlap", None, 62.09)
    hier = [row("hierarchical", 1, 62.25), row("hierarchical", 2, 62.25)]
    text = strategy_text(StrategyPick(hier[1], versus), {}, results=[versus, *hier])
    assert text == ("The hierarchical all-reduce is not faster here: its best row, "
                    "hierarchical at 2 MB, takes 62.25 ms per step, 0.3% more than overlap "
                    "(62.09 ms).")
    fp16 = row("ddp", 25, 70.0, comm_hook=parse_comm_hook("fp16"))
    fsdp = row("fsdp", None, 65.0)
    both = strategy_text(StrategyPick(fsdp, versus), {}, results=[versus, fsdp, fp16])
    assert both.startswith("Sharding and comm hooks are not faster here: the best of them, "
                           "fsdp, takes 65.00 ms")
    three = strategy_text(StrategyPick(hier[0], versus), {}, results=[fsdp, fp16, *hier])
    assert three.startswith("Sharding, comm hooks and the hierarchical all-reduce are not "
                            "faster here: the best of them, hierarchical at 1 MB")
    hooks = strategy_text(StrategyPick(fp16, versus), {}, results=[versus, fp16])
    assert hooks.startswith("Comm hooks are not faster here: the best of them, ddp+fp16 at 25")


def cli(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_sweep_says_naive_is_fastest_with_its_measured_host_costs(capsys):
    # realrun's 288 µs per gradient (the measured host) on transformer-small's 111 gradients:
    # naive (simulated aside, not swept) beats every ddp and bucketed row
    out = cli(capsys, "sweep", "--model", "transformer-small", "--host", str(MEASURED),
              "--world-size", "64", "--link", "ib-8xndr", "--strategies", "ddp,bucketed",
              "--bucket-mb", "1,4,25,100")
    assert "(naive, the speedup baseline: 144.95 ms per step)" in out
    assert "naive is fastest: 144.95 ms per step" in out
    assert "Fastest configuration overall" not in out and "faster than naive" not in out


def test_sweep_prints_the_cpu_caution_once_after_the_summary(capsys, tmp_path):
    doc = json.loads(MEASURED.read_text())
    doc["measured"].update(backend="gloo", threads=1, cpus=2, ranks_on_host=2)
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(doc))
    out = cli(capsys, "sweep", "--model", str(profile), "--bucket-mb", "1,4,25")
    lines = out.splitlines()
    noted = [i for i, x in enumerate(lines) if "wait for a core" in x]
    summary = next(i for i, x in enumerate(lines) if x.startswith("Recommended bucket_cap_mb"))
    assert len(noted) == 1 and noted[0] > summary
    assert lines[noted[0]].startswith("note: profiled with 2 ranks x (1 training thread")
