"""Every chapter as a Jupyter notebook, generated from its page at build time.

Each chapter (a nav entry titled "N. Title") and the recap notebook page
(docs/notebooks/) gets ``<page>.ipynb`` next to its ``index.html``
(the post-build step, sitekit/postbuild.py, writes it and the page's
download). The notebook is the page, read through the page model
(``sitekit.pages``):

- prose becomes Markdown cells, a new cell at each heading; ``\\( \\)`` math
  becomes ``$ $`` (Jupyter's Markdown reads only dollars); links to other
  pages point at the published site; ``<section ... markdown>`` wrappers go.
- a container (an admonition, ``??? success remember "Solution 1"``) becomes
  a heading cell with the title the page shows, one level below its section,
  then its content. A collapsed one (``???``) folds its cells, as the page
  folds the block (:func:`fold` says what each viewer reads).
- the front matter is left out; ``--8<--`` includes are expanded.
- every executed fence becomes a code cell, in page order:

  * a ``python`` fence as it is. Its hidden lines (``# markdown-exec: hide``)
    are kept, without the marker: they are the page's checks, and with them
    the notebook checks itself. A fence whose code the page does not show
    (no ``source=``) is a cell whose code is folded (:func:`hide_source`).
  * a fence whose printed output the page shows as HTML (``html="true"``: the
    figures) or as Markdown (``markdown="true"``, or no ``result=``) starts
    with ``%%printed_as html`` / ``%%printed_as markdown``, a cell magic the
    setup cell defines: it runs the cell and displays what it printed.
  * a ``pycon`` console fence as one cell holding its statements, each
    followed by the output the page writes for it, as ``# `` comments
    (Jupyter echoes only a cell's last value). A statement the page shows
    raising ends its cell, tagged ``raises-exception`` ("Run all" goes on).
  * a fence that imports a widget (a module of ``sitekit/widgets/``) starts
    with ``%%printed_as widget <page address>``: it runs (later checks use
    its names) and shows a link to the page, since the widget needs the
    site's JavaScript.

- the first cell, Markdown, says what the notebook needs
  (:data:`REQUIREMENTS`: NumPy 2.0 or newer among them; Matplotlib where
  its code, or a module it brings, uses it) and what is folded.
- the first code cell, the set-up (:data:`SETUP`: ``sitekit/notebook_setup.py``,
  whose comments say what it does), is folded in JupyterLab, Notebook 7,
  Colab (a ``#@title`` form) and the classic Notebook (its Hide Input
  extension). It brings the modules the chapter imports, so the notebook
  runs with only NumPy, Matplotlib and a Jupyter kernel, without this
  repository, and always with the code it was built with.

The notebook is deterministic (numbered cell ids, no outputs, no dates).
tests/test_chapter_notebooks.py validates each one with nbformat (not the
build: jsonschema is slow, so cells are made without it) and executes it in a
fresh kernel, in a folder outside the repository.

Chapter 14's training run is a notebook of its own, stored with its outputs
(``sitekit.training_run``); the copy of it a reader downloads gets this set-up
cell (:func:`setup_cell`) in place of the one that finds the modules in the
repository.
"""

from __future__ import annotations

import ast
import doctest
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import nbformat

from sitekit import keys, nav, pages
from sitekit.pages import ROOT, Container, Fence, truthy

# Modules whose HTML is an interactive widget: it works only with the site's scripts.
WIDGET_PACKAGE = "sitekit.widgets"
# What a notebook needs, as its first cell says (Matplotlib where its code
# draws). The site is built and tested with these only: the pages' code uses
# NumPy 2 (ndarray.mT is new in 2.0), and the set-up cell checks NumPy's
# version (_require_numpy, in SETUP).
REQUIREMENTS = ("Python 3.11 or newer", "NumPy 2.0 or newer", "Matplotlib", "a Jupyter kernel")
_MATPLOTLIB = re.compile(r"\bmatplotlib\b")

_HEADING = re.compile(r"^(#{1,6}) ")
_MARKDOWN_WRAPPER = re.compile(r"^\s*<(section|div)\b[^>]*\smarkdown(?:=\"[^\"]*\")?[^>]*>\s*$")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\n\s*\n).)+?\1", re.DOTALL)
_INLINE_MATH = re.compile(r"\\\((.+?)\\\)", re.DOTALL)
_LINK = re.compile(r"(\]\()([^)\s]+)(\))")


# ----------------------------------------------------------------- prose


def _prose(text: str, link_base: str, page: str) -> str:
    """Prose as Jupyter's Markdown wants it: dollar math, links to the site."""
    pieces, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        pieces.append(_prose_outside_code(text[last : span.start()], link_base, page))
        pieces.append(span.group(0))
        last = span.end()
    pieces.append(_prose_outside_code(text[last:], link_base, page))
    return "".join(pieces)


