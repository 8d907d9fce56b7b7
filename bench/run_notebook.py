"""Run notebooks/walkthrough.ipynb in full (not SIMDDP_NOTEBOOK_SMALL) and save its outputs.

    python bench/run_notebook.py          # ~4 min on 2 cores; run on a quiet machine

The committed notebook carries the outputs of such a run, so it reads on a code host without
running; tests/test_notebook.py checks that it does, and runs a small copy.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import nbclient
import nbformat

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "walkthrough.ipynb"


def main() -> int:
    os.environ.pop("SIMDDP_NOTEBOOK_SMALL", None)   # the kernel inherits this environment
    os.environ["MPLBACKEND"] = "Agg"
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    nbformat.write(nb, NOTEBOOK)
    print(f"wrote {NOTEBOOK} with outputs, {NOTEBOOK.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
