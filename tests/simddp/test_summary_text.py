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
import re
from pathlib import Path

from simddp.cli.main import main
from simddp.planning.hooks import parse_comm_hook
from simddp.inputs.profile import Layer, ModelProfile
from simddp.report.recommendation import (beyond_kinds, cap_changes_plan, fastest_text,
                                          recommendation_text, strategy_text)
from simddp.rig.cpu_share import starved_note
from simddp.result import Result
from simddp.planning.strategy import make_strategy
from simddp.predict.recommend import StrategyPick, recommend

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "tests/data/validate-default-2026-11-23/profile.json"
TOY = ModelProfile("toy", tuple(Layer(f"l{i}", (4 << 20,), 1e-3, 2e-3) for i in range(4)))


def fastest_lines(text: str) -> list[str]:
    """The summary's lines that say what is fastest."""
    return [x for x in text.splitlines() if "fastest" in x.lower()]


def numbers(line: str) -> list[str]:
    """The numbers a line gives, in order (what a summary line is about, without its words)."""
    return re.findall(r"\d+(?:\.\d+)?", line)


def named(line: str) -> list[str]:
    """The configurations a line names, in order."""
    names = {"naive", "overlap", "bucketed", "ddp", "hierarchical", "fsdp"}
    return [w.strip(",.;()") for w in line.split() if w.strip(",.;()") in names]


def advises_extending(text: str) -> bool:
    """Whether the summary tells the user to sweep beyond the swept sizes."""
    return "extend" in text and "--bucket-mb" in text


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
    # naive first, then both tied swept rows at 1 MB, their step, and how much more it is
    assert named(last) == ["naive", "bucketed", "ddp"]
    assert numbers(last) == ["447.65", "1", "1", "449.49", "1.84", "0.4"]
    assert fastest_lines(text) == [last]          # no other line names another fastest
    assert "×" not in text                         # nor a speedup over naive


def test_naive_swept_and_fastest_names_the_next():
    rows = [row("naive", None, 100.0), row("overlap", None, 104.0), row("ddp", 1, 102.0)]
    line = fastest_text(recommend(rows), rows[0], rows)
    assert named(line) == ["naive", "ddp"]                    # overlap (104 ms) is not next
    assert numbers(line) == ["100.00", "1", "102.00", "2.00", "2.0"]


def test_a_speedup_that_rounds_to_one_is_said_in_percent():
    rows = [row("naive", None, 100.0), row("ddp", 1, 99.7), row("ddp", 4, 100.5)]
    line = fastest_text(recommend(rows), rows[0], rows)
    assert named(line) == ["ddp", "naive"] and numbers(line) == ["1", "0.3"]
    assert "×" not in line and "less" in line.split()
    rows[1] = row("ddp", 1, 99.99)                 # 0.01% less: no difference to claim
    same = fastest_text(recommend(rows), rows[0], rows)
    assert "×" not in same and "less" not in same and "0.1%" in same
    rows[1] = row("ddp", 1, 50.0)
    twice = fastest_text(recommend(rows), rows[0], rows)
    assert "2.00×" in twice and "%" not in twice


def test_tied_fastest_rows_are_all_named():
    rows = [row("naive", None, 120.0), row("ddp", 1, 80.0), row("ddp", 4, 90.0),
            row("hierarchical", 1, 62.93), row("hierarchical", 2, 62.93),
            row("hierarchical", 4, 63.5)]
    line = fastest_text(recommend(rows), rows[0], rows)
    assert named(line) == ["hierarchical", "naive"]
    assert numbers(line) == ["1", "2", "62.93", "1.91"] and "1.91×" in line
    # without the rows (realrun validate's call), the one fastest row recommend() kept
    kept = recommend(rows).fastest
    assert (kept.strategy, kept.bucket_mb) == ("hierarchical", 1)
    alone = fastest_text(recommend(rows), rows[0])
    assert "hierarchical" in alone and "62.93" in alone and "and" not in alone.split()


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
    assert advises_extending(recommendation_text(rec))                # no profile: can't tell
    assert not advises_extending(recommendation_text(rec, profile=TOY))

    bucketed = [row("bucketed", 2, 30.0), row("bucketed", 8, 10.0)]
    assert recommend(bucketed).edge == "largest"
    assert advises_extending(recommendation_text(recommend(bucketed), profile=TOY))

    small = [row("bucketed", 1, 10.0), row("bucketed", 8, 30.0)]
    assert recommend(small).edge == "smallest"
    assert not advises_extending(recommendation_text(recommend(small), profile=TOY))


def test_the_not_faster_sentence_names_what_was_swept():
    versus = row("overlap", None, 62.09)
    hier = [row("hierarchical", 1, 62.25), row("hierarchical", 2, 62.25)]
    text = strategy_text(StrategyPick(hier[1], versus), {}, results=[versus, *hier])
    # its best row, 2 MB (closer to 25 MB than the tied 1 MB), 0.3 % more than overlap
    assert named(text) == ["hierarchical", "hierarchical", "overlap"]
    assert numbers(text) == ["2", "62.25", "0.3", "62.09"] and "more" in text.split()
    fp16 = row("ddp", 25, 70.0, comm_hook=parse_comm_hook("fp16"))
    fsdp = row("fsdp", None, 65.0)
    # the kinds the sentence names: what was swept beyond plain DDP, not the pick's alone
    assert beyond_kinds([versus, fsdp, fp16]) == ["sharding", "comm hooks"]
    assert beyond_kinds([fsdp, fp16, *hier]) == ["sharding", "comm hooks",
                                                 "the hierarchical all-reduce"]
    assert beyond_kinds([versus, fp16]) == ["comm hooks"]
    assert beyond_kinds([versus, *hier]) == ["the hierarchical all-reduce"]
    for pick, results in ((fsdp, [versus, fsdp, fp16]), (hier[0], [fsdp, fp16, *hier]),
                          (fp16, [versus, fp16])):
        line = strategy_text(StrategyPick(pick, versus), {}, results=results)
        assert line.startswith(beyond_kinds(results)[0].capitalize())
        step_ms = f"{pick.step_s * 1e3:.2f}"
        assert pick.strategy in line and step_ms in line


def cli(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_sweep_says_naive_is_fastest_with_its_measured_host_costs(capsys):
    # realrun's 288 µs per gradient (the measured host) on transformer-small's 111 gradients:
    # naive (simulated aside, not swept) beats every ddp and bucketed row
    out = cli(capsys, "sweep", "--model", "transformer-small", "--host", str(MEASURED),
              "--world-size", "64", "--link", "ib-8xndr", "--strategies", "ddp,bucketed",
              "--bucket-mb", "1,4,25,100")
    doc = json.loads(cli(capsys, "sweep", "--model", "transformer-small", "--host",
                         str(MEASURED), "--world-size", "64", "--link", "ib-8xndr",
                         "--strategies", "ddp,bucketed", "--bucket-mb", "1,4,25,100",
                         "--format", "json"))
    assert round(doc["setup"]["naive_step_ms"], 2) == 144.95
    assert "naive" not in {r["strategy"] for r in doc["rows"]}          # simulated aside
    assert all(r["step_ms"] > doc["setup"]["naive_step_ms"] for r in doc["rows"])
    assert all(r["speedup"] < 1 for r in doc["rows"])
    # the text names naive as the fastest, once, and claims no speedup over it
    (line,) = fastest_lines(out)
    assert line.split()[0] == "naive" and "144.95" in line and "×" not in line


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
    # the caution is the one for what the profile recorded: 2 ranks x 1 thread on 2 CPUs
    assert lines[noted[0]].endswith(starved_note("gloo", 2, 1, 2))