def _prose_outside_code(text: str, link_base: str, page: str) -> str:
    text = _INLINE_MATH.sub(lambda m: f"${m.group(1).strip()}$", text)
    return _LINK.sub(lambda m: m.group(1) + site_link(m.group(2), link_base, page) + m.group(3), text)


def site_link(target: str, site_url: str, page: str) -> str:
    """A link of the page (relative to docs/) as an address on the published site."""
    parts = urlsplit(target)
    if parts.scheme or target.startswith(("/", "mailto:")):
        return target
    if not parts.path:  # "#anchor" on this page
        return f"{site_url}{nav.page_url(page)}#{parts.fragment}"
    path = parts.path
    if path.endswith(".md"):
        path = nav.page_url(path)
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    return f"{site_url}{path}{fragment}"


# ----------------------------------------------------------------- folding

# A notebook folds a cell only through the metadata its viewer reads, and no
# viewer reads another's (GitHub's and nbviewer's renderers read none):
# - JupyterLab and Notebook 7: ``jupyter.source_hidden`` and
#   ``jupyter.outputs_hidden``, nbformat's own fields, on any cell;
# - the classic Notebook (nbclassic, Notebook 6): ``collapsed``, nbformat's
#   field for a code cell's outputs, which it reads itself, and
#   ``hide_input``, which its Hide Input extension (jupyter_contrib_nbextensions)
#   reads; it folds no Markdown cell;
# - Colab: ``cellView: form`` on a code cell whose first line is a ``#@title``
#   (a form: the title shows, the code is hidden until the reader opens it).


def hide_source(cell_type: str, metadata: dict) -> dict:
    """``metadata`` with the cell's source folded: its code (or its Markdown) hidden, its outputs shown."""
    metadata.setdefault("jupyter", {})["source_hidden"] = True
    if cell_type == "code":
        metadata["hide_input"] = True
    return metadata


def fold(cell_type: str, metadata: dict) -> dict:
    """``metadata`` with the whole cell folded, source and outputs: a cell of a collapsed block of the page."""
    hide_source(cell_type, metadata)
    if cell_type == "code":
        metadata["jupyter"]["outputs_hidden"] = True
        metadata["collapsed"] = True
    return metadata


# --------------------------------------------------------------- code cells


def _comment(text: str) -> list[str]:
    return [f"# {line}".rstrip() for line in text.rstrip("\n").split("\n")] if text.strip() else []


def console_cells(code: str) -> list[tuple[str, bool]]:
    """A ``pycon`` fence as code cells ``(source, raises)``: statements, written outputs as comments."""
    cells, current = [], []
    for example in doctest.DocTestParser().get_examples(code):
        current += example.source.rstrip("\n").split("\n")
        current += _comment(example.want)
        if example.exc_msg is not None:
            cells.append(("\n".join(current), True))
            current = []
    if current:
        cells.append(("\n".join(current), False))
    return cells


def _python_cell(fence: Fence, page: str, base: Path) -> tuple[str, dict]:
    options = fence.options
    code = fence.expanded(base)
    # A cell that imports a widget's module shows the widget (it alone: the modules it imports never do).
    shows_widget = any(name.startswith(WIDGET_PACKAGE + ".")
                       for name in keys.imported_modules([code], base, follow=False))
    code = "\n".join(pages.HIDE_MARKER.sub("", line) for line in code.split("\n")).rstrip("\n")
    if shows_widget:
        code = f"%%printed_as widget {page}\n" + code
    elif truthy(options.get("html")):
        code = "%%printed_as html\n" + code
    elif truthy(options.get("markdown")) or ("result" not in options and "print(" in code):
        code = "%%printed_as markdown\n" + code
    metadata = {} if "source" in options else hide_source("code", {})
    return code, metadata


def snippets_folder(prefix: str, files: dict[str, str]) -> str:
    """The folder a notebook writes ``files`` into: ``prefix`` and a hash of the files (as SETUP computes it)."""
    version = hashlib.sha256()
    for name, text in sorted(files.items()):
        version.update(name.encode() + b"\0" + text.encode() + b"\0")
    return f"{prefix}-{version.hexdigest()[:12]}"


def _literal(text: str) -> str:
    """``text`` as a Python string literal that reads like the file: raw triple quotes when exact.

    Every line of the file starts with ``|`` in the literal (SETUP removes it):
    IPython strips ``>>>`` prompts from the lines of a cell, even inside a
    string, and the modules' docstring examples would lose theirs.
    """
    text = "".join(f"\n|{line}" for line in text.split("\n"))
    raw = f"r'''{text}'''"
    try:
        if ast.literal_eval(raw) == text:
            return raw
    except (SyntaxError, ValueError):
        pass
    return repr(text)


