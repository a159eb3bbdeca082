"""What works on the finished site: steps over the built folder, the same after any engine.

    python -m sitekit.postbuild SITE    # after a build by any engine; exits 1 on a problem

MkDocs and ProperDocs run these steps at the end of every build and every
rebuild of ``mkdocs serve`` (hooks/site.py, ``on_post_build``: each problem
is a warning, so ``--strict`` fails); after Zensical, the command above runs
them. In order:

1. **Figures' ids**: matplotlib numbers the ids inside every inline SVG the
   same way (``figure_1``, clip paths); the n-th figure of a page gets the
   prefix ``svg<n>-`` (a page with two figures would repeat ids: invalid
   HTML, and a clip path of one figure could resolve into another).
2. **Material's toggles**: its hidden checkboxes carry ``autocomplete``,
   which HTML does not allow on them.
3. **Notebooks**: every chapter and the recap notebook page as a Jupyter
   notebook next to its ``index.html`` (``sitekit.notebooks``, from the
   page's source), and the page's download links; and every page's "Edit
   this page" link, where the engine wrote none (Zensical, without
   ``repo_url``).
4. **Modules**: every module of snippets/ at ``snippets/<module>.py``, as it
   is in the repository, for the Snippets page's download links.
5. **Links**: every internal link, anchor and image of every page resolves,
   and every image has a text alternative (``sitekit.site_check``).
6. **Build errors**: a page that holds an error the build reported
   (``sitekit.report.build_error``: a block that raised, a console session
   whose written output differs, TeX that did not render) is a problem
   here too, so that an engine that exits 0 on it fails at this step.
7. **The stored notebook** (chapter 14's training run, a page shown with the
   outputs it was stored with; no engine runs it): the copy a reader
   downloads brings the site's modules (``sitekit.training_run.write_download``),
   and ``sitekit.training_run.stored_notebooks`` fails on an error stored in
   it and on code or a log changed since the run was made.
8. **Widgets' files** (:func:`widget_files`): what a widget fetches besides
   its page (the model writer's weights), written next to every page that
   shows it from the module's ``built_files()``, and checked against what
   the page names (the module's ``check_built``): a page built for other
   data than the file beside it fails here.
"""

from __future__ import annotations

import argparse
import html
import importlib
import re
import shutil
import sys
from pathlib import Path

from sitekit import keys, nav, notebooks, pages, site_check, training_run
from sitekit.report import ERROR_MARKER

# ----------------------------------------------------------------- figures

_SVG = re.compile(r"<svg\b.*?</svg>", re.DOTALL)
_SVG_ID = re.compile(r'(?<![\w-])id="([^"]+)"')
_SVG_REFERENCE = re.compile(r'url\(#([^)]+)\)|((?<![\w-])(?:xlink:)?href)="#([^"]+)"')


def unique_svg_ids(page_html: str) -> str:
    """Prefix the ids of the n-th inline SVG with ids of a page with ``svg<n>-``, and its references to them."""
    numbers = iter(range(1, 10**6))

    def rename(match: re.Match) -> str:
        svg = match.group(0)
        ids = set(_SVG_ID.findall(svg))
        if not ids or 'id="svg' in svg:  # no ids, or done already
            return svg
        prefix = f"svg{next(numbers)}-"
        # matplotlib names an embedded image after a hash of its pixels, so one
        # figure with two identical images repeats an id: later uses are
        # numbered (references resolve to the first, as in the browser).
        uses: dict[str, int] = {}

        def new_id(found: re.Match) -> str:
            name = found.group(1)
            uses[name] = uses.get(name, 0) + 1
            suffix = "" if uses[name] == 1 else f"-{uses[name]}"
            return f'id="{prefix}{name}{suffix}"'

        def reference(ref: re.Match) -> str:
            target = ref.group(1) or ref.group(3)
            if target not in ids:
                return ref.group(0)
            return f"url(#{prefix}{target})" if ref.group(1) else f'{ref.group(2)}="#{prefix}{target}"'

        svg = _SVG_ID.sub(new_id, svg)
        return _SVG_REFERENCE.sub(reference, svg)

    return _SVG.sub(rename, page_html)


