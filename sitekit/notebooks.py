"""Every chapter as a Jupyter notebook, generated from its page at build time.

Each chapter (a nav entry titled "N. Title") and the recap notebook page
(docs/notebooks/) gets ``<page>.ipynb`` next to its ``index.html``
(the post-build step, sitekit/postbuild.py, writes it and the page's
download). The notebook is the page, read through the page model
(``sitekit.pages``):

- prose becomes Markdown cells, a new cell at each heading; ``\\( \\)`` math
  becomes ``$ $`` (Jupyter's Markdown reads only dollars); links to other
  pages point at the published site; ``<section ... markdown>`` wrappers go.
- a container (an admonition, ``??? success remember "Solution 1"``, a tab),
  read by the page model with all its classes and its title, becomes a
  heading cell with the title the page shows, one level below the section
  it is in, followed by its dedented content. A collapsed one (``???``)
  folds its cells, as the page folds the block: its title stays in view,
  its cells' code and Markdown are hidden, and so are their outputs
  (:func:`fold`; the comment above it says what each viewer reads). No
  container header reaches a cell.
- the front matter, if any, is left out (it is MkDocs's, not the reader's).
- ``--8<--`` includes are expanded, as pymdownx.snippets does for the site.
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
    followed by the output the page writes for it, as ``# `` comments:
    Jupyter echoes only a cell's last value, so the comments keep what the
    page shows under every statement. A statement the page shows raising
    ends its cell, tagged ``raises-exception`` (Jupyter's convention: "Run
    all" goes on past it); the statements after it start the next cell.
  * a fence that imports a widget (a module of ``sitekit/widgets/``: the
    soft-lookup playground, the memory widget) starts with
    ``%%printed_as widget <page address>``: it
    runs (later checks use its names) and shows a link to the page, since
    the widget needs the site's JavaScript.

- the first cell, Markdown, says what the notebook needs
  (:data:`REQUIREMENTS`: NumPy 2.0 or newer among them; Matplotlib where
  its code, or a module it brings, uses it) and what is folded.
- the first code cell, the set-up, is folded in JupyterLab, Notebook 7,
  Colab (a ``#@title`` form) and the classic Notebook (its Hide Input
  extension). It stops, with a message that says what to do, under a NumPy
  older than 2.0; it writes the modules of ``snippets/`` and
  ``sitekit/`` that the chapter imports (with their own imports, and the
  packages' ``__init__.py``) into a folder of their own next to the
  notebook, ``<site>-code-<version>/``, where ``<version>`` is a hash of the
  files, and imports them from there. So the notebook runs with only NumPy,
  Matplotlib and a Jupyter kernel, without this repository, and always with
  the code it was built with: a reader's own ``snippets/`` is never read or
  overwritten, a package of those names imported earlier in the kernel is
  unloaded, and a copy in its folder that was edited stops the cell with an
  error naming the file.

The notebook is deterministic (numbered cell ids, no outputs, no dates).
tests/test_chapter_notebooks.py validates each one with nbformat (not the
build: jsonschema is slow, so cells are made without it) and executes it in a
fresh kernel, in a folder outside the repository.

Chapter 14's training run is a notebook of its own, stored with its outputs
(docs/notebooks/training-run.ipynb, shown by mkdocs-jupyter). Its copy for
download (:func:`self_contained`) gets the same set-up cell in place of the
one that finds the modules in the repository; :func:`code_digest` is the
digest of its code that the run's log records, and :func:`stored_errors` the
errors it stored (the post-build step checks both).
"""

from __future__ import annotations

import ast
import doctest
import hashlib
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import nbformat

from sitekit import code_lines, keys, nav, pages
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


