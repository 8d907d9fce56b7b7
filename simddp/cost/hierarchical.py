"""The two-level law (docs/TOPOLOGY.md): a collective over nodes × GPUs by an algorithm, each
phase on the link it crosses, each phase answered by the one-link law (:mod:`simddp.cost.single`).

A ring over every rank is paced by the link between nodes; the hierarchical all-reduce is a
reduce-scatter in the node, an all-reduce of the node's 1/G share across nodes and an
all-gather in the node. 2 nodes × 2 GPUs, 100 GB/s inside, 1 GB/s between, 16 MiB::

    >>> from types import SimpleNamespace as Topo
    >>> from simddp.inputs.link import Link
    >>> topo = Topo(nodes=2, gpus_per_node=2, world_size=4, intra=Link("nvl", 0.0, 100.0),
    ...             inter=None)
    >>> round(collective_s(topo, Link("eth", 0.0, 1.0), "all_reduce", 16_777_216,
    ...                    "hierarchical") * 1e3, 3)
    8.556

HSDP's collectives run on a subgroup (:data:`GROUPS`): an all-gather in the node, then the
all-reduce of the 8 MiB shards across the two nodes::

    >>> [round(group_s(topo, Link("eth", 0.0, 1.0), k, 16_777_216, g) * 1e3, 3)
    ...  for k, g in (("all_gather", NODE), ("all_reduce", ACROSS))]
    [0.084, 8.389]
"""
from __future__ import annotations

from typing import NamedTuple

from simddp.errors import InputError
from simddp.cost.factors import ALL_GATHER as AG, ALL_REDUCE as AR, REDUCE_SCATTER as RS
from simddp.cost.factors import kind_factor
from simddp.cost.single import collective_s as link_s
from simddp.cost.single import wait_s

ALGORITHMS = ("ring", "hierarchical")
# The process group a collective runs on: every rank; the G ranks of one node (HSDP's shard
# group); or one rank of each node (its replicate group), moving each node's 1/G share.
WORLD, NODE, ACROSS = "world", "node", "across"
GROUPS = (WORLD, NODE, ACROSS)


class LevelHosts(NamedTuple):
    """What each link's host adds to a waited-for call (:func:`simddp.cost.single.wait_s`):
    inside a node, the hierarchical inter-node phase's, and the link between nodes'. Only the
    CPU rig passes them; None: nothing."""

    intra: object = None
    across: object = None
    inter: object = None


NO_HOSTS = LevelHosts()


def across_s(topo, inter, kind: str, n_bytes: float) -> float:
    """The inter-node phase of a hierarchical ``kind`` collective of ``n_bytes``: each GPU's
    1/G slice among the N nodes, on the levels' inter link if the file had one."""
    return link_s(topo.inter or inter, kind, n_bytes / topo.gpus_per_node, topo.nodes,
                  nodes=topo.nodes)


def collective_s(topo, inter, kind: str, n_bytes: float, algorithm: str,
                 blocking: bool = False, hosts: LevelHosts = NO_HOSTS) -> float:
    """Seconds for one ``kind`` collective of ``n_bytes`` on ``topo`` (a
    :class:`simddp.inputs.topology.Topology`) by ``algorithm``; ``inter``: the link between
    nodes; ``hosts``: what each link's host adds to a waited-for call."""
    if algorithm not in ALGORITHMS:
        raise InputError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    nodes, gpus = topo.nodes, topo.gpus_per_node
    if nodes == 1:
        return link_s(topo.intra, kind, n_bytes, gpus, blocking, nodes=1, host=hosts.intra)
    if gpus == 1 or algorithm == "ring":
        return link_s(inter, kind, n_bytes, topo.world_size, blocking, nodes=nodes,
                      host=hosts.inter)
    across = topo.inter or inter   # the levels' inter fit, if the file had one
    across_host = hosts.across if topo.inter is not None else hosts.inter

    def inside(k: str) -> float:
        return link_s(topo.intra, k, n_bytes, gpus, blocking, nodes=1, host=hosts.intra)

    def between(k: str) -> float:   # each GPU's slice of the node crosses, one rank a node
        return link_s(across, k, n_bytes / gpus, nodes, blocking, nodes=nodes, host=across_host)

    # Each phase is waited for before the next, so each pays what waiting costs
    # (docs/FINDINGS.md#hierarchical-phases); a plan that waits anyway already pays it.
    waiting_s = 0.0 if blocking else wait_s(inter, hosts.inter)
    if kind == AR:
        return inside(RS) + between(AR) + inside(AG) + 3 * waiting_s
    if kind == RS:
        return inside(RS) + between(RS) + 2 * waiting_s
    if kind == AG:
        return between(AG) + inside(AG) + 2 * waiting_s
    raise InputError(f"unknown collective kind {kind!r}")


def group_s(topo, inter, kind: str, n_bytes: float, group: str, algorithm: str = "ring",
            blocking: bool = False, hosts: LevelHosts = NO_HOSTS) -> float:
    """Seconds for one ``kind`` collective of ``n_bytes`` (the whole unit's) on ``group``:
    every rank by ``algorithm``; a node's G ranks on the intra link; or one rank of each node,
    its 1/G share on the hierarchical inter-node phase's link. A group of one rank: 0 s."""
    if group == WORLD:
        return collective_s(topo, inter, kind, n_bytes, algorithm, blocking, hosts)
    nodes, gpus = topo.nodes, topo.gpus_per_node
    if group == NODE:
        if gpus == 1:
            return 0.0
        return link_s(topo.intra, kind, n_bytes, gpus, blocking, nodes=1, host=hosts.intra)
    if group == ACROSS:
        if nodes == 1:
            return 0.0
        across_host = hosts.across if topo.inter is not None else hosts.inter
        return link_s(topo.inter or inter, kind, n_bytes / gpus, nodes, blocking, nodes=nodes,
                      host=across_host)
    raise InputError(f"unknown process group {group!r}; expected {', '.join(GROUPS)}")


class LevelSplit(NamedTuple):
    """One collective's share of each link, run alone: seconds on the link between nodes and
    inside a node, and the bytes one rank sends over each (a ring over every rank counts on
    the link between nodes, which paces it)."""

    inter_s: float
    intra_s: float
    inter_bytes: float
    intra_bytes: float


def level_split(topo, inter, kind: str, n_bytes: float, algorithm: str, group: str = WORLD,
                hosts: LevelHosts = NO_HOSTS) -> LevelSplit:
    """:class:`LevelSplit` of one ``kind`` collective of ``n_bytes`` on ``group`` by
    ``algorithm`` (what ``simddp account --nodes`` prints per level)."""
    nodes, gpus = topo.nodes, topo.gpus_per_node
    total = group_s(topo, inter, kind, n_bytes, group, algorithm, hosts=hosts)
    if group == NODE or nodes == 1:
        ranks = gpus if group == NODE else topo.world_size
        return LevelSplit(0.0, total, 0.0, kind_factor(kind, ranks) * n_bytes)
    if group == ACROSS:
        return LevelSplit(total, 0.0, kind_factor(kind, nodes) * n_bytes / gpus, 0.0)
    if algorithm == "ring" or gpus == 1:
        return LevelSplit(total, 0.0, kind_factor(kind, topo.world_size) * n_bytes, 0.0)
    across = across_s(topo, inter, kind, n_bytes)
    inside = 2 if kind == AR else 1    # RS and AG inside the node: (G-1)/G·n each
    return LevelSplit(across, total - across, kind_factor(kind, nodes) * n_bytes / gpus,
                      inside * kind_factor(RS, gpus) * n_bytes)
