"""Console sessions: ``pycon`` fences run as a REPL would, and are checked as doctests.

A page writes a console session with the output it expects under each
statement::

    ```pycon exec="on" session="matrix-lookup"
    >>> d["dog"]
    10
    ```

At build time (this module is an mkdocs hook) the fence runs in the page's
markdown-exec session, one statement after the other, each compiled in
``"single"`` mode as the REPL and doctest do: an expression's value is echoed,
printed output appears under the statement that printed it, and an exception
is shown as a traceback. The page shows what really ran. Where the real
output differs from the written one, the build logs a warning with doctest's
diff, so ``mkdocs build --strict`` fails: the site never shows an output that
disagrees with its source.

Under pytest the root ``conftest.py`` runs the same fences through
:func:`run_console` in the page's session namespace, and a difference fails
the test with the same diff. One function, so the build and the tests cannot
disagree on what "the same output" means (doctest's ``OutputChecker``, with
``# doctest: +FLAG`` directives honoured).

Two more guards live here, because both concern fences that should run:

- a fence marked ``exec="on"`` in a language the site does not execute is an
  error (it would reach the page as raw Markdown while the build passed);
- a page whose HTML still contains a raw ``exec="…"`` fence header is an error.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import logging
import re
import sys
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Languages the site executes: markdown-exec's python formatter and the
# console formatter below (mkdocs.yml lists both under markdown-exec's languages).
EXECUTED_LANGUAGES = ("python", "py", "pycon")
TRUTHY = ("on", "true", "yes", "1")

_PARSER = doctest.DocTestParser()
_CHECKER = doctest.OutputChecker()
_MISSING = object()

log = logging.getLogger("mkdocs.hooks.console")


class ConsoleMismatch(AssertionError):
    """A console session printed something other than what its page says."""


def _flags(example: doctest.Example) -> int:
    flags = 0
    for flag, on in example.options.items():
        flags = flags | flag if on else flags & ~flag
    return flags


def _format_exception(error: BaseException, filename: str) -> str:
    """The traceback as the REPL prints it, with paths relative to the repository.

    Frames of this module (the runner) are left out, as are frames outside the
    repository (NumPy's internals): they depend on the machine.
    """
    lines = ["Traceback (most recent call last):"]
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename == filename:
            lines.append(f'  File "<stdin>", line {frame.lineno}, in {frame.name}')
        elif frame.filename.startswith(str(ROOT)) and frame.filename != __file__:
            where = Path(frame.filename).relative_to(ROOT).as_posix()
            lines.append(f'  File "{where}", line {frame.lineno}, in {frame.name}')
            if frame.line:
                lines.append(f"    {frame.line.strip()}")
    lines += "".join(traceback.format_exception_only(type(error), error)).rstrip("\n").split("\n")
    return "\n".join(lines) + "\n"


def _execute(example: doctest.Example, namespace: dict, filename: str) -> tuple[str, BaseException | None]:
    """Run one statement as the REPL does; return what it printed and what it raised."""
    buffer = io.StringIO()
    error = None
    saved_hook = sys.displayhook
    sys.displayhook = sys.__displayhook__  # pytest or IPython may have replaced it
    try:
        # A warning is an error, as in every executed block (hooks/build.py).
        with contextlib.redirect_stdout(buffer), warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                code = compile(example.source, filename, "single", dont_inherit=True)
                exec(code, namespace)  # noqa: S102 (running the page's code is the point)
            except KeyboardInterrupt:
                raise
            except BaseException as raised:  # noqa: BLE001 (SystemExit too: the page shows it)
                error = raised
    finally:
        sys.displayhook = saved_hook
    return buffer.getvalue(), error


def run_console(text: str, namespace: dict, *, name: str = "console", lineno: int = 0) -> tuple[str, list[str]]:
    """Run a console session in ``namespace``; return its transcript and its mismatches.

    The transcript is the session as the REPL shows it: each statement with
    its ``>>>``/``...`` prompts, then what it really printed or raised. Each
    mismatch is a line number (in the page, counting from ``lineno``) and
    doctest's report of expected against real output. Names the session
    defines stay in ``namespace`` for the fences after it.
    """
    filename = f"<console {name}>"
    examples = _PARSER.get_examples(text, name)
    if not examples and text.strip():
        return "", [f"line {lineno + 1}: a console fence without any '>>> ' statement"]
    # The page's fences print through a buffered print (markdown-exec, or the
    # quiet print of conftest.py): a console session prints to its transcript.
    page_print = namespace.pop("print", _MISSING)
    transcript, mismatches = [], []
    try:
        for example in examples:
            statement = example.source.rstrip("\n").split("\n")
            transcript.append(f">>> {statement[0]}")
            transcript += [f"... {line}" if line else "..." for line in statement[1:]]
            printed, error = _execute(example, namespace, filename)
            flags = _flags(example)
            if error is None:
                got = printed
                ok = example.exc_msg is None and _CHECKER.check_output(example.want, got, flags)
            else:
                got = printed + _format_exception(error, filename)
                message = "".join(traceback.format_exception_only(type(error), error))
                ok = example.exc_msg is not None and _CHECKER.check_output(example.exc_msg, message, flags)
            if got:
                transcript += got.rstrip("\n").split("\n")
            if not ok:
                where = lineno + example.lineno + 1
                mismatches.append(f"line {where}: {statement[0]}\n{_CHECKER.output_difference(example, got, flags)}")
    finally:
        if page_print is not _MISSING:
            namespace["print"] = page_print
    return "\n".join(transcript), mismatches


def count_examples(text: str) -> int:
    """How many ``>>>`` statements (doctest examples) a console session holds."""
    return len(_PARSER.get_examples(text))


# --- markdown-exec: the formatter of ``pycon`` fences -------------------------

def _run_for_markdown_exec(code: str, session: str | None = None, **_: object) -> str:
    from markdown_exec._internal.formatters.base import ExecutionError
    from markdown_exec._internal.formatters.python import _sessions_globals
    from markdown_exec._internal.rendering import code_block

    if not session:
        raise ExecutionError(code_block("text", 'a console fence needs session="<page name>"'))
    source, first_line = _locate(code)
    transcript, mismatches = run_console(code, _sessions_globals[session], name=session, lineno=first_line)
    if mismatches:
        report = "\n\n".join(f"{source} {mismatch}" for mismatch in mismatches)
        raise ExecutionError(code_block("text", f"the page's written output differs from the real one:\n\n{report}"))
    return transcript


# Where the console fence being run stands in its page, so that a mismatch names
# the page and the line (markdown-exec hands the formatter the code only). The
# fences of a page are rendered in order: each search starts after the last hit.
_page = {"source": "", "lines": [], "cursor": 0}


def _locate(code: str) -> tuple[str, int]:
    """The page's source path and the 0-based line before ``code``'s first line there."""
    wanted = [line.strip() for line in code.strip("\n").split("\n")]
    lines = _page["lines"]
    for start in range(_page["cursor"], len(lines) - len(wanted) + 1):
        if all(lines[start + i].strip() == line for i, line in enumerate(wanted)):
            _page["cursor"] = start + len(wanted)
            return _page["source"], start
    return _page["source"] or "a page", 0


def format_console(**options):
    """markdown-exec formatter: show the transcript as a ``pycon`` block (the real output)."""
    from markdown_exec._internal.formatters.base import base_format

    options.update(source="", result="pycon", html=False)
    return base_format(language="pycon", run=_run_for_markdown_exec, **options)


def on_startup(command, dirty):  # noqa: ARG001 (mkdocs hook signature)
    # markdown-exec dispatches on this mapping at render time; its own pycon
    # formatter joins the statements into one block, drops the written output
    # and echoes no values. requirements.txt pins markdown-exec.
    from markdown_exec._internal import main

    main.formatters["pycon"] = format_console


# --- fences that should run and would not ------------------------------------

_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[ \t]*\{?\.?(?P<language>[\w-]*)(?P<options>[^\n]*)$", re.MULTILINE)
_EXEC_ON = re.compile(r'\bexec="(?:' + "|".join(TRUTHY) + r')"', re.IGNORECASE)


def unexecuted_fences(markdown: str) -> list[str]:
    """Headers of fences marked ``exec="on"`` in a language the site does not execute."""
    return [
        match.group(0).strip()
        for match in _FENCE.finditer(markdown)
        if _EXEC_ON.search(match.group("options")) and match.group("language") not in EXECUTED_LANGUAGES
    ]


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001
    _page.update(source=f"{Path(config['docs_dir']).name}/{page.file.src_uri}", lines=markdown.split("\n"), cursor=0)
    for header in unexecuted_fences(markdown):
        log.warning(
            "%s: %s is marked exec=\"on\" but this site executes only %s fences; it would reach the page unrun",
            page.file.src_uri, header, ", ".join(EXECUTED_LANGUAGES),
        )
    return markdown


_RAW_EXEC = re.compile(r"exec=(?:&quot;|\")(?:" + "|".join(TRUTHY) + r")(?:&quot;|\")", re.IGNORECASE)

# --- copying a console session copies its statements only ---------------------
# Pygments marks prompts (``gp``) and plain output lines (``go``), but not the
# lines of a traceback. Every line of a console block that is not a statement
# is wrapped in one ``go`` span, newline included, so that the stylesheet can
# hide prompts and output while Material's copy button runs
# (``code[data-md-copying]``): the copied text is the statements alone.
_CODE = re.compile(r"(<code>)(.*?)(</code>)", re.DOTALL)
_PROMPT = '<span class="gp">'


def _mark_output_lines(match: re.Match) -> str:
    opening, body, closing = match.groups()
    if _PROMPT not in body:
        return match.group(0)  # not a console session
    *lines, rest = body.split("\n")
    marked = [line + "\n" if _PROMPT in line else f'<span class="go">{line}\n</span>' for line in lines]
    return opening + "".join(marked) + rest + closing


def on_page_content(html, page, config, files):  # noqa: ARG001
    if _RAW_EXEC.search(html):
        log.warning("%s: a fence marked exec=\"on\" reached the page unrendered", page.file.src_uri)
    return _CODE.sub(_mark_output_lines, html)