SETUP = r'''
#@title Set-up: run this cell first (NumPy 2.0 or newer, this chapter's modules) { display-mode: "form" }
# Set-up, written when the site was built. Run it first.
# 0. This notebook needs NumPy 2.0 or newer: under an older one, this cell
#    stops with a message that says what to do.
# 1. %%printed_as html|markdown: run a cell and show what it prints as HTML or
#    Markdown, as the page does (its figures are printed <figure> elements).
#    %%printed_as widget <address>: an interactive widget needs the site's
#    JavaScript, so the cell runs and shows a link to the page instead.
# 2. The modules of the site (snippets/, sitekit/, tools/) this notebook imports,
#    written to a folder of their own next to the notebook, named for this
#    version of the code (a hash of the files), and imported from there. A
#    snippets/ folder of yours is never read or changed; a copy in this folder
#    that was edited stops the cell with an error that names it.
#    Every line of a file is written after a "|": IPython would strip the
#    ">>>" of the docstrings' examples, even inside a string.


def _require_numpy():
    """Stop here, saying what to do, without NumPy 2.0 or newer (the site's code uses ndarray.mT, new in 2.0)."""
    try:
        import numpy
    except ImportError:
        found, recent = "no NumPy", False
    else:
        found, recent = f"NumPy {numpy.__version__}", int(numpy.__version__.split(".")[0]) >= 2
    if not recent:
        raise RuntimeError(
            f"This notebook needs NumPy 2.0 or newer, and this kernel has {found}. Install a newer one "
            '(%pip install --upgrade "numpy>=2" in a cell, or conda install "numpy>=2"), '
            "restart the kernel and run this cell again."
        )


def _define_printed_as():
    from IPython.core.magic import register_cell_magic

    @register_cell_magic
    def printed_as(line, cell):
        """Run the cell; display what it printed as HTML or Markdown."""
        import contextlib
        import io
        import re

        from IPython.display import HTML, Markdown, display

        kind, _, page = line.strip().partition(" ")
        shell = get_ipython()
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(cell, shell.compile.cache(cell), "exec"), shell.user_ns)
        finally:
            text = printed.getvalue()
            if kind == "widget":
                display(Markdown(f"*Here the page shows an interactive widget: try it on [the page]({page}).*"))
            elif text and kind == "markdown":
                display(Markdown(re.sub(r"\\\((.+?)\\\)", r"$\1$", text, flags=re.DOTALL)))
            elif text:
                display(HTML(text))


def _use_snippets(prefix, files):
    import hashlib
    import importlib
    import os
    import sys
    from pathlib import Path

    if not files:
        return
    # Each line of a file is written after a "|" (see the note above).
    files = {name: "\n".join(line[1:] for line in text.split("\n")[1:]) for name, text in files.items()}
    version = hashlib.sha256()
    for name, text in sorted(files.items()):
        version.update(name.encode() + b"\0" + text.encode() + b"\0")
    folder = Path(f"{prefix}-{version.hexdigest()[:12]}").resolve()
    for name, text in files.items():
        path = folder / name
        if path.exists():
            if path.read_text(encoding="utf-8") != text:
                raise RuntimeError(
                    f"{path} differs from the copy this notebook was built with (was it edited?). "
                    f"Keep your changes elsewhere, delete the folder {folder}, and run this cell again."
                )
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)  # whole or not at all, for a notebook running beside this one
    # This folder first on the path, and no module of its packages imported from elsewhere.
    packages = {name.split("/")[0] for name in files}
    loaded = [name for name in sys.modules if name.split(".")[0] in packages]
    foreign = [name for name in loaded if not Path(getattr(sys.modules[name], "__file__", None) or "/")
               .resolve().is_relative_to(folder)]
    if foreign:
        print(f"Unloaded {', '.join(sorted(foreign))}, imported before this cell: "
              f"this notebook uses its own copy, in {folder}.")
        for name in foreign:
            del sys.modules[name]
    if str(folder) in sys.path:
        sys.path.remove(str(folder))
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()


_require_numpy()
_define_printed_as()
_use_snippets(PREFIX, {
FILES
})
del _require_numpy, _define_printed_as, _use_snippets
'''


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


