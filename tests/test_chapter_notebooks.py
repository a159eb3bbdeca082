"""Every chapter's notebook (sitekit/notebooks.py) is well formed and runs without this repository.

The notebooks are generated from the page sources directly (no site build).
Each one is executed in a fresh kernel whose working directory is a
temporary folder outside the repository, with no ``PYTHONPATH``: the
``snippets`` and ``sitekit`` modules it imports must come from the folder its
first cell writes them to. A final cell, added here only, checks exactly that.
The notebooks run two at a time (the chapters' code takes most of the time, not the kernels).

Running them is a third run of every page's code, so the tests that do are
marked ``notebooks`` and left out of a plain ``pytest``: ``pytest -m
notebooks`` runs them, and .ci/run does.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
import sys
import time
import types
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from sitekit import nav, pages, postbuild
from sitekit.notebooks import chapter_notebook, write_notebook
from sitekit.pages import ROOT

AT_ONCE = 2
TIMEOUT = 300  # seconds per cell
NOTEBOOK_PAGES = nav.notebook_pages(nav.load_nav())


@pytest.fixture(scope="module")
def chapters(mkdocs_config) -> list[str]:
    return nav.notebook_pages(mkdocs_config["nav"])


@pytest.fixture(scope="module")
def notebooks(mkdocs_config, chapters) -> dict[str, nbformat.NotebookNode]:
    return {source: chapter_notebook(source, site_url=mkdocs_config["site_url"]) for source in chapters}


def test_every_chapter_has_a_notebook(mkdocs_config, chapters, notebooks):
    # every chapter, and the recap notebook after chapter 3
    numbered = nav.chapters(mkdocs_config["nav"])
    assert len(numbered) >= 13 and chapters[0] == "dictionaries.md"
    # (all of them but the chapters whose code reads the repository's data, and whose front matter
    # says "notebook: false": chapter 14, the stored training run; chapter 18, the shipped configurations)
    offered = [source for source in numbered if nav.offers_notebook(source)]
    without = [source for source in numbered if source not in offered]
    assert [source for source in chapters if source in numbered] == offered
    assert without == ["learned-lookups.md", "reading-a-config.md"]
    assert "notebooks/dict-to-attention.md" in chapters
    assert list(notebooks) == chapters


def test_notebooks_are_deterministic(mkdocs_config, notebooks):
    again = chapter_notebook("soft-keys.md", site_url=mkdocs_config["site_url"])
    assert nbformat.writes(again) == nbformat.writes(notebooks["soft-keys.md"])


def _code_outside_fences(markdown: str) -> str:
    return re.sub(r"^```.*?^```", "", markdown, flags=re.DOTALL | re.MULTILINE)


def test_notebook_structure(notebooks):
    for source, notebook in notebooks.items():
        nbformat.validate(notebook)
        assert notebook.nbformat == 4 and notebook.metadata.kernelspec.language == "python"
        assert [cell.id for cell in notebook.cells] == [f"cell-{n:03d}" for n in range(len(notebook.cells))]
        first, setup, title = notebook.cells[:3]
        assert first.cell_type == "markdown" and "**Requirements:** Python 3.11 or newer, NumPy 2.0 or newer" in first.source
        assert setup.cell_type == "code" and "register_cell_magic" in setup.source
        page = pages.without_front_matter(nav.read(source), source)
        assert title.source.splitlines()[0] == page.splitlines()[0], source
        for cell in notebook.cells:
            assert not cell.get("outputs"), f"{source} {cell.id}: a generated notebook ships no outputs"
            assert "markdown-exec" not in cell.source, f"{source} {cell.id}: {cell.source[:200]}"
            if cell.cell_type == "markdown":
                prose = re.sub(r"`[^`]*`", "", _code_outside_fences(cell.source))
                assert "\\(" not in prose, f"{source} {cell.id}: TeX delimiters Jupyter does not read"
                assert not re.search(r"\]\((?!https?://)[^)]*\)", prose), f"{source} {cell.id}: a link to a file"
            if "raises-exception" in cell.metadata.get("tags", []):
                assert "# Traceback (most recent call last):" in cell.source, f"{source} {cell.id}"
        code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
        assert "snippets/__init__.py" in setup.source or "from snippets" not in code
        # Matplotlib is a requirement where the notebook's code, or a module it brings, draws.
        requirements = next(part for part in first.source.split("\n\n") if part.startswith("**Requirements:**"))
        assert ("Matplotlib" in requirements) == bool(re.search(r"\bmatplotlib\b", code)), source


def _containers(blocks, inside_collapsed=False):
    """``(container, inside a collapsed one)`` for every container, nested ones too, in page order."""
    for block in blocks:
        if isinstance(block, pages.Container):
            yield block, inside_collapsed
            yield from _containers(block.blocks, inside_collapsed or block.collapsed)


def _folded(cell) -> bool:
    """Folded for JupyterLab and Notebook 7, and for the classic Notebook where it can fold the cell."""
    hidden = cell.metadata.get("jupyter", {})
    if cell.cell_type == "markdown":
        return hidden == {"source_hidden": True}
    return (hidden == {"source_hidden": True, "outputs_hidden": True} and cell.metadata.get("collapsed") is True
            and cell.metadata.get("hide_input") is True)


def test_no_container_header_reaches_a_cell(notebooks):
    """``???``/``!!!``/``===`` lines are the page's Markdown: a notebook shows their title as a heading instead."""
    for source, notebook in notebooks.items():
        for cell in notebook.cells:
            for line in cell.source.split("\n"):
                assert not re.match(r'\s*(?:!!!|\?\?\?|={3}[+!]* +")', line), f"{source} {cell.id}: {line!r}"


