"""Sharded data parallel as a plan: FSDP2's all-gathers and reduce-scatters, unit by unit.

Picture FSDP2 (``fully_shard``) on a stack of units. Each rank keeps 1/p of every unit's
parameters. Before a unit computes, an all-gather rebuilds its parameters; after its backward,
a reduce-scatter leaves each rank 1/p of the summed gradient; the optimizer updates the shard::

    >>> from simddp import Layer, ModelProfile
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (4 * 2**20,), 1e-3, 2e-3) for i in range(3)))
    >>> [u.names for u in shard_units(toy, None)], len(shard_units(toy, 8 * 2**20))
    ([('l0',), ('l1',), ('l2',)], 2)

Two strategies, told apart by ``Strategy.reshard_after_forward`` (FSDP2's own argument):

- ``fsdp`` (True: FULL_SHARD, ZeRO-3): a unit's parameters are freed after its forward, so
  backward gathers them again before the unit's backward.
- ``zero2`` (False: SHARD_GRAD_OP): the gathered parameters stay from forward to the end of
  backward; no re-gather. Each step's forward gathers the parameters the optimizer updated.

Prefetch, as torch FSDP2 does by default (docs/notes/fsdp.rst, torch PR #128884): one unit
ahead. In forward, unit u+1's all-gather is issued when compute reaches unit u (its pre-forward
hook, before it waits for its own gather), so it runs while unit u computes; on a GPU this is
FSDP2's implicit prefetch (the CPU runs ahead of the kernels), on CPU the same order needs
``unit_u.set_modules_to_forward_prefetch([unit_u+1])``. In backward (reverse post-forward
order), reaching unit u's backward issues unit u−1's re-gather. A reduce-scatter is issued
when its unit's backward ends. One comm lane runs them in that order::

    forward:  AG(0) AG(1) … AG(U−1)
    backward: AG'(U−1) AG'(U−2) RS(U−1) AG'(U−3) RS(U−2) … AG'(0) RS(1) RS(0)   (fsdp)
              RS(U−1) … RS(0)                                                  (zero2)

A unit is one layer with parameters (``Strategy.shard_unit_bytes`` None), or consecutive
layers grouped until they hold at least that many bytes; layers without parameters ride with
the unit before them. A real executor calls ``fully_shard`` once per unit on the modules
``unit.names`` (a list when several), then on the root.
"""
from __future__ import annotations

from dataclasses import dataclass

from simddp.kinds import Phase
from simddp.link import ALL_GATHER, REDUCE_SCATTER
from simddp.profile import ModelProfile

FORWARD, BACKWARD, AFTER_BACKWARD = Phase.FORWARD, Phase.BACKWARD, Phase.AFTER_BACKWARD


@dataclass(frozen=True)
class ShardUnit:
    """Layers sharded together: one all-gather and one reduce-scatter move them all.

    layers: forward indices, contiguous (with the parameter-less layers that ride along);
    names: the layers holding parameters, the modules to ``fully_shard`` as one group;
    first_layer/last_layer: the first and last of those, whose forward/backward starts wait.
    """

    index: int
    layers: tuple[int, ...]
    names: tuple[str, ...]
    tensor_ids: tuple[int, ...]
    nbytes: int
    first_layer: int
    last_layer: int

    @property
    def label(self) -> str:
        return self.names[0] if len(self.names) == 1 else f"{self.names[0]}…{self.names[-1]}"


def shard_units(profile: ModelProfile, unit_bytes: int | None) -> tuple[ShardUnit, ...]:
    """Group layers with parameters into units, in forward order (see the module text)."""
    groups: list[list[int]] = []     # layer indices with parameters, per unit
    filled = unit_bytes or 0         # a full group: the next layer with parameters opens one
    for li, layer in enumerate(profile.layers):
        if not layer.grad_bytes:
            continue
        if unit_bytes is None or filled >= unit_bytes:
            groups.append([])
            filled = 0
        groups[-1].append(li)
        filled += sum(layer.grad_bytes)
    by_layer: dict[int, list[int]] = {}
    for t, li in enumerate(profile.tensor_layer):
        by_layer.setdefault(li, []).append(t)
    units = []
    for u, group in enumerate(groups):
        start = 0 if u == 0 else group[0]
        end = groups[u + 1][0] if u + 1 < len(groups) else len(profile.layers)
        tensor_ids = tuple(t for li in group for t in by_layer[li])
        units.append(ShardUnit(u, tuple(range(start, end)),
                               tuple(profile.layers[li].name for li in group), tensor_ids,
                               sum(profile.tensor_bytes[t] for t in tensor_ids),
                               group[0], group[-1]))
    return tuple(units)


def sharded_steps(units: tuple[ShardUnit, ...], reshard_after_forward: bool) -> list[dict]:
    """One micro-step's collectives in launch order, as Collective fields (plans.py adds
    the micro-step and launch index)."""
    def gather(unit: ShardUnit, issued_by: int, gate: tuple[str, int], what: str) -> dict:
        return {"label": f"{unit.label} {what}", "kind": ALL_GATHER, "tensor_ids": unit.tensor_ids,
                "nbytes": unit.nbytes, "ready_layer": issued_by, "ready_at": gate[0],
                "gates": gate}

    out = [gather(unit, units[u - 1].first_layer if u else 0, (FORWARD, unit.first_layer),
                  "all-gather") for u, unit in enumerate(units)]
    for u in reversed(range(len(units))):
        unit = units[u]
        starts = (BACKWARD, unit.last_layer)    # this unit's backward starts here
        if reshard_after_forward:
            if u == len(units) - 1:             # resharded after forward: nothing to prefetch it
                out.append(gather(unit, unit.last_layer, starts, "re-gather"))
            if u > 0:                           # prefetch the next unit in backward
                prev = units[u - 1]
                out.append(gather(prev, unit.last_layer, (BACKWARD, prev.last_layer),
                                  "re-gather"))
        out.append({"label": f"{unit.label} reduce-scatter", "kind": REDUCE_SCATTER,
                    "tensor_ids": unit.tensor_ids, "nbytes": unit.nbytes,
                    "ready_layer": unit.first_layer, "ready_at": AFTER_BACKWARD, "gates": None})
    return out
