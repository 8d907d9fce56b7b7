"""A link: what the network and the collective library measured or cite, as a link file holds it.

:mod:`simddp.cost` turns these fields into seconds; its base is a ring's α–β law,
``t(n) = α + 2(p−1)/p · n / busbw`` for an all-reduce, busbw in GB/s as nccl-tests reports it::

    >>> Link("eth", alpha_s=50e-6, busbw_gbps=1.0).allreduce_s(1_000_000, world_size=2)
    0.00105

A reduce-scatter or an all-gather of n bytes (the full, unsharded size) moves half that::

    >>> Link("eth", 0.0, 1.0).collective_s(REDUCE_SCATTER, 1_000_000, world_size=4)
    0.00075

A link is the network and its collective library only; a link file may hold contention and
Gloo host effects beside it (:class:`simddp.inputs.link_file.LinkFile`; fields:
docs/FORMATS.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from simddp.errors import InputError
from simddp.cost import single
from simddp.cost.curve import Curve, make_curve
from simddp.cost.factors import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER
from simddp.inputs.profile import _check_spread

# Collective kinds a plan issues (simddp/planning/plans.py); a span's kind spells them with a hyphen.
COLLECTIVE_KINDS = (ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER)


def _positive(owner: str, name: str, value: float, allow_zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and math.isfinite(value) and (
        value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise InputError(f"link {owner!r}: {name} must be a finite number {bound}, got {value!r}")


@dataclass(frozen=True)
class LinkPiece:
    """One segment of a piecewise fit: sizes up to ``up_to_bytes`` (None: no upper bound)."""

    up_to_bytes: float | None
    alpha_s: float
    busbw_gbps: float


@dataclass(frozen=True)
class KindFit:
    """α and busbw calibrate measured for one collective kind (reduce_scatter, all_gather)."""

    alpha_s: float
    busbw_gbps: float


@dataclass(frozen=True)
class Link:
    """An all-reduce cost model. ``world_size`` is the world it was measured at, if any."""

    name: str
    alpha_s: float
    busbw_gbps: float
    world_size: int | None = None
    backend: str = ""
    pieces: tuple[LinkPiece, ...] = ()
    source: str = ""
    # (p5, p95) of measured all-reduce times over their median: a prediction range's input.
    time_spread: tuple[float, float] | None = None
    # Measured laws of the other kinds; a kind without one takes the all-reduce's α and busbw
    # (nccl-tests defines busbw to be, ideally, the same for every kind).
    kind_fits: dict[str, KindFit] = field(default_factory=dict, hash=False)
    # Measured size → time curves per kind: a kind with one is charged by it, not by α–β.
    curves: tuple[Curve, ...] = ()

    def __post_init__(self) -> None:
        _positive(self.name, "alpha_s", self.alpha_s, allow_zero=True)
        _positive(self.name, "busbw_gbps", self.busbw_gbps)
        pieces = tuple(p if isinstance(p, LinkPiece) else LinkPiece(**p) for p in self.pieces)
        object.__setattr__(self, "pieces", pieces)
        for p in pieces:
            _positive(self.name, "pieces.alpha_s", p.alpha_s, allow_zero=True)
            _positive(self.name, "pieces.busbw_gbps", p.busbw_gbps)
        bounds = [p.up_to_bytes for p in pieces]
        if any(b is not None and (isinstance(b, bool) or not isinstance(b, (int, float))
                                  or not b > 0) for b in bounds):
            raise InputError(f"link {self.name!r}: pieces.up_to_bytes must be numbers > 0 or null")
        if pieces and (bounds[-1] is not None or any(b is None for b in bounds[:-1])
                       or any(a >= b for a, b in zip(bounds[:-2], bounds[1:-1]))):
            raise InputError(f"link {self.name!r}: pieces must have increasing up_to_bytes "
                             "and end with up_to_bytes null")
        _check_spread(f"link {self.name!r}", "time_spread", self, "time_spread")
        fits = {}
        for kind, fit in dict(self.kind_fits or {}).items():
            if kind not in (REDUCE_SCATTER, ALL_GATHER):
                raise InputError(f"link {self.name!r}: kind_fits: unknown kind {kind!r}; "
                                 f"expected {REDUCE_SCATTER} or {ALL_GATHER}")
            if not isinstance(fit, KindFit):
                try:
                    fit = KindFit(**fit)
                except TypeError:
                    raise InputError(f"link {self.name!r}: kind_fits.{kind} must be "
                                     "{alpha_s, busbw_gbps}") from None
            _positive(self.name, f"kind_fits.{kind}.alpha_s", fit.alpha_s, allow_zero=True)
            _positive(self.name, f"kind_fits.{kind}.busbw_gbps", fit.busbw_gbps)
            fits[kind] = fit
        object.__setattr__(self, "kind_fits", fits)
        if not isinstance(self.curves, (list, tuple)):
            raise InputError(f"link {self.name!r}: curves must be a list of curves, "
                             f"got {self.curves!r}")
        object.__setattr__(self, "curves", tuple(
            make_curve(c, f"link {self.name!r}: curves[{i}]") for i, c in enumerate(self.curves)))
        if self.world_size is not None and (not isinstance(self.world_size, int)
                                            or self.world_size < 2):
            raise InputError(f"link {self.name!r}: world_size must be an integer >= 2")

    def allreduce_s(self, n_bytes: float, world_size: int) -> float:
        """Seconds for one all-reduce of ``n_bytes`` among ``world_size`` ranks (the law:
        simddp/cost/single.py)."""
        return single.collective_s(self, ALL_REDUCE, n_bytes, world_size)

    def collective_s(self, kind: str, n_bytes: float, world_size: int) -> float:
        """Seconds for one ``kind`` collective of ``n_bytes`` (reduce-scatter and all-gather:
        the full, unsharded bytes) among ``world_size`` ranks (simddp/cost/single.py)."""
        return single.collective_s(self, kind, n_bytes, world_size)

    def for_world(self, world_size: int, rescale: bool = False) -> "Link":
        """Check that this link applies to ``world_size`` ranks: a calibrated link only at the
        world size it was measured at, unless ``rescale`` (busbw and α held)."""
        if not isinstance(world_size, int) or world_size < 2:
            raise InputError(f"--world-size must be an integer >= 2, got {world_size!r}")
        if self.world_size not in (None, world_size) and not rescale:
            raise InputError(f"link {self.name!r} was calibrated at world size {self.world_size}, "
                             f"not {world_size}; recalibrate or pass --rescale-link")
        if self.world_size not in (None, world_size):
            return replace(self, name=f"{self.name}@p{world_size}", world_size=world_size,
                           source=f"{self.source} (rescaled from p={self.world_size} by the ring law)")
        return self

    def time_scaled(self, factor: float) -> "Link":
        """The same link with every all-reduce ``factor`` times as long (α ×f, busbw ÷f)."""
        if factor == 1.0:
            return self
        return replace(self, alpha_s=self.alpha_s * factor, busbw_gbps=self.busbw_gbps / factor,
                       pieces=tuple(replace(p, alpha_s=p.alpha_s * factor,
                                            busbw_gbps=p.busbw_gbps / factor)
                                    for p in self.pieces),
                       kind_fits={k: KindFit(f.alpha_s * factor, f.busbw_gbps / factor)
                                  for k, f in self.kind_fits.items()},
                       curves=tuple(c.time_scaled(factor) for c in self.curves))

    def with_overrides(self, alpha_us: float | None = None,
                       busbw_gbps: float | None = None) -> "Link":
        """The same link with α and/or busbw replaced (a piecewise fit, per-kind fits and
        measured curves collapse to one line)."""
        if alpha_us is None and busbw_gbps is None:
            return self
        return replace(self, name=f"{self.name}*",
                       alpha_s=self.alpha_s if alpha_us is None else alpha_us / 1e6,
                       busbw_gbps=self.busbw_gbps if busbw_gbps is None else busbw_gbps,
                       pieces=(), kind_fits={}, curves=())
