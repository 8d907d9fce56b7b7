"""The README's "Bring what you have" commands, run as written from the checkout (their
outputs go to a fresh folder instead of out/)."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bring_commands() -> list[list[str]]:
    section = (ROOT / "README.md").read_text().split("## Bring what you have", 1)[1]
    section = re.split(r"\n## ", section, maxsplit=1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [words for line in block.replace("\\\n", " ").splitlines()
            if (words := shlex.split(line, comments=True))]


def test_every_command_runs(tmp_path):
    commands = bring_commands()
    assert [c[:4] for c in commands] == [["python", "-m", "simddp", "sweep"],
                                         ["python", "-m", "simddp", "scale"],
                                         ["python", "-m", "calibrate", "--from-nccl-tests"],
                                         ["python", "-m", "simddp", "collectives"]]
    for words in commands:
        argv = [sys.executable] + [w.replace("out/", f"{tmp_path}/") for w in words[1:]]
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (words, proc.stderr[-1000:])
        assert proc.stdout.strip()
