"""``simddp sweep|simulate|account`` with sharding (fsdp, zero2) and comm hooks: the issue's
hand check on the command line, the strategy recommendation, the accounts, and bad input."""
from __future__ import annotations

import json

import pytest

from simddp.analytic.memory import Precision
from simddp.analytic.states import state_bytes
from simddp.analytic.traffic import comm_rows
from simddp.inputs.link import Link
from simddp.planning.plans import plan
from simddp.presets import build_profile, parse_model
from simddp.planning.strategy import MB, make_strategy
from tests.simddp.test_cli import cli

# The issue's hand check: mlp-4x1024 (B = 16 MiB), no compute, α 0, busbw 1 GB/s, 4 ranks.
HAND = ("--model", "mlp-4x1024", "--forward-ms", "0", "--backward-ms", "0",
        "--optimizer-ms", "0", "--alpha-us", "0", "--busbw-gbps", "1", "--world-size", "4")


def test_the_issue_hand_check_on_the_command_line(capsys):
    code, out, _ = cli(capsys, "sweep", *HAND, "--strategies", "flat,fsdp,zero2,bucketed",
                       "--bucket-mb", "25", "--comm-hook", "fp16", "--format", "json")
    assert code == 0
    ms = {r["strategy"]: r["step_ms"] for r in json.loads(out)["rows"]}
    b = 16 * MB
    assert ms["flat"] == pytest.approx(1.5 * b / 1e6)             # 25.166
    assert ms["fsdp"] == pytest.approx(3 * 0.75 * b / 1e6)        # 37.749
    assert ms["zero2"] == pytest.approx(1.5 * b / 1e6)            # 25.166
    # 12.583, plus at most 10 % for the casts (none here: presets' hosts are free)
    assert 0.75 * b / 1e6 <= ms["bucketed+fp16"] <= 1.1 * 0.75 * b / 1e6
    assert [round(ms[k], 3) for k in ("flat", "fsdp", "zero2", "bucketed+fp16")] == \
        [25.166, 37.749, 25.166, 12.583]


