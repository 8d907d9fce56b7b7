"""One link's law: seconds for one collective of a kind and a size among p ranks.

Two implementations, picked per kind by what the link holds:

- a **measured curve** of that kind (:mod:`simddp.cost.curve`), wherever the link has one,
  moved from its p0 ranks to p through busbw, ``t_p(n) = t_p0(n) · f(p)/f(p0)`` (docs/FORMATS.md);
  of curves differing only by algorithm the fastest at each size, as NCCL's tuner picks.
- else **α–β**: ``α + f(p) · n / busbw``, with the link's pieces (a piecewise fit) and its
  kind's own fit (``kind_fits``).

A call waited for before the next is issued (``blocking``) costs more only where a ``host``
(:class:`simddp.inputs.gloo_host.GlooHost`, passed by :mod:`simddp.rig`) says so: its blocking α
replaces the segment's, and a curve's call pays the wait on top::

    >>> from simddp.inputs.link import Link
    >>> collective_s(Link("eth", 50e-6, 1.0), "all_reduce", 1_000_000, 2)
    0.00105
    >>> curved = Link("c", 50e-6, 1.0, curves=[{"kind": "all_reduce", "ranks": 2,
    ...     "bytes": [1000, 1_000_000], "seconds": [20e-6, 800e-6]}])
    >>> round(collective_s(curved, "all_reduce", 1_000_000, 2) * 1e6, 3)   # the point itself
    800.0
    >>> round(collective_s(curved, "all_reduce", 1_000_000, 8) * 1e6, 3)   # × 1.75 / 1.0
    1400.0
    >>> round(collective_s(curved, "all_gather", 1_000_000, 2) * 1e6, 3)   # no curve: α–β
    550.0
"""
from __future__ import annotations

import math

from simddp.cost.factors import ALL_REDUCE, GB, bus_factor, kind_factor


def alpha_beta_s(alpha_s, busbw_gbps, kind: str, n_bytes, world_size: int):
    """α + f(p)·n/busbw for one collective (numbers or numpy arrays of sizes)::

        >>> alpha_beta_s(0.0, 1.0, "all_gather", 1e6, 4)
        0.00075
    """
    return alpha_s + kind_factor(kind, world_size) * n_bytes / (busbw_gbps * GB)


def bytes_s(kind: str, n_bytes, world_size: int, busbw_gbps):
    """The bytes term alone, f(p)·n/busbw: what a fit subtracts to solve for α."""
    return kind_factor(kind, world_size) * n_bytes / (busbw_gbps * GB)


def wait_s(link, host=None) -> float:
    """What waiting for a call before issuing the next costs on top of the lone α: the
    host's blocking α less the link's, 0 without a host."""
    return 0.0 if host is None else host.wait_s(link.alpha_s)


def segment(link, n_bytes: float, blocking: bool = False, host=None) -> tuple[float, float]:
    """(α seconds, busbw GB/s) of the all-reduce fit segment ``n_bytes`` falls in;
    ``blocking``: the ``host``'s ``blocking_alpha_s`` replaces every piece's α."""
    alpha_s, busbw_gbps = link.alpha_s, link.busbw_gbps
    for piece in link.pieces:
        if piece.up_to_bytes is None or n_bytes <= piece.up_to_bytes:
            alpha_s, busbw_gbps = piece.alpha_s, piece.busbw_gbps
            break
    if blocking and host is not None and host.blocking_alpha_s is not None:
        alpha_s = host.blocking_alpha_s
    return alpha_s, busbw_gbps


def kind_segment(link, kind: str, n_bytes: float, blocking: bool = False, host=None
                 ) -> tuple[float, float]:
    """(α seconds, busbw GB/s) of a ``kind`` collective: its measured fit, else the
    all-reduce's (:func:`segment`). ``blocking``: the kind's own waited-for α where the
    ``host`` measured it (the all-reduce's wait does not carry over to other kinds:
    docs/FINDINGS.md#blocking-alpha), else the lone α plus :func:`wait_s`.

    >>> from simddp.inputs.gloo_host import GlooHost
    >>> from simddp.inputs.link import KindFit, Link
    >>> link = Link("l", 400e-6, 1.0, kind_fits={"all_gather": KindFit(200e-6, 1.0),
    ...                                          "reduce_scatter": KindFit(200e-6, 1.0)})
    >>> host = GlooHost(800e-6, kind_blocking_alpha_s={"all_gather": 300e-6})
    >>> [round(kind_segment(link, k, 1e6, True, host)[0] * 1e6)
    ...  for k in ("all_gather", "reduce_scatter")]
    [300, 600]
    """
    fit = link.kind_fits.get(kind)
    if fit is None:
        return segment(link, n_bytes, blocking, host)
    if blocking and host is not None and host.kind_blocking_alpha_s.get(kind) is not None:
        return host.kind_blocking_alpha_s[kind], fit.busbw_gbps
    return fit.alpha_s + (wait_s(link, host) if blocking else 0.0), fit.busbw_gbps


