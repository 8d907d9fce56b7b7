"""The dtype gradients are reduced in: hand-computed bytes and times on an α–β link, in the
simulator, in account and on the command line; fp32, the default, changes nothing."""
from __future__ import annotations

import json

import pytest

from simddp.cli.main import main
from simddp.inputs.io import link_to_json, profile_to_json, save_json
from simddp.inputs.link import Link
from simddp.inputs.profile import Layer, ModelProfile
from simddp.inputs.resolved import Inputs
from simddp.planning.grad_dtype import with_grad_dtype
from simddp.planning.plans import plan
from simddp.planning.strategy import Strategy, make_strategy
from simddp.report.recommendation import _caveat
from simddp.sim.comm import comm_seconds
from simddp.sim.engine import simulate

MB = 10**6
GRADS = ModelProfile("grads", (Layer("w", (100 * MB,)),))   # 100 MB of fp32 gradients
LINK = Link("l", 100e-6, 10.0)                               # α 100 µs, busbw 10 GB/s
RANKS = 4


def test_a_100_mb_fp32_gradient_all_reduces_as_50_mb_in_bf16():
    # ring all-reduce: α + 2(p-1)/p · n / busbw = 0.1 ms + 1.5 · n / 10 GB/s
    for dtype, wire, ms in (("fp32", 100 * MB, 15.1), ("bf16", 50 * MB, 7.6),
                            ("fp16", 50 * MB, 7.6)):
        p = plan(GRADS, with_grad_dtype(make_strategy("flat"), dtype))
        assert [c.calls for c in p.collectives] == [(wire,)]
        assert [c.nbytes for c in p.collectives] == [100 * MB]   # the fp32 bytes stay
        assert comm_seconds(p, LINK, RANKS) == pytest.approx([ms / 1e3])
        # no compute: the step is the one all-reduce
        assert simulate(p, Inputs(GRADS, LINK, RANKS)).step_s == pytest.approx(ms / 1e3)


def test_fsdp_reduce_dtype_halves_the_reduce_scatter_and_not_the_all_gather():
    # zero2 on 4 ranks: all-gather α + 3/4 · 100 MB / 10 GB/s = 7.6 ms; reduce-scatter in
    # bf16 α + 3/4 · 50 MB / 10 GB/s = 3.85 ms; nothing else on the lane
    p = plan(GRADS, with_grad_dtype(make_strategy("zero2"), "bf16"))
    assert [(c.kind, c.calls) for c in p.collectives] == [
        ("all_gather", (100 * MB,)), ("reduce_scatter", (50 * MB,))]
    assert comm_seconds(p, LINK, RANKS) == pytest.approx([7.6e-3, 3.85e-3])
    assert simulate(p, Inputs(GRADS, LINK, RANKS)).step_s == pytest.approx(11.45e-3)
    # with FSDP2's param_dtype too, both halve
    both = plan(GRADS, with_grad_dtype(make_strategy("zero2", param_dtype="bf16"), "bf16"))
    assert [c.calls for c in both.collectives] == [(50 * MB,), (50 * MB,)]


def test_a_bucket_cap_counts_the_gradients_in_their_own_dtype():
    four = ModelProfile("four", tuple(Layer(f"l{i}", (10 * 2**20,)) for i in range(4)))
    fp32 = plan(four, make_strategy("bucketed", 20))
    bf16 = plan(four, with_grad_dtype(make_strategy("bucketed", 20), "bf16"))
    assert [len(c.tensor_ids) for c in fp32.collectives] == [2, 2]   # 20 MiB of fp32 each
    assert [len(c.tensor_ids) for c in bf16.collectives] == [4]      # 4 × 5 MiB of bf16
    assert bf16.collectives[0].calls == (20 * 2**20,)


