"""Sharded data parallel as a plan: FSDP2's all-gathers and reduce-scatters, unit by unit.

Each rank keeps 1/p of every unit's parameters: an all-gather rebuilds a unit before it
computes, a reduce-scatter leaves each rank 1/p of its summed gradient. ``fsdp``
(``reshard_after_forward``, ZeRO-3) gathers again in backward; ``zero2`` keeps the gathered
parameters through backward. Prefetch is FSDP2's default, one unit ahead; the collective
order, units and mixed precision are in docs/FORMATS.md, "Sharded plans"; HSDP in
docs/TOPOLOGY.md::

    forward:  AG(0) AG(1) … AG(U−1)
    backward: AG'(U−1) AG'(U−2) RS(U−1) AG'(U−3) RS(U−2) … AG'(0) RS(1) RS(0)   (fsdp)
              RS(U−1) … RS(0)                                                  (zero2)

    >>> from simddp import Layer, ModelProfile
    >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (4 * 2**20,), 1e-3, 2e-3) for i in range(3)))
    >>> [u.names for u in shard_units(toy, None)], len(shard_units(toy, 8 * 2**20))
    ([('l0',), ('l1',), ('l2',)], 2)

Under ``param_dtype="bf16"`` the all-gathers (and only they) move half the bytes::

    >>> from simddp.planning.plans import plan
    >>> from simddp.planning.strategy import make_strategy
    >>> [c.calls for c in plan(toy, make_strategy("fsdp", param_dtype="bf16")).collectives][:4]
    [(2097152,), (2097152,), (2097152,), (2097152,)]

HSDP (``hsdp``) shards over a node's ranks and all-reduces each reduced shard across nodes::

    >>> [(c.kind, c.group) for c in plan(toy, make_strategy("hsdp")).collectives][-2:]
    [('reduce_scatter', 'node'), ('all_reduce', 'across')]
"""
from __future__ import annotations

from dataclasses import dataclass

from simddp.errors import InputError
from simddp.planning.hooks import HookCost
from simddp.kinds import Phase
from simddp.cost.factors import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from simddp.cost.hierarchical import ACROSS, NODE
from simddp.inputs.profile import ModelProfile

FORWARD, BACKWARD, AFTER_BACKWARD = Phase.FORWARD, Phase.BACKWARD, Phase.AFTER_BACKWARD

# A run's --precision, the same words as realrun/precision.py; with fsdp or zero2, bf16 is
# also FSDP2's MixedPrecisionPolicy (PRECISION_POLICY: --precision -> Strategy.param_dtype).
PRECISIONS = ("fp32", "tf32", "bf16")
PRECISION_POLICY = {"bf16": "bf16"}
# FSDP2's param_dtype choices in bytes per element; parameters and reduce_dtype stay fp32.
PARAM_DTYPES = {"bf16": 2, "fp16": 2}
FP32_BYTES = 4
# A cast reads the fp32 shard and writes 16 bits (FSDP2's _get_param_all_gather_inputs).
CAST_PASS = (FP32_BYTES + 2) / FP32_BYTES


def check_param_dtype(param_dtype: str | None) -> str | None:
    if param_dtype is not None and param_dtype not in PARAM_DTYPES:
        raise InputError(f"param_dtype: unknown {param_dtype!r}; choose from "
                         f"{', '.join(PARAM_DTYPES)} (or none: fp32)")
    return param_dtype


def param_dtype_of(precision: str) -> str | None:
    """The FSDP2 ``param_dtype`` a run's ``--precision`` gives fsdp and zero2 (None: fp32).

    >>> [param_dtype_of(p) for p in PRECISIONS]
    [None, None, 'bf16']
    """
    if precision not in PRECISIONS:
        raise InputError(f"--precision: unknown {precision!r}; choose from "
                         f"{', '.join(PRECISIONS)}")
    return PRECISION_POLICY.get(precision)


