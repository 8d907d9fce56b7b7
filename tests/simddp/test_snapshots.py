"""What users read, pinned whole: each command's output equals its stored snapshot.

A change meant to change an output rewrites them (``python -m tests.simddp.snapshots``) and
shows the diff in its commit; a change that did not mean to is caught here, line by line.
"""
from __future__ import annotations

import difflib

import pytest

from tests.simddp.snapshots import CASES, SNAPSHOTS, compare_output, run


def _same(name: str, got: str) -> None:
    want = (SNAPSHOTS / f"{name}.txt").read_text()
    diff = "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines(), "snapshot",
                                          "now", lineterm="", n=1))
    assert got == want, f"{name} changed (python -m tests.simddp.snapshots rewrites it):\n{diff}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_command_output_is_its_snapshot(name):
    _same(name, run(CASES[name]))


def test_compare_output_is_its_snapshot():
    _same("compare-measured", compare_output())
