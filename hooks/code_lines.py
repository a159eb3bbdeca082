"""Code on a phone: every line of every code block in a span of its own.

About 45 characters of code fit the width of a 390 px phone, and many lines
of the pages, printed output above all, are longer. On a narrow screen the
stylesheet (docs/stylesheets/extra.css, "Code on a phone") wraps such a line
instead of cutting it: the rows after the first are indented two characters
past the line's own indentation and marked with "↪" in the margin, so that a
wrapped row is never read as a line of its own. That needs each line to be
one element, and the line's indentation: this hook wraps every line of a
``<pre><code>`` block in ``<span class="cl">`` and gives an indented line its
indentation as ``--indent``. On a wide screen the spans change nothing.

Runs after hooks/console.py, which wraps each output line of a console
session, newline included, in a ``go`` span that the copy button hides:
such a line becomes one ``cl go`` span, and its newline a ``go`` span of its
own, so that a copy still holds the statements alone, with no blank lines.
"""

from __future__ import annotations

import html
import re

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

_BLOCK = re.compile(r"(<pre\b[^>]*>(?:<span></span>)?<code\b[^>]*>)(.*?)(</code></pre>)", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_SPAN = re.compile(r"<span\b[^>]*>|</span>")
_OUTPUT = '<span class="go">'


def _indentation(line: str) -> int:
    text = html.unescape(_TAG.sub("", line))
    return len(text) - len(text.lstrip(" "))


def _output_inner(line: str) -> str | None:
    """What a line holds inside the one ``go`` span it is wrapped in; None if it is not so wrapped."""
    if not (line.startswith(_OUTPUT) and line.endswith("</span>")):
        return None
    depth = 0
    for tag in _SPAN.finditer(line):
        depth += -1 if tag.group(0) == "</span>" else 1
        if depth == 0:
            return line[len(_OUTPUT) : tag.start()] if tag.end() == len(line) else None
    return None


def _wrap_line(line: str) -> str:
    indent = _indentation(line)
    style = f' style="--indent:{indent}"' if indent else ""
    inner = _output_inner(line)
    if inner is not None:
        return f'<span class="cl go"{style}>{inner}</span><span class="go">\n</span>'
    return f'<span class="cl"{style}>{line}</span>\n'


def wrap_lines(code: str) -> str:
    """The body of a ``<code>`` element with every non-empty line in a ``cl`` span."""
    # A newline just before a closing tag (console.py's output lines) moves
    # after it, so that every line between two newlines is balanced markup.
    while "\n</span>" in code:
        code = code.replace("\n</span>", "</span>\n")
    *lines, rest = code.split("\n")
    return "".join(_wrap_line(line) if line else "\n" for line in lines) + rest


def _wrap_block(match: re.Match) -> str:
    opening, body, closing = match.groups()
    return opening + wrap_lines(body) + closing


def wrap_code_lines(page_html: str) -> str:
    return _BLOCK.sub(_wrap_block, page_html)


@event_priority(-50)  # after console.py (default priority), before build.py (-100), which sets <pre> aside
def on_page_content(html_text: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:  # noqa: ARG001
    return wrap_code_lines(html_text)
