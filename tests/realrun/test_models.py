"""realrun's torch modules match simddp's presets: same parameter names, order and shapes."""
from __future__ import annotations

import pytest
import torch

from realrun.models import build_model, make_batch
from simddp.presets.models import parse_model

SMALL = {
    "transformer": parse_model("transformer-small").shrunk(layers=2, d_model=32, d_ff=64,
                                                           heads=4, vocab=50),
    "mlp": parse_model("mlp-3x16"),
    "ffn": parse_model("ffn-2x16x40"),
}


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_parameters_equal_spec_parameters(kind):
    spec = SMALL[kind]
    model = build_model(spec)
    assert [(n, tuple(p.shape)) for n, p in model.named_parameters()] == spec.parameters()


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_every_op_is_a_module_and_the_loss_reaches_every_parameter(kind):
    spec = SMALL[kind]
    model = build_model(spec)
    for name, _, _ in spec.ops():
        model.get_submodule(name)   # raises if missing, e.g. the attention core
    loss = model(*make_batch(spec, batch=2, seq=5, seed=0))
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_full_depth_presets_match_at_tiny_width():
    # Depth and naming are what can go wrong at full size; width only scales shapes.
    for spec in (parse_model("transformer-small").shrunk(d_model=48, vocab=10),
                 parse_model("mlp-40x8"), parse_model("ffn-126x4x8")):
        got = [(n, tuple(p.shape)) for n, p in build_model(spec).named_parameters()]
        assert got == spec.parameters(), spec.name


def test_shrunk_name_is_simddps():
    spec = parse_model("transformer-small").shrunk(d_model=384, layers=2)   # 12 heads of 32
    assert spec.name == "transformer-small[d_model=384,layers=2]"
    assert [n for n, _ in build_model(spec).named_parameters()][:3] == [
        "embed.weight", "blocks.0.attn_norm.weight", "blocks.0.q.weight"]


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_make_batch_is_deterministic(kind):
    spec = SMALL[kind]
    a, b = make_batch(spec, 3, 7, seed=1), make_batch(spec, 3, 7, seed=1)
    other = make_batch(spec, 3, 7, seed=2)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], other[0])


def test_make_batch_shapes_and_next_token_target():
    inputs, target = make_batch(SMALL["transformer"], batch=2, seq=6, seed=0)
    assert inputs.shape == target.shape == (2, 6) and inputs.dtype == torch.int64
    assert torch.equal(inputs[:, 1:], target[:, :-1])          # target = inputs shifted by one
    assert 0 <= int(inputs.min()) and int(inputs.max()) < 50
    x, y = make_batch(SMALL["mlp"], batch=2, seq=6, seed=0)
    assert x.shape == y.shape == (2, 6, 16)


def test_make_batch_leaves_the_global_rng_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    make_batch(SMALL["mlp"], 2, 2, seed=9)
    assert torch.equal(torch.rand(3), expected)


def test_same_seed_same_weights():
    torch.manual_seed(0)
    a = build_model(SMALL["transformer"])
    torch.manual_seed(0)
    b = build_model(SMALL["transformer"])
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


def test_bad_batch_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="batch must be an integer >= 1, got 0"):
        make_batch(SMALL["mlp"], batch=0, seq=2, seed=0)
