"""fsdp and zero2 for real: torch FSDP2 ``fully_shard`` on simddp's shard units, then the root.

Picture simddp's plan for a sharded strategy (simddp/planning/sharding.py): a list of units, each one
module with trainable parameters (or several consecutive ones with ``--shard-unit-mb``). Here
each unit becomes one ``fully_shard`` call, bottom-up, and the root gets the last one, which
takes every parameter no unit took::

    model, plan = shard_module(net, make_strategy("fsdp"), torch.device("cpu"))
    loss_fn(model(x), y).backward()     # FSDP2 all-gathers, reduce-scatters inside
    opt.step()                          # on this rank's shard (DTensor parameters)

``reshard_after_forward`` is the strategy's (True for fsdp and hsdp, False for zero2);
prefetching is FSDP2's default. hsdp (``Strategy.hybrid``) shards on a 2-D mesh, FSDP2's
HSDP: ``init_device_mesh(device, (N, G), mesh_dim_names=("replicate", "shard"))``, G ranks a
node (node-major, as the launcher numbers them): each unit is sharded over its node's G ranks
and FSDP2 all-reduces each reduce-scattered shard over the N ranks sharing its local index.
``Strategy.param_dtype`` (``--precision bf16``) adds FSDP2's
``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=float32)`` to every call
(realrun/precision.py), the same policy on each unit and the root. The units come from ``simddp.plan(module_profile(module), strategy)``: the
same function the simulator uses, on the module's own definition order (a measured profile
may order layers differently; that only moves the grouping with ``--shard-unit-mb``).

What FSDP2 needs that the plan does not say:

- every rank must start from the same weights: FSDP2 shards what each rank holds and
  broadcasts nothing (realrun builds every rank's model from one seed);
- a tied parameter (one Parameter held by two modules, e.g. embedding and LM head) must live
  in one FSDP unit reaching all its users, so a unit holding one is left to the root
  (:func:`shard_groups` says which).

On Gloo FSDP2 reduce-scatters with ``ReduceOp.AVG``, which older Gloo builds summed silently
(pytorch/pytorch#162338). torch 2.13's averages (checked on 2 ranks: the same result with and
without ``set_force_sum_reduction_for_comms``), so FSDP2's defaults stay; the equivalence
tests (tests/realrun/test_beyond_ddp.py) would catch a sum.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from realrun.precision import mixed_precision_policy
from realrun.tensors import module_profile
from simddp.errors import InputError
from simddp.planning.plans import Plan, plan as make_plan
from simddp.planning.strategy import Strategy

ROOT = "(root)"   # module_profile's name for parameters the root module owns itself


def shard_groups(module: nn.Module, plan: Plan) -> list[list[str]]:
    """Module names of each ``fully_shard`` call before the root's, children first.

    A unit is skipped (its parameters go to the root) when it is the root itself or when one
    of its parameters is also held by a module outside it (a tied weight).
    """
    named = dict(module.named_modules())
    holders: dict[int, set[str]] = {}      # id(parameter) -> modules that hold it directly
    for name, sub in named.items():
        for p in sub.parameters(recurse=False):
            holders.setdefault(id(p), set()).add(name)
    groups = []
    for unit in plan.units:
        if ROOT in unit.names:
            continue
        inside = {n for n in named if any(n == u or n.startswith(u + ".") for u in unit.names)}
        params = [p for u in unit.names for p in named[u].parameters()]
        if any(holders[id(p)] - inside for p in params):
            continue
        groups.append(list(unit.names))
    # bottom-up: a unit nested in another (a module with parameters of its own and children
    # with theirs) must be sharded first
    return sorted(groups, key=lambda names: -max(n.count(".") + 1 for n in names))


_MESHES: dict = {}   # (the world, G, device type) -> its 2-D mesh, made once per world


def hybrid_mesh(gpus_per_node: int, device_type: str):
    """HSDP's mesh of the whole world: (N nodes, G ranks a node), node-major. Made once per
    world and G: each mesh dimension is a set of new process groups (a rendezvous each)."""
    from torch.distributed.device_mesh import init_device_mesh
    world = dist.get_world_size()
    g = gpus_per_node
    if isinstance(g, bool) or not isinstance(g, int) or g < 1 or world % g:
        raise InputError(f"hsdp: gpus_per_node={g!r} must be an integer >= 1 that divides "
                         f"the {world} ranks (node = rank // gpus_per_node)")
    key = (id(dist.group.WORLD), g, device_type)
    made = _MESHES.get(key)
    if made is None or made[0] is not dist.group.WORLD:   # a new world reuses no old groups
        mesh = init_device_mesh(device_type, (world // g, g),
                                mesh_dim_names=("replicate", "shard"))
        made = _MESHES[key] = (dist.group.WORLD, mesh)
    return made[1]


def shard_module(module: nn.Module, strategy: Strategy, device: torch.device,
                 process_group=None, gpus_per_node: int | None = None
                 ) -> tuple[nn.Module, Plan]:
    """``module`` under FSDP2 as ``strategy`` (fsdp, zero2 or hsdp) plans it, and that plan;
    ``gpus_per_node``: hsdp's shard group, the ranks of one node (None: the whole world)."""
    # here, not at the top: torch.distributed.fsdp pulls in DTensor, a large share of what
    # every rank of every world took to import realrun's step code, which most worlds (ddp,
    # bucketed, calibrate) never use (docs/FINDINGS.md#what-a-world-costs-before-its-first-step)
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    plan = make_plan(module_profile(module), strategy)
    group = process_group or dist.group.WORLD
    if strategy.hybrid:
        if group is not dist.group.WORLD:
            raise InputError("hsdp shards the whole world in nodes; it takes no process group")
        mesh = hybrid_mesh(gpus_per_node or dist.get_world_size(), device.type)
    else:
        mesh = DeviceMesh.from_group(group, device_type=device.type)
    kwargs = {"mesh": mesh, "reshard_after_forward": strategy.reshard_after_forward}
    policy = mixed_precision_policy(strategy.param_dtype)
    if policy is not None:
        kwargs["mp_policy"] = policy
    named = dict(module.named_modules())
    for names in shard_groups(module, plan):
        targets = [named[n] for n in names]
        fully_shard(targets[0] if len(targets) == 1 else targets, **kwargs)
    fully_shard(module, **kwargs)
    return module, plan
