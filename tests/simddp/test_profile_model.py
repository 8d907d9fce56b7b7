"""The model profile a plan is made from: its tensors, their ready order, its totals, and
bad layers or profiles refused with one line each."""
from __future__ import annotations

import math

import pytest

from simddp.errors import InputError
from simddp.inputs.profile import Layer, ModelProfile

def test_profile_numbers_tensors_in_forward_order_and_readies_them_in_reverse():
    p = ModelProfile("m", (Layer("a", (10, 20)), Layer("empty"), Layer("b", (30,))))
    assert p.tensor_bytes == (10, 20, 30)
    assert p.tensor_layer == (0, 0, 2)
    assert p.n_tensors == 3 and p.grad_total_bytes == 60
    assert p.ready_order_ids() == (2, 1, 0)
    measured = ModelProfile("m", p.layers, ready_order=[0, 2, 1])
    assert measured.ready_order == (0, 2, 1) and measured.ready_order_ids() == (0, 2, 1)


def test_profile_totals_and_scaled_keep_per_layer_proportions():
    p = ModelProfile("m", (Layer("a", (1,), 1e-3, 1e-3), Layer("b", (1,), 3e-3, 3e-3)), 2e-3)
    assert math.isclose(p.forward_s, 4e-3) and math.isclose(p.backward_s, 4e-3)
    q = p.scaled(forward_s=8e-3, optimizer_s=5e-3)
    assert [round(layer.forward_s * 1e3, 9) for layer in q.layers] == [2.0, 6.0]
    assert [layer.backward_s for layer in q.layers] == [1e-3, 3e-3]   # untouched
    assert q.optimizer_s == 5e-3 and q.ready_order is None
    with pytest.raises(InputError, match="cannot rescale backward_s"):
        ModelProfile("z", (Layer("a", (1,), 1e-3, 0.0),)).scaled(backward_s=1.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(grad_bytes=(0,)), "grad_bytes must be integers > 0, got 0"),
    (dict(grad_bytes=(-4,)), "grad_bytes must be integers > 0"),
    (dict(grad_bytes=(4.0,)), "grad_bytes must be integers > 0, got 4.0"),
    (dict(grad_bytes=(True,)), "grad_bytes must be integers > 0"),
    (dict(grad_bytes=(4, 4), grad_names=("w",)), "1 grad_names for 2 grad_bytes"),
    (dict(forward_s=-1e-3), "forward_s must be a finite number >= 0 seconds"),
    (dict(backward_s=float("nan")), "backward_s must be a finite number >= 0 seconds"),
    (dict(backward_s=float("inf")), "backward_s"),
    (dict(forward_s="1"), "forward_s"),
])
def test_bad_layer_is_a_one_line_input_error_naming_the_layer(kwargs, match):
    with pytest.raises(InputError, match=match) as e:
        Layer("fc1", **kwargs)
    assert "'fc1'" in str(e.value) and "\n" not in str(e.value)


def test_bad_profile_is_an_input_error():
    with pytest.raises(InputError, match="has no layers"):
        ModelProfile("m", ())
    with pytest.raises(InputError, match="optimizer_s"):
        ModelProfile("m", (Layer("a"),), optimizer_s=-1.0)
    layers = (Layer("a", (4, 4)),)
    for order in [(0,), (0, 0), (0, 2), (1, 2)]:
        with pytest.raises(InputError, match=r"ready_order must be a permutation of 0\.\.1"):
            ModelProfile("m", layers, ready_order=order)
