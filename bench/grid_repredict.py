"""Grid cells predicted again by today's code from the files they kept: what a change does.

    python bench/grid_repredict.py /tmp/g25 /tmp/g26 ...          # every cell of each grid
    python bench/grid_repredict.py --spread /tmp/g35/tfm-loopback  # one cell, spread rebuilt

Each argument is a ``bench/workflow_grid.py --out D`` folder or one of its cells (D/cell).
A cell is swept again with its own profile and link (``simddp sweep``, the grid's
strategies and buckets) and scored against its own bench by ``simddp compare``, as the grid
scored it then. ``--spread``: the link's ``time_spread`` is first rebuilt from the parts its
calibration kept (cal/allreduce.json) by today's rule (calibrate/analysis.py: the bandwidth
sizes, the overlapped α's uncertainty, the blocking α's repeats), written as
cal/link_spread.json. Prints per cell then and now: median and max APE, regret, medians
inside their ranges; then the means over cells by kind of cell. Used for the
changes in docs/results/2026-11-26-torch-lone-buckets.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.workflow_grid import STRATEGIES  # noqa: E402
from calibrate.spreads import alpha_uncertainty, widen  # noqa: E402

KEYS = ("median_ape", "max_ape", "regret", "in_range", "with_range")


def compare(cell: Path, link: str, tag: str) -> dict:
    """``simddp compare``'s JSON for ``cell`` swept again with ``link`` into ``cell/tag``."""
    rows = json.loads((cell / "workflow.json").read_text())["rows"]
    buckets = ",".join(sorted({str(r["bucket_mb"]) for r in rows if r["bucket_mb"]}))
    py = [sys.executable, "-m", "simddp"]
    subprocess.run(py + ["sweep", "--model", str(cell / "prof.json"), "--link", link,
                         "--bucket-mb", buckets, "--strategies", STRATEGIES, "--out",
                         str(cell / tag), "--force"], cwd=ROOT, capture_output=True, check=True)
    return json.loads(subprocess.run(
        py + ["compare", "--predicted", str(cell / tag / "sweep.json"), "--measured",
              str(cell / "bench" / "bench.json"), "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout)


def cells(paths: list[str]) -> list[Path]:
    def is_cell(c: Path) -> bool:
        return (c / "workflow.json").exists() and (c / "cal" / "link.json").exists()

    out = []
    for p in map(Path, paths):
        if is_cell(p):
            found = [p]
        else:
            found = sorted(c for c in p.iterdir() if is_cell(c)) if p.is_dir() else []
        if not found:   # bad input: one line, exit 2
            print(f"grid_repredict: no grid cell in {p}", file=sys.stderr)
            raise SystemExit(2)
        out += found
    return out


def rebuilt_link(cell: Path) -> Path:
    """cal/link_spread.json: the cell's link with time_spread from today's rule."""
    link = json.loads((cell / "cal" / "link.json").read_text())
    seq = json.loads((cell / "cal" / "allreduce.json").read_text())["runs"][0]["sequence"]
    spread = widen(seq["bandwidth_spread"],
                   widen(alpha_uncertainty(seq), seq.get("blocking_alpha_spread")))
    path = cell / "cal" / "link_spread.json"
    path.write_text(json.dumps({**link, "time_spread": list(spread)}))
    return path


def line(s: dict) -> str:
    return (f"{s['median_ape']:5.1f} / {s['max_ape']:5.1f} %, regret {s['regret']:4.1f} %, "
            f"{s['in_range']}/{s['with_range']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--spread", action="store_true")
    args = ap.parse_args()
    by_kind: dict[str, list[tuple[dict, dict]]] = {}
    for cell in cells(args.paths):
        then = json.loads((cell / "workflow.json").read_text())
        link = rebuilt_link(cell) if args.spread else cell / "cal" / "link.json"
        now = compare(cell, str(link), "pred_again")["summary"]
        by_kind.setdefault(cell.name, []).append((then, now))
        print(f"{cell}: then {line(then)} | now {line(now)}")
    for kind, pairs in by_kind.items():
        mean = {k: [statistics.mean(p[i][k] for p in pairs) for i in (0, 1)]
                for k in ("median_ape", "max_ape", "regret")}
        over = [sum(p[i]["regret"] > 3 for p in pairs) for i in (0, 1)]
        inside = [sum(p[i]["in_range"] for p in pairs) for i in (0, 1)]
        total = [sum(p[i]["with_range"] for p in pairs) for i in (0, 1)]
        print(f"# {kind} ({len(pairs)} cells), then -> now: mean median APE "
              f"{mean['median_ape'][0]:.1f} -> {mean['median_ape'][1]:.1f} %, max "
              f"{mean['max_ape'][0]:.1f} -> {mean['max_ape'][1]:.1f} %, regret "
              f"{mean['regret'][0]:.2f} -> {mean['regret'][1]:.2f} % (over 3 %: {over[0]} -> "
              f"{over[1]}), in range {inside[0]}/{total[0]} -> {inside[1]}/{total[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
