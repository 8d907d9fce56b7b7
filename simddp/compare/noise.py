"""How far apart two identical rows of the measuring bench read, as compare reports it.

``realrun bench`` times a second compute-only model beside the first (realrun/twin.py) and
writes how far apart the two read as the file's ``instance_gap``. A best-bucket regret or
an error smaller than that is within what the bench's own model instances differ by (up to
×1.2 on the 2-vCPU VM in one run, within 1 % in the next: docs/results/
2026-11-26-slower-rank.md, section 6)::

    >>> instance_gap_pct({"instance_gap": {"apart_pct": 3.8}}, "m.json")
    3.8
    >>> instance_gap_pct({"results": []}, "m.json") is None      # an older bench, or validate
    True
"""
from __future__ import annotations

import math

from simddp.errors import InputError


def instance_gap_pct(doc, where: str) -> float | None:
    """The measured file's two compute-only models' distance in %, None if it has none;
    a malformed one is a one-line InputError naming ``where``."""
    gap = doc.get("instance_gap") if isinstance(doc, dict) else None
    if gap is None:
        return None
    pct = gap.get("apart_pct") if isinstance(gap, dict) else None
    if (not isinstance(pct, (int, float)) or isinstance(pct, bool) or not math.isfinite(pct)
            or pct < 0):
        raise InputError(f"{where}: instance_gap must hold apart_pct, a number >= 0, "
                         f"got {gap!r}")
    return float(pct)


def noise_text(pct: float) -> str:
    """The report's line under the best bucket."""
    return (f"  two identical compute-only models in the bench read {pct:.1f} % apart: a regret "
            "or error below that is within its model instances' own difference")
