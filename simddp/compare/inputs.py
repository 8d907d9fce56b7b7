"""What ``simddp compare`` accepts as results, and how it finds one configuration among them.

A configuration is ``(strategy, bucket_mb, accum_steps)``; bucket sizes match within
:data:`BUCKET_REL_TOL`. The checks turn a hand-edited or truncated file into one
:class:`~simddp.errors.InputError` line naming the file (simddp/compare/match.py calls them)::

    >>> same_bucket(0.1, 0.09999943), same_bucket(None, 1.0)
    (True, False)
"""
from __future__ import annotations

import math

from simddp.compare.text import config_label
from simddp.errors import InputError
from simddp.result import Result

# Bucket sizes travel as MB floats: int(mb * 2**20) / 2**20 brings 0.1 MB back as 0.09999943
# (6e-6 relative); 1e-3 is far above that and far below any step between swept sizes.
BUCKET_REL_TOL = 1e-3


def same_bucket(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=BUCKET_REL_TOL, abs_tol=1e-9)


def find_result(results, strategy: str, bucket_mb: float | None, accum_steps: int | None = None
                ) -> Result | None:
    """The result of that configuration (closest bucket within tolerance), or None.
    ``accum_steps=None`` accepts any, preferring the smallest."""
    hits = [r for r in results if r.strategy == strategy and same_bucket(r.bucket_mb, bucket_mb)
            and (accum_steps is None or r.accum_steps == accum_steps)]
    if not hits:
        return None
    return min(hits, key=lambda r: (r.accum_steps,
                                    0.0 if bucket_mb is None else abs(r.bucket_mb - bucket_mb)))


def check_result(r: Result, where: str) -> None:
    """Values compare's arithmetic relies on; a hand-edited or truncated file fails here."""
    def number(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    what = f"{where}: {r.strategy!r}"
    if not isinstance(r.strategy, str):
        raise InputError(f"{what}: strategy must be a name like 'ddp'")
    if r.bucket_mb is not None and not (number(r.bucket_mb) and r.bucket_mb > 0):
        raise InputError(f"{what}: bucket_mb {r.bucket_mb!r} must be null or a number > 0")
    if not (isinstance(r.accum_steps, int) and r.accum_steps >= 1):
        raise InputError(f"{what}: accum_steps {r.accum_steps!r} must be an integer >= 1")
    what = f"{where}: {config_label(*r.config)}"
    if not (number(r.step_s) and r.step_s > 0):
        raise InputError(f"{what} has step_s {r.step_s!r}, expected a time > 0 s")
    for name in ("step_p5_s", "step_p95_s"):
        v = getattr(r, name)
        if v is not None and not (number(v) and v >= 0):
            raise InputError(f"{what} has {name} {v!r}, expected null or a time >= 0 s")


def check_unique(results: list[Result], where: str) -> None:
    seen: list[Result] = []
    for r in results:
        if find_result(seen, *r.config) is not None:
            raise InputError(f"{where}: config {config_label(*r.config)} is listed twice "
                             "(expected one result per configuration)")
        seen.append(r)


def one_job(results: list[Result], where: str) -> tuple[str, int]:
    for name, values in (("models", {r.model for r in results}),
                         ("world sizes", {r.world_size for r in results})):
        if len(values) > 1:
            raise InputError(f"{where}: mixes {name} {', '.join(map(str, sorted(values)))}; "
                             "compare one job at a time")
    return results[0].model, results[0].world_size
