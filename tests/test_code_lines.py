"""sitekit/code_lines.py: every line of a code block in a span of its own, and nothing else changed."""

from __future__ import annotations

import html
import re

from sitekit.code_lines import wrap_code_lines, wrap_lines

PROMPT = '<span class="gp">&gt;&gt;&gt; </span>'


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_each_line_is_one_span_with_its_indentation():
    code = '<span class="k">def</span> f():\n    <span class="k">return</span> 1\n\n'
    wrapped = wrap_lines(code)
    assert wrapped == (
        '<span class="cl"><span class="k">def</span> f():</span>\n'
        '<span class="cl" style="--indent:4">    <span class="k">return</span> 1</span>\n'
        "\n"
    )
    assert text_of(wrapped) == text_of(code)  # the same text: a copy is unchanged


def test_a_console_output_line_stays_hidden_from_copies_newline_included():
    # mark_output_lines wraps each output line, newline included, in one "go" span
    code = f'{PROMPT}x\n<span class="go"><span class="go">[1 2]</span>\n</span><span class="go">  3\n</span>'
    wrapped = wrap_lines(code)
    assert wrapped == (
        f'<span class="cl">{PROMPT}x</span>\n'
        '<span class="cl go"><span class="go">[1 2]</span></span><span class="go">\n</span>'
        '<span class="cl go" style="--indent:2">  3</span><span class="go">\n</span>'
    )
    # what the copy button copies: everything outside the "go" spans (and the prompts)
    copied = re.sub(r'<span class="cl go"[^>]*>.*?</span><span class="go">\n</span>', "", wrapped)
    assert text_of(copied) == ">>> x\n"


def test_a_line_with_output_and_more_is_no_output_line():
    line = '<span class="go">a</span><span class="n">b</span>'
    assert wrap_lines(line + "\n") == f'<span class="cl">{line}</span>\n'


def test_only_code_blocks_are_touched():
    page = (
        "<p>inline <code>x = 1\ny</code></p>"
        '<div class="highlight"><pre><span></span><code>a\nb\n</code></pre></div>'
    )
    assert wrap_code_lines(page) == (
        "<p>inline <code>x = 1\ny</code></p>"
        '<div class="highlight"><pre><span></span><code><span class="cl">a</span>\n'
        '<span class="cl">b</span>\n</code></pre></div>'
    )


def test_indentation_is_counted_in_characters_of_text():
    assert wrap_lines("  &lt;tag&gt;\n") == '<span class="cl" style="--indent:2">  &lt;tag&gt;</span>\n'


def test_a_block_is_done_once():
    """Python-Markdown runs postprocessors on a block's output and again on the page holding it."""
    page = f'<div class="highlight"><pre><span></span><code>{PROMPT}x\n<span class="go">1</span>\n</code></pre></div>'
    once = wrap_code_lines(page)
    assert wrap_code_lines(once) == once
    assert '<span class="cl go"><span class="go">1</span></span>' in once, once
