"""Each row's error net of the compute baseline's miss: does a miss come from the compute or
from the communication?

When the bench ran the compute slower or faster than the profile did, every row moves with it
(docs/FINDINGS.md#drift-and-the-compute-only-anchor); a row still off once the compute-only
miss is added to its prediction (once per micro-step) is the communication model's::

    >>> from simddp.compare.match import Row
    >>> rows = [Row("compute-only", None, 1, 0.040, 0.050, None, None, 30),
    ...         Row("overlap", None, 1, 0.100, 0.120, None, None, 30),
    ...         Row("ddp", 25.0, 1, 0.080, 0.085, None, None, 30)]
    >>> net = net_of_compute(rows)
    >>> round(net.compute_miss_s * 1e3, 3), [(label, round(pct, 2)) for label, pct in net.rows]
    (-10.0, [('overlap', -8.33), ('ddp:25', 5.88)])

A diagnostic, not a correction; absent where the compute-only row is an input or missing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simddp.result import COMPUTE_ONLY


@dataclass(frozen=True)
class NetOfCompute:
    compute_miss_s: float                   # predicted − measured compute-only step (accum 1)
    compute_error_pct: float                # that miss over the measured compute-only step
    rows: tuple[tuple[str, float], ...]     # (configuration label, net error %), table order

    @property
    def median_ape(self) -> float:
        return float(np.median([abs(pct) for _, pct in self.rows]))

    @property
    def worst(self) -> tuple[str, float]:
        return max(self.rows, key=lambda row: abs(row[1]))

    def to_json(self) -> dict:
        label, pct = self.worst
        return {"compute_miss_ms": self.compute_miss_s * 1e3,
                "compute_error_pct": self.compute_error_pct,
                "median_ape": self.median_ape, "max_ape": abs(pct), "max_config": label,
                "rows": [{"config": label, "net_error_pct": pct} for label, pct in self.rows]}


def net_of_compute(rows) -> NetOfCompute | None:
    """The scored rows' errors with the compute-only miss added to each prediction; None
    without a scored compute-only row at accum 1 or any other scored row."""
    base = next((r for r in rows if r.strategy == COMPUTE_ONLY and r.accum_steps == 1), None)
    if base is None or base.is_input:
        return None
    miss = base.predicted_s - base.measured_s
    net = tuple((r.label, (r.predicted_s - r.accum_steps * miss - r.measured_s)
                 / r.measured_s * 100.0)
                for r in rows if r.strategy != COMPUTE_ONLY and not r.is_input)
    if not net:
        return None
    return NetOfCompute(miss, miss / base.measured_s * 100.0, net)


def net_text(net: NetOfCompute | None) -> list[str]:
    """The report's line (none without a compute-only row to take out)."""
    if net is None:
        return []
    label, pct = net.worst
    way = "slower" if net.compute_miss_s < 0 else "faster"
    return [f"compute-only ran {abs(net.compute_miss_s) * 1e3:.2f} ms {way} than predicted "
            f"({net.compute_error_pct:+.1f} %); with that added to each prediction:",
            f"  |error| median {net.median_ape:.1f} %, max {abs(pct):.1f} % ({label} "
            f"{pct:+.1f} %): what stays is the communication's"]
