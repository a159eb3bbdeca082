"""Let pytest run the pages: every executed fence of every page is a test.

The pages are written for markdown-exec (```` ```python exec="on"
session="page" ````), which runs the fences at build time. pytest-markdown-docs
runs fences under pytest, but knows neither markdown-exec's options nor its
sessions, nor pymdownx's includes and admonitions. Writing its own options
(``continuation``, ``notest``) into the pages would break their rendering, so
this file translates instead, through the plugin's documented hooks:

- an executed fence becomes a test; every other fence is marked ``notest``;
- a fence of a session already seen on the page gets ``continuation``, so it
  runs after the earlier fences of its session, as at build time;
- those fences run through ``SessionRunner``, which keeps the session's
  namespace between the fences of a page, so each fence's code runs once
  (``continuation`` alone re-runs every earlier fence: quadratic in the number
  of fences). A fence run on its own, or after a failure, still replays the
  fences before it;
- ``--8<-- "file"`` and ``--8<-- "file:section"`` lines are replaced by the
  file, as pymdownx.snippets does at build time;
- ``pycon`` fences are console sessions: they run as doctests in the page's
  namespace (``hooks/console.py``, the same code the build runs), so a written
  output that differs from the real one fails the test with doctest's diff;
- a fence marked ``exec="on"`` in a language the site does not run fails
  collection (at build time it would reach the page as raw Markdown);
- fences inside admonitions (``!!!``, ``???``) and tabs (``===``) are found:
  their bodies are dedented, line numbers unchanged.
"""

from __future__ import annotations

import dataclasses
import io
import re
from pathlib import Path

import numpy
from markdown_it import MarkdownIt

# Custom runners are the plugin's own extension point (pytest_markdown_docs.
# _runners); requirements.txt pins the version, and tests/test_failures.py
# checks that a failing fence still fails.
from pytest_markdown_docs._runners import DefaultRunner, register_runner

from hooks.console import EXECUTED_LANGUAGES, TRUTHY, ConsoleMismatch, count_examples, run_console

ROOT = Path(__file__).resolve().parent
NUMPY_PRINT_OPTIONS = numpy.get_printoptions()

_OPTION = re.compile(r'([\w-]+)="([^"]*)"')
_CONTAINER = re.compile(r"^(?P<indent> *)(?:!!!|\?\?\?\+?|===)\s")
_INCLUDE = re.compile(r'^(?P<indent>\s*)-+8<-+\s+"(?P<target>[^"]+)"\s*$')
_SECTION_MARKER = re.compile(r"^\s*#?\s*-+8<-+\s+\[(?:start|end):[\w-]+\]\s*$")


def parse_info(info: str) -> tuple[str, dict[str, str]]:
    """Split a fence's info string into its language and markdown-exec options."""
    words = info.split(maxsplit=1)
    language = words[0] if words else ""
    options = dict(_OPTION.findall(words[1])) if len(words) > 1 else {}
    return language, options


def dedent_containers(markdown: str) -> str:
    """Dedent the bodies of admonitions and tabs so CommonMark sees their fences."""
    lines_out = []
    body_indents: list[int] = []
    for line in markdown.split("\n"):
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if stripped:
            while body_indents and indent < body_indents[-1]:
                body_indents.pop()
        container = _CONTAINER.match(line)
        if container:
            body_indents.append(len(container.group("indent")) + 4)
            lines_out.append("")  # keep the line count, so reported line numbers stay true
            continue
        cut = min(indent, body_indents[-1]) if body_indents else 0
        lines_out.append(line[cut:])
    return "\n".join(lines_out)


def read_include(target: str) -> str:
    """Return what ``--8<-- "target"`` includes: a whole file or one section of it."""
    path, _, section = target.partition(":")
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    if section:
        start, end = f"[start:{section}]", f"[end:{section}]"
        starts = [i for i, line in enumerate(lines) if start in line]
        ends = [i for i, line in enumerate(lines) if end in line]
        if not starts or not ends:
            raise ValueError(f"no section {section!r} in {path}")
        lines = lines[starts[0] + 1 : ends[0]]
    return "\n".join(line for line in lines if not _SECTION_MARKER.match(line))


def expand_includes(code: str) -> str:
    def expand(line: str) -> str:
        include = _INCLUDE.match(line)
        return read_include(include.group("target")) if include else line

    return "\n".join(expand(line) for line in code.split("\n"))


def console_to_python(code: str, first_line: int) -> str:
    """Python that runs a console session as a doctest, on as many lines as the fence.

    The page's namespace is the fence's ``globals()``; line numbers stay those
    of the page, so a failure points at the fence.
    """
    call = f"__console__({code!r}, globals(), {first_line})"
    return call + "\n" * code.count("\n")


# Doctest examples run this session: on the pages' console sessions (counted
# here) and in the docstrings of snippets/ (counted from pytest's items).
DOCTEST_EXAMPLES = {"pages": 0, "docstrings": 0}