@dataclass(frozen=True)
class ShardUnit:
    """Layers sharded together: one all-gather and one reduce-scatter move them all.

    ``layers`` also holds the parameter-less layers that ride along; ``names`` are the modules
    to ``fully_shard`` as one group; ``first_layer``/``last_layer`` are the first and last of
    those, whose forward/backward starts wait.
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
    """Group layers with parameters into units in forward order: one layer each
    (``unit_bytes`` None), or consecutive layers until they hold ``unit_bytes``; layers
    without parameters ride with the unit before them."""
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


def sharded_steps(units: tuple[ShardUnit, ...], reshard_after_forward: bool,
                  param_dtype: str | None = None) -> list[dict]:
    """One micro-step's collectives in launch order, as Collective fields (plans.py adds
    the micro-step and launch index); with ``param_dtype`` an all-gather's ``hook`` moves the
    unit in that dtype while ``nbytes`` stays fp32."""
    wire = None
    if check_param_dtype(param_dtype) is not None:
        def wire(nbytes: int) -> HookCost:
            return HookCost((nbytes * PARAM_DTYPES[param_dtype] // FP32_BYTES,))

    def gather(unit: ShardUnit, issued_by: int, gate: tuple[str, int], what: str) -> dict:
        fields = {"label": f"{unit.label} {what}", "kind": ALL_GATHER,
                  "tensor_ids": unit.tensor_ids, "nbytes": unit.nbytes,
                  "ready_layer": issued_by, "ready_at": gate[0], "gates": gate}
        if wire is not None:
            fields["hook"] = wire(unit.nbytes)
        return fields

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


def hybrid_steps(steps: list[dict]) -> list[dict]:
    """HSDP's micro-step from fsdp's: the same calls within a node, each reduce-scatter
    followed by the all-reduce of its shard across nodes, released with it. Its ``nbytes``
    are the whole unit's; the law moves each node's 1/G share (simddp/cost/hierarchical.py)."""
    out = []
    for fields in steps:
        out.append({**fields, "group": NODE})
        if fields["kind"] == REDUCE_SCATTER:
            unit = fields["label"].removesuffix(" reduce-scatter")
            out.append({**fields, "label": f"{unit} all-reduce", "kind": ALL_REDUCE,
                        "group": ACROSS})
    return out


def shard_ranks(strategy, world_size: int, gpus_per_node: int | None = None) -> int:
    """The ranks each unit is sharded over: every rank (fsdp, zero2), or a node's under HSDP
    (``gpus_per_node`` None: one node holds every rank).

    >>> from simddp.planning.strategy import make_strategy
    >>> shard_ranks(make_strategy("hsdp"), 8, 4), shard_ranks(make_strategy("fsdp"), 8, 4)
    (4, 8)
    """
    if not strategy.hybrid or gpus_per_node is None:
        return world_size
    return gpus_per_node


def cast_seconds(plan, world_size: int) -> list[float]:
    """Seconds of FSDP2's mixed-precision cast before each collective of a sharded ``plan``
    (launch order, on the comm lane ahead of the call): 1.5·n/p bytes at ``cast_gbps`` before
    an all-gather, else 0; all 0 without ``param_dtype`` or ``cast_gbps``. The
    reduce-scatter's copy-in runs with or without the policy, so it stays a host copy
    (:func:`simddp.sim.overheads.shard_host_s`). 4 MiB units on 2 ranks at 1 GB/s::

        >>> from simddp import Layer, ModelProfile, make_strategy, plan
        >>> toy = ModelProfile("toy", tuple(Layer(f"l{i}", (4 * 2**20,)) for i in range(3)))
        >>> s = make_strategy("zero2", param_dtype="bf16", cast_gbps=1.0)
        >>> [round(t * 1e3, 3) for t in cast_seconds(plan(toy, s), 2)]
        [3.146, 3.146, 3.146, 0.0, 0.0, 0.0]
    """
    strategy = plan.strategy
    if strategy.param_dtype is None or not strategy.cast_gbps:
        return [0.0] * len(plan.collectives)
    rate = strategy.cast_gbps * 1e9
    return [CAST_PASS * c.nbytes / world_size / rate if c.kind == ALL_GATHER else 0.0
            for c in plan.collectives]


def cast_rate(measured_copy_gbps: float | None, device_mem_gbps: float | None,
              device_name: str = "") -> tuple[float | None, str]:
    """(GB/s read + written the casts are timed at, where it comes from): twice a measured
    host's ``copy_gbps`` (a copy reads and writes each byte), else the device's datasheet
    memory bandwidth (a lower bound on the time), else None: not modelled.

    >>> cast_rate(None, 3350.0, "h100")
    (3350.0, 'h100 memory bandwidth 3350 GB/s (simddp/presets/devices.py)')
    >>> cast_rate(2.0, None)[0], cast_rate(None, None)
    (4.0, (None, 'not modelled: the profile measured no host copy rate'))
    """
    if measured_copy_gbps:
        return 2 * measured_copy_gbps, (f"the measured host's copy rate, 2 x "
                                        f"{measured_copy_gbps:g} GB/s read + written")
    if device_mem_gbps:
        return device_mem_gbps, (f"{device_name} memory bandwidth {device_mem_gbps:g} GB/s "
                                 "(simddp/presets/devices.py)").lstrip()
    return None, "not modelled: the profile measured no host copy rate"
