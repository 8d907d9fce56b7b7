"""What one rank trains: a model, one micro-batch, and the scalar loss they give.

Two sources, one contract. A preset (``--model mlp-8x1024``, built by realrun.models) or the
user's own model (``--module FILE.py:FN`` or ``--module package.module:FN``)::

    def build():                      # every rank calls it; realrun moves the results
        model = MyNet()               # to the rank's device (cuda:local_rank or cpu)
        rank = int(os.environ.get("RANK", 0))          # this rank's own data
        g = torch.Generator().manual_seed(rank)
        inputs = {"x": torch.randn(8, 32, generator=g)}
        return model, inputs, lambda out: out.square().mean()   # loss_fn is optional

- ``model(**inputs)`` for a dict, ``model(*inputs)`` for a tuple or list, ``model(inputs)``
  for a tensor; ``inputs`` is ONE rank's micro-batch;
- the loss is the output when it is a scalar tensor, else ``output.loss`` (Hugging Face
  outputs), else ``loss_fn(output)``; anything else is one clear error.

torch's RNG is seeded with the run's seed before ``FN()``, so every rank builds the same
weights (DDP broadcasts rank 0's anyway); data differs per rank only if FN uses ``RANK``.
:class:`Workload` is the JSON-able description that travels to the ranks;
:func:`check` calls FN once in the launching process, so a bad file or FN fails in one line
before any rank starts.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from realrun.models import build_model, make_batch
from realrun.tensors import trainable_parameters
from simddp.errors import InputError
from simddp.presets.models import ModelSpec

_DOTTED_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class Workload:
    """A preset (``spec`` with ``batch`` x ``seq`` per rank) or a ``module`` target."""

    name: str
    spec: dict | None = None
    batch: int = 0
    seq: int = 0
    module: str | None = None       # "FILE.py:FN" (absolute path) or "package.module:FN"

    @classmethod
    def preset(cls, spec: ModelSpec, batch: int, seq: int) -> "Workload":
        return cls(spec.name, dataclasses.asdict(spec), batch, seq)

    @classmethod
    def from_target(cls, target: str) -> "Workload":
        """``FILE.py:FN`` or ``package.module:FN``; InputError if it cannot be found."""
        source, fn_name = _split(target)
        if source.endswith(".py"):
            path = Path(source).expanduser().resolve()
            if not path.is_file():
                raise InputError(f"--module {target}: no such file {source}")
            return cls(f"{path.stem}:{fn_name}", module=f"{path}:{fn_name}")
        return cls(f"{source}:{fn_name}", module=target)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    def build(self, seed: int, rank: int, device) -> tuple[torch.nn.Module, Any, Callable | None]:
        """(model, inputs, loss_fn) on ``device``: rank ``rank``'s micro-batch."""
        torch.manual_seed(seed)  # the same weights on every rank, in every configuration
        if self.module is None:
            spec = ModelSpec(**self.spec)
            model, inputs, loss_fn = (build_model(spec),
                                      make_batch(spec, self.batch, self.seq, seed + rank), None)
        else:
            model, inputs, loss_fn = call_fn(self.module)
        return model.to(device), to_device(inputs, device), loss_fn


def _split(target: str) -> tuple[str, str]:
    source, sep, fn_name = str(target).rpartition(":")
    if not sep or not source or not fn_name.isidentifier():
        raise InputError(f"--module {target!r}: expected FILE.py:FN or package.module:FN")
    if not source.endswith(".py") and not _DOTTED_RE.match(source):
        raise InputError(f"--module {target!r}: {source!r} is neither a .py file nor a "
                         "dotted module name")
    return source, fn_name


