"""What a training step computes: layers, their gradient tensors and their compute times.

A :class:`ModelProfile` is the simulator's picture of a model — layers in forward order, each
with the byte sizes of its gradient tensors and its forward/backward seconds::

    >>> p = ModelProfile("toy", (Layer("l0", (400,), 1e-3, 2e-3), Layer("l1", (400,), 1e-3, 2e-3)))
    >>> p.n_tensors, p.tensor_bytes, p.ready_order_ids()
    (2, (400, 400), (1, 0))

Gradient tensors are numbered in forward order, unless the layers give their ids
(``grad_ids``): a measured profile numbers them as ``module.parameters()`` does, which differs
when modules run in another order than defined (SwiGLU: w1, w3, w2)::

    >>> p = ModelProfile("swiglu", (Layer("w1", (8,), grad_ids=(0,)), Layer("w3", (8,), grad_ids=(2,)),
    ...                             Layer("w2", (8,), grad_ids=(1,))))
    >>> p.tensor_layer, p.ready_order_ids()
    ((0, 2, 1), (2, 1, 0))

A gradient is ready when its layer's backward ends; without a measured ``ready_order``, in
reverse tensor-id order, as torch DDP assumes before it observes a backward.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

from simddp.errors import InputError


def _check_spread(owner: str, name: str, obj, attr: str) -> None:
    """A (low, high) factor pair with 0 < low <= 1 <= high, stored as a tuple; None passes."""
    value = getattr(obj, attr)
    if value is None:
        return
    pair = tuple(value)
    if (len(pair) != 2 or any(not isinstance(v, (int, float)) or isinstance(v, bool)
                              or not math.isfinite(v) for v in pair)
            or not 0 < pair[0] <= 1.0 <= pair[1]):
        raise InputError(f"{owner}: {name} must be (low, high) factors with "
                         f"0 < low <= 1 <= high, got {value!r}")
    object.__setattr__(obj, attr, pair)


def _check_seconds(owner: str, name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise InputError(f"{owner}: {name} must be a finite number >= 0 seconds, got {value!r}")


@dataclass(frozen=True)
class Layer:
    """One module of the model: its gradient tensors' sizes and its compute seconds."""

    name: str
    grad_bytes: tuple[int, ...] = ()
    forward_s: float = 0.0
    backward_s: float = 0.0
    grad_names: tuple[str, ...] = ()
    grad_ids: tuple[int, ...] = ()   # the tensor id of each gradient; () = forward order

    def __post_init__(self) -> None:
        object.__setattr__(self, "grad_bytes", tuple(self.grad_bytes))
        object.__setattr__(self, "grad_names", tuple(self.grad_names))
        object.__setattr__(self, "grad_ids", tuple(self.grad_ids))
        if self.grad_ids and len(self.grad_ids) != len(self.grad_bytes):
            raise InputError(f"layer {self.name!r}: {len(self.grad_ids)} grad_ids "
                             f"for {len(self.grad_bytes)} grad_bytes")
        for n in self.grad_bytes:
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                raise InputError(f"layer {self.name!r}: grad_bytes must be integers > 0, got {n!r}")
        if self.grad_names and len(self.grad_names) != len(self.grad_bytes):
            raise InputError(f"layer {self.name!r}: {len(self.grad_names)} grad_names "
                             f"for {len(self.grad_bytes)} grad_bytes")
        _check_seconds(f"layer {self.name!r}", "forward_s", self.forward_s)
        _check_seconds(f"layer {self.name!r}", "backward_s", self.backward_s)


