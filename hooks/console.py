"""Console sessions at build time, and fences that should run but would not.

- ``pycon`` fences are console sessions: this hook makes
  :func:`sitekit.console.run_console` markdown-exec's formatter for them, run
  in the page's markdown-exec session. A written output that differs from the
  real one is logged with doctest's diff, so ``mkdocs build --strict`` fails.
  (markdown-exec's own pycon formatter joins the statements into one block,
  drops the written output and echoes no values.)
- A fence marked ``exec="on"`` in a language the site does not execute is an
  error: it would reach the page as raw Markdown while the build passed.
- A page whose HTML still holds a raw ``exec="…"`` fence header is an error.
- Copying a console session copies its statements only (see below).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import _repository  # noqa: F401 (the repository's root on sys.path, for sitekit)
from markdown_exec import ExecutionError, base_format, code_block, formatters
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from sitekit import block_outputs, markdown_exec_internals, pages
from sitekit.console import run_console

log = logging.getLogger("mkdocs.hooks.console")


# --- markdown-exec: the formatter of ``pycon`` fences -------------------------


def _run_for_markdown_exec(code: str, session: str | None = None, **_: object) -> str:
    if not session:
        raise ExecutionError(code_block("text", 'a console fence needs session="<page name>"'))
    source, first_line = _locate(code)
    namespace = markdown_exec_internals.session_globals(session)
    transcript, mismatches = run_console(code, namespace, name=session, lineno=first_line)
    if mismatches:
        report = "\n\n".join(f"{source} {mismatch}" for mismatch in mismatches)
        raise ExecutionError(code_block("text", f"the page's written output differs from the real one:\n\n{report}"))
    return transcript


# What markdown-exec calls: kept and replayed by hooks/serve.py while serving.
_run_console_block = block_outputs.runner(_run_for_markdown_exec)


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


def format_console(**options) -> str:
    """markdown-exec formatter: show the transcript as a ``pycon`` block (the real output)."""
    options.update(source="", result="pycon", html=False)
    return base_format(language="pycon", run=_run_console_block, **options)


def on_startup(*, command: str, dirty: bool) -> None:  # noqa: ARG001
    # markdown-exec dispatches on this mapping when it renders a fence.
    formatters["pycon"] = format_console


# --- fences that should run and would not ------------------------------------


def on_page_markdown(markdown: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:  # noqa: ARG001
    _page.update(source=f"{Path(config['docs_dir']).name}/{page.file.src_uri}", lines=markdown.split("\n"), cursor=0)
    for fence in pages.unexecuted_fences(markdown):
        log.warning(
            "%s: %s is marked exec=\"on\" but this site executes only %s fences; it would reach the page unrun",
            page.file.src_uri, fence.source.split("\n", 1)[0].strip(), ", ".join(pages.EXECUTED_LANGUAGES),
        )
    return markdown


_RAW_EXEC = re.compile(r"exec=(?:&quot;|\")(?:" + "|".join(pages.TRUTHY) + r")(?:&quot;|\")", re.IGNORECASE)

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


def on_page_content(html: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:  # noqa: ARG001
    if _RAW_EXEC.search(html):
        log.warning("%s: a fence marked exec=\"on\" reached the page unrendered", page.file.src_uri)
    return _CODE.sub(_mark_output_lines, html)
