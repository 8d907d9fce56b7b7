"""``simddp scale``: per-GPU throughput and scaling efficiency over GPU counts (issue 62 item 3).

Hand-checked on round numbers: one 100 MB gradient (10⁸ bytes) whose collectives cannot
overlap anything (one layer: 10 ms forward, 20 ms backward), 100 GB/s inside an 8-GPU node,
10 GB/s between nodes, α 0, no contention (the toy names no device). A ring of p ranks moves
2(p−1)/p·n bytes per all-reduce and (p−1)/p·n per all-gather or reduce-scatter, paced by the
link between nodes once there are two nodes (docs/TOPOLOGY.md).
"""
from __future__ import annotations

import json
from dataclasses import fields

import pytest

from simddp import Layer, Link, ModelProfile, build_profile, parse_model
from simddp.cli.main import main
from simddp.errors import InputError
from simddp.planning.plans import plan
from simddp.planning.strategy import make_strategy
from simddp.predict.scaling import (SCALE_FORMAT, ScaleRequest, ScaleRow, by_block, clusters,
                                    layouts, scale)

TOY = ModelProfile("toy", (Layer("w", (10**8,), 0.010, 0.020),))
INTRA, INTER = Link("nvl", 0.0, 100.0), Link("ib", 0.0, 10.0)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def rows_of(answer, strategy: str) -> list[ScaleRow]:
    return [r for r in answer.rows if r.strategy == strategy]


def test_weak_scaling_efficiency_is_the_step_ratio_with_the_ring_on_the_slow_link():
    """ddp: 30 ms of compute, then the all-reduce: 2·7/8·10⁸ B / 100 GB/s = 1.75 ms in one
    node; 2·15/16·10⁸ B / 10 GB/s = 18.75 ms on 2 nodes, 19.375 ms on 4. Per-GPU batch fixed,
    so efficiency = step(8) / step(N)."""
    a = scale(TOY, INTER, clusters([32, 8, 16], 8, INTRA),
              ScaleRequest(("ddp",), micro_batch=4, seq=100))
    rows = rows_of(a, "ddp")
    assert [(r.gpus, r.nodes, r.gpus_per_node, r.accum_steps) for r in rows] == \
        [(8, 1, 8, 1), (16, 2, 8, 1), (32, 4, 8, 1)]
    assert [r.step_ms for r in rows] == pytest.approx([31.75, 48.75, 49.375])
    assert [r.exposed_comm_ms for r in rows] == pytest.approx([1.75, 18.75, 19.375])
    assert [r.efficiency for r in rows] == pytest.approx([1.0, 31.75 / 48.75, 31.75 / 49.375])
    assert [r.samples_per_s_per_gpu for r in rows] == pytest.approx([4 / 0.03175, 4 / 0.04875,
                                                                 4 / 0.049375])
    assert [r.tokens_per_s_per_gpu for r in rows] == pytest.approx(
        [100 * r.samples_per_s_per_gpu for r in rows])
    assert [r.global_batch for r in rows] == [32, 64, 128]


def test_strong_scaling_accumulation_steps_follow_the_global_batch():
    """256 samples at micro-batch 8: 4 micro-steps on 8 GPUs, 2 on 16, 1 on 32. ddp syncs the
    last only (no_sync): 3·30 + 30 + 1.75 ms; 30 + 30 + 18.75; 30 + 19.375. fsdp gathers,
    re-gathers and reduce-scatters every micro-step: 3 calls of (p−1)/p·10⁸ B each."""
    a = scale(TOY, INTER, clusters([8, 16, 32], 8, INTRA),
              ScaleRequest(("ddp", "fsdp"), micro_batch=8, global_batch=256))
    ddp, fsdp = rows_of(a, "ddp"), rows_of(a, "fsdp")
    assert [r.accum_steps for r in ddp] == [r.accum_steps for r in fsdp] == [4, 2, 1]
    assert {r.global_batch for r in a.rows} == {256}
    assert [r.step_ms for r in ddp] == pytest.approx([121.75, 78.75, 49.375])
    assert [r.collectives for r in ddp] == [1, 1, 1]
    call_ms = [7 / 8 * 1.0, 15 / 16 * 10.0, 31 / 32 * 10.0]    # one call of 10⁸ B, ms
    assert [r.collectives for r in fsdp] == [12, 6, 3]
    assert [r.exposed_comm_ms for r in fsdp] == pytest.approx(
        [3 * k * c for k, c in zip([4, 2, 1], call_ms)])
    samples = [256 / n / (r.step_ms / 1e3) for n, r in zip([8, 16, 32], ddp)]
    assert [r.samples_per_s_per_gpu for r in ddp] == pytest.approx(samples)
    assert [r.efficiency for r in ddp] == pytest.approx([s / samples[0] for s in samples])
    assert ddp[0].tokens_per_s_per_gpu is None     # no sequence given: counted in samples