def test_collapsed_blocks_are_folded_as_on_the_page(notebooks):
    """A collapsed block (a solution, a note on how a table is made): its title in view, every cell of its content folded."""
    checked = 0
    for source, notebook in notebooks.items():
        cells = notebook.cells
        heading = 0
        for container, inside_collapsed in _containers(pages.parse(nav.read(source))):
            if not container.collapsed:
                continue
            # its heading: the next cell, in page order, that holds nothing but its title
            heading = next(n for n in range(heading + 1, len(cells))
                           if re.fullmatch(rf"#+ {re.escape(container.title)}", cells[n].source))
            # (in view, unless the block is inside a collapsed one, as on the page)
            assert _folded(cells[heading]) == inside_collapsed, f"{source}: the heading of {container.title}"
            content = []
            for cell in cells[heading + 1 :]:
                if not _folded(cell):
                    break
                content.append(cell)
            code = [fence for fence in pages.fences(container.blocks) if fence.executed and not fence.console]
            assert content, (source, container.title)
            for fence in code:
                first_line = fence.code.strip().split("\n")[0]
                assert any(first_line in cell.source for cell in content), (source, container.title, first_line)
            checked += container.title.startswith("Solution")
    assert checked >= 50, checked  # every chapter's solutions, the "remember" ones among them


