"""fsdp and zero2 for real: torch FSDP2 ``fully_shard`` on simddp's shard units, then the root.

Each unit of simddp's plan (simddp/planning/sharding.py) becomes one ``fully_shard`` call,
bottom-up, and the root gets the last one, which takes every parameter no unit took::

    model, plan = shard_module(net, make_strategy("fsdp"), torch.device("cpu"))
    loss_fn(model(x), y).backward()     # FSDP2 all-gathers, reduce-scatters inside
    opt.step()                          # on this rank's shard (DTensor parameters)

``reshard_after_forward`` is the strategy's; hsdp shards on FSDP2's 2-D mesh, (N nodes, G
ranks a node) node-major; ``Strategy.param_dtype`` adds the same mixed-precision policy to every
call. The units come from ``simddp.plan(module_profile(module), strategy)``, the simulator's own
function. FSDP2 broadcasts nothing, so every rank builds its model from one seed; a unit holding
a tied parameter is left to the root (:func:`shard_groups`). Gloo's ``ReduceOp.AVG`` is checked
in docs/REALRUN.md, fsdp, zero2 and comm hooks.
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
    """Module names of each ``fully_shard`` call before the root's, children first; a unit is
    left to the root when it is the root or shares a parameter with a module outside it."""
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
    # here: DTensor is slow to import, and most worlds never shard
    # (docs/FINDINGS.md#what-a-world-costs-before-its-first-step)
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