def chapter_notebook(
    source: str, *, docs_dir: Path = pages.DOCS, site_url: str, site_name: str | None = None, base: Path = ROOT
):
    """The notebook of the chapter at ``docs_dir / source``, addresses under ``site_url``.

    ``site_name`` is mkdocs.yml's (read from it if not given).
    """
    site_url = site_url.rstrip("/") + "/"
    if site_name is None:
        site_name = nav.read_config(base).get("site_name", "the site")
    path = docs_dir / source
    text = pages.expand_includes(pages.without_front_matter(path.read_text(encoding="utf-8"), path), base)
    page = f"{site_url}{nav.page_url(source)}"
    cells: list = []  # (cell type, source, metadata): "markdown" or "code"
    prose: list[tuple[bool, str]] = []  # (verbatim, line)
    level = 1
    wrappers: list[str] = []

    def flush():
        # Math and code spans may run over lines: runs of prose lines are converted as a whole.
        parts, run = [], []
        for verbatim, line in prose + [(True, None)]:
            if not verbatim:
                run.append(line)
                continue
            if run:
                parts.append(_prose("\n".join(run), site_url, source))
                run = []
            if line is not None:
                parts.append(line)
        content = "\n".join(parts).strip("\n")
        if content.strip():
            cells.append(("markdown", content, {}))
        prose.clear()

    def walk(blocks):
        nonlocal level
        for block in blocks:
            if isinstance(block, str):
                line = block
                heading = _HEADING.match(line)
                if heading:
                    flush()
                    level = len(heading.group(1))
                wrapper = _MARKDOWN_WRAPPER.match(line)
                if wrapper:
                    wrappers.append(wrapper.group(1))
                    continue
                if wrappers and line.strip() == f"</{wrappers[-1]}>":
                    wrappers.pop()
                    continue
                prose.append((False, line))
            elif isinstance(block, Container):
                # A heading one level below the section it is in, with the title the page
                # shows; a collapsed block (???) keeps its title in view and folds its cells.
                flush()
                outer = level
                level = min(outer + 1, 6)
                if block.title:
                    cells.append(("markdown", f"{'#' * level} {_prose(block.title, site_url, source)}", {}))
                first = len(cells)
                walk(block.blocks)
                flush()
                if block.collapsed:
                    for cell in cells[first:]:
                        fold(cell[0], cell[2])
                level = outer
            elif not block.executed:  # a fence shown as it is
                prose.append((True, block.source))
            else:
                flush()
                if block.console:
                    for cell_source, raises in console_cells(block.expanded(base)):
                        metadata = {"tags": ["raises-exception"]} if raises else {}
                        cells.append(("code", cell_source, metadata))
                else:
                    cells.append(("code", *_python_cell(block, page, base)))

    walk(pages.parse(text))
    flush()

    title = text.split("\n", 1)[0].lstrip("# ").strip()
    setup, folder, modules = setup_cell(keys.page_modules(text, base), site_name, base)
    code = [(base / name).read_text(encoding="utf-8") for name in modules] + [cell[1] for cell in cells if cell[0] == "code"]
    draws = any(_MATPLOTLIB.search(body) for body in code)
    needs = [need for need in REQUIREMENTS if need != "Matplotlib" or draws]
    about = "\n\n".join([
        f"*This notebook is the chapter [{title}]({page}) of [{site_name}]({site_url}), "
        "generated from the page when the site was built. Run its cells from the top.*",
        f"**Requirements:** {', '.join(needs[:-1])} and {needs[-1]}. The site's code is written and tested for NumPy 2 only "
        "(its modules use `ndarray.mT`, new in 2.0): under an older NumPy the set-up cell stops and says what to do.",
        "The set-up cell, the first code cell, checks NumPy's version and defines `%%printed_as`, which shows "
        "what a cell prints as HTML or Markdown (the page's figures and tables)"
        + (
            ", and writes the modules of the site that the chapter uses "
            f"({', '.join(f'`{name}`' for name in modules)}) into a folder of their own next to the notebook, "
            f"`{folder}/`, named for this version of the code, and imports them from there: "
            "a `snippets` folder of your own is never read or changed."
            if modules
            else "."
        ),
        "**Folded cells**, as on the page: the set-up cell; the cells whose code the page hides; and the page's "
        "collapsed blocks, such as the exercises' solutions, whose title is a heading with their cells folded "
        "under it. Click a folded cell to open it. JupyterLab and Notebook 7 fold them all; Colab folds the "
        "set-up cell, and the classic Notebook, with its Hide Input extension, the code of them all. "
        "Under a console statement, the `#` comments are the output the page shows for it.",
    ])

    # The fields of nbformat.v4's new_notebook/new_*_cell, without their
    # validation of every cell against the schema (jsonschema: 0.3 s a build).
    notebook = nbformat.from_dict({
        "nbformat": nbformat.v4.nbformat,
        "nbformat_minor": nbformat.v4.nbformat_minor,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "cells": [],
    })
    # The set-up is folded for every viewer that can fold it: its first line is Colab's form title.
    all_cells = [("markdown", about, {}), ("code", setup, hide_source("code", {"cellView": "form"})), *cells]
    for number, cell in enumerate(all_cells):
        new = {"id": f"cell-{number:03d}", "cell_type": cell[0], "source": cell[1],
               "metadata": cell[2]}
        if cell[0] == "code":
            new.update(execution_count=None, outputs=[])
        notebook.cells.append(nbformat.from_dict(new))
    return notebook