def test_open_blocks_and_the_page_stay_unfolded(tmp_path):
    """Only a collapsed block folds its cells; ``!!!`` and ``???+`` keep theirs open."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: A site\n")
    (docs / "a-page.md").write_text(
        "---\ntitle: A page\n---\n\n# 1. A page\n\nProse.\n\n"
        '!!! note "Open"\n\n    ```python exec="on" session="a-page" source="above"\n    x = 1\n    ```\n\n'
        '???+ tip\n\n    Open too.\n\n'
        '??? success remember "Solution 1"\n\n    Written *out*.\n\n'
        '    ```python exec="on" session="a-page" source="above"\n    y = x + 1\n    ```\n\n'
        "After it, in view.\n"
    )
    notebook = chapter_notebook("a-page.md", docs_dir=docs, site_url="https://example.org/", base=tmp_path)
    nbformat.validate(notebook)
    cells = [(cell.cell_type, cell.source, _folded(cell)) for cell in notebook.cells[2:]]
    assert cells == [
        ("markdown", "# 1. A page\n\nProse.", False),
        ("markdown", "## Open", False),
        ("code", "x = 1", False),
        ("markdown", "## Tip", False),
        ("markdown", "Open too.", False),
        ("markdown", "## Solution 1", False),
        ("markdown", "Written *out*.", True),
        ("code", "y = x + 1", True),
        ("markdown", "After it, in view.", False),
    ]


def test_the_setup_cell_is_folded_in_every_viewer_that_can(notebooks):
    for source, notebook in notebooks.items():
        setup = notebook.cells[1]
        # JupyterLab and Notebook 7; Colab, whose form needs a #@title first line; the classic Notebook's Hide Input.
        assert setup.metadata == {"jupyter": {"source_hidden": True}, "cellView": "form", "hide_input": True}, source
        assert setup.source.startswith("#@title Set-up: run this cell first"), source
        # Its outputs stay in view: what it says when NumPy is too old, or when it unloads a module.
        assert "collapsed" not in setup.metadata and "outputs_hidden" not in setup.metadata["jupyter"]


def _setup_function(setup: str, name: str):
    """A function that the set-up cell defines, defined alone."""
    tree = ast.parse(setup)
    (function,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    namespace: dict = {}
    exec(compile(ast.Module([function], []), "<set-up>", "exec"), namespace)  # noqa: S102 (the notebook's own code)
    return namespace[name]


@pytest.mark.parametrize(("version", "stops"), [
    ("1.26.4", True), ("1.21.0", True), ("2.0.0rc1", False), ("2.0.0", False), ("2.4.6", False), ("10.1", False)])
def test_the_setup_cell_stops_under_numpy_older_than_2(notebooks, monkeypatch, version, stops):
    require = _setup_function(notebooks["soft-keys.md"].cells[1].source, "_require_numpy")
    monkeypatch.setitem(sys.modules, "numpy", types.SimpleNamespace(__version__=version))
    if not stops:
        require()
        return
    with pytest.raises(RuntimeError, match=rf"needs NumPy 2.0 or newer, and this kernel has NumPy {re.escape(version)}\."):
        require()


def test_the_setup_cell_checks_numpy_before_anything_else(notebooks, monkeypatch, tmp_path):
    """Under NumPy 1.26 the set-up stops at once: nothing written, no magic defined, with what to do."""
    monkeypatch.setitem(sys.modules, "numpy", types.SimpleNamespace(__version__="1.26.4"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError) as stopped:
        exec(compile(notebooks["soft-keys.md"].cells[1].source, "<set-up>", "exec"), {})  # noqa: S102
    assert "restart the kernel and run this cell again" in str(stopped.value)
    assert 'pip install --upgrade "numpy>=2"' in str(stopped.value)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setitem(sys.modules, "numpy", None)  # no NumPy at all: import numpy raises ImportError
    with pytest.raises(RuntimeError, match="needs NumPy 2.0 or newer, and this kernel has no NumPy"):
        _setup_function(notebooks["soft-keys.md"].cells[1].source, "_require_numpy")()


def test_widgets_run_and_link_the_site(mkdocs_config, notebooks):
    shown = postbuild.widget_pages(mkdocs_config["nav"])
    assert shown, "no page shows a widget"
    for source, widgets in shown.items():
        if source not in notebooks:  # a page that offers no notebook (chapter 14: "notebook: false")
            assert not nav.offers_notebook(source), source
            continue
        cells = notebooks[source].cells
        printed = [cell for cell in cells if cell.source.startswith("%%printed_as widget ")]
        address = mkdocs_config["site_url"] + nav.page_url(source)
        assert printed, source
        assert all(cell.source.split("\n", 1)[0] == f"%%printed_as widget {address}" for cell in printed), source
        for widget in widgets:
            assert f"'{widget.module.replace('.', '/')}.py'" in cells[1].source, (source, widget.module)


# ------------------------------------------------------------ execution


_REPO_CHECK = """\
import sys
from pathlib import Path
repository, environment = Path({root!r}), Path(sys.prefix).resolve()
# No module the notebook ran came from the repository (but the virtualenv's, when .venv is there). The
# repository may be on sys.path, behind the copies: an editable install (pip install -e .) names it.
files = [Path(module.__file__).resolve() for module in list(sys.modules.values()) if getattr(module, "__file__", None)]
read = [file for file in files if file.is_relative_to(repository) and not file.is_relative_to(environment)]
assert not read, read
copies = Path.cwd().resolve() / {folder!r}
for package in ("snippets", "sitekit"):
    module = sys.modules.get(package)
    assert module is None or Path(module.__file__).resolve().parent == copies / package, module
