"""Rank function for tests/realrun/test_hsdp.py: hsdp (FSDP2 on a 2-D mesh) on the emulated
2 x 2 cluster, against one process.

    run_world("tests.realrun._hsdp_targets:train_and_compare", {"cases": {...}},
              world_size=4, emulate_hosts=2, link_gbit=1.0)

Each rank first reports the mesh hsdp put a parameter on (its shape, dimension names, the
parameter's placements and this rank's share of it), then trains every case as
tests/realrun/_beyond_ddp_targets.py does: on its slice of a fixed global batch, compared
after every step with a single-process model trained on the whole batch.
"""
from __future__ import annotations

import torch

from realrun.steps import wrap
from tests.realrun._beyond_ddp_targets import _build, _case


def _layout(config: dict, ctx) -> dict:
    """Where hsdp put fc1's weight: its mesh and this rank's part of it."""
    net = wrap(_build("untied", 7, ctx.device), config, ctx).model
    weight = net.fc1.weight
    mesh = weight.device_mesh
    return {"mesh_shape": list(mesh.shape), "mesh_dims": list(mesh.mesh_dim_names),
            "placements": [type(p).__name__ for p in weight.placements],
            "local_rows": weight.to_local().shape[0], "rows": weight.shape[0],
            "mesh": mesh.mesh.tolist()}


def train_and_compare(payload: dict, ctx) -> dict:
    """``payload["layout"]``: the config whose layout to report; ``payload["cases"]``: name ->
    {"config", "model", "per_rank"} to train."""
    torch.set_num_threads(1)
    out = {"layout": _layout(payload["layout"], ctx)}
    out.update({name: _case(ctx, case["config"], case["model"], case.get("per_rank", 4))
                for name, case in payload["cases"].items()})
    return out