# The set-up cell: sitekit/notebook_setup.py, a module (linted, its functions importable) read as
# text, and the calls that run them. setup_cell fills in PREFIX and FILES.
SETUP = (Path(__file__).with_name("notebook_setup.py").read_text(encoding="utf-8") + """

_require_numpy()
_define_printed_as()
_use_snippets(PREFIX, {
FILES
})
del _require_numpy, _define_printed_as, _use_snippets
""")


def setup_cell(module_names: list[str], site_name: str, base: Path = ROOT) -> tuple[str, str, list[str]]:
    """The set-up cell that brings the modules ``module_names`` (:func:`sitekit.keys.imported_modules`).

    Returns the cell's source, the folder it writes them into (next to the
    notebook, named for this version of the files) and the modules' paths
    (without the packages' ``__init__.py``).
    """
    paths = [keys.module_file(name, base).relative_to(base) for name in module_names]
    files = [(path.as_posix(), (base / path).read_text(encoding="utf-8")) for path in paths]
    # A folder of this repository without an __init__.py (tools/) is a namespace package here; next
    # to a notebook it is a package of its own, so that no `tools` installed elsewhere comes first.
    namespaces = {path.parent.as_posix() for path in paths if path.parent != Path(".")}
    files += [(f"{folder}/__init__.py", "") for folder in sorted(namespaces)
              if not any(name == f"{folder}/__init__.py" for name, _ in files)]
    modules = [path.as_posix() for path in paths if path.name != "__init__.py"]
    prefix = f"{re.sub(r'[^a-z0-9]+', '-', site_name.lower()).strip('-')}-code"
    setup = SETUP.lstrip("\n").replace("PREFIX", repr(prefix))
    setup = setup.replace("FILES", "\n".join(f"    {name!r}: {_literal(body)}," for name, body in files))
    setup = setup.replace(f"_use_snippets({prefix!r}, {{\n\n}})", f"_use_snippets({prefix!r}, {{}})")
    return setup, snippets_folder(prefix, dict(files)), modules


# ------------------------------------------------------------- the notebook


@dataclass
class Cell:
    """A cell of a chapter's notebook: ``kind`` is "markdown" or "code"."""

    kind: str
    source: str
    metadata: dict = field(default_factory=dict)


