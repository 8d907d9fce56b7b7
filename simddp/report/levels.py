"""What each level of a two-level cluster carries, for the sweep's text and JSON.

One line per configuration that matters: the recommended bucket size under torch DDP's ring,
and the hierarchical all-reduce at the same size, each with its bytes per step over the
inter-node link, the seconds its phases take on each link when run alone, and which level
bounds its communication (simddp.inputs.topology.level_load)::

    inter-node link per step and rank, collectives run alone: ddp 25 MB 0.90 GiB, 40.1 ms
    (inter-bound); hierarchical 25 MB 0.11 GiB, 5.02 ms inter + 2.31 ms intra (inter-bound)
"""
from __future__ import annotations

from simddp.inputs.link import Link
from simddp.inputs.link_file import LinkFile, as_link_file
from simddp.planning.plans import plan
from simddp.inputs.profile import ModelProfile
from simddp.result import Result
from simddp.inputs.topology import Topology, level_load

GIB = 2**30


def topology_json(topology: Topology, link: Link | LinkFile, profile: ModelProfile, rec,
                  results: list[Result]) -> dict:
    """The cluster and the per-level load of the recommended row and of hierarchical at the
    same bucket size (or its first row)."""
    picks = []
    if rec is not None:
        picks.append(next(r for r in results if r.strategy == rec.strategy
                          and r.bucket_mb == rec.bucket_mb))
    hier = [r for r in results if r.spec is not None and r.spec.two_level]
    if hier:
        same = [r for r in hier if rec is not None and r.bucket_mb == rec.bucket_mb]
        picks.append((same or hier)[0])
    levels = []
    found = as_link_file(link)
    for r in picks:
        load = level_load(topology, found.link, plan(profile, r.spec), found.host)
        levels.append({"strategy": r.strategy, "bucket_mb": r.bucket_mb,
                       "inter_node_bytes": load["inter_node_bytes"],
                       "inter_node_ms": load["inter_node_s"] * 1e3,
                       "intra_node_ms": load["intra_node_s"] * 1e3,
                       "bound_by": load["bound_by"]})
    intra, across = topology.intra, topology.inter
    doc = {"nodes": topology.nodes, "gpus_per_node": topology.gpus_per_node,
           "intra_link": intra.name, "intra_alpha_us": intra.alpha_s * 1e6,
           "intra_busbw_gbps": intra.busbw_gbps, "levels": levels}
    if across is not None:  # the link file's levels: hierarchical's inter-node phase
        doc.update(hierarchical_inter_link=across.name,
                   hierarchical_inter_alpha_us=across.alpha_s * 1e6,
                   hierarchical_inter_busbw_gbps=across.busbw_gbps)
    return doc


def levels_line(doc: dict) -> str:
    """The per-level load as one line (see the module text)."""
    parts = []
    for lv in doc["levels"]:
        size = "" if lv["bucket_mb"] is None else f" {lv['bucket_mb']:g} MB"
        secs = f"{lv['inter_node_ms']:.3g} ms"
        if lv["intra_node_ms"] > 0 and lv["inter_node_ms"] > 0:
            secs = f"{lv['inter_node_ms']:.3g} ms inter + {lv['intra_node_ms']:.3g} ms intra"
        elif lv["intra_node_ms"] > 0:
            secs = f"{lv['intra_node_ms']:.3g} ms intra"
        parts.append(f"{lv['strategy']}{size} {lv['inter_node_bytes'] / GIB:.2f} GiB, {secs} "
                     f"({lv['bound_by']}-bound)")
    return ("inter-node link per step and rank, collectives run alone: "
            + ("; ".join(parts) or "no collectives"))


def topology_text(topology: Topology | None) -> str:
    """What the setup line adds for ``--nodes``/``--gpus-per-node``, '' without them. The
    link inside a node is printed as its preset is (``python -m simddp links``)::

        >>> from simddp.presets import get_link
        >>> for part in topology_text(Topology(4, 8, get_link("nvlink-a100"))).split("; "):
        ...     print(part)
         | 4 nodes × 8 GPUs, the link above between nodes
        inside: nvlink-a100 (α 46.3 µs, busbw 152.2 GB/s)
    """
    if topology is None:
        return ""
    intra, across = topology.intra, topology.inter
    text = (f" | {topology.nodes} nodes × {topology.gpus_per_node} GPUs, the link above "
            f"between nodes; inside: {intra.name} (α {intra.alpha_s * 1e6:g} µs, busbw "
            f"{intra.busbw_gbps:g} GB/s)")
    if across is not None:
        text += (f"; hierarchical's inter-node phase: {across.name} (α "
                 f"{across.alpha_s * 1e6:g} µs, busbw {across.busbw_gbps:g} GB/s, all "
                 f"{topology.gpus_per_node} cross-node groups at once)")
    return text
