"""The executed fences: markdown-exec formatters for ``python`` and ``pycon`` fences.

Every engine that builds the site (MkDocs, ProperDocs, Zensical) hands a
fence marked ``exec="on"`` to ``markdown_exec.formatter``, which calls the
formatter registered for its language in ``markdown_exec.formatters`` (its
public registry; ``sitekit.render`` registers the two below). Each formatter
runs its code here and gives markdown-exec's ``base_format`` the output,
which lays it out as the fence's options say (``source=``, ``result=``,
``html=``):

- a ``python`` fence runs in its page's session namespace, as markdown-exec's
  own runner would: only ``print`` reaches the page. A warning is an error
  (pytest runs the pages the same way), and a traceback names the page and
  its line (the code is compiled under the page's path, at its lines);
- a ``pycon`` fence is a console session (``sitekit.console``): run as a REPL
  in the same namespace and compared, statement by statement, with the
  output written under it. The page shows what really ran.

A block that raises, a console session whose written output differs, and a
fence marked ``exec="on"`` in a language the site does not run are build
errors (:func:`build_error`): a warning that names the page and the line
(``mkdocs build --strict`` fails on it) and a marker in the page's HTML, which
the post-build step (``python -m sitekit.postbuild``) reports after any engine.

Each page starts with empty sessions and NumPy's default print options
(``sitekit.render`` calls ``SESSIONS.start_page``), and with fresh modules of this
repository when one changed on disk since it was imported, so ``mkdocs serve``
never runs stale code or sees an earlier build's variables.

While ``mkdocs serve`` builds again and again (``Sessions.serving``), what each page's
blocks printed, and the HTML markdown-exec made of it, is kept with the
page's code key (``sitekit.pages.code_key``: its executed fences and
everything they depend on, down to the statements of the modules they can
reach, not its prose). A page whose code key has not
changed shows the kept HTML instead of running its code and laying out its
output again: a prose edit to chapter 14, whose code takes 3 s, shows as
fast as one to a page without code (under 2 s, the rest of a rebuild). A block that is not
the one kept (the key should make that impossible) is run, after the page's
earlier blocks are run again in a fresh session, so that it never runs
without the names they define.
"""

from __future__ import annotations

import functools
import html
import linecache
import logging
import re
import sys
import traceback
import types
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from io import StringIO
from pathlib import Path

from markdown_exec import ExecutionError, base_format, code_block
from markupsafe import Markup

from sitekit import pages
from sitekit.console import run_console

log = logging.getLogger("mkdocs.sitekit")

# The markdown-exec this module was written against: base_format's options,
# and the print semantics run_python reproduces (requirements.txt pins it).
WRITTEN_FOR = "1.12.6"
# In a page's HTML wherever the build found an error: the post-build step fails on it.
ERROR_MARKER = "sitekit build error:"


def build_error(where: str, message: str) -> str:
    """Log a build error (``--strict`` fails on it); return the HTML comment that marks it in the page."""
    log.warning("%s: %s", where, message)
    return f"<!-- {ERROR_MARKER} {html.escape(where)}: {html.escape(message).replace('--', '- -')} -->"


def version_problem() -> str | None:
    """Why the installed markdown-exec may not be the one this module was written for, or None."""
    installed = metadata.version("markdown-exec")
    if installed == WRITTEN_FOR:
        return None
    return (f"markdown-exec {installed} is installed, but sitekit/fences.py was written for {WRITTEN_FOR} "
            "(the version requirements.txt pins): install the pinned requirements, or check run_python "
            "against the new version's runner and update WRITTEN_FOR")


@dataclass
class Block:
    """One executed block: what ran, what it printed, and the HTML markdown-exec made of it."""

    language: str
    code: str
    output: str
    html: str | None = None  # None: not laid out yet, or its HTML holds a heading (reported to the TOC)


@dataclass
class Page:
    """One page being rendered: where its executed fences stand, and what they printed."""

    source: str  # relative to docs/
    where: str  # the page's path for messages: docs/<source>
    text: str  # the page's file
    fences: list  # its executed fences (sitekit.pages.Fence), in page order
    code_key: str
    kept: list[Block] | None  # a replay: every block of the last build
    printed: list[Block] = field(default_factory=list)  # this build's, in order
    cursor: int = 0

    def next_kept(self, language: str, code: str) -> Block | None:
        """In a replay, the kept block this one is (not yet taken: see :meth:`take`), else None."""
        done = len(self.printed)
        if self.kept is None or done >= len(self.kept):
            return None
        kept = self.kept[done]
        return kept if (kept.language, kept.code) == (language, code) else None

    def take(self, kept: Block) -> Block:
        """The kept block, as this build printed it."""
        self.printed.append(kept)
        return kept

    def where_is(self, written: str) -> str:
        """The page and the line where ``written`` first stands in it (the page alone if it is not there)."""
        found = self.text.find(written)
        return self.where if found < 0 else f"{self.where} line {self.text.count(chr(10), 0, found) + 1}"

    def locate(self, code: str) -> int:
        """The 0-based line of the page where the fence that runs ``code`` opens (the next one that matches)."""
        wanted = code.strip("\n")
        for index in range(self.cursor, len(self.fences)):
            fence = self.fences[index]
            if fence.expanded().strip("\n") == wanted:
                self.cursor = index + 1
                return fence.line
        return self.fences[self.cursor].line if self.cursor < len(self.fences) else 0