def run_console_fence(code: str, namespace: dict, first_line: int) -> None:
    DOCTEST_EXAMPLES["pages"] += count_examples(code)
    _, mismatches = run_console(code, namespace, name="page", lineno=first_line)
    if mismatches:
        raise ConsoleMismatch("the written output differs from the real one:\n\n" + "\n\n".join(mismatches))


@register_runner()
class SessionRunner(DefaultRunner):
    """Run a page's fences in one namespace, each fence's code once.

    With ``continuation`` a fence's test source is every earlier fence of the
    page plus its own. When the earlier part is exactly what ran last on this
    page, only the new part runs, in the namespace left by the earlier fences
    (line numbers kept, so tracebacks point into the page). Otherwise, as when
    a single fence is selected or the fence before failed, everything runs
    from the start in a fresh namespace.
    """

    def __init__(self):
        self._done: dict[str, tuple[str, dict]] = {}  # page -> (source run so far, namespace)

    def runtest(self, test, args, *, asyncio_runner=None):
        page = str(test.source_path)
        done, namespace = self._done.pop(page, ("", None))
        if namespace is not None and done and test.source.startswith(done):
            rest = "\n" * done.count("\n") + test.source[len(done) :]
        else:
            rest, namespace = test.source, args
            # A page starts with NumPy's default print options, as at build time.
            numpy.set_printoptions(**NUMPY_PRINT_OPTIONS)
        super().runtest(dataclasses.replace(test, source=rest), namespace, asyncio_runner=asyncio_runner)
        self._done[page] = (test.source, namespace)


def _refuse_images_without_text(token) -> None:
    """A Markdown image must say what it shows (the build refuses it too: hooks/site_check.py)."""
    for child in token.children or []:
        if child.type == "image" and not child.content.strip():
            raise ValueError(
                f"an image without a text alternative (line {token.map[0] + 1}): "
                f"![]({child.attrGet('src')}); write what it shows between the brackets"
            )


class ExecutedFenceParser(MarkdownIt):
    """A CommonMark parser that rewrites fences the way the build runs them."""

    def parse(self, src, env=None):
        tokens = super().parse(dedent_containers(src), env)
        page_session = None
        for token in tokens:
            if token.type == "inline":
                _refuse_images_without_text(token)
            if token.type != "fence":
                continue
            language, options = parse_info(token.info)
            if options.get("exec", "").lower() not in TRUTHY:
                token.info = f"{language or 'text'} notest"
                continue
            if language not in EXECUTED_LANGUAGES:
                raise ValueError(
                    f"a fence marked exec=\"on\" in {language or 'no language'!r} (line {token.map[0] + 1}): "
                    f"the site executes only {', '.join(EXECUTED_LANGUAGES)} fences"
                )
            session = options.get("session")
            if session is None:
                raise ValueError(
                    f"an executed fence has no session (line {token.map[0] + 1}): "
                    'give every executed fence session="<page name>"'
                )
            if page_session not in (None, session):
                raise ValueError(
                    f"two sessions on one page: {page_session!r} and {session!r} "
                    f"(line {token.map[0] + 1}); use one session per page"
                )
            code = expand_includes(token.content)
            token.content = console_to_python(code, token.map[0] + 1) if language == "pycon" else code
            token.info = "python runner:SessionRunner" + ("" if page_session is None else " continuation")
            page_session = session
        return tokens


def pytest_markdown_docs_markdown_it():
    return ExecutedFenceParser("commonmark")


def pytest_markdown_docs_globals():
    # The plugin turns output capture off; keep the pages' printing (figures as
    # SVG among it) out of the test log. What a page prints is shown on the
    # page; what it claims is asserted.
    sink = io.StringIO()

    def quiet_print(*args, sep=" ", end="\n", file=None, flush=False):  # noqa: ARG001
        sink.write(sep.join(str(arg) for arg in args) + end)

    return {"print": quiet_print, "__console__": run_console_fence}


def pytest_runtest_setup(item):
    # Outside the pages (unit tests, docstring doctests), NumPy prints with its
    # defaults whatever the last page set; a page's fences keep its own options.
    if item.path.suffix != ".md":
        numpy.set_printoptions(**NUMPY_PRINT_OPTIONS)


def pytest_collection_modifyitems(items):
    DOCTEST_EXAMPLES["docstrings"] = sum(len(item.dtest.examples) for item in items if hasattr(item, "dtest"))


def pytest_terminal_summary(terminalreporter):
    pages, docstrings = DOCTEST_EXAMPLES["pages"], DOCTEST_EXAMPLES["docstrings"]
    if pages or docstrings:
        terminalreporter.write_line(
            f"doctest examples: {pages} run in the pages' console sessions, "
            f"{docstrings} collected from the docstrings of snippets/"
        )
