"""Chapter 14's training run: a notebook kept with its outputs, shown as a page of the site, offered as a download.

``docs/notebooks/training-run.ipynb`` is run by ``tools/train.py``, never by
the build. Its page (``training-run.md``) names it in a ``stored-notebook``
fence, which this Markdown extension replaces with the notebook's cells as
Markdown: Markdown cells as they are, code cells as ``python`` fences, what
they printed as text blocks, the figure as the HTML it displayed. So every
engine renders it as every page (highlighting, code lines, search, table of
contents, edit link). The post-build step writes the download
(:func:`write_download`) and fails on an error the notebook stored or on
code or a log changed since the run (:func:`stored_notebooks`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import nbformat
from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor

from sitekit import keys, nav, notebooks, pages
from sitekit.pages import ROOT

TRAINING_RUN = "notebooks/training-run.ipynb"  # the stored notebook, under docs/
TRAINING_PAGE = "notebooks/training-run.md"  # its page, which names it in a stored-notebook fence
TRAINING_LOG = "training/log.json"  # the log the run wrote, with the fingerprint of what it was made from
REPLACE_RUN = "python tools/train.py --replace-stored-run"  # what runs it again and stores it
SETUP_TAG = "set-up"  # the stored notebook's cell that finds the site's modules in the repository
# An exception or warning as Python prints its last line, with or without the
# traceback above it ("ZeroDivisionError: division by zero", "x.py:3: UserWarning: …").
_RAISED = re.compile(r"^(?:\S+:\d+: )?[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt): ", re.MULTILINE)


def code_digest(notebook) -> str:
    """The SHA-256 of the notebook's code cells, joined: the training run's log records it (tools/train.py)."""
    code = "\n\n".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code")
    return hashlib.sha256(code.encode()).hexdigest()


def log_digest(log: dict) -> str:
    """The SHA-256 of the log without its fingerprint, which records it: an edit to the log is a changed run.

    >>> log_digest({"loss": [2.0], "fingerprint": {"log": "x"}}) == log_digest({"loss": [2.0]})
    True
    """
    content = {key: value for key, value in log.items() if key != "fingerprint"}
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def stored_errors(notebook) -> list[str]:
    """Each error a notebook stored: an output of type ``error``, or a stream that printed a traceback or an error.

    >>> stored_errors({"cells": [{"cell_type": "code", "id": "c", "source": "1/0", "outputs": [
    ...     {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero"}]}]})
    ['code cell 1 (id c) stored an error, ZeroDivisionError: division by zero']
    """
    found = []
    for number, cell in enumerate((cell for cell in notebook["cells"] if cell["cell_type"] == "code"), 1):
        where = f"code cell {number} (id {cell.get('id')})"
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", ""))
            if out.get("output_type") == "error":
                found.append(f"{where} stored an error, {out.get('ename')}: {out.get('evalue')}")
            elif "Traceback (most recent call last)" in text:
                found.append(f"{where} printed a traceback to {out.get('name')}")
            elif raised := _RAISED.search(text):
                line = text[raised.start():].split("\n", 1)[0]
                found.append(f"{where} printed an error to {out.get('name')}: {line[:200]}")
    return found


def self_contained(notebook, *, site_name: str | None = None, base: Path = ROOT):
    """The stored run as a reader downloads it: its ``set-up`` cell, which finds the modules in the repository,
    becomes the chapter notebooks' set-up (:func:`sitekit.notebooks.setup_cell`) with the modules the other
    cells import inside, so it runs wherever it is saved. Every other cell is as stored, outputs and all.
    """
    if site_name is None:
        site_name = nav.read_config(base).get("site_name", "the site")
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))  # a copy
    cells = notebook["cells"]
    tagged = [i for i, cell in enumerate(cells) if SETUP_TAG in cell.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1 or cells[tagged[0]]["cell_type"] != "code":
        raise ValueError(f"the notebook needs one code cell tagged {SETUP_TAG!r}, its set-up; found {len(tagged)}")
    codes = ["".join(cell["source"]) for i, cell in enumerate(cells) if cell["cell_type"] == "code" and i != tagged[0]]
    setup, _, _ = notebooks.setup_cell(keys.imported_modules(codes, base), site_name, base)
    cell = cells[tagged[0]]
    cell.update(source=setup, outputs=[], execution_count=None)
    cell["metadata"] = {"jupyter": {"source_hidden": True}, "tags": [SETUP_TAG]}
    return notebook


def stored_notebooks(docs: Path = pages.DOCS) -> list[str]:
    """The problems of the stored training run: errors it stored, code or a log changed since it ran.

    No engine runs the notebook, so an error it stored would ship unnoticed,
    and so would outputs of code changed since: its log records the digest of
    the code cells that made them (:func:`code_digest`) and of itself
    (:func:`log_digest`). Each problem names the command that runs it again.
    """
    path = docs / TRAINING_RUN
    where = path.relative_to(docs.parent).as_posix()
    notebook = json.loads(path.read_text(encoding="utf-8"))
    problems = [f"{where}: {error}: its page would show it. Fix the cell; run it again with `{REPLACE_RUN}`"
                for error in stored_errors(notebook)]
    log_path = docs / TRAINING_LOG
    log = json.loads(log_path.read_text(encoding="utf-8")) if log_path.is_file() else {}
    if log and log.get("fingerprint", {}).get("log") != log_digest(log):
        problems.append(
            f"{log_path.relative_to(docs.parent)}: changed since the training run wrote it (its fingerprint "
            "records the digest of another log): chapter 14 would plot and state figures no run made. "
            f"Restore it from git, or run `{REPLACE_RUN}` and commit docs/training/ and the notebook"
        )
    if log.get("fingerprint", {}).get("notebook code") != code_digest(notebook):
        kernel = log.get("blas_kernel")
        same = f"; under the stored run's BLAS kernel, {kernel}, its figures stay the same" if kernel else ""
        problems.append(
            f"{where}: its code cells changed since the stored run was made ({log_path.relative_to(docs.parent)} "
            "records the digest of other code): its page would show outputs, and chapter 14 read weights, "
            f"that other code made. Run `{REPLACE_RUN}` and commit docs/training/ and the notebook{same}"
        )
    return problems


def write_download(site: Path, site_name: str | None) -> None:
    """The copy a reader downloads (:func:`self_contained`), over the stored notebook the engine copied into ``site``."""
    if (site / TRAINING_RUN).is_file():
        notebook = self_contained(json.loads((pages.DOCS / TRAINING_RUN).read_text(encoding="utf-8")), site_name=site_name)
        (site / TRAINING_RUN).write_text(notebooks.notebook_text(notebook), encoding="utf-8")


# ------------------------------------------------------------- its page

_FENCE = re.compile(r"^```stored-notebook\n(.+?)\n```$", re.MULTILINE)


def _fenced(text: str, attributes: str) -> str:
    """``text`` in a fence longer than any run of backticks in it."""
    ticks = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", text)), default=0))
    return f"{ticks}{attributes}\n{text.rstrip()}\n{ticks}"


def _outputs(cell: dict, stash) -> list[str]:
    """What a code cell printed (stderr greyed: the progress bar), and the HTML it displayed (the figure)."""
    blocks = []
    for out in cell.get("outputs", []):
        data, text = out.get("data", {}), "".join(out.get("text", ""))
        if text.strip():
            stderr = " .notebook-stderr" if out.get("name") == "stderr" else ""
            blocks.append(_fenced(text, f"{{.text .notebook-output{stderr}}}"))
        elif "text/html" in data:  # sitekit.figures.svg_figure's <figure>, with its text alternative
            blocks.append(stash("".join(data["text/html"])))
        elif data:  # (an error has none: stored_notebooks names it)
            raise ValueError(f"a {TRAINING_RUN} output of {sorted(data)} cannot be shown on its page: print "
                             "text, or display a sitekit.figures svg_figure (HTML, with its text alternative)")
    return blocks


def notebook_markdown(notebook, stash) -> str:
    """The notebook's cells as the Markdown of a page; ``stash`` keeps raw HTML from Markdown (``htmlStash.store``)."""
    blocks = []
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            blocks.append(source)
        elif cell["cell_type"] == "code":
            blocks += [_fenced(source, "python"), *_outputs(cell, stash)]
    return "\n\n".join(blocks)


class StoredNotebookPage(Preprocessor):
    """A ``stored-notebook`` fence naming a notebook under docs/ becomes the notebook's cells, as Markdown."""

    def run(self, lines: list[str]) -> list[str]:
        def cells(match: re.Match) -> str:
            notebook = json.loads((pages.DOCS / match.group(1).strip()).read_text(encoding="utf-8"))
            return notebook_markdown(notebook, self.md.htmlStash.store)

        text = "\n".join(lines)
        return _FENCE.sub(cells, text).split("\n") if "```stored-notebook" in text else lines


class StoredNotebookExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        # After sitekit.render's StartPage (35), which finds the page by its text, and the whitespace
        # normalisation (30), which would drop the stash's markers; before superfences' fences (25).
        md.preprocessors.register(StoredNotebookPage(md), "sitekit_stored_notebook", 29)


def makeExtension(**kwargs) -> StoredNotebookExtension:  # noqa: N802 (Python-Markdown's name)
    return StoredNotebookExtension(**kwargs)
