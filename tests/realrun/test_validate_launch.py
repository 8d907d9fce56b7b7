"""realrun validate's launches: under torchrun (rank 0 alone reports) and NCCL refused in one
line before anything is calibrated (no GPU, or one GPU for two local ranks)."""
from __future__ import annotations

import json
import os

import pytest

from tests._messages import assert_one_line
from tests._nccl import nccl_refusal_for_two_ranks
from tests._torchrun import torchrun
from tests.realrun.test_validate import TINY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_validate_under_torchrun_rank_0_prints_and_writes(tmp_path):
    """torchrun starts the ranks; each runs the whole pipeline in one process group, rank 0
    decides which configuration to clock for the timeline and is the only one to report."""
    out = tmp_path / "val"
    cmd = ["-m", "realrun", "validate", "--model", "mlp-2x64", "--batch", "1", "--seq", "2",
           "--strategies", "overlap,bucketed", "--bucket-mb", "0.01,1", "--steps", "2",
           "--warmup", "2", "--profile-repeats", "2", "--calibrate-iters", "2",
           "--timeline-steps", "1", "--format", "json", "--out", str(out)]
    done = torchrun(cmd, cwd=ROOT, timeout_s=240)
    doc = json.loads(done.stdout)            # one document: only rank 0 printed
    assert doc["summary"]["world_size"] == 2 and doc["summary"]["measured_link"] == "torchrun"
    assert doc["validate"]["timeline_config"] and (out / "validate.json").exists()


def test_nccl_without_gpus_is_one_line_exit_2(capsys, tmp_path):
    """Refused before the calibration starts: no GPU here, or (the device machine) one GPU
    for 2 local ranks."""
    words = nccl_refusal_for_two_ranks()
    from realrun.cli import main
    assert main(["validate", *TINY, "--backend", "nccl", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_nccl_on_one_gpu_is_refused_before_calibrating(capsys, tmp_path, monkeypatch):
    """Found on the one-GPU device machine: validate checked for one GPU, started the
    calibration, and only its ranks found one GPU short. Two local ranks need two GPUs."""
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    from realrun.cli import main
    assert main(["validate", *TINY, "--backend", "nccl", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert_one_line(err, "nccl", "2", "1")     # the backend, the GPUs it needs, those found
    assert not (tmp_path / "o").exists()
