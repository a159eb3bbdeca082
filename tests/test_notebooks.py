"""Run every notebook page top to bottom: a raising cell fails pytest directly
(the site build fails on it too, see test_failures.py)."""

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

from sitebuild import ROOT

NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.py"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path):
    notebook = jupytext.read(path)
    NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells and all(cell.execution_count for cell in code_cells)
    # Cells print what they show; the last cell checks every claim at once.
    assert "assert " in code_cells[-1].source, "a notebook page ends with a cell that asserts its claims"
