"""``python -m calibrate --from-nccl-tests LOG...``: link.json from logs, no GPU; bad logs exit 2."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from simddp.inputs.io import load_link

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "nccl-tests"


def _run(*args):
    return subprocess.run([sys.executable, "-m", "calibrate", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_writes_a_link_with_a_curve_per_log_and_a_bucket_range_fit(tmp_path):
    r = _run("--from-nccl-tests", str(DATA / "a3mega-2x8xH100-all_reduce.md"),
             str(DATA / "dranet-2x8xB200-all_gather.log"), "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    link = load_link(tmp_path / "link.json")
    assert [(c.kind, c.ranks, c.nodes) for c in link.curves] == [
        ("all_reduce", 16, 2), ("all_gather", 16, 2)]
    assert link.world_size == 16 and "fit_range_bytes [1000000, 100000000]" in link.source
    assert link.collective_s("all_reduce", 1 << 20, 16) == 203.2e-6   # the log's own time
    assert "torch" not in r.stdout
    data = json.loads((tmp_path / "link.json").read_text())
    assert data["curves"][0]["seconds"][17] == 203.2e-6


def test_the_link_reproduces_its_log_through_simddp_collectives(tmp_path):
    log = DATA / "nccl-tests-290-2x8xH100-srun.log"
    assert _run("--from-nccl-tests", str(log), "--out", str(tmp_path)).returncode == 0
    r = subprocess.run([sys.executable, "-m", "simddp", "collectives", "--link",
                        str(tmp_path / "link.json"), "--measured", str(log), "--format", "json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert all(abs(row["error_pct"]) < 1e-6 for row in json.loads(r.stdout)["rows"])


def test_bad_logs_get_one_line_and_exit_2(tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_text("Segmentation fault\n")
    for args in ([str(junk)], [str(tmp_path / "missing.log")]):
        r = _run("--from-nccl-tests", *args, "--out", str(tmp_path / "out"))
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith("calibrate: error:")
    assert not (tmp_path / "out" / "link.json").exists()
