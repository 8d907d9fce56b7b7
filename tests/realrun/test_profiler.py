"""realrun's per-layer profiler: a valid simddp ModelProfile that simddp reads back."""
from __future__ import annotations

import json

import pytest

from realrun.cli import main as realrun_main
from realrun.profiler import attribute, profile_model
from simddp.io import load_profile
from simddp.presets.models import parse_model

TINY = parse_model("transformer-small").shrunk(layers=2, d_model=32, d_ff=64, heads=4, vocab=50)


def test_attribute_gives_gaps_to_the_next_layer_and_the_tail_to_the_last():
    # ends at 1, 3 and 4 s (layer 2 finished first); the pass ran from 0 to 6 s
    assert attribute([3.0, 4.0, 1.0, None], start_s=0.0, stop_s=6.0) == [2.0, 3.0, 1.0, 0.0]
    assert attribute([None], 0.0, 1.0) == [0.0]


@pytest.fixture(scope="module")
def tiny_profile():
    return profile_model(TINY, batch=2, seq=4, repeats=3, warmup=1)


def test_profile_has_every_op_and_the_parameters(tiny_profile):
    profile, measured = tiny_profile
    assert profile.name == TINY.name
    assert [layer.name for layer in profile.layers] == [name for name, _, _ in TINY.ops()]
    names = [n for layer in profile.layers for n in layer.grad_names]
    assert names == [n for n, _ in TINY.parameters()]
    sizes = [4 * _numel(shape) for _, shape in TINY.parameters()]
    assert list(profile.tensor_bytes) == sizes
    attn = [layer for layer in profile.layers if layer.name.endswith(".attn")]
    assert len(attn) == 2 and all(layer.grad_bytes == () for layer in attn)
    assert all(layer.forward_s > 0 and layer.backward_s >= 0 for layer in profile.layers)
    assert profile.optimizer_s > 0
    assert measured["repeats"] == 3 and measured["ready_order_stable"]


def test_ready_order_is_observed(tiny_profile):
    profile, _ = tiny_profile
    order = list(profile.ready_order)
    ids = {n: i for i, (n, _) in enumerate(TINY.parameters())}
    assert order[:2] == [ids["head.weight"], ids["norm.weight"]]
    assert order[-1] == ids["embed.weight"]
    # SwiGLU: w2 first, then w3 (computed after silu(w1 x) in forward), then w1.
    pos = {tid: k for k, tid in enumerate(order)}
    b = "blocks.1."
    assert pos[ids[b + "w2.weight"]] < pos[ids[b + "w3.weight"]] < pos[ids[b + "w1.weight"]]


def test_mlp_ready_order_is_reverse():
    profile, _ = profile_model(parse_model("mlp-3x8"), batch=1, seq=2, repeats=1, warmup=0)
    assert profile.ready_order == (2, 1, 0)


def test_profile_cli_writes_a_file_simddp_sweep_reads(tmp_path, capsys):
    path = tmp_path / "profile.json"
    code = realrun_main(["profile", "--model", "ffn-2x8x16", "--batch", "1", "--seq", "2",
                         "--repeats", "2", "--warmup", "1", "--optimizer", "adam",
                         "--out", str(path)])
    assert code == 0
    assert "blocks.1.down" in capsys.readouterr().out
    profile = load_profile(path)
    assert profile.name == "ffn-2x8x16"
    assert json.loads(path.read_text())["measured"]["optimizer"] == "adam"

    pytest.importorskip("simddp.commands.sweep")
    from simddp.cli import main as simddp_main
    assert simddp_main(["sweep", "--model", str(path), "--format", "json"]) == 0
    assert "ffn-2x8x16" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--model", "mlp-2x8", "--heads", "2"], "--heads does not apply to mlp-2x8"),
    (["--model", "mlp-2x8", "--repeats", "0"], "--repeats must be an integer >= 1, got 0"),
    (["--model", "profile.json"], "a profile file has no torch module to run"),
    (["--model", "cnn-3"], "unknown model 'cnn-3'"),
    (["--model", "transformer-small", "--heads", "5"], "not divisible by heads 5"),
])
def test_profile_bad_args_exit_2_with_one_line(argv, message, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert realrun_main(["profile", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n
