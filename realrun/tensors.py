"""How realrun numbers a module's gradients: simddp tensor id i is the i-th unique trainable
parameter in ``module.parameters()`` order.

Tied weights appear once, so they are reduced once; frozen parameters are skipped. Everything
in realrun numbers tensors here, so a profile's tensor ids are the wrapper's::

    >>> from torch import nn
    >>> [n for n, _ in trainable_parameters(nn.Linear(4, 2))]
    ['weight', 'bias']
"""
from __future__ import annotations

from torch import nn

from simddp.errors import InputError
from simddp.inputs.profile import Layer, ModelProfile


def trainable_parameters(module: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """(name, parameter) of each unique trainable parameter, position i being tensor id i; a
    tied weight appears once, under its first name."""
    return [(name, p) for name, p in module.named_parameters() if p.requires_grad]


def module_profile(module: nn.Module, name: str | None = None) -> ModelProfile:
    """A zero-time profile of ``module``: one Layer per module owning trainable parameters.

        >>> module_profile(nn.Linear(4, 2)).tensor_bytes     # weight, bias in float32
        (32, 8)
    """
    layers: list[tuple[str, list[int], list[str]]] = []
    for param_name, p in trainable_parameters(module):
        owner = param_name.rpartition(".")[0] or "(root)"
        if not layers or layers[-1][0] != owner:
            layers.append((owner, [], []))
        layers[-1][1].append(p.numel() * p.element_size())
        layers[-1][2].append(param_name)
    if not layers:
        raise InputError(f"module {type(module).__name__} has no trainable parameters "
                         "(requires_grad=True); there is nothing to synchronise")
    return ModelProfile(name or type(module).__name__,
                        tuple(Layer(owner, tuple(sizes), 0.0, 0.0, tuple(names))
                              for owner, sizes, names in layers))


def tensor_bytes(module: nn.Module) -> list[int]:
    """Bytes of each gradient realrun.DDP all-reduces for ``module``, in tensor-id order."""
    return [p.numel() * p.element_size() for _, p in trainable_parameters(module)]