class Sessions:
    """The namespaces of the pages' sessions, and each page's outputs between builds."""

    def __init__(self):
        self.namespaces: dict[str, dict] = {}
        self.kept: dict[str, tuple[str, list[Block]]] = {}  # page -> (code key, blocks)
        self.module_stamps: dict[str, int] = {}  # this repository's modules the pages import -> mtime
        self.numpy_options: dict | None = None
        self.checked_version = False
        # Keep each page's blocks for the next build of this process: ``mkdocs serve`` says so
        # (hooks/site.py). A single build does not pay for the keys (what every page depends on).
        self.serving = False

    # ------------------------------------------------------------- a page

    def start_page(self, source: str, text: str) -> Page:
        """Set up the page ``source`` (relative to docs/), whose file holds ``text``, before its fences run."""
        if not self.checked_version:
            self.checked_version = True
            problem = version_problem()
            if problem:
                log.warning(problem)
        self._fresh_modules()
        fences = pages.executed_fences(text)
        for session in {fence.session for fence in fences if fence.session}:
            self.namespaces[session] = {}
        self._default_numpy_options()
        try:
            key = pages.code_key(pages.DOCS / source) if self.serving else ""
        except (FileNotFoundError, pages.FrontMatterError):  # reported by sitekit.render as the page's error
            key = ""
        kept_key, blocks = self.kept.get(source, (None, None))
        page = Page(source, f"docs/{source}", text, fences, key, blocks if self.serving and key and kept_key == key else None)
        if self.serving and key:  # what its blocks print, kept for the next build (dropped if one fails)
            self.kept[source] = (key, page.printed)
        return page

    def _default_numpy_options(self) -> None:
        # Pages run one after the other in one process: np.set_printoptions on one
        # page must not change what the next one prints (conftest.py does the same).
        import numpy

        if self.numpy_options is None:
            self.numpy_options = numpy.get_printoptions()
        numpy.set_printoptions(**self.numpy_options)

    def _fresh_modules(self) -> None:
        """Forget this repository's modules the pages import if one changed since it was imported."""
        loaded = {name: module for name, module in sys.modules.items() if _imported_by_pages(name)}
        stamps = {}
        for name, module in loaded.items():
            file = getattr(module, "__file__", None)
            stamps[name] = Path(file).stat().st_mtime_ns if file and Path(file).is_file() else 0
        if any(self.module_stamps.get(name, stamp) != stamp for name, stamp in stamps.items()):
            for name in loaded:
                del sys.modules[name]
            stamps = {}
        self.module_stamps = stamps

    # ------------------------------------------------------------- a block

    def run(self, page: Page | None, language: str, code: str, session: str | None, **extra) -> str:
        """markdown-exec's ``run``: the output of one block, run or replayed."""
        line = page.locate(code) if page else 0
        if page is not None and page.kept is not None:
            kept = page.next_kept(language, code)
            if kept is not None:
                return page.take(kept).output
            # Not the block kept: run the blocks before it, then go on running.
            page.kept = None
            self.namespaces[session or ""] = {}
            for earlier in page.printed:
                self._execute(page, earlier.language, earlier.code, session, 0, extra, quiet=True)
        try:
            output = self._execute(page, language, code, session, line, extra)
        except ExecutionError:
            if page is not None:
                self.kept.pop(page.source, None)
            raise
        if page is not None:
            page.printed.append(Block(language, code, output))
        return output

    def _execute(self, page, language, code, session, line, extra, *, quiet=False) -> str:
        where = page.where if page else "a page"
        before = pages.source_snapshot()
        namespace = self.namespaces.setdefault(session or "", {})
        output = _run_block(namespace, where, language, code, session, line, extra, quiet)
        problem = pages.source_writes(before, pages.source_snapshot())
        if problem is not None:
            raise ExecutionError(code_block("text", problem) + "\n\n" + build_error(f"{where} line {line + 1}", problem))
        return output


def _run_block(namespace, where, language, code, session, line, extra, quiet) -> str:
    """One block run in ``namespace``: a console session compared with its written output, or python."""
    if language == "pycon":
        transcript, mismatches = run_console(code, namespace, name=session or "console", lineno=line + 1)
        if mismatches and not quiet:
            report = "\n\n".join(f"{where} {mismatch}" for mismatch in mismatches)
            marker = build_error(f"{where} line {line + 1}", "a console session's written output differs")
            raise ExecutionError(
                code_block("text", f"the page's written output differs from the real one:\n\n{report}") + "\n\n"
                + marker
            )
        return transcript
    return run_python(code, namespace, where, line, extra)


_PAGE_MODULE = re.compile("|".join(rf"{re.escape(module)}(?:\.|$)" for module in pages.PAGE_IMPORTS))


def _imported_by_pages(name: str) -> bool:
    return _PAGE_MODULE.match(name) is not None


