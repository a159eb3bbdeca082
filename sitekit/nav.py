"""mkdocs.yml read without MkDocs: the nav, its chapters, the pages offered as notebooks, each page's address.

For the scripts, the tests and the post-build step, which run after (or
without) any engine; a hook has MkDocs' own ``config``.
"""

from __future__ import annotations

import re
from pathlib import Path

from sitekit.pages import DOCS, ROOT, FrontMatterError, front_matter, where

CHAPTER_TITLE = re.compile(r"^(?P<number>\d+)\. ")


def read_config(base: Path = ROOT, name: str = "mkdocs.yml") -> dict:
    """mkdocs.yml as written, read without MkDocs.

    ``INHERIT: parent.yml`` is honoured as MkDocs does: the parent's settings,
    with this file's merged into them (mappings key by key, anything else replaced).
    """
    import yaml

    loader = type("Loader", (yaml.SafeLoader,), {})
    loader.add_multi_constructor("!", lambda *_: None)  # tags such as !relative and !ENV
    loader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda _loader, suffix, _node: suffix)
    path = base / name
    config = yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {}  # noqa: S506 (a safe loader)
    parent = config.pop("INHERIT", None)
    if parent is None:
        return config
    return _merged(read_config(path.parent, parent), config)


def _merged(parent: dict, child: dict) -> dict:
    merged = dict(parent)
    for key, value in child.items():
        both = isinstance(value, dict) and isinstance(parent.get(key), dict)
        merged[key] = _merged(parent[key], value) if both else value
    return merged


def load_nav(base: Path = ROOT) -> list:
    """mkdocs.yml's nav, read without MkDocs."""
    return read_config(base).get("nav") or []


def nav_entries(nav: list) -> list[tuple[str | None, str]]:
    """``(title, source)`` for every page of the nav, in order; the title is None where the nav gives none."""
    found: list[tuple[str | None, str]] = []
    for item in nav or []:
        title, value = next(iter(item.items())) if isinstance(item, dict) else (None, item)
        if isinstance(value, list):
            found += nav_entries(value)
        else:
            found.append((None if title is None else str(title), value))
    return found


def nav_sources(nav: list) -> list[str]:
    """The source files of the nav's pages, in order (relative to docs/)."""
    return [source for _, source in nav_entries(nav)]


def chapters(nav: list) -> list[str]:
    """The chapters: pages whose nav title is numbered ("3. Soft keys"), in nav order."""
    return [source for title, source in nav_entries(nav) if title and CHAPTER_TITLE.match(title)]


def offers_notebook(source: str, docs: Path = DOCS) -> bool:
    """False for a page whose front matter says ``notebook: false``.

    Chapter 14 says so: its code reads the stored training run of this
    repository (docs/training/), and its notebook is that run itself,
    docs/notebooks/training-run.ipynb, shown by its own page.
    """
    path = docs / source
    if not path.is_file():
        return True
    offered = front_matter(path.read_text(encoding="utf-8"), path).get("notebook", True)
    if not isinstance(offered, bool):
        raise FrontMatterError(f"{where(path)}: notebook: in the front matter must be true or false, not {offered!r}")
    return offered


def notebook_pages(nav: list, docs: Path = DOCS) -> list[str]:
    """The pages offered as Jupyter notebooks, in nav order: the chapters and the pages of docs/notebooks/.

    A page whose front matter says ``notebook: false`` is left out (:func:`offers_notebook`).
    """
    return [
        source
        for title, source in nav_entries(nav)
        if source.endswith(".md") and ((title and CHAPTER_TITLE.match(title)) or source.startswith("notebooks/"))
        and offers_notebook(source, docs)
    ]


def page_url(source: str) -> str:
    """The page's address relative to the site's root (directory URLs, as mkdocs.yml uses)."""
    stem = source.rsplit(".", 1)[0]
    if stem == "index":
        return ""
    return (stem.removesuffix("/index") if stem.endswith("/index") else stem) + "/"


def built_page(source: str) -> str:
    """The HTML file MkDocs writes for the page, relative to the site's folder."""
    return page_url(source) + "index.html"


def read(source: str, docs: Path = DOCS) -> str:
    """The Markdown of the page ``source`` (relative to docs/)."""
    return (docs / source).read_text(encoding="utf-8")
