"""The site's Python-Markdown extension: what a page needs in order to render right, on any engine.

mkdocs.yml lists it under ``markdown_extensions`` (``sitekit.render``), so
MkDocs, ProperDocs and Zensical all run it on every page, and markdown-exec
on every block's output. It

- before anything else reads a page (:class:`StartPage`), has the page
  runner (``sitekit.run``) run the page's executed fences, or replay them
  while ``mkdocs serve`` keeps them, and reports fences marked ``exec="on"``
  in a language the site does not run (they would reach the page as raw
  Markdown). Which page it is, the engine says: MkDocs and ProperDocs
  through hooks/site.py, which names the page's file in a first line of its
  Markdown (:func:`named`); Zensical runs no hook, so there the page is its
  Markdown, unnamed, and its errors name the lines of that Markdown;
- is markdown-exec's formatter of ``python`` and ``pycon`` fences
  (``markdown_exec.formatters``, the registry its generic ``formatter``
  dispatches on, which the engines configure as superfences' custom fences
  for the languages mkdocs.yml lists). markdown-exec hands the formatters a
  page's executed fences in page order, and the n-th one places the page's
  n-th block: its output, laid out by markdown-exec's ``base_format`` as the
  fence's options say (``source=``, ``result=``, ``html=``), or its failure.
  A fence that is not the block the page model found there is a build error;
- after the page is converted (once every block's output is in the HTML),
  turns TeX into MathML (``sitekit.mathml``), puts every code line in a span
  of its own and marks console output for the copy button
  (``sitekit.code_lines``), keeps code blocks and figures out of the search
  index (Material's ``data-search-exclude``), and reports an ``exec="…"``
  fence header that reached the HTML unrendered.

Errors are ``sitekit.report.build_error``: a warning that names the page (and
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
import weakref  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from importlib import metadata  # noqa: E402
from pathlib import Path  # noqa: E402

import markdown_exec  # noqa: E402
import pymdownx.highlight  # noqa: E402
from markdown import Extension, Markdown  # noqa: E402
from markdown.postprocessors import Postprocessor  # noqa: E402
from markdown.preprocessors import Preprocessor  # noqa: E402
from markdown_exec import ExecutionError, base_format, code_block  # noqa: E402
from markupsafe import Markup  # noqa: E402

from sitekit import code_lines, mathml, pages, run  # noqa: E402
from sitekit.report import build_error, log  # noqa: E402

# The markdown-exec this module was written against: base_format's options,
# and the print semantics sitekit.run.run_python reproduces (requirements.txt pins it).
WRITTEN_FOR = "1.12.6"

_RAW_EXEC = re.compile(r"exec=(?:&quot;|\")(?:" + "|".join(pages.TRUTHY) + r")(?:&quot;|\")", re.IGNORECASE)
# Code blocks and inline SVG figures: out of Material's search index (every
# page loads the index; code, printed output and tick labels were most of it).
_UNSEARCHED = re.compile(r'<(pre|svg)\b(?![^>]*data-search-exclude)')
_NAMED = re.compile(r"^<!-- sitekit page: (?P<path>.+) -->$")


def version_problem() -> str | None:
    """Why the installed markdown-exec may not be the one this module was written for, or None."""
    installed = metadata.version("markdown-exec")
    if installed == WRITTEN_FOR:
        return None
    return (f"markdown-exec {installed} is installed, but sitekit/render.py was written for {WRITTEN_FOR} "
            "(the version requirements.txt pins): install the pinned requirements, or check run_python "
            "against the new version's runner and update WRITTEN_FOR")


def named(markdown: str, path: str) -> str:
    """The page's Markdown with a first line that names its file, for :class:`StartPage` (hooks/site.py)."""
    return f"<!-- sitekit page: {path} -->\n{markdown}"


@dataclass
class _Converting:
    """A page being converted: its blocks, and how many markdown-exec has placed."""

    page: run.Page
    placed: int = 0


_CONVERTING: weakref.WeakKeyDictionary[Markdown, _Converting] = weakref.WeakKeyDictionary()


