"""The training-script example runs as the README says: under torchrun, 2 Gloo ranks, with
gradient accumulation, and every rank ends with the same parameters. The script ends with
finish_torchrun, so torchrun must exit 0 (no Gloo teardown abort to tolerate)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests._torchrun import torchrun

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
# bucketed: the README's own line, run by the tour (tests/test_readme_tour.py), which checks
# the same checksums
@pytest.mark.parametrize("strategy", ["overlap", "ddp"])
def test_train_ddp_under_torchrun(strategy, tmp_path):
    done = torchrun([str(ROOT / "examples" / "train_ddp.py"), "--strategy", strategy,
                     "--steps", "3"], cwd=tmp_path, timeout_s=120)
    # the number alone: two ranks share torchrun's stdout, and print() writes a line's text
    # and its newline apart, so rank 0's next line can follow the checksum on the same line
    checksums = re.findall(r"rank (\d): parameter checksum (-?\d+\.\d{10})", done.stdout)
    assert "3" in re.findall(r"step (\d+):", done.stdout)     # it ran its 3 steps
    assert sorted(r for r, _ in checksums) == ["0", "1"]
    assert len({c for _, c in checksums}) == 1, checksums   # the ranks stayed in sync
