"""Chapter 14's training notebook, as mkdocs-jupyter renders it, made fit for this site.

mkdocs-jupyter turns the stored notebook (docs/notebooks/training-run.ipynb,
never executed at build time) into HTML that carries what a JupyterLab page
needs and this one does not: a MathJax loader with an empty ``src`` (invalid
HTML), a Mermaid loader, a clipboard button whose markup has an invalid
attribute, ``tabindex`` on every cell, and JupyterLab's whole stylesheet,
575 KB inlined into the page. The notebook has no math and no diagrams, and
Material styles code and text already. For pages rendered by mkdocs-jupyter
(their content starts a ``jupyter-wrapper``), this hook removes those parts
and the outputs that printed only a newline, gives the code blocks
Material's ``highlight`` class back (so that they take the site's colours in
both schemes) and the shape of the site's other blocks, ``<pre><code>``, and
leaves the cells, their outputs and their images as they are;
docs/stylesheets/notebook.css lays them out.
"""

from __future__ import annotations

import re

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

_WRAPPER = 'class="jupyter-wrapper"'
_REMOVE = [
    re.compile(r"<style[^>]*>.*?</style>", re.DOTALL),                  # JupyterLab's CSS and its pygments colours
    re.compile(r"<script\b[^>]*>.*?</script>", re.DOTALL),               # MathJax, Mermaid, the clipboard element
    re.compile(r"<!--.*?-->", re.DOTALL),
    re.compile(r'<div class="zeroclipboard-container">.*?</clipboard-copy>\s*</div>', re.DOTALL),
    re.compile(r'<(\w+) class="clipboard-copy-txt"[^>]*>.*?</\1>', re.DOTALL),      # the copy button's text
    # An output that printed only a newline (the progress bar's last one): an empty box.
    re.compile(r'<div class="jp-OutputArea-child">\s*<div class="jp-OutputPrompt jp-OutputArea-prompt"></div>\s*'
               r'<div class="jp-RenderedText jp-OutputArea-output"[^>]*>\s*<pre>\s*</pre>\s*</div>\s*</div>'),
]


# A <pre> without a <code> inside: nbconvert writes the cells' code and outputs so.
_BARE_PRE = re.compile(r"(<pre\b[^>]*>(?:<span></span>)?)(?!<code\b)(.*?)</pre>", re.DOTALL)


def clean_notebook_html(html: str) -> str:
    """The notebook's cells without JupyterLab's scripts, styles and copy buttons; code in ``<pre><code>``.

    The site's code blocks are ``<pre><code>``: given that shape, the
    notebook's code and outputs get what the site gives every block
    (hooks/code_lines.py's lines, which wrap on a phone with a "↪" mark,
    Material's colours and copy button).

    >>> clean_notebook_html('<div class="highlight-ipynb hl-python"><pre><span></span>x = 1</pre></div>')
    '<div class="highlight hl-python"><pre><span></span><code>x = 1</code></pre></div>'
    """
    for pattern in _REMOVE:
        html = pattern.sub("", html)
    html = html.replace(' tabindex="0"', "")
    html = _BARE_PRE.sub(r"\1<code>\2</code></pre>", html)
    return html.replace('class="highlight-ipynb ', 'class="highlight ').strip()


# Default priority: before code_lines.py (-50) and build.py (-100), which work on the final HTML.
def on_page_content(html: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:  # noqa: ARG001
    if _WRAPPER not in html:
        return html
    return clean_notebook_html(html)