def load_fn(target: str) -> Callable:
    """The function ``target`` names; InputError (one line) if the file, the module or the
    function is missing, or the file fails to import."""
    source, fn_name = _split(target)
    try:
        if source.endswith(".py"):
            path = Path(source)
            if not path.is_file():
                raise InputError(f"--module {target}: no such file {source}")
            name = f"realrun_user_{path.stem}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # dataclasses and pickling look modules up by name
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(source)
    except InputError:
        raise
    except Exception as e:  # a SyntaxError or ImportError of the user's file: one line
        raise InputError(f"--module {target}: importing it failed: {_one_line(e)}") from None
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise InputError(f"--module {target}: {source} has no function {fn_name}")
    return fn


def call_fn(target: str) -> tuple[torch.nn.Module, Any, Callable | None]:
    """``FN()`` checked against the contract: (model, inputs) or (model, inputs, loss_fn)."""
    fn = load_fn(target)
    try:
        out = fn()
    except Exception as e:
        raise InputError(f"--module {target}: {fn.__name__}() raised {_one_line(e)}") from None
    if not isinstance(out, tuple) or len(out) not in (2, 3):
        raise InputError(f"--module {target}: {fn.__name__}() must return (model, inputs) or "
                         f"(model, inputs, loss_fn), got {type(out).__name__}")
    model, inputs, loss_fn = (*out, None) if len(out) == 2 else out
    if not isinstance(model, torch.nn.Module):
        raise InputError(f"--module {target}: the model must be a torch.nn.Module, got "
                         f"{type(model).__name__}")
    if not isinstance(inputs, (dict, tuple, list, torch.Tensor)):
        raise InputError(f"--module {target}: inputs must be a dict, tuple, list or tensor, "
                         f"got {type(inputs).__name__}")
    if loss_fn is not None and not callable(loss_fn):
        raise InputError(f"--module {target}: loss_fn must be callable, got "
                         f"{type(loss_fn).__name__}")
    if not trainable_parameters(model):
        raise InputError(f"--module {target}: the model has no trainable parameters "
                         "(requires_grad=True); there is nothing to synchronise")
    return model, inputs, loss_fn


def to_device(inputs, device):
    """The tensors of a dict, tuple, list or lone tensor moved to ``device``."""
    if isinstance(inputs, torch.Tensor):
        return inputs.to(device)
    if isinstance(inputs, dict):
        return {k: to_device(v, device) if isinstance(v, torch.Tensor) else v
                for k, v in inputs.items()}
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(to_device(v, device) if isinstance(v, torch.Tensor) else v
                            for v in inputs)
    return inputs


def forward(model, inputs):
    """``model`` called on ``inputs`` by the contract's rule."""
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def loss_of(output, loss_fn: Callable | None) -> torch.Tensor:
    """The scalar loss of ``output``: itself, ``output.loss``, or ``loss_fn(output)``."""
    if isinstance(output, torch.Tensor) and output.dim() == 0:
        return output
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.dim() == 0:
        return loss
    if loss_fn is not None:
        loss = loss_fn(output)
        if isinstance(loss, torch.Tensor) and loss.dim() == 0:
            return loss
        raise InputError(f"loss_fn returned {_describe(loss)}, not a scalar tensor")
    raise InputError(f"the model returned {_describe(output)}, not a scalar loss, and has no "
                     ".loss; return a loss_fn as the third value of FN()")


def check(workload: Workload, seed: int = 0) -> None:
    """Build the workload once here, on the CPU, and compute its loss: a wrong FN fails in
    one line before any rank starts (InputError)."""
    if workload.module is None:
        return
    model, inputs, loss_fn = workload.build(seed, int(os.environ.get("RANK", 0)), "cpu")
    try:
        loss = loss_of(forward(model, inputs), loss_fn)
    except InputError as e:
        raise InputError(f"--module {workload.module}: {e}") from None
    except Exception as e:
        raise InputError(f"--module {workload.module}: the forward pass raised "
                         f"{_one_line(e)}") from None
    if not loss.requires_grad:
        raise InputError(f"--module {workload.module}: the loss does not depend on any "
                         "trainable parameter (it has no grad_fn)")


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}" if text else type(e).__name__