def pick_curves(link, kind: str, world_size: int, nodes: int | None = None,
                algorithm: str | None = None) -> tuple:
    """The link's curves that answer for ``kind`` at ``world_size`` ranks (on ``nodes``
    nodes, where known): those at the nearest point (nodes first, then ranks: exact, else
    nearest in log, the larger on a tie), one per algorithm; () where the link has none of
    that kind (the α–β law answers). ``algorithm``: only curves of that algorithm."""
    mine = [c for c in link.curves if c.kind == kind
            and (algorithm is None or c.algorithm == algorithm)]
    if not mine:
        return ()

    def distance(c):
        return (nodes is not None and c.nodes != nodes, c.ranks != world_size,
                abs(math.log(c.ranks / world_size)), -c.ranks)

    best = min(distance(c) for c in mine)
    return tuple(c for c in mine if distance(c) == best)


def _curve_s(curves: tuple, kind: str, n_bytes: float, world_size: int) -> float:
    """The fastest of ``curves`` at ``n_bytes``, each moved to ``world_size`` by busbw."""
    return min(c.seconds_at(n_bytes) * (kind_factor(kind, world_size)
                                        / kind_factor(kind, c.ranks)) for c in curves)


def parts(link, kind: str, n_bytes: float, world_size: int, blocking: bool = False,
          nodes: int | None = None, host=None) -> tuple[float, float]:
    """(fixed seconds, bytes seconds) of one collective, summing to :func:`collective_s`:
    the fixed part is α (a curve's low-end α) and a waited-for call's wait.

        >>> from simddp.inputs.link import Link
        >>> parts(Link("eth", 50e-6, 1.0), "all_reduce", 1_000_000, 2)
        (5e-05, 0.001)
    """
    curves = pick_curves(link, kind, world_size, nodes) if link.curves else ()
    if curves:
        waiting_s = wait_s(link, host) if blocking else 0.0
        total_s = _curve_s(curves, kind, n_bytes, world_size)
        fixed_s = min(total_s, min(c.fixed_s * kind_factor(kind, world_size)
                                   / kind_factor(kind, c.ranks) for c in curves))
        return fixed_s + waiting_s, total_s - fixed_s
    alpha_s, busbw_gbps = kind_segment(link, kind, n_bytes, blocking, host)
    return alpha_s, bytes_s(kind, n_bytes, world_size, busbw_gbps)


def collective_s(link, kind: str, n_bytes: float, world_size: int, blocking: bool = False,
                 nodes: int | None = None, host=None) -> float:
    """Seconds for one ``kind`` collective of ``n_bytes`` (reduce-scatter and all-gather: the
    full, unsharded bytes) among ``world_size`` ranks on ``link``."""
    if link.curves:
        curves = pick_curves(link, kind, world_size, nodes)
        if curves:
            return (_curve_s(curves, kind, n_bytes, world_size)
                    + (wait_s(link, host) if blocking else 0.0))
    alpha_s, busbw_gbps = kind_segment(link, kind, n_bytes, blocking, host)
    return alpha_beta_s(alpha_s, busbw_gbps, kind, n_bytes, world_size)


def all_reduce_law(link, world_size: int, blocking: bool = False, host=None):
    """``n_bytes -> seconds`` of an all-reduce on ``link``, worked out once for a plan's many
    calls; the same numbers as :func:`collective_s`, to the bit."""
    if link.pieces or (link.curves and pick_curves(link, ALL_REDUCE, world_size)):
        return lambda n: collective_s(link, ALL_REDUCE, n, world_size, blocking, host=host)
    alpha_s, busbw_gbps = segment(link, 0.0, blocking, host)
    factor, per_s = bus_factor(world_size), busbw_gbps * GB
    return lambda n: alpha_s + factor * n / per_s
