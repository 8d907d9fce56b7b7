"""The README's two install lines: what CI runs, and what the torch line says it installs.

Issue 23: the README said `pip install torch==2.13.0` gets the CPU build; it does only where
the index serves that build. The public PyPI on Linux serves the CUDA build.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TORCH = "python -m pip install torch==2.13.0"


def _blocks() -> list[list[str]]:
    return [block.strip().splitlines() for block in re.findall(r"```bash\n(.*?)```", README,
                                                                 flags=re.S)]


def test_the_first_two_lines_are_what_ci_runs():
    first, second = _blocks()[0]
    assert first == "python -m pip install . && python -m simddp sweep --bucket-mb 1,10,100,1000"
    assert second == f'{TORCH} && python -m pip install -e ".[dev]" && python -m pytest -q'
    ci = (ROOT / ".ci" / "run").read_text()
    assert '"$user" -m simddp sweep --bucket-mb 1,10,100,1000' in ci
    assert "python -m pip install --quiet torch==2.13.0\n" in ci  # the same pin, same index
    assert 'python -m pip install --quiet -e ".[dev]"' in ci and "python -m pytest -q" in ci


def test_the_torch_line_says_which_build_and_how_to_ask_for_cpu():
    text = " ".join(README.split("## What it does")[0].split())
    assert "installs the CPU build" not in text  # only true where the index serves it
    assert "the public PyPI on Linux gives the CUDA build" in text
    assert f"{TORCH} --index-url https://download.pytorch.org/whl/cpu" in [
        line for block in _blocks()[:2] for line in block]
