"""Console sessions: ``pycon`` fences run as a REPL would, and are checked as doctests.

A page writes a console session as a ``pycon`` fence marked ``exec="on"``:
statements after ``>>>`` prompts, as typed at Python's prompt, each with the
output it expects written under it, as in a doctest.

At build time (the page runner, ``sitekit/run.py``, whose output
``sitekit/render.py`` places as markdown-exec's formatter of ``pycon``
fences) the fence runs in the page's namespace, one
statement after the other, each compiled in ``"single"`` mode as the REPL and
doctest do: an expression's value is echoed, printed output appears under the
statement that printed it, and an exception is shown as a traceback. The page
shows what really ran. Where the real output differs from the written one,
the build logs a warning with doctest's diff, so ``mkdocs build --strict``
fails: the site never shows an output that disagrees with its source.

Under pytest the root ``conftest.py`` runs the same fences through
:func:`run_console` in the page's session namespace, and a difference fails
the test with the same diff. One function, so the build and the tests cannot
disagree on what "the same output" means (doctest's ``OutputChecker``, with
``# doctest: +FLAG`` directives honoured).
"""

from __future__ import annotations

import contextlib
import doctest
import io
import re
import sys
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_PARSER = doctest.DocTestParser()
_CHECKER = doctest.OutputChecker()
_MISSING = object()
# A prompt holding only a comment: doctest skips it, the transcript keeps it.
_COMMENT_PROMPT = re.compile(r"^[ \t]*(>>>[ \t]*#.*)$")


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
        # A warning is an error, as in every executed block (sitekit/run.py).
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
    its ``>>>``/``...`` prompts, then what it really printed or raised; a
    prompt holding only a comment (``>>> # the keys``), which doctest skips,
    is shown where it was written. Each
    mismatch is a line number (in the page, counting from ``lineno``) and
    doctest's report of expected against real output. Names the session
    defines stay in ``namespace`` for the fences after it.
    """
    filename = f"<console {name}>"
    examples = _PARSER.get_examples(text, name)
    # (line, comment) for every prompt holding only a comment, which doctest skips
    comments = [(number, found.group(1).rstrip()) for number, line in enumerate(text.split("\n"))
                if (found := _COMMENT_PROMPT.match(line))]
    if not examples and text.strip():
        return "", [f"line {lineno + 1}: a console fence without any '>>> ' statement"]
    # The page's fences print through a buffered print (markdown-exec, or the
    # quiet print of conftest.py): a console session prints to its transcript.
    page_print = namespace.pop("print", _MISSING)
    transcript, mismatches = [], []
    try:
        for example in examples:
            while comments and comments[0][0] < example.lineno:
                transcript.append(comments.pop(0)[1])
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
        transcript += [comment for _, comment in comments]
    finally:
        if page_print is not _MISSING:
            namespace["print"] = page_print
    return "\n".join(transcript), mismatches


def count_examples(text: str) -> int:
    """How many ``>>>`` statements (doctest examples) a console session holds."""
    return len(_PARSER.get_examples(text))