# The copies are the repository's files, byte for byte (IPython strips ">>>" from a cell's lines).
for copy in copies.rglob("*.py"):
    assert copy.read_bytes() == (repository / copy.relative_to(copies)).read_bytes(), copy
"""


def _snippets_folder(notebook) -> str | None:
    """The folder the notebook's first cell says it writes the site's modules into."""
    match = re.search(r"`([^`/]+-code-[0-9a-f]+)/`", notebook.cells[0].source)
    return match.group(1) if match else None


def _clean_env() -> dict[str, str]:
    """The kernel's environment: no PYTHONPATH, nothing naming the repository but the venv's interpreter."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "JUPYTER", "MPL"))}
    env = {key: value for key, value in env.items() if str(ROOT) not in value}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    env["PYTHONNOUSERSITE"] = "1"
    return env


async def _run(source: str, notebook, folder: Path, limit: asyncio.Semaphore) -> dict:
    async with limit:
        folder.mkdir()
        path = folder / Path(source).with_suffix(".ipynb").name
        write_notebook(notebook, path)  # what a reader downloads
        notebook = nbformat.read(path, as_version=4)
        notebook.cells.append(nbformat.v4.new_code_cell(
            _REPO_CHECK.format(root=str(ROOT), folder=_snippets_folder(notebook) or "")))
        client = NotebookClient(
            notebook,
            timeout=TIMEOUT,
            kernel_name="python3",
            allow_errors=True,  # errors are collected and judged below, cell by cell
            resources={"metadata": {"path": str(folder)}},
        )
        start = time.perf_counter()
        try:
            await client.async_execute(env=_clean_env())
        except Exception as error:  # noqa: BLE001 (a timeout or a dead kernel is a failure to report)
            return {"notebook": notebook, "seconds": time.perf_counter() - start, "crash": repr(error)}
        return {"notebook": notebook, "seconds": time.perf_counter() - start, "crash": None}


@pytest.fixture(scope="module")
def executed(notebooks, tmp_path_factory) -> dict[str, dict]:
    workdir = tmp_path_factory.mktemp("chapter-notebooks")
    assert not workdir.resolve().is_relative_to(ROOT.resolve())

    async def run_all():
        limit = asyncio.Semaphore(AT_ONCE)
        runs = [_run(source, nb, workdir / Path(source).stem, limit) for source, nb in notebooks.items()]
        return dict(zip(notebooks, await asyncio.gather(*runs), strict=True))

    start = time.perf_counter()
    results = asyncio.run(run_all())
    results["_total_seconds"] = time.perf_counter() - start
    return results


def _errors(cell) -> list[dict]:
    return [output for output in cell.get("outputs", []) if output.output_type == "error"]


@pytest.mark.notebooks
@pytest.mark.parametrize("source", NOTEBOOK_PAGES)
def test_chapter_notebook_runs_outside_the_repository(executed, source):
    result = executed[source]
    assert result["crash"] is None, f"{source}: {result['crash']}"
    problems = []
    for cell in result["notebook"].cells:
        if cell.cell_type != "code":
            continue
        errors = _errors(cell)
        if "raises-exception" in cell.metadata.get("tags", []):
            expected = re.findall(r"^# (\w+(?:\.\w+)*):", cell.source, flags=re.MULTILINE)
            if not errors or errors[0].ename != expected[-1].split(".")[-1]:
                problems.append(f"{cell.id} should raise {expected[-1]}, got {[e.ename for e in errors]}")
        elif errors:
            error = errors[0]
            problems.append(f"{cell.id} raised {error.ename}: {error.evalue}\n{cell.source[:400]}")
        assert cell.execution_count, f"{source} {cell.id} did not run"
    assert not problems, f"{source}:\n" + "\n".join(problems)


