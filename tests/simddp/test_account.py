"""simddp account: memory terms, FSDP sharding, communication volume — hand-computed numbers.

Units: GB = 1e9 bytes, GiB = 2**30 bytes. The worked example is the issue's: 126 blocks of
bias-free d_model=16384 → d_ff=53248 → d_model, fp32 master/grads/Adam, bf16 activations.
"""
from __future__ import annotations

import json

import pytest

from simddp.cli.main import main
from simddp.errors import InputError
from simddp.analytic.memory import (GiB, Precision, activation_terms, fsdp_device_bytes, fsdp_min_world,
                           fsdp_units, memory_report)
from simddp.presets.models import ModelSpec, parse_model

# P = 126 blocks × 2 linears × 16384 × 53248 = 126 × 1,744,830,464 = 219,848,638,464
P = 219_848_638_464
BLOCK = 1_744_830_464          # one FSDP unit: up + down = 2 · 16384 · 53248
FFN = "ffn-126x16384x53248"


def run_cli(capsys, *argv):
    code = main(["account", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_worked_example_bytes():
    spec = parse_model(FFN)
    assert spec.n_params == P == 126 * BLOCK
    r = memory_report(spec, Precision(comm="bf16"), batch=1, seq=1024, world_size=8,
                      device_mem_gb=80)
    rep = r["replicated"]
    # fp32 master 4·P, fp32 grads 4·P, Adam two fp32 moments 8·P: 16 bytes per parameter.
    assert rep["params"] == rep["grads"] == 4 * P == 879_394_553_856      # 879.39 GB
    assert rep["optimizer"] == 8 * P == 1_758_789_107_712                   # 1758.79 GB
    # 2^14 · 13·2^12 · 2 · 126 · 4 = 1638 · 2^29: parameters are exactly 819 GiB.
    assert rep["params"] == 819 * GiB and rep["optimizer"] == 1638 * GiB
    # Activations: T = 1·1024 tokens; each block saves the up input (T·16384) and the
    # hidden (T·53248) in bf16: 1024 · 69632 · 2 = 142,606,336 bytes; × 126 blocks.
    assert rep["activations"] == 126 * 1024 * (16384 + 53248) * 2 == 17_968_398_336
    assert rep["weight_copy"] == 0
    assert rep["total"] == 16 * P + 17_968_398_336 == 3_535_546_613_760   # 3535.55 GB
    # FSDP at N = 8: every unit's 1,744,830,464 params split evenly (8 divides it).
    f = r["fsdp"]
    assert f["params"] == 126 * (BLOCK // 8) * 4 == 109_924_319_232
    assert f["optimizer"] == 126 * (BLOCK // 8) * 8
    # Working set: one block gathered in fp32 (no weight copy) with its fp32 gradient.
    assert f["working_set"] == BLOCK * (4 + 4) == 13_958_643_712
    assert f["total"] == 16 * P // 8 + 13_958_643_712 + 17_968_398_336 == 471_624_318_976


def test_worked_example_fsdp_device_count():
    # Room for shards: 80e9 − 13,958,643,712 (working set) − 17,968,398,336 (activations)
    # = 48,072,957,952 bytes; 16·P / that = 73.17 → N = 74. Shards are ceil(BLOCK/N) per unit:
    #   N = 73: ceil = 23,901,788; × 126 × 16 = 48,186,004,608 > 48,072,957,952 → no
    #   N = 74: ceil = 23,578,791; × 126 × 16 = 47,534,842,656 → total 79,461,884,704 → fits
    spec, prec = parse_model(FFN), Precision(comm="bf16")
    units, act = fsdp_units(spec), 17_968_398_336
    assert units == [BLOCK] * 126
    assert sum(fsdp_device_bytes(units, prec, act, 73).values()) == \
        23_901_788 * 126 * 16 + 13_958_643_712 + act > 80e9
    assert sum(fsdp_device_bytes(units, prec, act, 74).values()) == 79_461_884_704 <= 80e9
    assert fsdp_min_world(units, prec, act, 80e9) == 74
    # Variants quoted in docs/ACCOUNT.md: 1 × 2048 tokens doubles the activations → 117;
    # bf16 gathers (--weight-copy bf16) shrink the working set to BLOCK·(2+4) → 69;
    # 80 GiB read as 85.9e9 bytes → 66.
    assert memory_report(spec, prec, 1, 2048, 1, 80)["fsdp_min_world"] == 117
    assert memory_report(spec, Precision(weight_copy="bf16"), 1, 1024, 1, 80)[
        "fsdp_min_world"] == 69
    assert fsdp_min_world(units, prec, act, 80 * GiB) == 66


def test_worked_example_does_not_fit_at_default_batch(capsys):
    # 8 × 1024 tokens: activations 126 · 8192 · 69632 · 2 = 143,747,186,688 bytes > 80 GB alone.
    code, out, _ = run_cli(capsys, "--model", FFN, "--world-size", "1")
    assert code == 0 and "143.75" in out
    code, out, _ = run_cli(capsys, "--model", FFN, "--world-size", "1", "--format", "json")
    memory = json.loads(out)["memory"]     # no N fits: the unsharded part alone is too big
    assert memory["fsdp_min_world"] is None
    assert memory["fsdp_floor_bytes"] > memory["device_mem_bytes"] == 80e9
    r = memory_report(parse_model(FFN), Precision(), 8, 1024, 1, 80)
    assert r["fsdp_min_world"] is None and r["fsdp_at_min_world"] is None
    # The floor: activations + working set + a one-element shard per unit (126 × 16 bytes).
    assert r["fsdp_floor_bytes"] == 143_747_186_688 + 13_958_643_712 + 126 * 16


def test_worked_example_cli_text_and_json(capsys):
    args = ("--model", FFN, "--batch", "1", "--seq", "1024", "--comm-dtype", "bf16",
            "--world-size", "8")
    code, text, _ = run_cli(capsys, *args)
    assert code == 0
    code, out, _ = run_cli(capsys, *args, "--format", "json")
    doc = json.loads(out)
    assert doc["memory"]["params"] == P == 219_848_638_464
    assert doc["memory"]["fsdp_min_world"] == 74
    assert doc["memory"]["replicated"]["total"] == 3_535_546_613_760 > 80e9   # does not fit
    # the text gives the same numbers (the whole of it: tests/data/snapshots/account-ffn.txt)
    assert "219,848,638,464" in text.split() and "819.00" in text.split()
    (total,) = [x for x in text.splitlines() if x.split()[:1] == ["total"] and "3535.55" in x]
    assert "NOT" in total.split()
    assert any(x.split()[-1:] == ["74"] for x in text.splitlines())
    # bf16 gradients on the wire: 2 bytes × P per all-reduce payload, 2(p−1)/p of it sent.
    ddp = next(r for r in doc["communication"]["rows"] if r["strategy"] == "ddp")
    assert ddp["payload_bytes"] == 2 * P
    assert ddp["sent_bytes_per_rank"] == pytest.approx(2 * 7 / 8 * 2 * P, rel=1e-12)


def test_precision_variants():
    spec = parse_model("mlp-4x1024")   # 4 × 1024² = 4,194,304 parameters
    n = 4 * 1024 ** 2
    r = memory_report(spec, Precision(master="bf16", grad="bf16", optim="sgd"), 1, 1, 1, 80)
    assert (r["replicated"]["params"], r["replicated"]["grads"], r["replicated"]["optimizer"]) \
        == (2 * n, 2 * n, 0)
    r = memory_report(spec, Precision(optim="sgd-momentum", weight_copy="bf16"), 1, 1, 1, 80)
    assert r["replicated"]["optimizer"] == 4 * n and r["replicated"]["weight_copy"] == 2 * n
    # FSDP keeps no persistent copy: it gathers the bf16 copy per unit (working set 2 + 4).
    assert r["fsdp"]["working_set"] == 1024 ** 2 * (2 + 4)
    r = memory_report(spec, Precision(optim="adamw", optim_dtype="bf16"), 1, 1, 1, 80)
    assert r["replicated"]["optimizer"] == 2 * 2 * n


def test_mlp_activations():
    # 3 Linear+ReLU layers of width 4, T = 2·5 = 10 tokens, fp32: each Linear saves its input
    # (T·4), the last ReLU its output (T·4): 4 tensors × 10 × 4 × 4 bytes = 640.
    terms = activation_terms(parse_model("mlp-3x4"), 2, 5, 4)
    assert sum(t.total_bytes for t in terms) == 4 * 10 * 4 * 4 == 640


def test_transformer_activations_and_units():
    spec = ModelSpec("transformer", layers=2, d_model=8, d_ff=16, heads=2, vocab=10, name="t")
    # batch 2, seq 4: T = 8 tokens, bf16 (2 bytes). Per block:
    #   norm inputs, q/k/v input, w1/w3 input 4·T·d·2      = 512
    #   flash: q, k, v, out 4·T·d·2 + lse b·h·s·4 = 512+64 = 576
    #   SwiGLU 4·T·d_ff·2                                  = 1024
    #   two 1/rms, T fp32 each: 2·8·4                      = 64    → 2176 per block, × 2
    # embedding ids 8·8 = 64; final norm + head input 2·T·d·2 + T·4 = 288; loss T·V·4 = 320
    flash = activation_terms(spec, 2, 4, 2, "flash")
    assert sum(t.total_bytes for t in flash) == 2 * 2176 + 64 + 288 + 320 == 5024
    # eager: probs b·h·s²·2 = 128 replace the lse's 64 → 64 more per block
    eager = activation_terms(spec, 2, 4, 2, "eager")
    assert sum(t.total_bytes for t in eager) == 5024 + 2 * 64
    # Units: root = embedding 10·8 + final norm 8 + head 8·10 = 168; a block = 2 norms 16 +
    # q, k, v, o 4·64 + w1, w2, w3 3·128 = 656.
    assert fsdp_units(spec) == [168, 656, 656] and sum(fsdp_units(spec)) == spec.n_params


def test_communication_rows(capsys):
    # mlp-4x1024: 4 fp32 tensors of 4,194,304 bytes; 4 ranks; α = 100 µs, busbw 10 GB/s.
    # Ring all-reduce per call: 1e-4 + 2·3/4 · 4,194,304 / 1e10 = 7.291456e-4 s.
    base = ("--model", "mlp-4x1024", "--world-size", "4", "--alpha-us", "100",
            "--busbw-gbps", "10", "--format", "json")
    code, out, _ = run_cli(capsys, *base)
    rows = {r["strategy"]: r for r in json.loads(out)["communication"]["rows"]}
    calls = {k: r["collectives"] for k, r in rows.items()}
    # bucketed 25 MiB holds all 16 MiB; ddp's 1 MiB first bucket closes after one tensor;
    # zero2 gathers once per unit and reduce-scatters once (fsdp gathers twice).
    assert calls == {"naive": 4, "flat": 1, "overlap": 4, "bucketed": 1, "ddp": 2,
                     "no_sync": 2, "fsdp": 12, "zero2": 8}
    naive = rows["naive"]
    assert naive["payload_bytes"] == 16_777_216
    assert naive["sent_bytes_per_rank"] == 1.5 * 16_777_216
    assert naive["alpha_s"] == pytest.approx(4e-4)
    assert naive["time_s"] == pytest.approx(4 * 7.291456e-4, rel=1e-12)
    # FSDP: per unit 2 all-gathers (fp32 params) + 1 reduce-scatter (fp32 grads), each moving
    # 3/4 · 4,194,304 bytes per rank: 1e-4 + 3.145728e-4 s each, 12 of them.
    fsdp = rows["fsdp"]
    assert fsdp["payload_bytes"] == 12 * 4_194_304
    assert fsdp["sent_bytes_per_rank"] == 0.75 * 12 * 4_194_304
    assert fsdp["time_s"] == pytest.approx(12 * 4.145728e-4, rel=1e-12)
    # bf16 on the wire halves the all-reduce bytes; FSDP's reduce-scatter halves, gathers don't.
    code, out, _ = run_cli(capsys, *base, "--comm-dtype", "bf16", "--accum-steps", "2")
    rows = {r["strategy"]: r for r in json.loads(out)["communication"]["rows"]}
    assert rows["naive"]["payload_bytes"] == 2 * 8_388_608          # 2 synced micro-steps
    assert rows["no_sync"]["payload_bytes"] == 8_388_608            # syncs the last only
    assert rows["fsdp"]["payload_bytes"] == 2 * (8 * 4_194_304 + 4 * 2_097_152)


def test_world_size_one_is_memory_only(capsys):
    code, out, _ = run_cli(capsys, "--world-size", "1", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["communication"] is None and doc["bucket_optimum"] is None
    code, out, _ = run_cli(capsys, "--world-size", "1")
    assert code == 0 and not any(x.split()[:1] == ["ddp"] for x in out.splitlines())


def test_bucket_optimum_line(capsys):
    code, out, _ = run_cli(capsys, "--format", "json")
    optimum = json.loads(out)["bucket_optimum"]
    assert code == 0 and optimum["regime"] == "comm-bound" and optimum["bucket_mb"] > 0
    code, out, _ = run_cli(capsys)
    (line,) = [x for x in out.splitlines() if x.startswith("closed-form")]
    size = f"{optimum['bucket_mb']:.2f}"
    assert size in line.split() and "comm-bound" in line


@pytest.mark.parametrize("argv, needle", [
    (("--optim", "lamb"), "--optim: unknown 'lamb'"),
    (("--master", "fp8"), "--master: unknown 'fp8'"),
    (("--comm-dtype", "int8"), "--comm-dtype"),
    (("--attention", "sparse"), "--attention"),
    (("--world-size", "0"), "--world-size must be an integer >= 1"),
    (("--device-mem-gb", "0"), "--device-mem-gb must be a number > 0"),
    (("--device-mem-gb", "-5"), "--device-mem-gb"),
    (("--bucket-mb", "0"), "--bucket-mb"),
    (("--accum-steps", "0"), "--accum-steps"),
    (("--batch", "0"), "--batch"),
    (("--backward-ms", "-1"), "--backward-ms"),
    (("--model", "ffn-1x2"), "unknown model"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, needle):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert needle in err and err.count("\n") == 1


def test_precision_validation_raises_input_error():
    with pytest.raises(InputError, match="--optim"):
        Precision(optim="rmsprop")
    with pytest.raises(InputError, match="--weight-copy"):
        Precision(weight_copy="fp32")
