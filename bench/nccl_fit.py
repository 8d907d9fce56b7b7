"""Does a curve from an nccl-tests log predict the sizes it was not given? Hold out every other.

    python bench/nccl_fit.py                                   # every fixture log, every table
    python bench/nccl_fit.py LOG [LOG ...] [--min-bytes 64K]

For each table of each log (simddp/ingest/nccl_tests.py: nccl-tests and rccl-tests, as
published): the rows at even positions (sizes 0, 2, 4, …) become the link's measured curve,
as ``python -m calibrate --from-nccl-tests`` makes it (calibrate.from_nccl_tests.log_curve),
and simddp's law (log–log between points) predicts each odd row. It prints each held-out
size's measured and predicted time and error, then the median and max |error| per table and
pooled over every table. Sizes below --min-bytes (default 64 KiB, as the presets' check) are
left out: there nccl-tests' time is launch latency and jitters by tens of µs between
neighbours. A table with fewer than four such sizes has nothing to hold out and is listed
as such.
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibrate.from_nccl_tests import log_curve  # noqa: E402
from simddp.inputs.link import Link  # noqa: E402
from simddp.ingest.nccl_tests import NcclTestsLog, read_tables  # noqa: E402

FIXTURES = sorted(p for p in (ROOT / "tests" / "data" / "nccl-tests").iterdir()
                  if p.name != "SOURCES.md")
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def held_out(table: NcclTestsLog, min_bytes: int) -> list[tuple[int, float, float]]:
    """(bytes, measured µs, predicted µs) at the odd rows of ``table`` (sizes ≥ min_bytes),
    from a curve of its even rows."""
    rows = [r for r in table.rows if r.bytes >= min_bytes]
    if len(rows) < 4:
        return []
    fit, test = rows[0::2], rows[1::2]
    curve = log_curve(replace(table, rows=tuple(fit)))
    link = Link("held-out", 0.0, 1.0, curves=(curve,))
    return [(r.bytes, r.time_us, link.collective_s(table.kind, r.bytes, table.ranks) * 1e6)
            for r in test]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("logs", nargs="*", type=Path, default=FIXTURES)
    p.add_argument("--min-bytes", default="64K")
    a = p.parse_args(argv)
    m = re.fullmatch(r"(\d+)([KMG]?)", a.min_bytes.upper())
    min_bytes = int(m.group(1)) * _UNIT[m.group(2)]
    pooled, summary = [], []
    for path in a.logs:
        for table in read_tables(path):
            rows = held_out(table, min_bytes)
            name = Path(table.source).name
            if not rows:
                summary.append(f"{name:48} {table.kind:14} {table.ranks:5d}  (fewer than 4 "
                               f"sizes ≥ {min_bytes} B: nothing to hold out)")
                continue
            print(f"\n{name}: {table.kind}, {table.ranks} ranks on {table.nodes} node(s); "
                  f"fit on every other size ≥ {min_bytes} B, predicting the other {len(rows)}")
            print(f"{'bytes':>12} {'measured us':>12} {'predicted us':>13} {'error':>8}")
            errors = []
            for n, measured, predicted in rows:
                err = (predicted - measured) / measured * 100
                errors.append(abs(err))
                print(f"{n:12d} {measured:12.1f} {predicted:13.1f} {err:+7.1f}%")
            pooled += errors
            summary.append(f"{name:48} {table.kind:14} {table.ranks:5d}  median "
                           f"{median(errors):5.1f} %, max {max(errors):5.1f} % over "
                           f"{len(errors)} sizes")
    print("\nper table:")
    print("\n".join(summary))
    print(f"pooled over {len(pooled)} held-out sizes of {len(summary)} tables: median "
          f"|error| {median(pooled):.1f} %, max {max(pooled):.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
