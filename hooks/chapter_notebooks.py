"""Every chapter, and the recap notebook page, as a Jupyter notebook next to its page.

``sitekit.notebooks`` makes the notebook from the page's source; this hook
names it on the page (``page.notebook_download``, for the download link in
overrides/main.html) and writes it next to the page's ``index.html``.
While serving, a page's notebook is made again only when something the page
depends on changed (the serve cache's key, ``page.serve_key``, from hooks/serve.py).
"""

from __future__ import annotations

from pathlib import Path

import _repository  # noqa: F401 (the repository's root on sys.path, for sitekit)
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page
from mkdocs.utils.templates import TemplateContext

from sitekit import notebooks, pages

_serving = False
# While serving: page -> (key of what it depends on, its notebook's text), so
# that a rebuild writes the notebooks of unchanged pages without making them again.
_made: dict[str, tuple[str, str]] = {}


def _offers_notebook(page: Page, config: MkDocsConfig) -> bool:
    return page.file.src_uri in pages.notebook_pages(config["nav"])


def on_startup(*, command: str, dirty: bool) -> None:  # noqa: ARG001
    global _serving
    _serving = command == "serve"


def on_page_context(
    context: TemplateContext, /, *, page: Page, config: MkDocsConfig, nav: Navigation  # noqa: ARG001
) -> TemplateContext:
    if _offers_notebook(page, config):
        page.notebook_download = Path(page.file.src_uri).with_suffix(".ipynb").name
        page.notebook_of_chapter = not page.file.src_uri.startswith("notebooks/")
    return context


def on_post_page(output: str, /, *, page: Page, config: MkDocsConfig) -> str:
    if _offers_notebook(page, config):
        source = page.file.src_uri
        # The serve cache's key for this page, made for this rebuild (hooks/serve.py).
        key = getattr(page, "serve_key", None) if _serving else None
        kept_key, text = _made.get(source, (None, None))
        if key is None or kept_key != key:
            notebook = notebooks.chapter_notebook(
                source, docs_dir=Path(config["docs_dir"]), site_url=config["site_url"] or "",
                site_name=config["site_name"], base=pages.ROOT,
            )
            text = notebooks.notebook_text(notebook)
            if key is not None:
                _made[source] = (key, text)
        target = Path(page.file.abs_dest_path).parent / page.notebook_download
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return output
