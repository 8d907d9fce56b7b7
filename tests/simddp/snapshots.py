"""Whole outputs of the main commands, as golden snapshots: what a user reads, pinned.

Each case is one command line; its stdout is stored in tests/data/snapshots/<name>.txt.
``python -m tests.simddp.snapshots`` rewrites them all (after a change meant to change what
users read: look at the diff before committing it); tests/simddp/test_snapshots.py compares.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "tests" / "data" / "snapshots"
MEASURED = "tests/data/validate-default-2026-11-23"

CASES = {
    "sweep-default": ["sweep", "--bucket-mb", "1,10,100,1000"],
    "sweep-default-explain": ["sweep", "--bucket-mb", "1,10,100,1000", "--explain"],
    "sweep-xl-ib-hdr-16": ["sweep", "--model", "transformer-xl", "--link", "ib-hdr",
                           "--world-size", "16"],
    "sweep-measured": ["sweep", "--model", f"{MEASURED}/profile.json", "--link",
                       f"{MEASURED}/link.json", "--bucket-mb", "1,4,10,40"],
    "sweep-sharded-hooks": ["sweep", "--model", "mlp-40x4096", "--link", "ib-hdr",
                            "--world-size", "8", "--strategies",
                            "ddp,no_sync,fsdp,zero2", "--comm-hook", "fp16,powersgd:2",
                            "--bucket-mb", "5,25,100"],
    "sweep-two-level": ["sweep", "--model", "transformer-large", "--link", "ib-hdr",
                        "--nodes", "4", "--gpus-per-node", "8", "--bucket-mb", "5,25,100"],
    "simulate-ddp": ["simulate", "--strategy", "ddp", "--bucket-mb", "25"],
    "simulate-fsdp": ["simulate", "--strategy", "fsdp", "--shard-unit-mb", "50"],
    "account-ffn": ["account", "--model", "ffn-126x16384x53248", "--batch", "1", "--seq",
                    "1024", "--world-size", "8"],
    "account-xl-hooks": ["account", "--model", "transformer-xl", "--world-size", "8",
                         "--comm-hook", "fp16,powersgd:2"],
    "scale-large-ib-hdr": ["scale", "--model", "transformer-large", "--link", "ib-hdr",
                           "--gpus", "8,16,64,256", "--strategies", "ddp,fsdp,hsdp"],
}


def run(args: list[str]) -> str:
    return subprocess.run([sys.executable, "-m", "simddp", *args], capture_output=True,
                          text=True, check=True, cwd=ROOT).stdout


def compare_output() -> str:
    """``simddp compare`` of a sweep of the measured files against their own bench."""
    with tempfile.TemporaryDirectory() as tmp:
        run(["sweep", "--model", f"{MEASURED}/profile.json", "--link", f"{MEASURED}/link.json",
             "--bucket-mb", "1,4,10,40", "--strategies", "naive,flat,overlap,bucketed,ddp",
             "--out", tmp])
        return run(["compare", "--predicted", f"{tmp}/sweep.json", "--measured",
                    f"{MEASURED}/measured.json"])


def outputs() -> dict[str, str]:
    out = {name: run(args) for name, args in CASES.items()}
    out["compare-measured"] = compare_output()
    return out


if __name__ == "__main__":
    SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    for name, text in outputs().items():
        (SNAPSHOTS / f"{name}.txt").write_text(text)