def test_simulate_names_the_units_and_the_kinds(capsys):
    code, out, _ = cli(capsys, "simulate", *HAND, "--strategy", "fsdp", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["kinds"] == ["all_gather", "reduce_scatter"]
    assert doc["collectives"] == 12 and round(doc["step_ms"], 3) == 37.749
    code, out, _ = cli(capsys, "simulate", *HAND, "--strategy", "zero2", "--shard-unit-mb", "8",
                       "--format", "json")
    doc = json.loads(out)       # 2 units of 8 MiB, each gathered and scattered once
    assert code == 0 and doc["kinds"] == ["all_gather", "reduce_scatter"]
    assert doc["collectives"] == 2 * 2
    code, out, _ = cli(capsys, "simulate", *HAND, "--strategy", "zero2", "--shard-unit-mb", "8")
    (heading,) = [x for x in out.splitlines() if x.startswith("zero2")]
    assert code == 0 and "2" in heading.split() and "reshard_after_forward=False)" in heading
    code, out, _ = cli(capsys, "simulate", *HAND, "--strategy", "ddp", "--comm-hook", "fp16",
                       "--format", "json")
    doc = json.loads(out)       # 16 MiB of fp32 gradients, sent as fp16
    assert code == 0 and doc["kinds"] == ["all_reduce"]
    assert (doc["allreduce_bytes"], doc["wire_bytes"]) == (16 * MB, 8 * MB)


def test_sweep_recommends_a_hook_when_it_is_faster_and_says_what_it_costs(capsys):
    # Comm-bound (1 GB/s, 4 ranks): fp16 halves what cannot hide behind 1 ms of backward.
    code, out, _ = cli(capsys, "sweep", "--model", "mlp-4x1024", "--busbw-gbps", "1",
                       "--world-size", "4", "--strategies", "ddp,fsdp,zero2",
                       "--bucket-mb", "1,25", "--comm-hook", "fp16", "--explain")
    assert code == 0
    text = out
    code, out, _ = cli(capsys, "sweep", "--model", "mlp-4x1024", "--busbw-gbps", "1",
                       "--world-size", "4", "--strategies", "ddp,fsdp,zero2",
                       "--bucket-mb", "1,25", "--comm-hook", "fp16", "--format", "json")
    pick = json.loads(out)["recommended_strategy"]
    assert pick["faster"] and pick["strategy"] == "ddp+fp16" and pick["versus"]["strategy"] == "ddp"
    assert sum(pick["model_state_bytes"].values()) == 4 * 16 * MB + 8 * MB   # + fp16 copies
    assert set(pick["model_state_bytes"]) - set(pick["versus"]["model_state_bytes"]) == {
        "16_bit_copies"}
    # the text recommends the same pick by the same gain, and cautions about the hook: it is
    # lossy, and its casts were free (the preset host has no copy rate)
    gain = f"{100 * pick['gain']:.1f}%"
    (line,) = [x for x in text.splitlines() if x.startswith("Recommended strategy")]
    assert line.split()[2] == "ddp+fp16" and gain in line.split()
    assert "convergence" in text and "charged" in text


def test_sweep_says_when_sharding_is_not_faster_and_what_it_would_save(capsys):
    code, out, _ = cli(capsys, "sweep", "--model", "mlp-8x2048", "--world-size", "8",
                       "--strategies", "ddp,fsdp", "--bucket-mb", "25", "--explain")
    assert code == 0
    # only sharding was swept: the sentence names sharding alone (issue 53)
    code, doc, _ = cli(capsys, "sweep", "--model", "mlp-8x2048", "--world-size", "8",
                       "--strategies", "ddp,fsdp", "--bucket-mb", "25", "--format", "json")
    pick = json.loads(doc)["recommended_strategy"]
    assert not pick["faster"] and pick["strategy"] == "fsdp"
    assert (pick["versus"]["strategy"], pick["versus"]["bucket_mb"]) == ("ddp", 25)
    # and what it would save: fsdp's states per rank, gathered units included, beside ddp's
    assert "gathered" in pick["model_state_bytes"]
    assert sum(pick["model_state_bytes"].values()) < sum(pick["versus"]["model_state_bytes"].values())
    # only sharding was swept: the sentence names sharding alone (issue 53), and the cost
    (line,) = [x for x in out.splitlines() if x.startswith("Sharding")]
    more = f"{-100 * pick['gain']:.1f}%"
    assert "fsdp" in line and more in line.split() and "hooks" not in line
    assert "gathered" in out   # fsdp's states, beside ddp's


def test_account_lists_each_strategy_from_its_plan(capsys):
    code, out, _ = cli(capsys, "account", "--model", "mlp-4x1024", "--world-size", "4",
                       "--comm-hook", "fp16,powersgd:1", "--shard-unit-mb", "8",
                       "--format", "json")
    doc = json.loads(out)
    assert code == 0
    rows = {r["strategy"]: r for r in doc["communication"]["rows"]}
    # 2 units of 8 MiB: fsdp gathers each twice and reduce-scatters it once: 6 calls, 48 MiB
    assert (rows["fsdp"]["collectives"], rows["fsdp"]["payload_bytes"]) == (6, 48 * MB)
    assert rows["zero2"]["kind"] == "all-gather + reduce-scatter"
    assert rows["ddp+fp16"]["payload_bytes"] == 8 * MB
    assert rows["bucketed+powersgd:1"]["collectives"] == 3
    states = {r["strategy"]: r for r in doc["states"]}
    # fsdp over 4 ranks: 4 MiB shards of params and grads, 8 MiB of Adam; 2 units of 8 MiB
    # gathered (one computing, one prefetched) and one unit's gradient: 24 MiB
    assert {k: v // MB for k, v in states["fsdp"].items() if k != "strategy"} == \
        {"params": 4, "grads": 4, "optimizer": 8, "gathered": 24}
    assert states["ddp+powersgd:1"]["error_feedback"] == 16 * MB


def test_account_rows_move_what_the_simulator_moves():
    profile = build_profile(parse_model("transformer-small"))
    link = Link("l", 1e-5, 10.0)
    rows = {r["strategy"]: r for r in comm_rows(profile, link, 8, Precision(), 25, 1)}
    for name in ("fsdp", "zero2", "ddp"):
        p = plan(profile, make_strategy(name, 25))
        assert rows[name]["payload_bytes"] == sum(c.nbytes for c in p.collectives)
        assert rows[name]["time_s"] == pytest.approx(sum(
            link.collective_s(c.kind, c.nbytes, 8) for c in p.collectives), rel=1e-12)
    assert state_bytes(plan(profile, make_strategy("zero2")), 8)["gathered"] > \
        state_bytes(plan(profile, make_strategy("fsdp")), 8)["gathered"]


BAD = {
    "unknown hook": ("sweep", "--comm-hook", "int8"),
    "powersgd rank 0": ("sweep", "--comm-hook", "powersgd:0"),
    "shard unit 0": ("sweep", "--strategies", "fsdp", "--shard-unit-mb", "0"),
    "shard unit negative": ("sweep", "--strategies", "fsdp", "--shard-unit-mb", "-4"),
    "shard unit not a number": ("sweep", "--strategies", "fsdp", "--shard-unit-mb", "big"),
    "shard unit without sharding": ("sweep", "--shard-unit-mb", "4"),
    "hook without ddp or bucketed": ("sweep", "--strategies", "flat,fsdp", "--comm-hook", "fp16"),
    "unknown strategy": ("sweep", "--strategies", "zero3"),
    "simulate hook on flat": ("simulate", "--strategy", "flat", "--comm-hook", "fp16"),
    "simulate hook on fsdp": ("simulate", "--strategy", "fsdp", "--comm-hook", "bf16"),
    "simulate two hooks": ("simulate", "--strategy", "ddp", "--comm-hook", "fp16,bf16"),
    "simulate shard unit on ddp": ("simulate", "--strategy", "ddp", "--shard-unit-mb", "4"),
    "simulate bad name": ("simulate", "--strategy", "ddp+int8"),
    "account hook on bf16 grads": ("account", "--comm-hook", "fp16", "--grad", "bf16"),
    "account shard unit 0": ("account", "--shard-unit-mb", "0"),
}


@pytest.mark.parametrize("argv", BAD.values(), ids=BAD.keys())
def test_bad_input_is_one_line_and_exit_2(capsys, argv):
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_recommend_strategy_weighs_the_fastest_of_each_kind():
    from simddp.result import Result
    from simddp.predict.recommend import recommend_strategy

    def row(strategy, mb, ms):
        return Result("m", "l", strategy, mb, 2, ms / 1e3, 0.0, 1)

    rows = [row("naive", None, 120), row("ddp", 10, 80), row("bucketed", 10, 80),
            row("bucketed+fp16", 1, 60), row("ddp+fp16", 1, 60), row("fsdp", None, 90),
            row("no_sync", 10, 10)]   # per optimizer step: never weighed against a step
    pick = recommend_strategy(rows)
    # ties go to torch DDP's rule: ddp over bucketed, ddp+fp16 over bucketed+fp16
    assert (pick.best.strategy, pick.versus.strategy) == ("ddp+fp16", "ddp")
    assert pick.faster and pick.gain == pytest.approx(0.25)          # 60 ms instead of 80
    assert recommend_strategy(rows[:3]) is None                      # nothing beyond DDP
    slower = recommend_strategy(rows[:3] + [rows[5]])
    assert not slower.faster and slower.gain == pytest.approx(-0.125)