def _print_into(buffer: StringIO, *texts, end: str = "\n", **_) -> None:
    """markdown-exec's print for a block: the texts, space-separated, into the block's output."""
    buffer.write(" ".join(str(text) for text in texts) + end)


def run_python(code: str, namespace: dict, where: str, line: int, extra: dict) -> str:
    """Run a ``python`` fence's code in ``namespace``; return what it printed.

    The code is compiled under the page's path with its first line at the
    page's line, so a traceback points into the page (``linecache`` is given
    the code, for the pages' included lines). A warning is an error.
    """
    module = f"_page_{where.replace('/', '_').replace('.', '_').replace('-', '_')}"
    namespace["__name__"] = module  # functions defined here get a __module__, and dataclasses a module
    sys.modules[module] = types.ModuleType(module)
    buffer = StringIO()
    namespace["print"] = functools.partial(_print_into, buffer)
    lines = ["\n"] * (line + 1) + [text + "\n" for text in code.split("\n")]
    filename = f"{where} (as run)"
    linecache.cache[filename] = (len("".join(lines)), None, lines, filename)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exec(compile("".join(lines), filename, "exec"), namespace)  # noqa: S102 (running the page is the point)
    except Exception as error:  # noqa: BLE001 (any error of the page's code is reported)
        frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == filename]
        at = frames[-1].lineno if frames else line + 1
        # From the page's frame on: the one above it is this function's exec.
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__.tb_next))
        marker = build_error(f"{where} line {at}", f"the block raised {type(error).__name__}: {error}")
        raise ExecutionError(code_block("python", trace, **extra) + "\n\n" + marker) from error
    output = buffer.getvalue()
    problem = pages.printed_nan(output)
    if problem is not None:
        raise ExecutionError(code_block("text", problem) + "\n\n" + build_error(f"{where} line {line + 1}", problem))
    return output


SESSIONS = Sessions()


def _page_of(md) -> Page | None:
    return getattr(md, "sitekit_page", None)


_HEADING = re.compile(r"<h[1-6]\b")


def _format(language: str, code: str, md, options: dict) -> str:
    """A block's HTML: kept from the last build while its page's code is unchanged, else laid out by markdown-exec."""
    page = _page_of(md)
    kept = page.next_kept(language, code) if page is not None else None
    if kept is not None and kept.html is not None:
        page.locate(code)
        return Markup(page.take(kept).html)  # noqa: S704 (markdown-exec's own HTML, from the last build)
    run = functools.partial(_run, page, language)
    if options.get("result"):
        # The output sits in a code block: it holds no heading to report to the table of contents.
        options["update_toc"] = False
    else:
        run, options["update_toc"] = _run_first(run, code, options)
    html = base_format(language=language, run=run, code=code, md=md, **options)
    if page is not None and page.printed and page.printed[-1].code == code and not _HEADING.search(html):
        page.printed[-1].html = str(html)
    return html


# A line of Markdown or HTML that may be a heading: ATX (# ...), a setext underline, or <h1>...<h6>.
_MAYBE_HEADING = re.compile(r"<h[1-6]\b|^ {0,3}#{1,6}(?:[ \t]|$)|^ {0,3}(?:=+|-+)[ \t]*$", re.MULTILINE)


def _run_first(run, code: str, options: dict):
    """Run a block before markdown-exec lays it out, to tell it whether its output may hold a heading.

    markdown-exec reports the headings a block prints to the page's table of
    contents, and to do so it remembers, for the life of the process, every
    page it did it for (an unbounded cache keyed by the page's Markdown
    instance, holding all of that page's HTML): under ``mkdocs serve`` each
    rebuild that ran a page's code again kept about 2 MB. Its public option
    ``update_toc=False`` skips that for every output without a heading.
    Returns the ``run`` markdown-exec is given (it hands back this run's output,
    or raises its error, as the block's run would) and the ``update_toc`` to use.
    """
    try:
        output = run(code, returncode=options.get("returncode", 0), session=options.get("session"),
                     id=options.get("id", ""), **options.get("extra", {}))
    except ExecutionError as error:
        failure = error

        def fail(*_, **__):
            raise failure

        return fail, False
    return (lambda *_, **__: output), bool(_MAYBE_HEADING.search(output))


def format_python(code: str, md, **options) -> str:
    """markdown-exec's formatter for ``python`` fences: run in the page's session."""
    return _format("python", code, md, options)


def format_console(code: str, md, **options) -> str:
    """markdown-exec's formatter for ``pycon`` fences: the session as a REPL shows it (what really ran)."""
    options.update(source="", result="pycon", html=False)
    return _format("pycon", code, md, options)


def _run(page: Page | None, language: str, code: str, *, session: str | None = None, returncode: int = 0,
         id: str = "", **extra) -> str:  # noqa: A002, ARG001 (markdown-exec's names)
    if language == "pycon" and not session:
        where = page.where if page else "a page"
        raise ExecutionError(code_block("text", 'a console fence needs session="<page name>"') + "\n\n"
                             + build_error(where, 'a console fence has no session="<page name>"'))
    return SESSIONS.run(page, language, code, session, **extra)
