"""What a link file holds: the link, and what was measured beside it.

Beside the link, a ``simddp.link/2`` file (docs/FORMATS.md) may hold, each in a section:

- ``contention``: how much compute and calibrate's all-reduces slowed each other
  (:class:`simddp.inputs.contention.Contention`, source "link");
- ``gloo_host``: what Gloo on a shared CPU host adds (:class:`simddp.inputs.gloo_host.GlooHost`);
- ``levels``: on a two-level world, the link inside every node and the link across nodes,
  each a link file's body of its own (:class:`Levels`).

:func:`simddp.predict.resolve.resolve` decides once which a prediction uses::

    >>> from simddp.inputs.link import Link
    >>> f = LinkFile(Link("cal", 1e-4, 10.0), Contention(1.2, 1.5, source="link"))
    >>> f.link.name, f.contention.measured, f.host is None
    ('cal', True, True)
"""
from __future__ import annotations

from dataclasses import dataclass

from simddp.errors import InputError
from simddp.inputs.contention import Contention
from simddp.inputs.gloo_host import GlooHost
from simddp.inputs.link import Link
from simddp.inputs.topology import Topology


@dataclass(frozen=True)
class LinkFile:
    """A link and what its file measured beside it."""

    link: Link
    contention: Contention | None = None
    host: GlooHost | None = None
    levels: "Levels | None" = None

    def __post_init__(self) -> None:
        for name, kind in (("link", Link), ("contention", Contention), ("host", GlooHost),
                           ("levels", Levels)):
            value = getattr(self, name)
            if not isinstance(value, kind) and (name == "link" or value is not None):
                raise TypeError(f"LinkFile.{name} must be a {kind.__name__}, got {value!r}")


def as_link_file(link: "Link | LinkFile") -> LinkFile:
    """``link`` as a LinkFile: a bare Link (a preset) has nothing measured beside it."""
    return link if isinstance(link, LinkFile) else LinkFile(link)


@dataclass(frozen=True)
class Levels:
    """A link file's per-level fits (its ``levels`` section, docs/FORMATS.md): measured by
    ``python -m calibrate`` on ``gpus_per_node`` ranks a node, ``intra`` inside every node at
    once, ``inter`` across nodes (one rank a node, the same local rank) in all G subgroups at
    once. The file's top-level link stays the flat ring's over every rank."""

    gpus_per_node: int
    intra: LinkFile
    inter: LinkFile

    def __post_init__(self) -> None:
        g = self.gpus_per_node
        if isinstance(g, bool) or not isinstance(g, int) or g < 2:
            raise InputError(f"levels.gpus_per_node must be an integer >= 2, got {g!r}")
        for name in ("intra", "inter"):
            value = getattr(self, name)
            if isinstance(value, Link):
                object.__setattr__(self, name, LinkFile(value))
            elif not isinstance(value, LinkFile):
                raise InputError(f"levels.{name} must be a link's fields")
        if self.intra.link.world_size not in (None, g):
            raise InputError(f"levels.intra.world_size {self.intra.link.world_size} is not "
                             f"levels.gpus_per_node {g}")

    def topology(self, nodes: int, gpus_per_node: int, intra: Link | None = None,
                 inter: Link | None = None, where: str = "the link file") -> Topology:
        """``nodes`` × ``gpus_per_node`` on these levels (``intra``/``inter``: replacements,
        e.g. with overrides); InputError unless ``gpus_per_node`` is the one measured."""
        if gpus_per_node != self.gpus_per_node:
            raise InputError(f"--gpus-per-node {gpus_per_node}: {where} was calibrated per "
                             f"level with {self.gpus_per_node} GPUs per node; pass "
                             f"--gpus-per-node {self.gpus_per_node}, or --intra-link to give "
                             "the link inside a node yourself")
        return Topology(nodes, gpus_per_node, intra or self.intra.link,
                        inter or self.inter.link, self.intra.host, self.inter.host)
