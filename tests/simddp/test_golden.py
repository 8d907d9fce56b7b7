"""Refactors keep predictions: the engine's timelines and the sweep's JSON on fixed inputs.

tests/data/golden-sweeps/ was written before the engine was taken apart (issue 24):
timelines.json by ``python -m tests.simddp.golden`` (every engine path, span by span), the
sweep files by the commands in SWEEPS. Floats may differ in the last bits (an addition done
in another order), nothing more: 1e-9 relative.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from tests.simddp.golden import GOLDEN, MEASURED, timelines

M = str(MEASURED)
SWEEPS = {
    "default.json": ["--bucket-mb", "1,10,100,1000"],
    "mlp-sharded-hooks.json": ["--model", "mlp-40x4096", "--link", "ib-hdr", "--world-size", "8",
                               "--strategies", "naive,flat,overlap,bucketed,ddp,no_sync,fsdp,zero2",
                               "--comm-hook", "fp16,powersgd:2", "--bucket-mb", "5,25,100"],
    "measured-host.json": ["--model", f"{M}/profile.json", "--link", f"{M}/link.json", "--host",
                           f"{M}/profile.json", "--world-size", "2", "--bucket-mb", "1,4,10,40"],
    "units.json": ["--model", "transformer-small", "--link", "eth-100g", "--strategies",
                   "fsdp,zero2,ddp", "--shard-unit-mb", "50", "--bucket-mb", "25"],
}


def same(a, b, where="") -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15), f"{where}: {a} != {b}"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def test_timelines_unchanged():
    want = json.loads((GOLDEN / "timelines.json").read_text())
    got = json.loads(json.dumps(timelines()))
    same(got, want)


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_sweep_json_unchanged(name):
    out = subprocess.run([sys.executable, "-m", "simddp", "sweep", "--format", "json",
                          *SWEEPS[name]], capture_output=True, text=True, check=True).stdout
    same(json.loads(out), json.loads((GOLDEN / name).read_text()), name)
