"""One tiny ``realrun validate`` run shared by the tests that judge its output: every
strategy (the five DDP-family ones, FSDP2's fsdp and zero2) and the fp16 hook, at two bucket
sizes, on a given link (so no calibration). tests/realrun/test_validate.py checks the report,
files and timeline, tests/realrun/test_beyond_ddp.py the sharded and hooked rows: one run
instead of two, each of which spent most of its ~11 s starting worlds (issue 53 item 8).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from simddp.inputs.io import link_to_json, save_json
from simddp.inputs.link import Link

TINY = ["--model", "mlp-2x64", "--batch", "1", "--seq", "2"]


@dataclass(frozen=True)
class ValidateRun:
    doc: dict        # the --format json document
    out: Path        # its --out folder
    stderr: str


@pytest.fixture(scope="session")
def tiny_validate(tmp_path_factory) -> ValidateRun:
    folder = tmp_path_factory.mktemp("tiny_validate")
    link = folder / "link.json"
    save_json(link, link_to_json(Link("test-link", 200e-6, 1.0, world_size=2)))
    out = folder / "val"
    cmd = [sys.executable, "-m", "realrun", "validate", *TINY,
           "--strategies", "naive,flat,overlap,bucketed,ddp,fsdp,zero2", "--comm-hook", "fp16",
           "--bucket-mb", "0.01,1", "--steps", "4", "--warmup", "2", "--chunk", "2",
           "--profile-repeats", "3", "--link", str(link), "--out", str(out), "--format", "json"]
    # prepend: the caller's PYTHONPATH may hold packages installed outside the venv
    path = os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONPATH": path})
    assert proc.returncode == 0, proc.stderr
    return ValidateRun(json.loads(proc.stdout), out, proc.stderr)