_TOGGLE = re.compile(r'(<input class="md-toggle"[^>]*?) autocomplete="off"')


# ------------------------------------------------------------- notebooks

_ARTICLE = re.compile(r'(<article class="md-content__inner md-typeset">)(.*?)(</article>)', re.DOTALL)

# Material Design Icons' "download" (Apache 2.0), as Material's theme inlines it.
_DOWNLOAD_ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">'
                  '<path d="M5 20h14v-2H5m14-9h-4V3H9v6H5l7 7z"/></svg>')


def with_download_links(page_html: str, notebook: str, *, chapter: bool) -> str:
    """The page with a download button above its content and a download paragraph below it."""
    label = "Download this chapter as a notebook" if chapter else "Download this notebook"
    button = (f'\n  <a href="{notebook}" download class="md-content__button md-icon"\n'
              f'       title="{label} ({notebook})"\n       aria-label="{label} ({notebook})">\n'
              f"      {_DOWNLOAD_ICON}\n    </a>\n")
    if chapter:
        text = (f'<a href="{notebook}" download>Download this chapter as a notebook\n        ({notebook})</a>: '
                "it runs in Jupyter with NumPy 2.0 or newer and Matplotlib,\n        and brings the snippets modules it uses.")
    else:
        text = (f'<a href="{notebook}" download>Download this notebook\n        ({notebook})</a>: '
                "it needs only Python and NumPy 2.0 or newer.")
    paragraph = f'\n    <p class="notebook-download">\n      {text}\n    </p>\n'
    return _ARTICLE.sub(lambda m: m.group(1) + button + m.group(2) + paragraph + m.group(3), page_html, count=1)


# Material Design Icons' "file-edit-outline" (Apache 2.0), as Material's theme inlines it for its edit link.
_EDIT_ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"><path d="M10 20H6V4h7v5h5v3.1l2-2V8l-6-6H6c'
              "-1.1 0-2 .9-2 2v16c0 1.1.9 2 2 2h4zm10.2-7c.1 0 .3.1.4.2l1.3 1.3c.2.2.2.6 0 .8l-1 1-2.1-2.1 1-1c.1-.1.2-.2.4"
              '-.2m0 3.9L14.1 23H12v-2.1l6.1-6.1z"/></svg>')


def with_edit_link(page_html: str, url: str) -> str:
    """The page with Material's "Edit this page" button, where the engine wrote none.

    Zensical writes it only with ``repo_url``, which the site leaves out (its
    header would ask GitHub's API for the repository's stars on every page).
    """
    if 'rel="edit"' in page_html:
        return page_html
    link = (f'\n  <a href="{url}" title="Edit this page" class="md-content__button md-icon" rel="edit">\n'
            f"    {_EDIT_ICON}\n  </a>\n")
    return _ARTICLE.sub(lambda m: m.group(1) + link + m.group(2) + m.group(3), page_html, count=1)


class _Notebooks:
    """Each page's notebook, kept while nothing the page depends on changes (``mkdocs serve`` rebuilds often)."""

    def __init__(self):
        self.made: dict[str, tuple[str, str]] = {}  # page -> (sitekit.keys.page_key, notebook text)

    def text(self, source: str, config: dict, *, serving: bool) -> str:
        key = keys.page_key(pages.DOCS / source) if serving else None  # a single build keeps nothing
        kept_key, text = self.made.get(source, (None, None))
        if key is None or kept_key != key:
            notebook = notebooks.chapter_notebook(source, site_url=config.get("site_url") or "",
                                                  site_name=config.get("site_name"))
            text = notebooks.notebook_text(notebook)
            if key is not None:
                self.made[source] = (key, text)
        return text


_NOTEBOOKS = _Notebooks()


# ------------------------------------------------------------------ steps


