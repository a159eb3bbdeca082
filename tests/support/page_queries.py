"""Questions the tests ask of a page, through the page model (sitekit.pages): nothing the build needs.

``conftest.py`` asks :func:`images_without_text` while it collects a page's
fences (the build checks every ``<img>`` in the post-build step), and
.ci/page_metrics.py counts :func:`visible_asserts`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sitekit.pages import HIDE_MARKER, Fence, fences, parse

_ASSERT = re.compile(r"(>>> )?assert\b")


def session_name(source: str) -> str:
    """The markdown-exec session every executed fence of a page uses: the page's name."""
    return source.removesuffix(".md").replace("/", "-")


def outside_fences(text: str) -> str:
    """The page with every fence's lines blank and containers' bodies dedented, line for line.

    What is left is Markdown: prose, headings, container headers, as
    CommonMark reads them (an admonition's body, indented, would be code).
    """

    def lines(blocks) -> Iterator[str]:
        for block in blocks:
            if isinstance(block, str):
                yield block
            elif isinstance(block, Fence):
                yield from [""] * (block.source.count("\n") + 1)
            else:
                yield block.header
                yield from lines(block.blocks)

    return "\n".join(lines(parse(text)))


def images_without_text(text: str) -> list[tuple[int, str]]:
    """``(line, source)`` of every Markdown image with no text alternative (``![](file.png)``)."""
    from markdown_it import MarkdownIt

    found = []
    if "![" not in text:  # most docstrings the plugin hands over: no image to look for, no parse (0.35 s a run)
        return found
    for token in MarkdownIt("commonmark").parse(outside_fences(text)):
        for child in token.children or []:
            if child.type == "image" and not child.content.strip():
                found.append((token.map[0], child.attrGet("src")))
    return found


def visible_asserts(text: str) -> int:
    """``assert`` lines a reader sees in the page's fences (a hidden one ends in ``# markdown-exec: hide``)."""
    return sum(
        1
        for fence in fences(text)
        if fence.shows_code
        for line in fence.code.split("\n")
        if _ASSERT.match(line.strip()) and not HIDE_MARKER.search(line)
    )
