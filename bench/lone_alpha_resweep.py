"""Grid cells predicted again with α as calibrate/lone_alpha.py decides it now (issue 19).

    python bench/lone_alpha_resweep.py /tmp/g25/tfm-2gbit /tmp/g31/tfm-2gbit ...

Each argument is a cell of ``bench/workflow_grid.py --out D`` (D/cell). Its calibration kept
every lone 4 KiB sample (``lone_samples_s`` in cal/allreduce.json): α is decided from them
again (the median, or the fast mode where the median is unresolved), written beside the
cell's link as cal/link_lone.json, and the cell is swept and compared again with the same
profile and bench. Prints per cell the α and the summary before and after, then per row
the error before and after, for the rows that moved.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.workflow_grid import STRATEGIES  # noqa: E402
from calibrate.lone_alpha import sampled_lone_alpha  # noqa: E402


def compare(cell: Path, link: str, tag: str) -> dict:
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


def main() -> int:
    for arg in sys.argv[1:]:
        cell = Path(arg)
        link = json.loads((cell / "cal" / "link.json").read_text())
        calibration = json.loads((cell / "cal" / "allreduce.json").read_text())
        samples = calibration["runs"][0].get("sequence", {}).get("lone_samples_s")
        if samples is None:
            print(f"{cell}: no lone samples kept", file=sys.stderr)
            return 2
        lone = sampled_lone_alpha([{"lone_s": samples, "lone_bytes": 4096}],
                                  link["busbw_gbps"], link["world_size"])
        new = {**link, "alpha_s": min(lone["alpha_s"], link["alpha_s"])}  # the queue's cap
        (cell / "cal" / "link_lone.json").write_text(json.dumps(new))
        old_doc = compare(cell, str(cell / "cal" / "link.json"), "pred_old")
        new_doc = compare(cell, str(cell / "cal" / "link_lone.json"), "pred_lone")
        o, n = old_doc["summary"], new_doc["summary"]
        low, high = lone["interval_s"]
        print(f"{cell}: α {link['alpha_s'] * 1e6:.0f} -> {new['alpha_s'] * 1e6:.0f} µs "
              f"(median's interval x{high / max(low, 1e-12):.2f}); median APE "
              f"{o['median_ape']:.1f} -> {n['median_ape']:.1f} %, max {o['max_ape']:.1f} -> "
              f"{n['max_ape']:.1f} %, regret {o['regret']:.1f} -> {n['regret']:.1f} %")
        for a, b in zip(old_doc["rows"], new_doc["rows"]):
            if abs(a["error_pct"] - b["error_pct"]) >= 0.05:
                print(f"    {a['strategy']:9s} {a['bucket_mb'] or '':>5} {a['error_pct']:+6.1f}"
                      f" -> {b['error_pct']:+6.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