def test_a_global_batch_that_does_not_split_into_whole_micro_steps_is_refused():
    with pytest.raises(InputError, match="--global-batch"):
        scale(TOY, INTER, clusters([8, 16], 8, INTRA),
              ScaleRequest(("ddp",), micro_batch=8, global_batch=96))


def test_counts_fill_whole_nodes_or_part_of_one():
    assert layouts([16, 4, 8, 16], 8) == [(1, 4), (1, 8), (2, 8)]
    for bad in ([12], [1, 8], []):
        with pytest.raises(InputError, match="--gpus"):
            layouts(bad, 8)


def test_sharded_strategies_run_a_unit_per_transformer_block():
    profile = build_profile(parse_model("transformer-small"))   # 12 blocks
    blocks = by_block(profile)
    assert [layer.name for layer in blocks.layers[1:13]] == [f"blocks.{i}" for i in range(12)]
    assert blocks.grad_total_bytes == profile.grad_total_bytes
    assert blocks.forward_s == pytest.approx(profile.forward_s)
    assert len(plan(blocks, make_strategy("fsdp")).units) == 14   # embed, 12 blocks, norm+head
    assert by_block(TOY) is None
    assert by_block(build_profile(parse_model("mlp-4x1024"))) is None   # a unit per layer


def test_answer_json_holds_every_row_field(capsys, tmp_path):
    code, out, err = cli(capsys, "scale", "--gpus", "8,16", "--strategies", "ddp,fsdp",
                         "--link", "ib-hdr", "--format", "json", "--out", str(tmp_path))
    assert code == 0
    doc = json.loads(out)
    assert doc["format"] == SCALE_FORMAT and doc["setup"]["scaling"] == "weak"
    assert [(r["strategy"], r["gpus"]) for r in doc["rows"]] == \
        [("ddp", 8), ("ddp", 16), ("fsdp", 8), ("fsdp", 16)]
    assert all(set(r) == {f.name for f in fields(ScaleRow)} for r in doc["rows"])
    assert set(doc["setup"]["strategies"]) == {"ddp", "fsdp"}
    assert json.loads((tmp_path / "scale.json").read_text()) == doc
    assert (tmp_path / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_table_has_a_row_per_strategy_and_count(capsys):
    code, out, _ = cli(capsys, "scale", "--gpus", "8,16,32", "--strategies", "ddp,hsdp")
    assert code == 0
    rows = [line.split() for line in out.splitlines()
            if line.split()[:1] in (["ddp"], ["hsdp"])]
    assert [(r[0], int(r[1])) for r in rows] == [("ddp", 8), ("ddp", 16), ("ddp", 32),
                                                 ("hsdp", 8), ("hsdp", 16), ("hsdp", 32)]


@pytest.mark.parametrize("argv, flag", [
    (["--gpus", "12"], "--gpus"),
    (["--gpus", "8,x"], "--gpus"),
    (["--gpus", "1,8"], "--gpus"),
    (["--global-batch", "100"], "--global-batch"),
    (["--global-batch", "64", "--accum-steps", "2"], "--accum-steps"),
    (["--strategies", "ddp,no_sync"], "--strategies"),
    (["--batch", "0"], "--batch"),
    (["--bucket-mb", "0"], "--bucket-mb"),
    (["--gpus-per-node", "0"], "--gpus-per-node"),
    (["--model", "decoder:hidden=0,layers=2,heads=2,ffn=8,vocab=10,seq=8"], "hidden"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, flag):
    code, out, err = cli(capsys, "scale", *argv, "--out", str(tmp_path / "out"))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and flag in err
    assert not (tmp_path / "out").exists()
