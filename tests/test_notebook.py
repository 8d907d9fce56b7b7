"""notebooks/walkthrough.ipynb: committed with a real run's outputs (it reads on a code host
without running), and a copy of it runs top to bottom without errors (small sizes, < ~60 s)."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "walkthrough.ipynb"


@pytest.mark.slow
def test_walkthrough_executes(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("SIMDDP_NOTEBOOK_SMALL", "1")   # the kernel inherits this environment
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:  # run a clean copy: the committed outputs are a full run's
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.outputs)
    assert text.split()[0] == "small"                  # the small run, as asked
    assert "median" in text and any(x.startswith("Recommended") for x in text.splitlines())


def test_committed_with_the_outputs_of_a_full_run():
    """Every code cell has outputs from a full (not SIMDDP_NOTEBOOK_SMALL) run, with no error:
    re-run it with `python bench/run_notebook.py` after changing it."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("outputs") for c in code), "run bench/run_notebook.py and commit"
    assert not any(o.output_type == "error" for c in code for o in c.outputs)
    text = "".join(o.get("text", "") for c in code for o in c.outputs)
    assert text.split()[0] == "full"                   # printed first: which run it was
    assert any(x.startswith("Recommended") for x in text.splitlines())


def test_the_stored_preset_output_is_what_the_code_prints_now():
    """The cell tagged "deterministic" measures nothing: its stored output must be what it
    prints today, so the notebook cannot drift from the code unnoticed."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    (cell,) = [c for c in nb.cells if "deterministic" in c.metadata.get("tags", ())]
    stored = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(cell.source, "deterministic cell", "exec"), {})
    assert stored and out.getvalue() == stored, "rerun: python bench/run_notebook.py"
