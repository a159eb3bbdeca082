"""Build set-up shared by every page.

- Put the repository root on ``sys.path``, so pages can ``import snippets``,
  and run NumPy's OpenBLAS on one thread (the pages' matrices are small).
- Check that the installed markdown-exec is the version whose private parts
  ``sitekit/markdown_exec_internals.py`` uses (a warning: the strict build
  fails on another).
- Pin the build date to the last commit, so two builds of one commit are
  byte-identical (mkdocs stamps the sitemap with it).
- A warning raised by a page's code is an error: the block fails and the
  strict build with it (pytest does the same with ``filterwarnings = error``).
- Give every page NumPy's default print options: all pages run in one
  process, and ``np.set_printoptions`` on one page would change what the
  pages after it print (conftest.py does the same for pytest).
- Start every build with empty markdown-exec sessions: ``mkdocs serve`` keeps
  the interpreter alive, and variables from a previous build would otherwise
  leak into the next one and hide a missing definition.
- Let links to ids that executed blocks print (the glossary's term anchors)
  validate: mkdocs collects anchors before markdown-exec's output is in the
  page, so the ids of the finished HTML are added to the page's anchors.
- Give the ids inside each inline SVG figure a prefix of its own: matplotlib
  numbers them the same way in every figure (``figure_1``, clip paths), and a
  page with two figures would repeat ids (invalid HTML, and a clip path of one
  figure could resolve into another).
- Drop ``autocomplete`` from Material's hidden checkbox toggles, where HTML
  does not allow it.
- Reuse markdown-exec's inner Markdown converters: for each block's output it
  builds a new one with every extension of the page, about 5 ms
  each, 256 times a build. One per page is kept and reset between outputs
  (``Markdown.reset``, what it is for); a conversion inside a conversion gets
  a fresh one. The built site is byte-identical either way.
- Keep code blocks and the insides of SVG figures out of the search index:
  every page loads the index, and code (with its printed output) and tick
  labels were most of it; prose, headings, tables and figure captions stay
  searchable. Both are set aside while the search plugin and the theme work
  on the page (most of a chapter's HTML, which they would only parse) and
  put back into the finished page.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import subprocess
import sys
import warnings

import _repository
from markdown_exec import HeadingReportingTreeprocessor
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from sitekit import block_outputs, markdown_exec_internals

ROOT = _repository.ROOT
log = logging.getLogger("mkdocs.hooks.build")


def _last_commit_time() -> str | None:
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%ct"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out or None


def warnings_are_errors(run):
    """``run`` with every Python warning raised as an exception."""

    @functools.wraps(run)
    def run_strictly(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return run(*args, **kwargs)

    return run_strictly


@event_priority(100)  # first: the other hooks' code runs in the set-up this makes
def on_startup(*, command: str, dirty: bool) -> None:  # noqa: ARG001
    problem = markdown_exec_internals.version_problem()
    if problem:
        log.warning(problem)
    markdown_exec_internals.wrap_block_execution(warnings_are_errors)
    markdown_exec_internals.wrap_python_runner(block_outputs.runner)  # kept and replayed by serve.py
    markdown_exec_internals.wrap_converter_factory(reusing_converters)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("MPLBACKEND", "Agg")
    # One OpenBLAS thread: the pages' matrices are small, and a thread per core
    # only spins (chapter 14's code took 4.5 s instead of 3 s on a busy 2-core
    # machine); the other core runs the build's helper (hooks/parallel_build.py).
    # Set before NumPy loads OpenBLAS: neither MkDocs nor a plugin has imported it.
    if "numpy" in sys.modules:
        log.info("NumPy was imported before the build started: OpenBLAS keeps its own thread count")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "SOURCE_DATE_EPOCH" not in os.environ:
        stamp = _last_commit_time()
        if stamp:
            os.environ["SOURCE_DATE_EPOCH"] = stamp


def reusing_converters(mimic):
    """markdown-exec's factory of inner converters, reusing an idle one made for the same page's Markdown."""
    idle: dict[int, tuple[object, list]] = {}  # id(page's Markdown) -> (it, idle converters)

    @functools.wraps(mimic)
    def make_or_reuse(md, headings, *, update_toc=True):
        key = id(md), update_toc
        page, converters = idle.get(key, (None, []))
        if page is not md:  # a new page (or an id reused by a later page's Markdown)
            converters = []
            idle.clear()
            idle[key] = md, converters
        if converters:
            new_md = converters.pop()
            new_md.reset()
            if update_toc:  # report the headings of this output, to this converter
                new_md.treeprocessors.register(
                    HeadingReportingTreeprocessor(new_md, headings), HeadingReportingTreeprocessor.name, priority=1
                )
        else:
            new_md = mimic(md, headings, update_toc=update_toc)
            convert = new_md.convert

            def convert_and_return(text):
                try:
                    return convert(text)
                finally:  # idle again: the next output of this page may take it
                    current = idle.get(key)
                    if current is not None and current[0] is md:
                        current[1].append(new_md)

            new_md.convert = convert_and_return
        return new_md

    return make_or_reuse


def on_pre_build(*, config: MkDocsConfig) -> None:  # noqa: ARG001
    markdown_exec_internals.clear_sessions()


_ID = re.compile(r'\bid="([^"]+)"')
_SVG = re.compile(r"<svg\b.*?</svg>", re.DOTALL)
_SVG_ID = re.compile(r'(?<![\w-])id="([^"]+)"')
_SVG_REFERENCE = re.compile(r'url\(#([^)]+)\)|((?<![\w-])(?:xlink:)?href)="#([^"]+)"')


def unique_svg_ids(html: str) -> str:
    """Prefix the ids of the n-th inline SVG of a page with ``svg<n>-``, and its references to them."""
    numbers = iter(range(1, 10**6))

    def rename(match: re.Match) -> str:
        svg = match.group(0)
        ids = set(_SVG_ID.findall(svg))
        if not ids:
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

    return _SVG.sub(rename, html)


_NUMPY_PRINT_OPTIONS = None


def reset_numpy_print_options() -> None:
    """NumPy's print options as they were when the first page started."""
    global _NUMPY_PRINT_OPTIONS
    import numpy

    if _NUMPY_PRINT_OPTIONS is None:
        _NUMPY_PRINT_OPTIONS = numpy.get_printoptions()
    numpy.set_printoptions(**_NUMPY_PRINT_OPTIONS)


