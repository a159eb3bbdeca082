"""The training run's notebook: a reader's copy that runs where it is downloaded, and a stored one the build checks.

docs/notebooks/training-run.ipynb is shown as it was stored (sitekit.training_run,
no kernel at build time), so the build checks it instead of running it: the
post-build step (``sitekit.training_run.stored_notebooks``) fails on an error the
notebook stored and on code cells changed since the stored run was made (its
log, docs/training/log.json, records their digest), naming the command that
makes the run again. The copy the site offers for download brings the site's
modules in its set-up cell (``sitekit.training_run.self_contained``), as the
chapter notebooks do; ``pytest -m training`` runs that copy outside the
repository (tests/test_training_run.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from sitekit import training_run
from sitekit.pages import DOCS
from support.background import job
from support.build import run_mkdocs_build
from support.project import make_project

STORED = DOCS / training_run.TRAINING_RUN


def stored_notebook() -> dict:
    return json.loads(STORED.read_text(encoding="utf-8"))


def code_cells(notebook: dict) -> list[dict]:
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


def docs_with(tmp_path: Path, notebook: dict) -> Path:
    """A docs/ folder holding ``notebook`` as the training run, and the stored run's log."""
    docs = tmp_path / "docs"
    (docs / training_run.TRAINING_RUN).parent.mkdir(parents=True)
    (docs / training_run.TRAINING_RUN).write_text(json.dumps(notebook), encoding="utf-8")
    (docs / training_run.TRAINING_LOG).parent.mkdir(parents=True)
    shutil.copy(DOCS / training_run.TRAINING_LOG, docs / training_run.TRAINING_LOG)
    return docs


def with_a_changed_cell(notebook: dict) -> dict:
    changed = json.loads(json.dumps(notebook))
    cell = code_cells(changed)[2]  # the settings
    cell["source"] = "".join(cell["source"]).replace('"steps": 1500', '"steps": 1600')
    assert '"steps": 1600' in cell["source"]
    return changed


RAISING_CELL = {
    "cell_type": "code", "execution_count": 10, "id": "raising", "metadata": {}, "source": "1 / 0",
    "outputs": [{"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
                 "traceback": ["Traceback (most recent call last)", "ZeroDivisionError: division by zero"]}],
}


def with_a_raising_cell(notebook: dict) -> dict:
    raising = json.loads(json.dumps(notebook))
    raising["cells"].append(RAISING_CELL)
    return raising


# --- the check, on copies of the stored notebook --------------------------------------


def test_the_stored_notebook_passes_the_check():
    assert training_run.stored_notebooks() == []


def test_a_changed_code_cell_fails_the_check_naming_the_command(tmp_path):
    docs = docs_with(tmp_path, with_a_changed_cell(stored_notebook()))
    [problem] = training_run.stored_notebooks(docs)
    assert problem.startswith("docs/notebooks/training-run.ipynb: its code cells changed since the stored run")
    assert f"Run `{training_run.REPLACE_RUN}`" in problem
    log = json.loads((DOCS / training_run.TRAINING_LOG).read_text())
    assert log["blas_kernel"] in problem  # the kernel that gives the stored run back


def test_a_changed_markdown_cell_or_output_is_not_a_changed_run(tmp_path):
    notebook = stored_notebook()
    notebook["cells"][0]["source"] = "# Another title\n"
    code_cells(notebook)[-1]["outputs"] = []
    assert training_run.stored_notebooks(docs_with(tmp_path, notebook)) == []


def test_an_error_stored_in_the_notebook_fails_the_check(tmp_path):
    notebook = stored_notebook()
    cell = code_cells(notebook)[3]
    cell["outputs"].append(RAISING_CELL["outputs"][0])
    [problem] = training_run.stored_notebooks(docs_with(tmp_path, notebook))
    assert f"(id {cell['id']}) stored an error, ZeroDivisionError: division by zero" in problem
    assert training_run.REPLACE_RUN in problem


def test_a_changed_log_fails_the_check(tmp_path):
    """Issue 34: the log (the loss curve chapter 14 plots) was not covered by the stored run's fingerprint."""
    docs = docs_with(tmp_path, stored_notebook())
    log_path = docs / training_run.TRAINING_LOG
    log = json.loads(log_path.read_text())
    log["loss"][0] = log["loss"][0] / 2
    log_path.write_text(json.dumps(log))
    [problem] = training_run.stored_notebooks(docs)
    assert problem.startswith("docs/training/log.json: changed since the training run wrote it"), problem


def test_a_traceback_printed_to_a_stream_fails_the_check(tmp_path):
    notebook = stored_notebook()
    code_cells(notebook)[3]["outputs"].append(
        {"output_type": "stream", "name": "stderr", "text": "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n"})
    [problem] = training_run.stored_notebooks(docs_with(tmp_path, notebook))
    assert "printed a traceback to stderr" in problem


