"""The per-level sweeps on one rank of a two-level world: each level the way the hierarchical
all-reduce uses it (realrun/launch/two_level.py, ``TwoLevel``), every subgroup of a level at once.

Picture 2 nodes × 2 ranks, ranks node-major (0, 1 on node 0; 2, 3 on node 1)::

    intra:  {0, 1} and {2, 3}   all-reduce (and reduce-scatter, all-gather) of n, both at once
    inter:  {0, 2} and {1, 3}   all-reduce of n, both at once: they share each node's NIC

All at once, as in the step: one group alone misses what they share, a node's NIC and CPUs
(docs/FINDINGS.md#hierarchical-phases). Each iteration starts after a barrier of the whole
world, so the groups start together::

    out = measure_levels({"gpus_per_node": 2, "sizes_bytes": [...], "dtype": "float32",
                          "warmup": 5, "iters": 20, "kinds": [...],
                          "kind_sizes_bytes": [...]}, ctx, progress)
    out["intra"]["sweep"][i]["times_s"], out["intra"]["kinds"]["reduce_scatter"][i]
    out["inter"]["sweep"][i]["times_s"]
"""
from __future__ import annotations

import torch.distributed as dist

from calibrate.ranks.allreduce import measure_sweep
from calibrate.ranks.kinds import measure_kind_sweep
from realrun.launch.two_level import TwoLevel


def level_steps(cfg: dict) -> int:
    """How many sizes :func:`measure_levels` times (for the progress bar)."""
    return 2 * len(cfg["sizes_bytes"]) + len(cfg["kinds"]) * len(cfg["kind_sizes_bytes"])


def measure_levels(cfg: dict, ctx, progress) -> dict:
    """Rank side. ``cfg``: gpus_per_node (G, dividing the world; node = rank // G), sizes_bytes,
    dtype, warmup, iters, and kinds with kind_sizes_bytes (swept inside nodes only: the
    hierarchical all-reduce's intra phases are a reduce-scatter and an all-gather)."""
    two = TwoLevel.of(cfg["gpus_per_node"], device=ctx.device)
    if two.intra is None or two.inter is None:
        raise ValueError(f"gpus_per_node={cfg['gpus_per_node']} on {ctx.world_size} ranks "
                         "leaves one level with one rank: nothing to calibrate per level")
    sweep = (cfg["sizes_bytes"], cfg["dtype"], cfg["warmup"], cfg["iters"], ctx, progress)
    intra = {"sweep": measure_sweep(*sweep, group=two.intra, label="intra ")}
    if cfg["kinds"]:
        intra["kinds"] = measure_kind_sweep(cfg["kinds"], cfg["kind_sizes_bytes"], *sweep[1:],
                                            group=two.intra, label="intra ")
    inter = {"sweep": measure_sweep(*sweep, group=two.inter, label="inter ")}
    # which global ranks this rank timed each level with, for the results file and tests
    members = {name: dist.get_process_group_ranks(group) for name, group in
               (("intra", two.intra), ("inter", two.inter))}
    return {"gpus_per_node": two.gpus_per_node, "nodes": two.nodes, "members": members,
            "intra": intra, "inter": inter}
