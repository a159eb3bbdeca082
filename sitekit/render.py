"""The site's Python-Markdown extension: what a page needs in order to render right, on any engine.

mkdocs.yml lists it under ``markdown_extensions`` (``sitekit.render``), so
MkDocs, ProperDocs and Zensical all run it on every page, and markdown-exec
on every block's output. It

- makes :mod:`sitekit.fences`'s formatters markdown-exec's formatters of
  ``python`` and ``pycon`` fences (``markdown_exec.formatters``, the registry
  its generic ``formatter`` dispatches on, which the engines configure as
  superfences' custom fences for the languages mkdocs.yml lists);
- before a page's fences run, finds which page of docs/ it is (by its text:
  no engine tells a Markdown extension), starts its sessions afresh
  (``sitekit.fences.Sessions.start_page``) and reports fences marked
  ``exec="on"`` in a language the site does not run (they would reach the
  page as raw Markdown);
- after the page is converted (once every block's output is in the HTML),
  turns TeX into MathML (``sitekit.mathml``), puts every code line in a span
  of its own and marks console output for the copy button
  (``sitekit.code_lines``), keeps code blocks and figures out of the search
  index (Material's ``data-search-exclude``), and reports an ``exec="…"``
  fence header that reached the HTML unrendered.

Errors are ``sitekit.fences.build_error``: a warning that names the page (and
line), and a marker that ``python -m sitekit.postbuild`` fails on.
"""

from __future__ import annotations

import os

# Before NumPy loads (the pages' code imports it): one OpenBLAS thread, since
# the pages' matrices are small and a thread per core only spins (chapter 14's
# code took 4.5 s instead of 3 s on a busy 2-core machine); no display for
# matplotlib. A value the caller sets wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import inspect  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import markdown_exec  # noqa: E402
import pymdownx.highlight  # noqa: E402
from markdown import Extension, Markdown  # noqa: E402
from markdown.postprocessors import Postprocessor  # noqa: E402
from markdown.preprocessors import Preprocessor  # noqa: E402

from sitekit import code_lines, fences, mathml, pages  # noqa: E402

_RAW_EXEC = re.compile(r"exec=(?:&quot;|\")(?:" + "|".join(pages.TRUTHY) + r")(?:&quot;|\")", re.IGNORECASE)
# Code blocks and inline SVG figures: out of Material's search index (every
# page loads the index; code, printed output and tick labels were most of it).
_UNSEARCHED = re.compile(r'<(pre|svg)\b(?![^>]*data-search-exclude)')


class _PageSources:
    """The pages of docs/ by their Markdown (front matter left out, as the engines pass it), read again when changed."""

    def __init__(self):
        self.stamps: dict[Path, int] = {}
        self.by_markdown: dict[str, tuple[str, str]] = {}

    def find(self, text: str) -> tuple[str, str] | None:
        """``(source, file text)`` of the page whose Markdown is ``text``, or None (a block's output)."""
        found = self.by_markdown.get(text.strip())
        if found is not None:
            path = pages.DOCS / found[0]
            if path.is_file() and self.stamps.get(path) == path.stat().st_mtime_ns:
                return found  # its front matter may have changed otherwise
        # Every page starts with its title; markdown-exec's outputs (most conversions) hardly ever do.
        elif self.stamps and not text.lstrip().startswith("#"):
            return None
        stamps = {path: path.stat().st_mtime_ns for path in pages.DOCS.rglob("*.md")}
        if stamps != self.stamps:
            by_markdown = {}
            for path in sorted(stamps):
                file_text = path.read_text(encoding="utf-8")
                source = path.relative_to(pages.DOCS).as_posix()
                # A front matter MkDocs cannot read stops the build here, naming the page
                # (sitekit.pages.FrontMatterError), and again at every build until it is fixed.
                by_markdown[pages.without_front_matter(file_text, path).strip()] = (source, file_text)
            self.stamps, self.by_markdown = stamps, by_markdown
        return self.by_markdown.get(text.strip())


_SOURCES = _PageSources()