@pytest.mark.parametrize("printed", ["ZeroDivisionError: division by zero\n",
                                     "train.py:12: RuntimeWarning: overflow encountered in exp\n"])
def test_an_error_printed_without_a_traceback_fails_the_check(tmp_path, printed):
    """Issue 34: an error's last line alone (no "Traceback" header above it) used to pass."""
    notebook = stored_notebook()
    code_cells(notebook)[3]["outputs"].append({"output_type": "stream", "name": "stderr", "text": printed})
    [problem] = training_run.stored_notebooks(docs_with(tmp_path, notebook))
    assert f"printed an error to stderr: {printed.strip()}" in problem


def test_a_progress_bar_on_stderr_is_no_error():
    progress = {"output_type": "stream", "name": "stderr", "text": "step 100/1500: loss 2.31 |#####     | 50%\n"}
    assert training_run.stored_errors({"cells": [{"cell_type": "code", "id": "p", "source": "", "outputs": [progress]}]}) == []


def test_a_raising_cell_added_fails_the_check_twice(tmp_path):
    """Its error output, and the code the stored run was not made from."""
    problems = training_run.stored_notebooks(docs_with(tmp_path, with_a_raising_cell(stored_notebook())))
    assert len(problems) == 2 and "stored an error" in problems[0] and "code cells changed" in problems[1]


# --- the copy a reader downloads -----------------------------------------------------


def test_the_download_brings_the_modules_its_code_imports():
    stored = stored_notebook()
    download = training_run.self_contained(stored)
    nbformat.validate(download)
    setup = next(cell for cell in download.cells if training_run.SETUP_TAG in cell.metadata.get("tags", []))
    for module in ("snippets/training.py", "snippets/transformer.py", "snippets/attention.py",
                   "tools/corpus.py", "tools/__init__.py", "sitekit/figures.py"):
        assert f"'{module}':" in setup.source, module
    assert "sys.path.insert(0, str(folder))" in setup.source and "Path.cwd().parents[1]" not in setup.source
    # every other cell as stored, outputs and all
    others = [cell for cell in download.cells if cell is not setup]
    assert [json.loads(json.dumps(cell)) for cell in others] == [
        cell for cell in stored["cells"] if training_run.SETUP_TAG not in cell.get("metadata", {}).get("tags", [])]
    assert training_run.stored_errors(download) == []


def test_a_notebook_without_a_set_up_cell_cannot_be_made_self_contained():
    notebook = stored_notebook()
    for cell in notebook["cells"]:
        cell.get("metadata", {}).pop("tags", None)
    with pytest.raises(ValueError, match="one code cell tagged 'set-up'"):
        training_run.self_contained(notebook)


def test_the_figure_carries_a_text_alternative_and_no_timing_is_stored():
    figures = [out for cell in code_cells(stored_notebook()) for out in cell["outputs"] if "data" in out]
    [figure] = figures
    html = "".join(figure["data"]["text/html"])
    assert '<svg role="img" aria-label="Two line charts over 1500 steps.' in html and "<figcaption>" in html
    assert not any(key.startswith("image/") for key in figure["data"])
    streams = "".join("".join(out.get("text", "")) for cell in code_cells(stored_notebook()) for out in cell["outputs"])
    assert "it/s" not in streams and " s\n" not in streams, "a timing in the stored outputs"


# --- the strict build ------------------------------------------------------------------


@job
def notebook_build(folder: Path):
    """The strict build of a copy of the project whose training notebook has a changed cell and a raising cell added."""
    project = make_project(folder, {})
    (project / "mkdocs.yml").write_text(f"INHERIT: base.yml\nnav:\n  - index.md\n  - {training_run.TRAINING_PAGE}\n")
    copy = docs_with(folder / "copy", with_a_raising_cell(with_a_changed_cell(stored_notebook())))
    log = json.loads((copy / training_run.TRAINING_LOG).read_text())
    log["loss"][0] = log["loss"][0] / 2  # and a changed log
    (copy / training_run.TRAINING_LOG).write_text(json.dumps(log))
    shutil.copytree(folder / "copy" / "docs", project / "docs", dirs_exist_ok=True)
    shutil.copy(DOCS / training_run.TRAINING_PAGE, project / "docs" / training_run.TRAINING_PAGE)
    return run_mkdocs_build(project, folder / "site")


def test_a_changed_or_raising_cell_of_the_stored_notebook_fails_the_strict_build(notebook_build):
    log = notebook_build.stdout + notebook_build.stderr
    assert notebook_build.returncode != 0, log
    assert ("docs/notebooks/training-run.ipynb: code cell 10 (id raising) stored an error, "
            "ZeroDivisionError: division by zero") in log, log
    assert "docs/notebooks/training-run.ipynb: its code cells changed since the stored run was made" in log, log
    assert "docs/training/log.json: changed since the training run wrote it" in log, log
    assert f"Run `{training_run.REPLACE_RUN}`" in log