def on_page_markdown(markdown: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:  # noqa: ARG001
    reset_numpy_print_options()
    return markdown


@event_priority(-100)  # last: the ids, the anchors and what the search index skips are the final HTML's
def on_page_content(html: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:  # noqa: ARG001
    html = unique_svg_ids(html)
    if page.present_anchor_ids is not None:
        page.present_anchor_ids.update(_ID.findall(html))
    kept = _set_aside.setdefault(page.file.src_uri, [])
    kept.clear()

    def set_aside(match: re.Match) -> str:
        kept.append(match.group(0))
        return f"<!--set aside {len(kept) - 1}-->"

    return _UNSEARCHED.sub(set_aside, html)


# Code blocks and inline SVG figures: out of the search index.
_UNSEARCHED = re.compile(r"<pre\b.*?</pre>|<svg\b.*?</svg>", re.DOTALL)
# page -> what was set aside, while the search plugin and the theme run (see on_post_page)
_set_aside: dict[str, list[str]] = {}
_PLACEHOLDER = re.compile(r"<!--set aside (\d+)-->")
_TOGGLE = re.compile(r'(<input class="md-toggle"[^>]*?) autocomplete="off"')


@event_priority(-100)  # last: puts back what on_page_content set aside, into the finished page
def on_post_page(output: str, /, *, page: Page, config: MkDocsConfig) -> str:  # noqa: ARG001
    kept = _set_aside.pop(page.file.src_uri, [])
    output = _PLACEHOLDER.sub(lambda match: kept[int(match.group(1))], output)
    return _TOGGLE.sub(r"\1", output)


def on_post_template(output_content: str, /, *, template_name: str, config: MkDocsConfig) -> str:  # noqa: ARG001
    # Static templates (404.html) do not pass through on_post_page.
    return _TOGGLE.sub(r"\1", output_content)