@dataclass(frozen=True)
class ModelProfile:
    """Layers in forward order, optionally the measured gradient-ready order, optimizer seconds."""

    name: str
    layers: tuple[Layer, ...]
    optimizer_s: float = 0.0
    # Tensor ids in measured gradient-ready order (tied weights and unusual graphs break
    # reverse definition order); None: reverse definition order.
    ready_order: tuple[int, ...] | None = None
    # (p5, p95) of the measured compute-only step over its median: a prediction range's input.
    compute_spread: tuple[float, float] | None = None
    # What the compute was timed on: a device preset or a torch device ("cuda:0"); None: not
    # known. On a GPU, unmeasured contention takes published figures.
    device: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(self.layers))
        if not self.layers:
            raise InputError(f"model {self.name!r} has no layers")
        _check_seconds(f"model {self.name!r}", "optimizer_s", self.optimizer_s)
        _check_spread(f"model {self.name!r}", "compute_spread", self, "compute_spread")
        if self.device is not None and not isinstance(self.device, str):
            raise InputError(f"model {self.name!r}: device must be a name, got {self.device!r}")
        with_ids = [bool(layer.grad_ids) for layer in self.layers if layer.grad_bytes]
        ids = [t for layer in self.layers for t in layer.grad_ids]
        if any(with_ids) and (not all(with_ids) or any(
                not isinstance(t, int) or isinstance(t, bool) for t in ids)
                or sorted(ids) != list(range(len(ids)))):
            raise InputError(f"model {self.name!r}: grad_ids must be given for every layer "
                             f"with gradients and form a permutation of 0..{len(ids) - 1}")
        if self.ready_order is not None:
            order = tuple(self.ready_order)
            object.__setattr__(self, "ready_order", order)
            if (any(not isinstance(t, int) or isinstance(t, bool) for t in order)
                    or sorted(order) != list(range(self.n_tensors))):
                raise InputError(f"model {self.name!r}: ready_order must be a permutation of "
                                 f"0..{self.n_tensors - 1}")

    @cached_property
    def _by_id(self) -> list[tuple[int, int, str]]:
        """(bytes, owning layer index, name) of each tensor, indexed by tensor id."""
        tensors = [(n, i, names[k] if names else "")
                   for i, layer in enumerate(self.layers)
                   for names in (layer.grad_names,) for k, n in enumerate(layer.grad_bytes)]
        ids = [t for layer in self.layers for t in layer.grad_ids]
        if not ids:
            return tensors
        out: list = [None] * len(tensors)
        for t, tensor in zip(ids, tensors):
            out[t] = tensor
        return out

    @cached_property
    def tensor_bytes(self) -> tuple[int, ...]:
        return tuple(t[0] for t in self._by_id)

    @cached_property
    def tensor_layer(self) -> tuple[int, ...]:
        """For each tensor id, the index of the layer that owns it."""
        return tuple(t[1] for t in self._by_id)

    @cached_property
    def tensor_names(self) -> tuple[str, ...]:
        """For each tensor id, its parameter's name ("" where the layer names none)."""
        return tuple(t[2] for t in self._by_id)

    @property
    def n_tensors(self) -> int:
        return len(self.tensor_bytes)

    @property
    def grad_total_bytes(self) -> int:
        return sum(self.tensor_bytes)

    # Cached: a sweep reads these sums over every layer per row and per scenario.
    @cached_property
    def forward_s(self) -> float:
        return sum(layer.forward_s for layer in self.layers)

    @cached_property
    def backward_s(self) -> float:
        return sum(layer.backward_s for layer in self.layers)

    def ready_order_ids(self) -> tuple[int, ...]:
        """Tensor ids in gradient-ready order: measured, or reverse definition order."""
        if self.ready_order is not None:
            return self.ready_order
        return tuple(range(self.n_tensors - 1, -1, -1))

    def scaled(self, forward_s: float | None = None, backward_s: float | None = None,
               optimizer_s: float | None = None) -> "ModelProfile":
        """Rescale total forward/backward/optimizer seconds, keeping per-layer proportions."""
        factors = {}
        for attr, target in (("forward_s", forward_s), ("backward_s", backward_s)):
            if target is None:
                continue
            _check_seconds(f"model {self.name!r}", attr, target)
            total = sum(getattr(layer, attr) for layer in self.layers)
            if total == 0:
                raise InputError(f"model {self.name!r}: cannot rescale {attr}, it is 0")
            factors[attr] = (target, total)
        layers = self.layers
        if factors:
            layers = tuple(replace(layer, **{attr: getattr(layer, attr) * target / total
                                             for attr, (target, total) in factors.items()})
                           for layer in layers)
        return replace(self, layers=layers,
                       optimizer_s=self.optimizer_s if optimizer_s is None else optimizer_s)
