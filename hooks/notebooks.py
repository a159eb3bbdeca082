"""Notebook pages: light, offline, deterministic, and downloadable.

Notebooks are kept in git as jupytext "percent" ``.py`` files (readable diffs,
one source); mkdocs-jupyter executes and renders them. Its HTML needs three
repairs, made here:

- It inlines JupyterLab's whole stylesheet (about 570 KB) and scripts that
  load MathJax and Mermaid from a CDN. Both are removed; code cells are turned
  into Material code blocks (its highlighting and copy button), and
  docs/stylesheets/extra.css styles the rest.
- jupytext gives cells random ids, which would change the page on every
  build; they are numbered instead.
- Readers want a notebook, not a ``.py`` file: the source is converted to an
  ``.ipynb`` next to the page, and the template (overrides/main.html) links it.
"""

from __future__ import annotations

import re
from pathlib import Path

import jupytext

NOTEBOOK_DIR = "notebooks/"


def _is_notebook(page) -> bool:
    return page.file.src_uri.startswith(NOTEBOOK_DIR) and page.file.src_uri.endswith(".py")


_STYLE_OR_SCRIPT = re.compile(r"<(style|script)\b[^>]*>.*?</\1>", re.DOTALL)
# nbconvert's copy button (needs the removed script) and the hidden text it copies.
_CLIPBOARD = re.compile(
    r'<div class="zeroclipboard-container">.*?</clipboard-copy>\s*</div>'
    r'|<div class="clipboard-copy-txt"[^>]*>.*?</div>',
    re.DOTALL,
)
_CODE_CELL = re.compile(r'<div class="highlight-ipynb hl-python"><pre>(.*?)</pre></div>', re.DOTALL)
_CELL_ID = re.compile(r'id="cell-id=[^"]*"')


def on_page_content(html, page, config, files):  # noqa: ARG001
    if not _is_notebook(page):
        return html
    html = _STYLE_OR_SCRIPT.sub("", html)
    html = _CLIPBOARD.sub("", html)
    html = _CODE_CELL.sub(r'<div class="highlight"><pre><code>\1</code></pre></div>', html)
    numbers = iter(range(1, 10**6))
    return _CELL_ID.sub(lambda _: f'id="cell-{next(numbers)}"', html)


def on_page_context(context, page, config, nav):  # noqa: ARG001
    if _is_notebook(page):
        page.notebook_download = Path(page.file.src_uri).with_suffix(".ipynb").name
    return context


def on_post_page(output, page, config):  # noqa: ARG001
    if _is_notebook(page):
        notebook = jupytext.read(page.file.abs_src_path)
        for number, cell in enumerate(notebook.cells):
            cell.id = f"cell-{number:02d}"
        notebook.metadata.pop("jupytext", None)
        target = Path(page.file.abs_dest_path).parent / page.notebook_download
        target.parent.mkdir(parents=True, exist_ok=True)
        jupytext.write(notebook, target, fmt="ipynb")
    return output
