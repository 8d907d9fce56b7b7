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

Mixed precision, as GPU FSDP jobs run it: FSDP2's ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)`` (``Strategy.param_dtype``; ``--precision bf16`` with fsdp or zero2). The
sharded parameters, the optimizer and the reduce-scatters stay fp32; each all-gather sends the
shard cast to 16 bits, half the bytes, and forward and backward compute on the bf16 copy::

    >>> from simddp.planning.plans import plan
    >>> from simddp.planning.strategy import make_strategy
    >>> [c.calls for c in plan(toy, make_strategy("fsdp", param_dtype="bf16")).collectives][:4]
    [(2097152,), (2097152,), (2097152,), (2097152,)]

(the three forward all-gathers and the first re-gather of 4 MiB units move 2 MiB each; the
reduce-scatters keep 4 MiB). What the policy adds to the step is one cast per all-gather
(:func:`cast_seconds`).

HSDP (``hsdp``, ``Strategy.hybrid``: FSDP2's ``fully_shard(mesh=init_device_mesh(..., (N, G),
mesh_dim_names=("replicate", "shard")))``) is fsdp inside each node: a unit is sharded over
the node's G ranks, so its all-gathers and reduce-scatters run among them, and every
reduce-scatter is followed by an all-reduce of the shard among the N nodes (FSDP2's
``foreach_reduce``: one rank of each node, the same local index). Its collectives carry their
process group (``Collective.group``: simddp/cost/hierarchical.py, ``GROUPS``)::

    >>> [(c.kind, c.group) for c in plan(toy, make_strategy("hsdp")).collectives][-2:]
    [('reduce_scatter', 'node'), ('all_reduce', 'across')]

What a rank holds and updates is then 1/G of each unit, not 1/p (:func:`shard_ranks`).
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

# A run's --precision, the same words in simddp and realrun (realrun/precision.py says what each
# computes in). With fsdp or zero2, bf16 is also FSDP2's MixedPrecisionPolicy: PRECISION_POLICY.
PRECISIONS = ("fp32", "tf32", "bf16")
PRECISION_POLICY = {"bf16": "bf16"}   # --precision -> Strategy.param_dtype (the others: none)
# FSDP2's param_dtype choices and their bytes per element; the profile's parameters and the
# reduce_dtype (fp32, as GPU jobs run it: gradients summed in full precision) are 4 bytes.
PARAM_DTYPES = {"bf16": 2, "fp16": 2}
FP32_BYTES = 4
# A cast reads the fp32 shard and writes it in 16 bits: 4 + 2 bytes per element, 1.5 x the
# shard's fp32 bytes (FSDP2's _get_param_all_gather_inputs, a foreach copy into one buffer).
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


def sharded_steps(units: tuple[ShardUnit, ...], reshard_after_forward: bool,
                  param_dtype: str | None = None) -> list[dict]:
    """One micro-step's collectives in launch order, as Collective fields (plans.py adds
    the micro-step and launch index). With ``param_dtype`` an all-gather's call moves the
    unit in that dtype (``hook``: its wire bytes); ``nbytes`` stays the fp32 bytes."""
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
    """HSDP's micro-step from fsdp's (:func:`sharded_steps`): the same calls among the ranks
    of a node, each reduce-scatter followed by the all-reduce of its shard across nodes,
    released with it (FSDP2 issues it as soon as the reduce-scatter is done). Its ``nbytes``
    and calls are the reduce-scatter's, the whole unit's: the law moves each node's 1/G share
    (simddp/cost/hierarchical.py, ``ACROSS``)."""
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
    (``gpus_per_node``; None: one node holds every rank). What a rank's shard, its optimizer
    share and its shard copies are divided by.

    >>> from simddp.planning.strategy import make_strategy
    >>> shard_ranks(make_strategy("hsdp"), 8, 4), shard_ranks(make_strategy("fsdp"), 8, 4)
    (4, 8)
    """
    if not strategy.hybrid or gpus_per_node is None:
        return world_size
    return gpus_per_node


def cast_seconds(plan, world_size: int) -> list[float]:
    """Seconds of the cast FSDP2's mixed precision runs before each collective of a sharded
    ``plan``, in launch order; all 0 without ``param_dtype`` or without a rate to time it at
    (``Strategy.cast_gbps``).

    ``world_size``: the ranks each unit is sharded over (:func:`shard_ranks`). Before an
    all-gather FSDP2 casts this rank's fp32 shard (n/p bytes) into one 16-bit
    buffer: read n/p, write n/2p, 1.5·n/p bytes at ``cast_gbps`` (on a GPU it runs on its
    copy-in stream, which the all-gather waits for: the comm lane, ahead of the call). The
    reduce-scatter's copy of the unit's gradients into its fp32 input runs with or without the
    policy (reading 16-bit gradients, it moves fewer bytes than fp32's plain copy), so it is
    no cast the policy adds: it stays a host copy (:func:`simddp.sim.overheads.shard_host_s`).
    4 MiB units on 2 ranks, casts at 1 GB/s: 1.5 × 2 MiB = 3.15 ms per all-gather::

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
    """(GB/s of bytes read + written the casts are timed at, where it comes from).

    A profile that measured its host (a CPU profile: ``HostCosts.copy_gbps`` of fsdp) gives
    its copy rate; a copy reads and writes each byte it counts, so 2 × ``copy_gbps`` of
    traffic. Else a preset's device: its datasheet memory bandwidth
    (simddp/presets/devices.py, e.g. h100 3350 GB/s HBM3), a lower bound on the cast's time
    (the device's efficiency, 0.4, is a whole step's, not a streaming kernel's). Else None:
    a profile without host costs, the casts are not modelled.

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
