"""A measured curve: what one collective took at each size, as nccl-tests or calibrate timed it.

NCCL is not one line: it switches algorithm and protocol with size (8×H200: ring with LL up
to 1 MiB, NVLS with Simple from 2 MiB), and a 2-node table's busbw is not even monotonic. A
curve keeps the measured points and reads between them in log–log (a power law between
neighbours); beyond its ends it continues by the α–β line through the two end points on that
side (α clamped at 0, a falling end held flat), so it still grows with the bytes::

    >>> c = Curve("all_reduce", 8, bytes=(1 << 20, 1 << 24), seconds=(42e-6, 125e-6))
    >>> round(c.seconds_at(1 << 22) * 1e6, 1)           # √(42·125): halfway in log–log
    72.5
    >>> round(c.seconds_at(1 << 25) * 1e6, 1)           # past the end: α–β of the two points
    213.5
    >>> round(c.fixed_s * 1e6, 2)                       # the low end's α: its fixed part
    36.47

The file format (a link file's ``curves``, docs/FORMATS.md)::

    {"kind": "all_reduce", "ranks": 8, "nodes": 1, "algorithm": null, "source": "...",
     "bytes": [ascending ints], "seconds": [floats > 0, as many]}
"""
from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, replace

from simddp.errors import InputError
from simddp.cost.factors import COLLECTIVE_KINDS

CURVE_FIELDS = ("kind", "ranks", "nodes", "algorithm", "source", "bytes", "seconds")


def _end_line(b0: float, t0: float, b1: float, t1: float) -> tuple[float, float]:
    """(α s, β s/byte) through two points, anchored at (b1, t1): β ≥ 0 (a falling end is held
    flat) and α ≥ 0 (else the line through the origin and the anchor)."""
    beta = max(0.0, (t1 - t0) / (b1 - b0))
    alpha = t1 - beta * b1
    if alpha < 0:
        return 0.0, t1 / b1
    return alpha, beta


@dataclass(frozen=True)
class Curve:
    """Seconds of one ``kind`` collective at each of ``bytes`` (full, unsharded sizes, as
    nccl-tests counts them) among ``ranks`` ranks on ``nodes`` nodes; ``algorithm``: NCCL's,
    where the run pinned one (None: the library's own choice at each size)."""

    kind: str
    ranks: int
    bytes: tuple[int, ...]
    seconds: tuple[float, ...]
    nodes: int = 1
    algorithm: str | None = None
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "bytes", tuple(self.bytes))
        object.__setattr__(self, "seconds", tuple(self.seconds))
        b, t = self.bytes, self.seconds
        # read on every call: worked out once (frozen, so set past the dataclass's guard)
        object.__setattr__(self, "_log_b", [math.log(n) for n in b])
        object.__setattr__(self, "_log_t", [math.log(s) for s in t])
        object.__setattr__(self, "_low", _end_line(b[1], t[1], b[0], t[0]))
        object.__setattr__(self, "_high", _end_line(b[-2], t[-2], b[-1], t[-1]))

    @property
    def fixed_s(self) -> float:
        """What a call costs with no bytes: the low end's α (the curve's fixed part)."""
        return self._low[0]

    def seconds_at(self, n_bytes: float) -> float:
        """Seconds for ``n_bytes`` among :attr:`ranks` ranks (see the module text)."""
        b = self.bytes
        if n_bytes < b[0]:
            alpha, beta = self._low
            return alpha + beta * n_bytes
        if n_bytes > b[-1]:
            alpha, beta = self._high
            return alpha + beta * n_bytes
        i = bisect_right(b, n_bytes) - 1
        if n_bytes == b[i]:
            return self.seconds[i]
        lb, lt = self._log_b, self._log_t
        x = (math.log(n_bytes) - lb[i]) / (lb[i + 1] - lb[i])
        return math.exp(lt[i] + x * (lt[i + 1] - lt[i]))

    def time_scaled(self, factor: float) -> "Curve":
        """Every time ``factor`` times as long (one end of a prediction range)."""
        return replace(self, seconds=tuple(s * factor for s in self.seconds))

    def to_json(self) -> dict:
        """The link file's entry, in the format's order (bytes and seconds last: long)."""
        return {name: list(getattr(self, name)) if name in ("bytes", "seconds")
                else getattr(self, name) for name in CURVE_FIELDS}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def make_curve(item, where: str) -> Curve:
    """A :class:`Curve` from a link file's ``curves`` entry, checked field by field:
    InputError naming ``where`` (``link 'x': curves[2]``) and the bad field."""
    if isinstance(item, Curve):
        return item
    if not isinstance(item, dict):
        raise InputError(f"{where} must be an object with {', '.join(CURVE_FIELDS)}")
    extra = sorted(set(item) - set(CURVE_FIELDS))
    if extra:
        raise InputError(f"{where}: unknown field(s) {', '.join(extra)}; expected "
                         f"{', '.join(CURVE_FIELDS)}")
    for name in ("kind", "ranks", "bytes", "seconds"):
        if name not in item:
            raise InputError(f"{where}: missing field {name}")
    kind, ranks, nodes = item["kind"], item["ranks"], item.get("nodes", 1)
    if kind not in COLLECTIVE_KINDS:
        raise InputError(f"{where}.kind must be one of {', '.join(COLLECTIVE_KINDS)}, "
                         f"got {kind!r}")
    if not _is_int(ranks) or ranks < 2:
        raise InputError(f"{where}.ranks must be an integer >= 2, got {ranks!r}")
    if not _is_int(nodes) or nodes < 1 or ranks % nodes:
        raise InputError(f"{where}.nodes must be an integer >= 1 dividing ranks {ranks}, "
                         f"got {nodes!r}")
    algorithm, source = item.get("algorithm"), item.get("source", "")
    if algorithm is not None and (not isinstance(algorithm, str) or not algorithm):
        raise InputError(f"{where}.algorithm must be null or a name (ring, tree, nvls, ...), "
                         f"got {algorithm!r}")
    if not isinstance(source, str):
        raise InputError(f"{where}.source must be a string, got {source!r}")
    sizes, times = item["bytes"], item["seconds"]
    if (not isinstance(sizes, (list, tuple)) or len(sizes) < 2
            or not all(_is_int(n) and n > 0 for n in sizes)
            or any(a >= b for a, b in zip(sizes, sizes[1:]))):
        raise InputError(f"{where}.bytes must be at least 2 ascending integers > 0, "
                         f"got {sizes!r}"[:300])
    if (not isinstance(times, (list, tuple)) or len(times) != len(sizes)
            or not all(_is_number(s) and s > 0 for s in times)):
        raise InputError(f"{where}.seconds must be {len(sizes)} finite numbers > 0 (one per "
                         f"bytes entry), got {times!r}"[:300])
    return Curve(kind, ranks, tuple(sizes), tuple(float(s) for s in times), nodes,
                 algorithm, source)
