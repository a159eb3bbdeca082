"""Let pytest run the pages: every executed fence of every page is a test.

The pages are written for markdown-exec (```` ```python exec="on"
session="page" ````), which runs the fences at build time. pytest-markdown-docs
runs fences under pytest, but knows neither markdown-exec's options nor its
sessions, nor pymdownx's includes and admonitions. Writing its own options
(``continuation``, ``notest``) into the pages would break their rendering, so
this file translates instead, through the plugin's documented hooks, reading
each page through the page model (``sitekit.pages``), and running it under the
page runner's guards (``sitekit.run``), as the build does:

- an executed fence becomes a test; no other fence does;
- a fence after the first of its page gets ``continuation``, so it runs
  after the earlier fences of its session, as at build time;
- those fences run through ``SessionRunner``, which keeps the session's
  namespace between the fences of a page, so each fence's code runs once
  (``continuation`` alone re-runs every earlier fence: quadratic in the number
  of fences). A fence run on its own still replays the fences before it; the
  fences after one that failed are skipped, naming it (the build stops there);
- ``--8<-- "file"`` and ``--8<-- "file:section"`` lines are replaced by what
  they include, as pymdownx.snippets does at build time;
- ``pycon`` fences are console sessions: they run as doctests in the page's
  namespace (``sitekit.console``, the same code the build runs), so a written
  output that differs from the real one fails the test with doctest's diff;
- a fence marked ``exec="on"`` in a language the site does not run fails
  collection (at build time it would reach the page as raw Markdown), and so
  does an executed fence without a session or with a second one;
- fences inside admonitions (``!!!``, ``???``) are found, with the line
  numbers of the page; a Markdown image without a text alternative fails
  collection (the build refuses it too);
- a page's fences run in a temporary working folder; a block that changes a
  file of the clone (put back as it was) or prints ``nan`` fails, as at
  build time (``sitekit.run``).
"""

from __future__ import annotations

import dataclasses
import io
import os

# A whole test session runs two processes at once, on CI's two cores: this one
# and the site build it starts (tests/conftest.py), which inherits this
# environment. OpenBLAS starts a thread per core in each, and four spinning
# threads on two cores made docs/learned-lookups.md take 15 s instead of 5.
# The pages' matrices are small: one thread per process is as fast alone and
# much faster side by side. Set before NumPy loads OpenBLAS (no pytest plugin
# imports NumPy before this file; tests/test_site.py checks the count). A
# value the caller sets wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy
import pytest
from markdown_it.token import Token

# Custom runners are the plugin's own extension point (pytest_markdown_docs.
# _runners); requirements.txt pins the version, and tests/test_failures.py
# checks that a failing fence still fails.
from pytest_markdown_docs._runners import DefaultRunner, register_runner

from sitekit import pages, run
from sitekit.console import ConsoleMismatch, count_examples, run_console
from support.page_queries import images_without_text

NUMPY_PRINT_OPTIONS = numpy.get_printoptions()


def console_to_python(code: str, first_line: int) -> str:
    """Python that runs a console session as a doctest, on as many lines as the fence.

    The page's namespace is the fence's ``globals()``; line numbers stay those
    of the page, so a failure points at the fence.
    """
    call = f"__console__({code!r}, globals(), {first_line})"
    return call + "\n" * code.count("\n")


# Doctest examples run this session: on the pages' console sessions (counted
# here) and in the docstrings of snippets/ and sitekit/ (counted from pytest's items).
DOCTEST_EXAMPLES = {"pages": 0, "docstrings": 0}


def run_console_fence(code: str, namespace: dict, first_line: int) -> None:
    DOCTEST_EXAMPLES["pages"] += count_examples(code)
    _, mismatches = run_console(code, namespace, name="page", lineno=first_line)
    if mismatches:
        raise ConsoleMismatch("the written output differs from the real one:\n\n" + "\n\n".join(mismatches))


