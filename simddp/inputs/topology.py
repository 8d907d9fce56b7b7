"""Two-level clusters: GPUs in nodes, a fast link inside a node and a slower one between.

Picture 2 nodes × 2 GPUs, NVLink inside (100 GB/s), 1 GB/s between. A collective's time
depends on the algorithm, and each algorithm's phases run on one of the two links:

- **ring** (what NCCL and Gloo run by default): one ring over all p = N·G ranks. It crosses
  the node boundary, so its slowest hop, the inter-node link, sets the pace of the whole ring:
  ``t = α_inter + 2(p−1)/p · n / busbw_inter`` for an all-reduce (nccl-tests' busbw of a
  multi-node run is exactly this bottleneck figure).
- **hierarchical**: reduce-scatter inside each node (n bytes among G), all-reduce of the
  node's 1/G share across nodes (n/G among N), all-gather inside the node::

    t = [α + (G−1)/G·n/bw]_intra + [α + 2(N−1)/N·(n/G)/bw]_inter + [α + (G−1)/G·n/bw]_intra

  A reduce-scatter is the first two phases (the inter-node one a reduce-scatter of n/G), an
  all-gather the last two in reverse.

A worked case: mlp-4x1024's 16,777,216 B of gradients, α 0, 2 nodes × 2 GPUs::

    >>> from simddp.inputs.link import Link
    >>> from simddp.cost.factors import kind_factor
    >>> topo = Topology(nodes=2, gpus_per_node=2, intra=Link("nvl", 0.0, 100.0))
    >>> inter = Link("eth", 0.0, 1.0)
    >>> round(collective_s(topo, inter, "all_reduce", 16_777_216, "ring") * 1e3, 3)
    25.166
    >>> round(collective_s(topo, inter, "all_reduce", 16_777_216, "hierarchical") * 1e3, 3)
    8.556

One node (N = 1) is the intra link alone and one GPU per node (G = 1) the inter link alone,
for every algorithm: both reduce exactly to the single-link law (simddp/cost/single.py).
NCCL also runs trees across nodes for small messages and NVLS/CollNet where the hardware
has them; neither is modelled here (docs/TOPOLOGY.md).

A link calibrated per level (``python -m calibrate`` on a two-level world, docs/FORMATS.md)
also carries :class:`simddp.inputs.link_file.Levels`: the intra link measured inside every
node at once, and the inter link measured with all G cross-node subgroups at once, so that a
node's shared NIC is in its busbw. Its topology puts the latter in ``Topology.inter``, which
only the hierarchical inter-node phase reads; the ring keeps the link it is given. The case
above with the two cross-node all-reduces sharing each node's 1 GB/s NIC, measured at
0.5 GB/s each::

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
    link between nodes is the one every command already takes, ``--link``). ``inter``: the
    link of the hierarchical all-reduce's inter-node phase when it was measured apart from
    the ring's (a link file's levels: all G cross-node subgroups at once); None: that phase
    runs on the link between nodes, as the ring does. ``intra_host``, ``inter_host``: what Gloo
    on a shared CPU host adds to those two links, where their link files measured it (read
    once, where a prediction resolves its inputs: simddp/predict/resolve.py)."""

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
        """One end of a prediction range (simddp/predict/scenarios.py), which scales the link between
        nodes by ``factor``: the hierarchical inter-node phase's own link scales with it, as
        that phase did when it ran on the link between nodes; the intra link is held."""
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
    """Per optimizer step and rank, what each level carries for ``plan``: bytes sent over
    each link and seconds of phases on each (run alone, no overlap; each collective on its
    process group: simddp.cost.hierarchical.level_split), and which level bounds the
    communication ("inter" or "intra"); ``inter_host``: what Gloo on a shared CPU host adds
    to the link between nodes, where its file measured it."""
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