class StartPage(Preprocessor):
    """Before anything else reads the page: which page it is, its sessions set up, fences that would not run."""

    def run(self, lines: list[str]) -> list[str]:
        found = _SOURCES.find("\n".join(lines))
        if found is None:
            return lines
        source, text = found
        page = fences.SESSIONS.start_page(source, text)
        self.md.sitekit_page = page
        try:
            pages.data_files(text, page=pages.DOCS / source)
        except (FileNotFoundError, pages.FrontMatterError) as error:
            # The marker goes into the page too: an engine that exits 0 on a warning fails the post-build step.
            lines = [*lines, "", fences.build_error(f"{page.where} front matter", str(error))]
        for fence in pages.unexecuted_fences(text):
            fences.build_error(
                f"{page.where} line {fence.line + 1}",
                f"{fence.source.split(chr(10), 1)[0].strip()} is marked exec=\"on\", but this site executes only "
                f"{', '.join(pages.EXECUTED_LANGUAGES)} fences: it would reach the page unrun",
            )
        return lines


class FinishPage(Postprocessor):
    """The converted HTML made final: MathML, code lines, search exclusions, unrendered fences reported.

    Python-Markdown runs the postprocessors on the whole page and on pieces of
    it (the table of contents, a heading's text): each step leaves what it did
    alone, so any piece may pass through it more than once.
    """

    def run(self, text: str) -> str:
        page = getattr(self.md, "sitekit_page", None)
        where = page.where if page else "a block's output"
        text = mathml.render_math(text, page.where_is if page else where)
        text = code_lines.wrap_code_lines(text)
        text = _UNSEARCHED.sub(r"<\1 data-search-exclude", text)
        if _RAW_EXEC.search(text):
            text += fences.build_error(where, 'a fence marked exec="on" reached the page unrendered')
        return text


def shown_python(language: str, inputs: dict, options: dict, attrs: dict, md: Markdown) -> bool:  # noqa: ARG001
    """superfences validator (mkdocs.yml's ``custom_fences``): a plain ``python`` fence, shown and not run.

    A fence with any option (``exec``, ``title``, ``hl_lines``, an attribute)
    is left to the other fences: markdown-exec's (which superfences tries
    first) and superfences' own highlighting; so is every fence if the
    highlight settings give a block something of its own (a title, line
    numbers or anchors).
    """
    settings = _highlight_settings(md)
    return not inputs and not any(settings.get(name) for name in _PER_BLOCK)


def highlighted_python(src: str, language: str, class_name: str, options: dict, md: Markdown, **kwargs) -> str:  # noqa: ARG001
    """superfences formatter: what superfences' own highlighting makes of a plain fence, kept by its text.

    The Snippets pages show every module whole (5,000 lines), and Pygments
    highlighted them again at every rebuild of ``mkdocs serve`` (0.3 s of a
    prose edit's 1.7 s), whatever was edited. A block is highlighted once per
    text, class and highlight settings (pymdownx.highlight's, read as
    superfences reads them).
    """
    settings = {name: value for name, value in _highlight_settings(md).items() if name in _HIGHLIGHTER}
    classes = list(kwargs.get("classes") or ())
    id_value = kwargs.get("id_value") or ""
    key = (src, language, class_name, tuple(classes), id_value, repr(sorted(settings.items())))
    html = _HIGHLIGHTED.pop(key, None)
    if html is None:
        highlighter = pymdownx.highlight.Highlight(None, **settings)
        html = highlighter.highlight(src, language, class_name, classes=classes, id_value=id_value, attrs={})
        if len(_HIGHLIGHTED) >= 2048:  # the block used longest ago goes (the site has about 220)
            _HIGHLIGHTED.pop(next(iter(_HIGHLIGHTED)))
    _HIGHLIGHTED[key] = html  # the newest last
    return html


_HIGHLIGHTED: dict[tuple, str] = {}


def _highlight_settings(md: Markdown) -> dict:
    for extension in md.registeredExtensions:
        if hasattr(extension, "get_pymdownx_highlight_settings"):
            return extension.get_pymdownx_highlight_settings()
    return {}


# Settings that number a block or stash its title in the page's Markdown: such a block is not kept.
_PER_BLOCK = ("linenums", "anchor_linenums", "line_spans", "line_anchors", "auto_title")
_HIGHLIGHTER = set(inspect.signature(pymdownx.highlight.Highlight).parameters) - {"md"}


class SiteExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        markdown_exec.formatters["python"] = fences.format_python
        markdown_exec.formatters["pycon"] = fences.format_console
        # Before pymdownx.snippets (32) and whitespace normalisation (30): the page as written.
        md.preprocessors.register(StartPage(md), "sitekit_start_page", 35)
        # After the raw HTML (markdown-exec's outputs among it) is back in the page (30).
        md.postprocessors.register(FinishPage(md), "sitekit_finish_page", 5)


def makeExtension(**kwargs) -> SiteExtension:  # noqa: N802 (Python-Markdown's name)
    return SiteExtension(**kwargs)