class StartPage(Preprocessor):
    """Before anything else reads the page: its blocks run (or replayed), fences that would not run reported."""

    checked_version = False

    def run(self, lines: list[str]) -> list[str]:
        found = _NAMED.match(lines[0]) if lines else None
        if found is None and "exec=" not in "\n".join(lines):
            return lines  # an unnamed page or a block's output, with nothing to run
        if not StartPage.checked_version:
            StartPage.checked_version = True
            if problem := version_problem():
                log.warning(problem)
        path = Path(found["path"]) if found else None
        lines = lines[1:] if found else lines
        text = path.read_text(encoding="utf-8") if path else "\n".join(lines)
        page = run.RUNNER.page(path, text)
        _CONVERTING[self.md] = _Converting(page)
        if path is not None:
            try:
                pages.data_files(text, page=path)
            except (FileNotFoundError, pages.FrontMatterError) as error:
                # The marker goes into the page too: an engine that exits 0 on a warning fails the post-build step.
                lines = [*lines, "", build_error(f"{page.where} front matter", str(error))]
        for fence in pages.unexecuted_fences(text):
            build_error(
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
        converting = _CONVERTING.get(self.md)
        where = converting.page.where if converting else "the page"
        if converting is not None and converting.placed < len(converting.page.blocks):
            # Every fence markdown-exec formats is formatted by now: this one never will be.
            unplaced = converting.page.blocks[converting.placed].fence
            converting.placed = len(converting.page.blocks)
            build_error(f"{where} line {unplaced.line + 1}", "the page model finds an executed fence here that "
                        "markdown-exec was never handed: its output would not show")
        text = mathml.render_math(text, (lambda tex: _where_is(converting.page, tex)) if converting else where)
        text = code_lines.wrap_code_lines(text)
        text = _UNSEARCHED.sub(r"<\1 data-search-exclude", text)
        if _RAW_EXEC.search(text):
            text += build_error(where, 'a fence marked exec="on" reached the page unrendered')
        return text


def _where_is(page: run.Page, written: str) -> str:
    """The page and the line where ``written`` first stands in it (the page alone if it is not there)."""
    found = page.text.find(written)
    return page.where if found < 0 else f"{page.where} line {page.text.count(chr(10), 0, found) + 1}"


# ------------------------------------------------------------------ formatters


def format_python(code: str, md, **options) -> str:
    """markdown-exec's formatter for ``python`` fences: the block's output, as the fence's options lay it out."""
    return _format("python", code, md, options)


def format_console(code: str, md, **options) -> str:
    """markdown-exec's formatter for ``pycon`` fences: the session as a REPL shows it (what really ran)."""
    options.update(source="", result="pycon", html=False)
    return _format("pycon", code, md, options)


# A line of Markdown or HTML that may be a heading: ATX (# ...), a setext underline, or <h1>...<h6>.
_MAYBE_HEADING = re.compile(r"<h[1-6]\b|^ {0,3}#{1,6}(?:[ \t]|$)|^ {0,3}(?:=+|-+)[ \t]*$", re.MULTILINE)
_HEADING = re.compile(r"<h[1-6]\b")


def _format(language: str, code: str, md, options: dict) -> str:
    """The block's HTML: kept from the last build while its page's code is unchanged, else laid out by markdown-exec."""
    block = _next_block(md, language, code)
    if block.html is not None:
        return Markup(block.html)  # noqa: S704 (markdown-exec's own HTML, from the last build)
    failure = block.failure
    if failure is None:
        output = block.output

        def run_block(*_, **__) -> str:
            return output
    else:
        shown = code_block(failure.language, failure.shown, **(options.get("extra", {}) if failure.language == "python" else {}))
        error = ExecutionError(shown + (f"\n\n{failure.marker}" if failure.marker else ""))

        def run_block(*_, **__) -> str:
            raise error
    options["update_toc"] = update_toc(block, options)
    html = base_format(language=language, run=run_block, code=code, md=md, **options)
    if failure is None and not _HEADING.search(html):
        block.html = str(html)
    return html


def update_toc(block: run.Block, options: dict) -> bool:
    """Whether markdown-exec should report the headings of this block's output to the page's table of contents.

    It remembers, for the life of the process, every page it did it for (an
    unbounded cache keyed by the page's Markdown instance, holding all of that
    page's HTML): under ``mkdocs serve`` each rebuild that ran a page's code
    again kept about 2 MB. Its public option ``update_toc=False`` skips that
    for every output that cannot hold a heading: one in a code block
    (``result=``), a failure's, and one with no line that may be a heading.
    """
    return not options.get("result") and block.failure is None and bool(_MAYBE_HEADING.search(block.output))


def _next_block(md, language: str, code: str) -> run.Block:
    """The page's next block, the one markdown-exec formats now; a failure if it is not this fence's."""
    converting = _CONVERTING.get(md)
    blocks = converting.page.blocks if converting else []
    placed = converting.placed if converting else 0
    if placed < len(blocks) and (blocks[placed].fence.language, blocks[placed].code) == (language, code):
        converting.placed += 1
        return blocks[placed]
    if converting is not None:
        converting.placed = len(blocks)  # the fences after it cannot be placed either
    expected = (f"the {blocks[placed].fence.language} fence of line {blocks[placed].fence.line + 1}"
                if placed < len(blocks) else "no executed fence")
    where = converting.page.where if converting else "the page"
    problem = (f"markdown-exec was handed a {language} fence where the page model (sitekit.pages) finds {expected}: "
               "a fence the page model reads another way than the engine's extensions")
    fence = pages.Fence(language, code, -1, "")
    return run.Block(fence, code, failure=run.Failure(problem, marker=build_error(where, problem)))


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
        markdown_exec.formatters["python"] = format_python
        markdown_exec.formatters["pycon"] = format_console
        # Before pymdownx.snippets (32) and whitespace normalisation (30): the page as written.
        md.preprocessors.register(StartPage(md), "sitekit_start_page", 35)
        # After the raw HTML (markdown-exec's outputs among it) is back in the page (30).
        md.postprocessors.register(FinishPage(md), "sitekit_finish_page", 5)


def makeExtension(**kwargs) -> SiteExtension:  # noqa: N802 (Python-Markdown's name)
    return SiteExtension(**kwargs)