@register_runner()
class SessionRunner(DefaultRunner):
    """Run a page's fences in one namespace, each fence's code once, under the page runner's guards.

    With ``continuation`` a fence's test source is every earlier fence of the
    page plus its own. When the earlier part is exactly what ran last on this
    page, only the new part runs, in the namespace left by the earlier fences
    (line numbers kept, so tracebacks point into the page). Otherwise, as when
    a single fence is selected, everything runs from the start in a fresh
    namespace. After a fence that failed, the page's later ones are skipped.
    """

    def __init__(self):
        self._done: dict[str, tuple[str, dict, run.PageRun]] = {}  # page -> (source run so far, namespace, its run)
        self._failed: dict[str, tuple[str, str]] = {}  # page -> (the source that failed, its page and line)

    def runtest(self, test, args, *, asyncio_runner=None):
        page = str(test.source_path)
        failed, at = self._failed.get(page, (None, ""))
        if failed is not None and test.source.startswith(failed):
            pytest.skip(f"not run: an earlier block of this page failed ({at})")
        done, namespace, page_run = self._done.pop(page, ("", None, None))
        if namespace is not None and done and test.source.startswith(done):
            rest = "\n" * done.count("\n") + test.source[len(done) :]
        else:
            rest, namespace = test.source, args
            if page_run is not None:
                page_run.close()
            # A page starts with NumPy's default print options and a working folder of its own, as at build time.
            numpy.set_printoptions(**NUMPY_PRINT_OPTIONS)
            page_run = run.PageRun()
        where = f"{pages.where(test.source_path)} line {test.start_line}"
        try:
            with page_run.block(where):
                super().runtest(dataclasses.replace(test, source=rest), namespace, asyncio_runner=asyncio_runner)
        except BaseException:
            page_run.close()
            self._failed[page] = (test.source, where)
            raise
        self._done[page] = (test.source, namespace, page_run)


def fence_tests(markdown: str) -> list[Token]:
    """The page's executed fences as the plugin's fence tokens, in the form that runs them like the build."""
    pages.data_files(markdown)  # the files its front matter says it reads exist, as the build requires
    for line, source in images_without_text(markdown):
        # The build refuses it too (sitekit/site_check.py, in the post-build step).
        raise ValueError(
            f"an image without a text alternative (line {line + 1}): ![]({source}); write what it shows between the brackets"
        )
    for fence in pages.unexecuted_fences(markdown):
        raise ValueError(
            f"a fence marked exec=\"on\" in {fence.language or 'no language'!r} (line {fence.line + 1}): "
            f"the site executes only {', '.join(pages.EXECUTED_LANGUAGES)} fences"
        )
    executed = pages.executed_fences(markdown)
    if problem := run.session_problem(executed):
        raise ValueError(f"line {problem[0].line + 1}: {problem[1]}")
    tokens = []
    for index, fence in enumerate(executed):
        code = fence.expanded() + "\n"
        token = Token("fence", "code", 0, map=[fence.line, fence.line + fence.source.count("\n") + 1])
        token.content = console_to_python(code, fence.line + 1) if fence.console else code
        token.info = "python runner:SessionRunner" + (" continuation" if index else "")
        tokens.append(token)
    return tokens


class ExecutedFenceParser:
    """What the plugin asks for a parser: ``parse`` gives the fence tokens it turns into tests."""

    def parse(self, src: str, env=None) -> list[Token]:  # noqa: ARG002 (markdown-it's signature)
        return fence_tests(src)


def pytest_markdown_docs_markdown_it():
    return ExecutedFenceParser()


def pytest_markdown_docs_globals():
    # The plugin turns output capture off; keep the pages' printing (figures as
    # SVG among it) out of the test log. What a page prints is shown on the
    # page; what it claims is asserted.
    sink = io.StringIO()

    def quiet_print(*args, sep=" ", end="\n", file=None, flush=False):  # noqa: ARG001
        text = sep.join(str(arg) for arg in args) + end
        problem = run.printed_nan(text)
        if problem is not None:  # as the build refuses it (sitekit/run.py)
            raise ValueError(problem)
        sink.write(text)

    return {"print": quiet_print, "__console__": run_console_fence}


def pytest_addoption(parser):
    # Here, not in tests/conftest.py, so that `pytest docs/x.md --no-build` knows it too.
    parser.addoption(
        "--no-build", action="store_true",
        help="the quick loop: leave out every test that builds, serves or opens the site or a copy of it "
             "in a browser (tests/conftest.py says which)",
    )


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
            f"{docstrings} collected from the docstrings of snippets/ and sitekit/"
        )