@pytest.mark.notebooks
def test_figures_and_tables_display_as_html_and_markdown(executed):
    shown = {}
    for source, result in executed.items():
        if source.startswith("_"):
            continue
        for cell in result["notebook"].cells:
            for output in cell.get("outputs", []):
                for kind, data in output.get("data", {}).items():
                    shown[kind] = shown.get(kind, 0) + 1
                    if kind == "text/markdown" and "interactive widget" in data:
                        shown["widget notes"] = shown.get("widget notes", 0) + 1
                if output.output_type == "stream" and ("<figure" in output.text or "<div" in output.text):
                    pytest.fail(f"{source} {cell.id}: HTML printed as text")
    assert shown.get("text/html", 0) >= 12, shown  # the figures
    assert shown.get("text/markdown", 0) >= 2 + 2, shown  # the printed tables, the widget notes
    widget_cells = sum(
        cell.source.startswith("%%printed_as widget ")
        for source, result in executed.items() if not source.startswith("_")
        for cell in result["notebook"].cells
    )
    assert widget_cells >= 2 and shown.get("widget notes") == widget_cells, shown


# ------------------------------------------------- the reader's own files

_READER_FILES = {"snippets/__init__.py": "WHOSE = 'the reader'\n",
                 "snippets/attention.py": "WHOSE = 'the reader'\n\ndef softmax(x):\n    return 'not ours'\n"}

_SAFETY_CELLS = [
    # 0: the reader's own snippets package, imported in the kernel before the set-up runs
    "import snippets.attention\nassert snippets.attention.WHOSE == 'the reader'",
    # 1: the set-up (replaced by the notebook's own first code cell)
    None,
    # 2: the chapter's code runs on the notebook's copy, from its own folder
    """\
import sys
from pathlib import Path
import snippets.attention
from snippets.attention import softmax
copy = Path({folder!r}).resolve() / "snippets" / "attention.py"
assert Path(snippets.attention.__file__).resolve() == copy, snippets.attention.__file__
assert not hasattr(snippets.attention, "WHOSE") and softmax([0.0, 0.0]).tolist() == [0.5, 0.5]
written = copy.stat().st_mtime_ns""",
    # 3: the set-up again: the copy is there and unchanged, so it is used as it is
    None,
    "assert copy.stat().st_mtime_ns == written and Path(snippets.attention.__file__).resolve() == copy",
    # 5: the copy is edited; the set-up then stops, naming the file
    "copy.write_text(copy.read_text(encoding='utf-8') + '\\n# edited\\n', encoding='utf-8')",
    None,
]


@pytest.mark.notebooks
def test_notebook_never_reads_or_overwrites_the_readers_snippets(notebooks, tmp_path):
    source = next(source for source, nb in notebooks.items() if "snippets/attention.py" in nb.cells[1].source)
    notebook = notebooks[source]
    folder = _snippets_folder(notebook)
    assert folder and folder.startswith("attention-as-a-soft-dictionary-code-"), notebook.cells[0].source
    for name, text in _READER_FILES.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    setup = notebook.cells[1].source
    run = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(setup if cell is None else cell.format(folder=folder)) for cell in _SAFETY_CELLS
    ])
    client = NotebookClient(run, timeout=TIMEOUT, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=_clean_env())

    errors = [(n, _errors(cell)) for n, cell in enumerate(run.cells)]
    assert all(not found for n, found in errors[:-1]), [(n, e[0].ename, e[0].evalue) for n, e in errors if e]
    # The reader's files are as they were, and nothing was added to their folder.
    for name, text in _READER_FILES.items():
        assert (tmp_path / name).read_text(encoding="utf-8") == text, name
    # (__pycache__ comes from the reader's import in the first cell)
    assert sorted(p.name for p in (tmp_path / "snippets").iterdir() if p.name != "__pycache__") == [
        "__init__.py", "attention.py"]
    # The reader is told that the modules imported before were unloaded.
    printed = "".join(out.get("text", "") for out in run.cells[1].outputs)
    assert "Unloaded snippets, snippets.attention, imported before this cell" in printed, printed
    assert not run.cells[3].outputs, run.cells[3].outputs
    # An edited copy stops the set-up, with a message that says which file and what to do.
    (error,) = errors[-1][1]
    copy = tmp_path / folder / "snippets" / "attention.py"
    assert error.ename == "RuntimeError", error
    assert f"{copy} differs from the copy this notebook was built with" in error.evalue, error.evalue
    assert f"delete the folder {tmp_path / folder}" in error.evalue, error.evalue