def notebook_text(notebook) -> str:
    """The ``.ipynb`` file's text."""
    return nbformat.writes(notebook) + "\n"


def write_notebook(notebook, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(notebook_text(notebook), encoding="utf-8")


# ------------------------- chapter 14's training run: a notebook kept with its outputs

TRAINING_RUN = "notebooks/training-run.ipynb"  # its page, under docs/ (mkdocs-jupyter shows it as stored)
TRAINING_LOG = "training/log.json"  # the log the run wrote, with the fingerprint of what it was made from
REPLACE_RUN = "python tools/train.py --replace-stored-run"  # what runs it again and stores it
SETUP_TAG = "set-up"  # the stored notebook's cell that finds the site's modules in the repository
_TRACEBACK = "Traceback (most recent call last)"
# An exception or warning as Python prints its last line, with or without the
# traceback above it ("ZeroDivisionError: division by zero", "x.py:3: UserWarning: …").
_RAISED = re.compile(r"^(?:\S+:\d+: )?[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt): ", re.MULTILINE)


def code_text(notebook) -> str:
    """The code cells of a notebook (as read from its file), joined: what it does, without its outputs."""
    return "\n\n".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code")


def code_digest(notebook) -> str:
    """The SHA-256 of :func:`code_text`: the training run's log records it (tools/train.py's fingerprint)."""
    return hashlib.sha256(code_text(notebook).encode()).hexdigest()


def log_digest(log: dict) -> str:
    """The SHA-256 of the training run's log without its fingerprint: the fingerprint records it (tools/train.py).

    The log holds what chapter 14 plots and states (the loss curve, the
    scores), so an edit to it, by hand or by a tool, is a changed run.

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
    found, number = [], 0
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        number += 1
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "error":
                found.append(f"code cell {number} (id {cell.get('id')}) stored an error, "
                             f"{out.get('ename')}: {out.get('evalue')}")
            elif kind == "stream" and _TRACEBACK in "".join(out.get("text", "")):
                found.append(f"code cell {number} (id {cell.get('id')}) printed a traceback to {out.get('name')}")
            elif kind == "stream" and (raised := _RAISED.search("".join(out.get("text", "")))):
                line = "".join(out.get("text", ""))[raised.start():].split("\n", 1)[0]
                found.append(f"code cell {number} (id {cell.get('id')}) printed an error to {out.get('name')}: {line[:200]}")
    return found


def self_contained(notebook, *, site_name: str | None = None, base: Path = ROOT):
    """The stored training run as a reader downloads it: its set-up cell brings the site's modules along.

    In the repository, the code cell tagged ``set-up`` puts the repository on
    ``sys.path``. In the copy the site offers, that cell is the chapter
    notebooks' set-up (:func:`setup_cell`), with the modules the other cells
    import, and theirs, inside: it writes them into a folder of their own
    next to the notebook, named for their version, and imports them from
    there. So the notebook runs wherever it is downloaded, with NumPy,
    Matplotlib, tqdm and a Jupyter kernel. Every other cell, with its stored
    outputs, is as stored.
    """
    if site_name is None:
        site_name = nav.read_config(base).get("site_name", "the site")
    notebook = nbformat.from_dict(json.loads(json.dumps(notebook)))  # a copy
    cells = notebook["cells"]
    tagged = [i for i, cell in enumerate(cells) if SETUP_TAG in cell.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1 or cells[tagged[0]]["cell_type"] != "code":
        raise ValueError(f"the notebook needs one code cell tagged {SETUP_TAG!r}, its set-up; found {len(tagged)}")
    codes = ["".join(cell["source"]) for i, cell in enumerate(cells) if cell["cell_type"] == "code" and i != tagged[0]]
    setup, _, _ = setup_cell(keys.imported_modules(codes, base), site_name, base)
    cell = cells[tagged[0]]
    cell.update(source=setup, outputs=[], execution_count=None)
    cell["metadata"] = {"jupyter": {"source_hidden": True}, "tags": [SETUP_TAG]}
    return notebook


# ------------------------------------- the training run's page (mkdocs-jupyter)

JUPYTER_WRAPPER = 'class="jupyter-wrapper"'  # mkdocs-jupyter's page content holds it
_REMOVE = [
    re.compile(r"<style[^>]*>.*?</style>", re.DOTALL),                  # JupyterLab's CSS and its pygments colours
    re.compile(r"<script\b[^>]*>.*?</script>", re.DOTALL),               # MathJax, Mermaid, the clipboard element
    re.compile(r"<!--.*?-->", re.DOTALL),
    re.compile(r'<div class="zeroclipboard-container">.*?</clipboard-copy>\s*</div>', re.DOTALL),
    re.compile(r'<(\w+) class="clipboard-copy-txt"[^>]*>.*?</\1>', re.DOTALL),      # the copy button's text
    # An output that printed only a newline (the progress bar's last one): an empty box.
    re.compile(r'<div class="jp-OutputArea-child">\s*<div class="jp-OutputPrompt jp-OutputArea-prompt"></div>\s*'
               r'<div class="jp-RenderedText jp-OutputArea-output"[^>]*>\s*<pre>\s*</pre>\s*</div>\s*</div>'),
]
# A <pre> without a <code> inside: nbconvert writes the cells' code and outputs so.
_BARE_PRE = re.compile(r"(<pre\b[^>]*>(?:<span></span>)?)(?!<code\b)(.*?)</pre>", re.DOTALL)


def clean_notebook_html(content: str) -> str:
    """A notebook's cells (mkdocs-jupyter's HTML) without JupyterLab's scripts, styles and copy buttons.

    mkdocs-jupyter's page carries what a JupyterLab page needs and this one
    does not: a MathJax loader with an empty ``src`` (invalid HTML), a Mermaid
    loader, a clipboard button with an invalid attribute, ``tabindex`` on
    every cell, and JupyterLab's whole stylesheet (575 KB). The cells, their
    outputs and images stay; the code blocks get Material's ``highlight``
    class (the site's colours in both schemes) and its shape, ``<pre><code>``,
    with a span per line (``sitekit.code_lines``); docs/stylesheets/notebook.css
    lays them out.

    >>> clean_notebook_html('<div class="highlight-ipynb hl-python"><pre><span></span>x = 1\\n</pre></div>')
    '<div class="highlight hl-python"><pre><span></span><code><span class="cl">x = 1</span>\\n</code></pre></div>'
    """
    for pattern in _REMOVE:
        content = pattern.sub("", content)
    content = content.replace(' tabindex="0"', "")
    content = _BARE_PRE.sub(r"\1<code>\2</code></pre>", content)
    content = content.replace('class="highlight-ipynb ', 'class="highlight ')
    return code_lines.wrap_code_lines(content)
