"""Parameter names for an imported profile, from the user's own model (``--module``).

    params = module_parameters("examples/gpt2_tiny.py:build")   # runs the user's file
    profile = name_gradients(profile, grad_shapes, params)

The trace knows each gradient's shape and bytes, not its parameter's name. ``--module
FILE.py:FN`` follows realrun's own-model contract (realrun/workload.py): ``FN()`` returns
``(model, inputs)`` or ``(model, inputs, loss_fn)``. Only the model is used, duck-typed
(``named_parameters()``, ``numel()``, ``element_size()``, ``requires_grad``), so simddp
itself imports no torch: the user's file does. Tied weights count once, frozen ones not at
all, as DDP sees them.

Names are matched by shape: the trace's gradients in ready order take, each, the
not-yet-named trainable parameter of the same shape and size that comes LAST in
``parameters()`` order (DDP's gradients become ready roughly in reverse definition order).
Two tensors of one shape in one layer (a LayerNorm's weight and bias) may swap names; the
sizes, which is what the simulator uses, are checked exactly.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import replace

from simddp.errors import InputError
from simddp.inputs.profile import ModelProfile


def module_parameters(target: str) -> list[tuple[str, tuple[int, ...], int]]:
    """(name, shape, bytes) of each unique trainable parameter of ``FN()``'s model."""
    source, sep, fn_name = str(target).rpartition(":")
    if not sep or not source or not fn_name.isidentifier():
        raise InputError(f"--module {target!r}: expected FILE.py:FN or package.module:FN")
    try:
        if source.endswith(".py"):
            if not os.path.isfile(source):
                raise InputError(f"--module {target}: no such file {source}")
            name = f"simddp_user_{os.path.splitext(os.path.basename(source))[0]}"
            spec = importlib.util.spec_from_file_location(name, source)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(source)
        fn = getattr(module, fn_name, None)
        if not callable(fn):
            raise InputError(f"--module {target}: {source} has no function {fn_name}")
        out = fn()
    except InputError:
        raise
    except Exception as e:  # the user's code: one line, whatever it raised
        raise InputError(f"--module {target}: {type(e).__name__}: "
                         f"{' '.join(str(e).split())[:200]}") from None
    model = out[0] if isinstance(out, tuple) and out else None
    if not hasattr(model, "named_parameters"):
        raise InputError(f"--module {target}: {fn_name}() must return (model, inputs[, "
                         "loss_fn]) with a torch.nn.Module first")
    seen, params = set(), []
    for pname, p in model.named_parameters():
        if id(p) in seen or not p.requires_grad:
            continue
        seen.add(id(p))
        params.append((pname, tuple(int(d) for d in p.shape), int(p.numel() * p.element_size())))
    return params


def name_gradients(profile: ModelProfile, shapes: tuple, params: list) -> ModelProfile:
    """``profile`` with each gradient named after the parameter it was matched to;
    ``shapes``: the gradients' shapes in ready order (tensor id n−1−i for ready index i)."""
    n = profile.n_tensors
    if len(params) != n or sorted(b for _, _, b in params) != sorted(profile.tensor_bytes):
        raise InputError(f"--module: its model has {len(params)} trainable tensors "
                         f"({sum(b for _, _, b in params)} bytes), the trace {n} gradients "
                         f"({profile.grad_total_bytes} bytes); is it the traced model?")
    free = list(range(len(params)))
    names = [""] * n
    for i, shape in enumerate(shapes):
        tid = n - 1 - i
        size = profile.tensor_bytes[tid]
        match = [k for k in free if params[k][2] == size
                 and (shape is None or params[k][1] == tuple(shape))]
        if not match:
            raise InputError(f"--module: no parameter of shape {shape} ({size} bytes) is left "
                             "for a traced gradient; is it the traced model?")
        free.remove(match[-1])
        names[tid] = params[match[-1]][0]
    layers, tid = [], 0
    for layer in profile.layers:   # forward numbering: layer by layer, in order
        k = len(layer.grad_bytes)
        layers.append(replace(layer, grad_names=tuple(names[tid:tid + k])))
        tid += k
    return replace(profile, layers=tuple(layers))