class ChapterNotebook:
    """The notebook of one chapter, read from its page through the page model, a cell at a time."""

    def __init__(self, source: str, *, docs_dir: Path, site_url: str, site_name: str, base: Path):
        self.source, self.site_url, self.site_name, self.base = source, site_url, site_name, base
        path = docs_dir / source
        self.text = pages.expand_includes(pages.without_front_matter(path.read_text(encoding="utf-8"), path), base)
        self.page = f"{site_url}{nav.page_url(source)}"
        self.cells: list[Cell] = []
        self.prose: list[tuple[bool, str]] = []  # (verbatim, line), waiting to become a Markdown cell
        self.level = 1  # the heading level of the section being read
        self.wrappers: list[str] = []  # the <section markdown> and <div markdown> elements open

    def flush(self) -> None:
        """The prose read since the last cell, as a Markdown cell (math and code spans may run over lines)."""
        parts, run = [], []
        for verbatim, line in [*self.prose, (True, None)]:
            if not verbatim:
                run.append(line)
                continue
            if run:
                parts.append(_prose("\n".join(run), self.site_url, self.source))
                run = []
            if line is not None:
                parts.append(line)
        content = "\n".join(parts).strip("\n")
        if content.strip():
            self.cells.append(Cell("markdown", content))
        self.prose.clear()

    def walk(self, blocks: list) -> None:
        for block in blocks:
            if isinstance(block, str):
                self.line(block)
            elif isinstance(block, Container):
                self.container(block)
            elif not block.executed:  # a fence shown as it is
                self.prose.append((True, block.source))
            else:
                self.flush()
                if block.console:
                    for cell_source, raises in console_cells(block.expanded(self.base)):
                        self.cells.append(Cell("code", cell_source, {"tags": ["raises-exception"]} if raises else {}))
                else:
                    self.cells.append(Cell("code", *_python_cell(block, self.page, self.base)))

    def line(self, line: str) -> None:
        heading = _HEADING.match(line)
        if heading:
            self.flush()
            self.level = len(heading.group(1))
        wrapper = _MARKDOWN_WRAPPER.match(line)
        if wrapper:
            self.wrappers.append(wrapper.group(1))
        elif self.wrappers and line.strip() == f"</{self.wrappers[-1]}>":
            self.wrappers.pop()
        else:
            self.prose.append((False, line))

    def container(self, block: Container) -> None:
        """A heading one level below the section it is in, with the title the page shows; a collapsed
        block (???) keeps its title in view and folds its cells."""
        self.flush()
        outer = self.level
        self.level = min(outer + 1, 6)
        if block.title:
            self.cells.append(Cell("markdown", f"{'#' * self.level} {_prose(block.title, self.site_url, self.source)}"))
        first = len(self.cells)
        self.walk(block.blocks)
        self.flush()
        if block.collapsed:
            for cell in self.cells[first:]:
                fold(cell.kind, cell.metadata)
        self.level = outer

    def about(self, modules: list[str], folder: str) -> str:
        """The first cell: what the notebook is, what it needs, what its set-up does, what is folded."""
        title = self.text.split("\n", 1)[0].lstrip("# ").strip()
        code = [(self.base / name).read_text(encoding="utf-8") for name in modules]
        draws = any(_MATPLOTLIB.search(body) for body in code + [cell.source for cell in self.cells if cell.kind == "code"])
        needs = [need for need in REQUIREMENTS if need != "Matplotlib" or draws]
        brings = (", and writes the modules of the site that the chapter uses "
                  f"({', '.join(f'`{name}`' for name in modules)}) into a folder of their own next to the notebook, "
                  f"`{folder}/`, named for this version of the code, and imports them from there: "
                  "a `snippets` folder of your own is never read or changed." if modules else ".")
        return "\n\n".join([
            f"*This notebook is the chapter [{title}]({self.page}) of [{self.site_name}]({self.site_url}), "
            "generated from the page when the site was built. Run its cells from the top.*",
            f"**Requirements:** {', '.join(needs[:-1])} and {needs[-1]}. The site's code is written and tested for "
            "NumPy 2 only (its modules use `ndarray.mT`, new in 2.0): under an older NumPy the set-up cell stops "
            "and says what to do.",
            "The set-up cell, the first code cell, checks NumPy's version and defines `%%printed_as`, which shows "
            "what a cell prints as HTML or Markdown (the page's figures and tables)" + brings,
            "**Folded cells**, as on the page: the set-up cell; the cells whose code the page hides; and the page's "
            "collapsed blocks, such as the exercises' solutions, whose title is a heading with their cells folded "
            "under it. Click a folded cell to open it. JupyterLab and Notebook 7 fold them all; Colab folds the "
            "set-up cell, and the classic Notebook, with its Hide Input extension, the code of them all. "
            "Under a console statement, the `#` comments are the output the page shows for it.",
        ])

    def notebook(self):
        """The notebook: its first cell, the set-up (folded for every viewer that can: its first line is
        Colab's form title), then the page's cells. Deterministic: numbered ids, no outputs, no dates."""
        self.walk(pages.parse(self.text))
        self.flush()
        setup, folder, modules = setup_cell(keys.page_modules(self.text, self.base), self.site_name, self.base)
        cells = [Cell("markdown", self.about(modules, folder)), Cell("code", setup, hide_source("code", {"cellView": "form"})),
                 *self.cells]
        # The fields of nbformat.v4's new_notebook/new_*_cell, without their
        # validation of every cell against the schema (jsonschema: 0.3 s a build).
        kernel = {"display_name": "Python 3", "language": "python", "name": "python3"}
        notebook = nbformat.from_dict({"nbformat": nbformat.v4.nbformat, "nbformat_minor": nbformat.v4.nbformat_minor,
                                       "metadata": {"kernelspec": kernel, "language_info": {"name": "python"}}, "cells": []})
        for number, cell in enumerate(cells):
            new = {"id": f"cell-{number:03d}", "cell_type": cell.kind, "source": cell.source, "metadata": cell.metadata}
            if cell.kind == "code":
                new.update(execution_count=None, outputs=[])
            notebook.cells.append(nbformat.from_dict(new))
        return notebook


def chapter_notebook(
    source: str, *, docs_dir: Path = pages.DOCS, site_url: str, site_name: str | None = None, base: Path = ROOT
):
    """The notebook of the chapter at ``docs_dir / source``, addresses under ``site_url``; ``site_name`` mkdocs.yml's."""
    if site_name is None:
        site_name = nav.read_config(base).get("site_name", "the site")
    return ChapterNotebook(source, docs_dir=docs_dir, site_url=site_url.rstrip("/") + "/", site_name=site_name,
                           base=base).notebook()


def notebook_text(notebook) -> str:
    """The ``.ipynb`` file's text."""
    return nbformat.writes(notebook) + "\n"


def write_notebook(notebook, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(notebook_text(notebook), encoding="utf-8")
