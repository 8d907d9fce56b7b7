"""Your own model, end to end: a CNN (BatchNorm buffers, a frozen stem) through ``realrun
bench --module`` and ``realrun validate --module`` (which profiles it on its ranks). The
Hugging Face GPT-2 (tied embedding and LM head) goes through ``realrun profile --module``,
``simddp sweep --model profile.json`` and validate in the README's tour, whose files
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

from simddp.inputs.io import link_to_json, load_profile, save_json
from simddp.result import load_results
from simddp.inputs.link import Link

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {"cnn": (ROOT / "examples" / "cnn.py", 11)}


def run(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cnn"])
def test_bench_and_validate_a_third_party_model(name, tmp_path):
    # The GPT-2 goes through profile, sweep and validate in the README's tour
    # (tests/test_readme_tour.py checks its files): `realrun profile --module` and a sweep of
    # its file are checked there; validate profiles this model on its ranks the same way
    # (realrun/profile_on_ranks.py), so its profile is checked here through validate's files
    # (issue 53 item 8: the same commands again cost the suite 106 s, then 30 s).
    path, tensors = EXAMPLES[name]
    target = f"{path}:build"
    name_of_profile = f"{path.stem}:build"

    bench_dir = tmp_path / "bench"
    run("realrun", "bench", "--module", target, "--strategies", "overlap,bucketed,ddp",
        "--bucket-mb", "0.25", "--steps", "2", "--warmup", "2", "--out", str(bench_dir))
    measured = load_results(bench_dir / "bench.json")
    assert {r.model for r in measured} == {name_of_profile}
    assert [r.collectives for r in measured if r.strategy == "overlap"] == [tensors]

    link = tmp_path / "link.json"  # skip calibration: it is tested on its own
    save_json(link, link_to_json(Link("test", 5e-4, 1.0, world_size=2)))
    out = tmp_path / "validate"
    doc = json.loads(run("realrun", "validate", "--module", target, "--link", str(link),
                         "--strategies", "overlap,bucketed", "--bucket-mb", "0.25,1",
                         "--steps", "2", "--warmup", "2", "--profile-repeats", "2",
                         "--host-turns", "2", "--timeline-steps", "1", "--format", "json",
                         "--out", str(out)).stdout)
    # before running, every row is scored; anchored, compute-only is an input
    assert doc["summary"]["model"] == name_of_profile and doc["summary"]["configs"] == 4
    assert doc["anchored"]["summary"]["configs"] == 3
    assert doc["validate"]["profile"]["tensors"] == tensors
    # the profile validate measured: BatchNorm's buffers are not gradients, the frozen stem
    # has none; what simddp reads back from validate's own profile.json
    profile = load_profile(out / "profile.json")
    assert profile.name == name_of_profile and profile.n_tensors == tensors
    assert (out / "compare_timeline.png").stat().st_size > 0