def test_fp32_is_the_default_and_changes_no_plan():
    toy = ModelProfile("toy", tuple(Layer(f"l{i}", (4 * 2**20,), 1e-3, 2e-3) for i in range(5)))
    for name in ("naive", "flat", "overlap", "bucketed", "ddp", "no_sync", "fsdp", "zero2"):
        s = make_strategy(name, 8)
        assert with_grad_dtype(s, "fp32") is s and s.grad_dtype is None
        assert plan(toy, s) == plan(toy, Strategy.from_dict({**s.to_dict(), "grad_dtype": "fp32"}))
    s = with_grad_dtype(make_strategy("ddp", 8), "bf16")
    assert Strategy.from_dict(s.to_dict()) == s


def test_a_comm_hook_takes_fp32_gradients_only():
    with pytest.raises(ValueError, match="--grad-dtype"):
        with_grad_dtype(make_strategy("ddp+fp16", 8), "bf16")


def test_the_fsdp2_code_a_sweep_suggests_names_the_reduce_dtype():
    s = with_grad_dtype(make_strategy("fsdp"), "bf16")
    assert "reduce_dtype=torch.bfloat16" in _caveat(s)
    assert "MixedPrecisionPolicy" not in _caveat(make_strategy("fsdp"))


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def files(tmp_path):
    save_json(tmp_path / "p.json", profile_to_json(GRADS))
    save_json(tmp_path / "l.json", link_to_json(LINK))
    return str(tmp_path / "p.json"), str(tmp_path / "l.json")


def account_rows(capsys, files, *flags) -> dict:
    code, out, err = cli(capsys, "account", "--model", files[0], "--link", files[1],
                         "--world-size", str(RANKS), "--format", "json", *flags)
    assert code == 0, err
    return {r["strategy"]: r for r in json.loads(out)["communication"]["rows"]}


def test_account_moves_the_bytes_of_the_gradient_dtype(capsys, files):
    fp32 = account_rows(capsys, files)
    bf16 = account_rows(capsys, files, "--grad-dtype", "bf16")
    assert bf16 == account_rows(capsys, files, "--grad", "bf16")   # one flag, two names
    assert (fp32["flat"]["payload_bytes"], bf16["flat"]["payload_bytes"]) == (100 * MB, 50 * MB)
    assert (fp32["flat"]["time_s"], bf16["flat"]["time_s"]) == pytest.approx((15.1e-3, 7.6e-3))
    # zero2: one all-gather of the fp32 parameters, one reduce-scatter of bf16 gradients
    assert bf16["zero2"]["payload_bytes"] == 150 * MB
    assert bf16["zero2"]["time_s"] == pytest.approx(11.45e-3)


def test_simulate_and_sweep_take_grad_dtype(capsys, files):
    base = ["--model", files[0], "--link", files[1], "--world-size", str(RANKS)]
    code, out, _ = cli(capsys, "simulate", *base, "--strategy", "flat", "--grad-dtype", "bf16",
                       "--format", "json")
    doc = json.loads(out)
    assert code == 0 and (doc["allreduce_bytes"], doc["wire_bytes"]) == (100 * MB, 50 * MB)
    assert doc["grad_dtype"] == "bf16" and doc["comm_ms"] == pytest.approx(7.6)
    code, out, _ = cli(capsys, "sweep", *base, "--strategies", "flat,ddp,zero2", "--grad-dtype",
                       "fp16", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["setup"]["grad_dtype"] == "fp16"
    code, out, _ = cli(capsys, "sweep", *base, "--strategies", "flat", "--format", "json")
    assert code == 0 and "grad_dtype" not in json.loads(out)["setup"]


@pytest.mark.parametrize("argv", [["--grad-dtype", "int8"],
                                  ["--grad-dtype", "bf16", "--comm-hook", "fp16"]])
def test_bad_grad_dtype_is_one_line_and_exit_2(capsys, argv):
    code, out, err = cli(capsys, "sweep", "--strategies", "ddp", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "--grad-dtype" in err