def run(site: Path, *, serving: bool = False) -> list[str]:
    """Make the built site at ``site`` final; return its problems (none: it is ready to publish).

    ``serving``: the build is one of ``mkdocs serve``'s (hooks/site.py), and
    each page's notebook is kept for the next one while the page's key holds.
    """
    config = nav.read_config()
    entries = config.get("nav") or []
    offered = set(nav.notebook_pages(entries))
    chapters = set(nav.chapters(entries))
    problems = []
    sources = nav.nav_sources(entries)
    edit_uri = config.get("edit_uri") or ""
    for source in sources:
        built = site / nav.built_page(source)
        if not built.is_file():
            continue
        original = built.read_text(encoding="utf-8")
        page_html = _TOGGLE.sub(r"\1", unique_svg_ids(original))
        if edit_uri.startswith(("https://", "http://")):  # mkdocs.yml's, absolute: no repo_url
            page_html = with_edit_link(page_html, edit_uri + source)
        if source in offered:
            notebook = Path(source).with_suffix(".ipynb").name
            (built.parent / notebook).write_text(_NOTEBOOKS.text(source, config, serving=serving), encoding="utf-8")
            if "notebook-download" not in page_html:
                page_html = with_download_links(page_html, notebook, chapter=source in chapters)
        if page_html != original:
            built.write_text(page_html, encoding="utf-8")
    not_found = site / "404.html"  # a template, not a page of the nav
    if not_found.is_file():
        not_found.write_text(_TOGGLE.sub(r"\1", not_found.read_text(encoding="utf-8")), encoding="utf-8")
    modules = site / "snippets"
    modules.mkdir(parents=True, exist_ok=True)
    for module in sorted((pages.ROOT / "snippets").glob("*.py")):
        if module.name != "__init__.py":
            shutil.copyfile(module, modules / module.name)
    training_run.write_download(site, config.get("site_name"))
    site_url = config.get("site_url") or ""
    problems += site_check.check_site(site, site_url if not site_url or site_url.endswith("/") else site_url + "/")
    problems += build_errors(site)
    if training_run.TRAINING_PAGE in sources:
        problems += training_run.stored_notebooks()
    problems += widget_files(site, entries)
    return problems


def widget_pages(entries: list, base: Path = pages.ROOT) -> dict[str, list]:
    """The nav's pages that show a widget, each with its widgets (the ``sitekit.widgets`` modules it imports)."""
    from sitekit.widgets import widgets

    by_module = {widget.module: widget for widget in widgets()}
    found = {}
    for source in nav.nav_sources(entries):
        imported = keys.page_modules(nav.read(source, base / "docs"), base)
        shown = [by_module[name] for name in imported if name in by_module]
        if shown:
            found[source] = shown
    return found


def widget_files(site: Path, entries: list) -> list[str]:
    """Write the files the widgets of each page fetch next to the page, and check them against it.

    A module of sitekit/widgets/ may declare ``built_files()`` (file name ->
    bytes) and ``check_built(page_html, files)`` (its problems with the
    files beside a built page); the model writer does, for its weights.
    """
    problems = []
    for source, shown in widget_pages(entries).items():
        built = site / nav.built_page(source)
        if not built.is_file():
            continue
        for widget in shown:
            module = importlib.import_module(widget.module)
            if not hasattr(module, "built_files"):
                continue
            try:
                files = module.built_files()
            except ValueError as error:
                problems.append(f"{source}: the {widget.name}'s files: {error}")
                continue
            for name, data in files.items():
                (built.parent / name).write_bytes(data)
            page_html = built.read_text(encoding="utf-8")
            problems += [f"{nav.built_page(source)}: {problem}" for problem in module.check_built(page_html, files)]
    return problems


_MARKER = re.compile(r"<!-- " + re.escape(ERROR_MARKER) + r" (.*?) -->", re.DOTALL)


def build_errors(site: Path) -> list[str]:
    """The build errors (``sitekit.report.build_error``) that pages of ``site`` hold."""
    found = []
    for path in sorted(site.rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        if ERROR_MARKER in text:
            page = path.relative_to(site).as_posix()
            found += [f"{page} holds a build error: {html.unescape(m.group(1))}" for m in _MARKER.finditer(text)]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("site", type=Path, help="the built site's folder (e.g. site/)")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"postbuild: {args.site} holds no built site (no index.html)", file=sys.stderr)
        return 2
    try:
        problems = run(args.site)
    except pages.FrontMatterError as error:  # which pages offer a notebook is read from their front matter
        problems = [str(error)]
    for problem in problems:
        print(f"postbuild: {problem}", file=sys.stderr)
    print(f"postbuild: {args.site}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
