"""Code blocks on a phone, and copies of console sessions that hold their statements only.

About 45 characters of code fit the width of a 390 px phone, and many lines
of the pages, printed output above all, are longer. On a narrow screen the
stylesheet (docs/stylesheets/extra.css, "Code on a phone") wraps such a line
instead of cutting it: the rows after the first are indented two characters
past the line's own indentation and marked with "↪" in the margin, so that a
wrapped row is never read as a line of its own. That needs each line to be
one element, and the line's indentation: :func:`wrap_code_lines` wraps every
line of a ``<pre><code>`` block in ``<span class="cl">`` and gives an
indented line its indentation as ``--indent``. On a wide screen the spans
change nothing.

A console session's copy button copies its statements only. Pygments marks
prompts (``gp``) and plain output lines (``go``), but not the lines of a
traceback, so every line of a console block that is not a statement is first
wrapped in one ``go`` span, newline included (:func:`mark_output_lines`); the
stylesheet hides prompts and output while Material's copy button runs
(``code[data-md-copying]``). Such a line becomes one ``cl go`` span, and its
newline a ``go`` span of its own, so that a copy holds the statements alone,
with no blank lines.

A block is done once: ``sitekit.render`` runs this on the HTML of every
Markdown conversion, markdown-exec's conversions of a block's output
included, and a block whose lines are already in spans is left as it is.
"""

from __future__ import annotations

import html
import re

_BLOCK = re.compile(r"(<pre\b[^>]*>(?:<span></span>)?<code\b[^>]*>)(.*?)(</code></pre>)", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_SPAN = re.compile(r"<span\b[^>]*>|</span>")
_OUTPUT = '<span class="go">'
_PROMPT = '<span class="gp">'
_DONE = '<span class="cl'


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


def mark_output_lines(code: str) -> str:
    """The body of a console session's ``<code>`` with every line that is not a statement in one ``go`` span."""
    if _PROMPT not in code:
        return code  # not a console session
    *lines, rest = code.split("\n")
    marked = [line + "\n" if _PROMPT in line else f'<span class="go">{line}\n</span>' for line in lines]
    return "".join(marked) + rest


def _wrap_block(match: re.Match) -> str:
    opening, body, closing = match.groups()
    if _DONE in body:
        return match.group(0)
    return opening + wrap_lines(mark_output_lines(body)) + closing


def wrap_code_lines(page_html: str) -> str:
    """``page_html`` with every code block's lines in spans (console output marked first); done blocks kept."""
    return _BLOCK.sub(_wrap_block, page_html)
