"""Two-level clusters: GPUs in nodes, a fast link inside a node and a slower one between.

A **ring** over all p = N·G ranks is paced by its slowest hop, the inter-node link; the
**hierarchical** all-reduce reduce-scatters inside each node, all-reduces the node's 1/G share
across nodes and all-gathers inside (the laws: docs/TOPOLOGY.md). 2 nodes × 2 GPUs, α 0,
100 GB/s inside, 1 GB/s between, 16,777,216 B::

    >>> from simddp.inputs.link import Link
    >>> from simddp.cost.factors import kind_factor
    >>> topo = Topology(nodes=2, gpus_per_node=2, intra=Link("nvl", 0.0, 100.0))
    >>> inter = Link("eth", 0.0, 1.0)
    >>> round(collective_s(topo, inter, "all_reduce", 16_777_216, "ring") * 1e3, 3)
    25.166
    >>> round(collective_s(topo, inter, "all_reduce", 16_777_216, "hierarchical") * 1e3, 3)
    8.556

One node or one GPU per node reduces exactly to the single-link law. A link calibrated per
level puts the link measured with all G cross-node subgroups at once (a shared NIC in its
busbw) in ``Topology.inter``, which only the hierarchical inter-node phase reads; the same
case with each node's NIC shared, 0.5 GB/s each::

    >>> topo = Topology(2, 2, intra=Link("in", 0.0, 100.0), inter=Link("across", 0.0, 0.5))
    >>> round(collective_s(topo, inter, "all_reduce", 16_777_216, "hierarchical") * 1e3, 3)
    16.945
    >>> round(collective_s(topo, inter, "all_reduce", 16_777_216, "ring") * 1e3, 3)
    25.166
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from simddp.cost.factors import kind_factor
from simddp.errors import InputError
from simddp.inputs.gloo_host import GlooHost
from simddp.cost.hierarchical import LevelHosts, level_split
from simddp.cost.hierarchical import collective_s  # noqa: F401 (the examples above call it)
from simddp.inputs.link import Link


@dataclass(frozen=True)
class Topology:
    """``nodes`` × ``gpus_per_node`` ranks; ``intra`` is the link among a node's GPUs (the
    link between nodes is ``--link``'s). ``inter``: the hierarchical inter-node phase's link
    where measured apart (None: the link between nodes). ``intra_host``, ``inter_host``: what
    Gloo on a shared CPU host adds to those links, where their files measured it."""

    nodes: int
    gpus_per_node: int
    intra: Link
    inter: Link | None = None
    intra_host: GlooHost | None = None
    inter_host: GlooHost | None = None

    def __post_init__(self) -> None:
        for name in ("nodes", "gpus_per_node"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"--{name.replace('_', '-')} must be an integer >= 1, "
                                 f"got {value!r}")

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def two_level(self) -> bool:
        """Whether both links carry traffic (else one of them is the whole story)."""
        return self.nodes > 1 and self.gpus_per_node > 1

    def time_scaled(self, factor: float) -> "Topology":
        """For a prediction range that scales the link between nodes by ``factor``: the
        hierarchical inter-node phase's link scales with it, the intra link is held."""
        if factor == 1.0 or self.inter is None:
            return self
        return replace(self, inter=self.inter.time_scaled(factor),
                       inter_host=None if self.inter_host is None
                       else self.inter_host.time_scaled(factor))

    def inter_bytes(self, kind: str, n_bytes: float, algorithm: str) -> float:
        """Bytes one rank sends over the inter-node link for one ``kind`` collective of
        ``n_bytes`` (reduce-scatter and all-gather: the full, unsharded bytes)."""
        if self.nodes == 1:
            return 0.0
        if algorithm == "ring" or self.gpus_per_node == 1:
            return kind_factor(kind, self.world_size) * n_bytes
        return kind_factor(kind, self.nodes) * n_bytes / self.gpus_per_node


def level_load(topo: Topology, inter: Link, plan, inter_host: GlooHost | None = None) -> dict:
    """Per optimizer step and rank, the bytes and phase seconds (run alone) each level
    carries for ``plan``, and which level bounds the communication ("inter" or "intra")."""
    hosts = LevelHosts(topo.intra_host, topo.inter_host, inter_host)
    inter_bytes = intra_bytes = inter_s = intra_s = 0.0
    algorithm = plan.strategy.algorithm
    for c in plan.collectives:
        for n in c.calls:
            split = level_split(topo, inter, c.kind, n, algorithm, c.group, hosts)
            inter_bytes += split.inter_bytes
            intra_bytes += split.intra_bytes
            inter_s += split.inter_s
            intra_s += split.intra_s
    return {"inter_node_bytes": inter_bytes, "intra_node_bytes": intra_bytes,
            "inter_node_s": inter_s, "intra_node_s": intra_s,
            "bound_by": "inter" if inter_s >= intra_s else "intra"}
