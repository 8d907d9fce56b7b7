"""The nccl-tests table ``python -m calibrate`` prints, and its units::

    print(table(rows, "float32", world_size=2, fit=fit, heldout=mask))

Vocabulary as in nccl-tests' doc/PERFORMANCE.md: ``algbw = size / time`` and
``busbw = algbw · 2(p−1)/p`` for all-reduce, in GB/s = 1e9 bytes/s. Times are µs on screen,
seconds inside.
"""
from __future__ import annotations

from simddp.cost.factors import ALL_REDUCE, GB, kind_factor

_NCCL_TYPE = {"float32": "float", "float16": "half", "bfloat16": "bfloat16",
              "float64": "double", "int32": "int32", "int64": "int64", "uint8": "uint8"}


def bandwidths_gbps(size_bytes: float, time_s: float, world_size: int,
                    kind: str = ALL_REDUCE) -> tuple[float, float]:
    """(algbw, busbw) in GB/s, as nccl-tests computes them: busbw = algbw · 2(p−1)/p for
    all-reduce, algbw · (p−1)/p for reduce-scatter and all-gather (size = the full bytes).

    >>> bandwidths_gbps(1e9, 2.0, 4), bandwidths_gbps(1e9, 2.0, 4, "reduce_scatter")
    ((0.5, 0.75), (0.5, 0.375))
    """
    algbw = size_bytes / time_s / GB
    return algbw, algbw * kind_factor(kind, world_size)


def human_bytes(n: float) -> str:
    """1024 -> '1 KiB', 67108864 -> '64 MiB'."""
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def table(rows: list[dict], dtype: str, world_size: int, fit=None, heldout=None) -> str:
    """The nccl-tests all_reduce_perf layout, plus p95, the fit's prediction and its error.

    Held-out sizes (not used by the fit) are marked ``*`` in the last column.
    """
    head = ("#{:>12} {:>12} {:>9} {:>6} {:>10} {:>10} {:>8} {:>8} {:>10} {:>7}"
            .format("size", "count", "type", "redop", "time", "p95", "algbw", "busbw",
                    "fit", "err"))
    units = ("#{:>12} {:>12} {:>9} {:>6} {:>10} {:>10} {:>8} {:>8} {:>10} {:>7}"
             .format("(B)", "(elements)", "", "", "(us)", "(us)", "(GB/s)", "(GB/s)", "(us)",
                     "(%)"))
    lines = [head, units]
    predicted = fit.predict_s([r["size_bytes"] for r in rows]) if fit is not None else None
    for i, r in enumerate(rows):
        algbw, busbw = bandwidths_gbps(r["size_bytes"], r["time_s"], world_size)
        fit_cols = ["", ""]
        if predicted is not None:
            err = (predicted[i] - r["time_s"]) / r["time_s"]
            fit_cols = [f"{predicted[i] * 1e6:.1f}", f"{err * 100:+.1f}"]
        mark = " *" if heldout is not None and heldout[i] else ""
        lines.append(" {:>12} {:>12} {:>9} {:>6} {:>10.1f} {:>10.1f} {:>8.3f} {:>8.3f} {:>10} "
                     "{:>7}{}".format(r["size_bytes"], r["count"], _NCCL_TYPE.get(dtype, dtype),
                                      "sum", r["time_s"] * 1e6, r["p95_s"] * 1e6, algbw, busbw,
                                      *fit_cols, mark))
    if heldout is not None and any(heldout):
        lines.append("# * held out: not used by the fit, scored against it")
    return "\n".join(lines)


def wire_fraction(busbw_gbps: float, link_gbit: float | None) -> float | None:
    """busbw over the emulated wire rate R/8 GB/s (1 Gbit/s carries 0.125 GB/s)."""
    return busbw_gbps / (link_gbit / 8) if link_gbit else None
