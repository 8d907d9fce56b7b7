"""Your own model, end to end: a CNN (BatchNorm buffers, a frozen stem) through ``realrun
profile --module`` -> ``simddp sweep --model profile.json`` -> ``realrun bench --module`` ->
``realrun validate --module``. The Hugging Face GPT-2 (tied embedding and LM head) goes
through profile, sweep and validate in the README's tour, whose files
tests/test_readme_tour.py checks the same way.

Tiny settings (a few steps): these check that every command takes a third-party model and
that the files agree with each other, not how good the predictions are (docs/VALIDATION.md).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simddp.io import link_to_json, load_profile, load_results, save_json
from simddp.link import Link

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {"cnn": (ROOT / "examples" / "cnn.py", 11)}


def run(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cnn"])
def test_profile_sweep_bench_validate_a_third_party_model(name, tmp_path):
    # The GPT-2 goes through profile, sweep and validate in the README's tour
    # (tests/test_readme_tour.py checks its files): run here too, it cost the suite 106 s
    # for the same commands (issue 53 item 8). bench --module is validate's own bench.
    path, tensors = EXAMPLES[name]
    target = f"{path}:build"
    profile_path = tmp_path / "profile.json"
    run("realrun", "profile", "--module", target, "--repeats", "2", "--warmup", "1",
        "--out", str(profile_path))
    profile = load_profile(profile_path)
    assert profile.name == f"{path.stem}:build" and profile.n_tensors == tensors

    sweep = json.loads(run("simddp", "sweep", "--model", str(profile_path), "--link", "eth-100g",
                           "--bucket-mb", "0.25,1", "--format", "json").stdout)
    assert sweep["setup"]["tensors"] == tensors and sweep["recommended_bucket_mb"] in (0.25, 1)

    bench_dir = tmp_path / "bench"
    run("realrun", "bench", "--module", target, "--strategies", "overlap,bucketed,ddp",
        "--bucket-mb", "0.25", "--steps", "2", "--warmup", "2", "--out", str(bench_dir))
    measured = load_results(bench_dir / "bench.json")
    assert {r.model for r in measured} == {profile.name}
    assert [r.collectives for r in measured if r.strategy == "overlap"] == [tensors]

    link = tmp_path / "link.json"  # skip calibration: it is tested on its own
    save_json(link, link_to_json(Link("test", 5e-4, 1.0, world_size=2)))
    out = tmp_path / "validate"
    doc = json.loads(run("realrun", "validate", "--module", target, "--link", str(link),
                         "--strategies", "overlap,bucketed", "--bucket-mb", "0.25,1",
                         "--steps", "2", "--warmup", "2", "--profile-repeats", "2",
                         "--timeline-steps", "1", "--format", "json", "--out", str(out)).stdout)
    # before running, every row is scored; anchored, compute-only is an input
    assert doc["summary"]["model"] == profile.name and doc["summary"]["configs"] == 4
    assert doc["anchored"]["summary"]["configs"] == 3
    assert doc["validate"]["profile"]["tensors"] == tensors
    assert (out / "compare_timeline.png").stat().st_size > 0
