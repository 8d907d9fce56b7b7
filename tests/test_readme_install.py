"""The README's two install lines: what CI runs, and what the torch line says it installs.

Issue 23: the README said `pip install torch==2.13.0` gets the CPU build; it does only where
the index serves that build. The public PyPI on Linux serves the CUDA build.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
TORCH = "python -m pip install torch==2.13.0"


def _blocks() -> list[list[str]]:
    return [block.strip().splitlines() for block in re.findall(r"```bash\n(.*?)```", README,
                                                                 flags=re.S)]


def commands(lines: list[str]) -> list[list[str]]:
    """Each shell command of ``lines`` as its words: ``&&`` splits commands, an output
    redirection is dropped, CI's ``"$user"`` (the wheel's venv) reads as ``python`` and pip's
    ``--quiet`` is left out; a line shlex cannot read (a quoted script) is not a command here."""
    out = []
    for line in lines:
        for part in line.split("&&"):
            try:
                words = shlex.split(part.split(" > ")[0], comments=True)
            except ValueError:
                continue
            words = [("python" if w == "$user" else w) for w in words if w != "--quiet"]
            if words:
                out.append(words)
    return out


def test_the_first_two_lines_are_what_ci_runs():
    first, second = _blocks()[0]
    assert commands([first]) == [["python", "-m", "pip", "install", "."],
                                 ["python", "-m", "simddp", "sweep", "--bucket-mb",
                                  "1,10,100,1000"]]
    assert commands([second]) == [shlex.split(TORCH),
                                  ["python", "-m", "pip", "install", "-e", ".[dev]"],
                                  ["python", "-m", "pytest", "-q"]]
    ci = commands((ROOT / ".ci" / "run").read_text().splitlines())
    # the README's sweep, its torch pin (the same index: no --index-url), the dev extras and
    # the test command are each a command CI runs, word for word
    for command in commands([first])[1:] + commands([second]):
        assert command in ci, command


def test_the_torch_line_says_which_build_and_how_to_ask_for_cpu():
    text = " ".join(README.split("## What it does")[0].split())
    # the sentence on what the pinned line gets: the index's choice, CUDA from PyPI on Linux
    (which,) = [x for x in text.split(". ") if "torch==2.13.0`" in x]
    assert "index's" in which and "PyPI" in which and "CUDA" in which and "Linux" in which
    # and the command that asks for the CPU build
    cpu = shlex.split(TORCH) + ["--index-url", "https://download.pytorch.org/whl/cpu"]
    assert cpu in commands([line for block in _blocks()[:2] for line in block])
