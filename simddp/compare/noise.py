"""How far the measuring bench disagrees with itself, as compare reports it: two numbers.

**Twin models**: how far a second compute-only model beside the first reads apart
(``instance_gap``); a smaller error or regret is within the bench's own noise
(docs/FINDINGS.md#measurement-noise)::

    >>> instance_gap_pct({"instance_gap": {"apart_pct": 3.8}}, "m.json")
    3.8
    >>> instance_gap_pct({"results": []}, "m.json") is None      # an older bench, or validate
    True

**Split halves**: the bench runs each row in round-robin turns, so its odd and even turns are
two measurements of the same row; how far their medians read apart is the row's own noise::

    >>> round(halves_apart_pct([1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0], turn_steps=2), 1)
    66.7
    >>> halves_apart_pct([1.0] * 5, turn_steps=5) is None     # one turn: no halves
    True
"""
from __future__ import annotations

import math

import numpy as np

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


def turn_steps(doc, where: str) -> int | None:
    """The steps of one turn of the measured file's bench (its ``bench.chunk``), None where
    it has none (a validate run, an older file); a malformed one is a one-line InputError."""
    bench = doc.get("bench") if isinstance(doc, dict) else None
    chunk = bench.get("chunk") if isinstance(bench, dict) else None
    if chunk is None:
        return None
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
        raise InputError(f"{where}: bench.chunk must be a whole number of steps >= 1, "
                         f"got {chunk!r}")
    return chunk


def halves_apart_pct(steps_s, turn_steps: int) -> float | None:
    """How far apart the medians of a row's odd and even turns read, in % of the median of
    all its steps (``steps_s`` in the order they ran); None with fewer than two turns."""
    turns = [steps_s[i:i + turn_steps] for i in range(0, len(steps_s), turn_steps)]
    if len(turns) < 2:
        return None
    a, b = (float(np.median([t for turn in turns[k::2] for t in turn])) for k in (0, 1))
    return abs(a - b) / float(np.median(steps_s)) * 100.0


def halves_summary(rows) -> dict | None:
    """Over the scored rows with a split (``Row.halves_apart_pct``): the median and the
    largest distance, and the rows whose |error| is larger than their own; None without."""
    split = [r for r in rows if not r.is_input and r.halves_apart_pct is not None]
    if not split:
        return None
    worst = max(split, key=lambda r: r.halves_apart_pct)
    return {"median_pct": float(np.median([r.halves_apart_pct for r in split])),
            "max_pct": worst.halves_apart_pct, "max_config": worst.label, "rows": len(split),
            "beyond": [r.label for r in split if abs(r.error_pct) > r.halves_apart_pct]}


def halves_text(summary: dict | None, turn_steps: int | None) -> list[str]:
    """The report's line under the errors (none without a split)."""
    if summary is None:
        return []
    beyond = summary["beyond"]
    named = ", ".join(beyond[:6]) + (", …" if len(beyond) > 6 else "")
    return [f"the bench against itself: each row's odd and even turns ({turn_steps} steps "
            f"each) read apart by median {summary['median_pct']:.1f} %, max "
            f"{summary['max_pct']:.1f} % ({summary['max_config']}); {len(beyond)} of "
            f"{summary['rows']} rows miss by more than their own split"
            + (f": {named}" if beyond else "")]
