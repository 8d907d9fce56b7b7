"""--module FILE.py:FN: the calling contract, the loss rule, and every way FN can be wrong.

Each bad FN must end in one line on stderr and exit code 2 before any rank starts.
"""
from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from realrun.cli import main as realrun_main
from realrun.workload import Workload, check, forward, loss_of, to_device
from simddp.errors import InputError


class Echo(nn.Module):
    """Returns what it was called with, scaled by its one weight."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(()))

    def forward(self, *args, **kwargs):
        return {"args": [a * self.w for a in args], "kwargs": {k: v * self.w
                                                               for k, v in kwargs.items()}}


def test_inputs_are_spread_by_their_type():
    model, x = Echo(), torch.ones(2)
    assert list(forward(model, {"a": x})["kwargs"]) == ["a"]
    assert len(forward(model, (x, x))["args"]) == 2 and len(forward(model, [x])["args"]) == 1
    assert len(forward(model, x)["args"]) == 1


def test_the_loss_is_the_output_then_its_loss_then_loss_fn():
    scalar = torch.tensor(2.0)
    assert loss_of(scalar, None) is scalar
    hf = SimpleNamespace(loss=torch.tensor(3.0), logits=torch.ones(2, 3))
    assert loss_of(hf, None) is hf.loss
    assert loss_of(torch.ones(4), lambda out: out.sum()).item() == 4.0
    with pytest.raises(InputError, match=r"shape \(4,\), not a scalar loss, and has no .loss"):
        loss_of(torch.ones(4), None)
    with pytest.raises(InputError, match="loss_fn returned a tensor of shape"):
        loss_of(torch.ones(4), lambda out: out * 2)


def test_tensors_move_to_the_device_and_the_rest_stays():
    moved = to_device({"x": torch.ones(1), "n": 3}, "cpu")
    assert moved["n"] == 3 and moved["x"].device.type == "cpu"
    assert isinstance(to_device([torch.ones(1)], "cpu"), list)


def write(tmp_path, body: str) -> str:
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


GOOD = """
    import torch
    from torch import nn

    def build():
        return nn.Linear(4, 2), torch.ones(3, 4), lambda out: out.pow(2).mean()
"""


def test_a_good_module_builds_on_every_rank_with_the_same_weights(tmp_path):
    workload = Workload.from_target(write(tmp_path, GOOD) + ":build")
    assert workload.name == "mine:build" and workload.module.endswith("mine.py:build")
    check(workload)
    a, _, _ = workload.build(seed=7, rank=0, device="cpu")
    b, inputs, loss_fn = workload.build(seed=7, rank=1, device="cpu")
    assert torch.equal(a.weight, b.weight)
    assert loss_fn(forward(b, inputs)).dim() == 0
    assert Workload(**workload.to_json()) == workload  # it travels to the ranks as JSON


@pytest.mark.parametrize("body, target, message", [
    (GOOD, "{path}:nope", "has no function nope"),
    (GOOD, "/no/such/file.py:build", "no such file /no/such/file.py"),
    (GOOD, "{path}", "expected FILE.py:FN or package.module:FN"),
    (GOOD, "not a module:build", "is neither a .py file nor a dotted module name"),
    (GOOD, "no_such_package.mod:build", "importing it failed: ModuleNotFoundError"),
    ("def build(:\n", "{path}:build", "importing it failed: SyntaxError"),
    ("def build():\n    raise ValueError('no data')\n", "{path}:build",
     "build() raised ValueError: no data"),
    ("def build():\n    return 1\n", "{path}:build",
     "must return (model, inputs) or (model, inputs, loss_fn), got int"),
    ("def build():\n    return 'model', 1\n", "{path}:build", "must be a torch.nn.Module"),
    ("import torch\nfrom torch import nn\ndef build():\n    return nn.ReLU(), torch.ones(2)\n",
     "{path}:build", "has no trainable parameters"),
    ("import torch\nfrom torch import nn\ndef build():\n    return nn.Linear(2, 2), torch.ones(2)\n",
     "{path}:build", "not a scalar loss, and has no .loss; return a loss_fn"),
    ("import torch\nfrom torch import nn\ndef build():\n"
     "    return nn.Linear(2, 2), torch.ones(3, 2), lambda out: torch.zeros(())\n",
     "{path}:build", "the loss does not depend on any trainable parameter"),
    ("import torch\nfrom torch import nn\ndef build():\n    return nn.Linear(2, 2), torch.ones(3, 5)\n",
     "{path}:build", "the forward pass raised RuntimeError"),
])
def test_a_bad_module_is_one_line_and_exit_2_before_any_rank(tmp_path, capsys, body, target,
                                                              message):
    target = target.format(path=write(tmp_path, body))
    out = tmp_path / "p.json"
    assert realrun_main(["profile", "--module", target, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_module_and_preset_flags_do_not_mix(tmp_path, capsys):
    target = write(tmp_path, GOOD) + ":build"
    for extra, message in ((["--model", "mlp-2x8"], "give one of them"),
                           (["--layers", "2"], "--layers shrinks a preset")):
        assert realrun_main(["bench", "--module", target, *extra]) == 2
        assert message in capsys.readouterr().err
