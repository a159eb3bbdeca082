"""Render TeX to MathML at build time, so no page loads a math library.

``pymdownx.arithmatex`` (generic mode) leaves ``\\(...\\)`` in
``<span class="arithmatex">`` and ``\\[...\\]`` in ``<div class="arithmatex">``.
:func:`render_math` replaces both with native MathML from the ``math-core``
package, which Chromium, Firefox and Safari render without JavaScript or web
fonts (``sitekit.render`` runs it on every page's HTML).

TeX that math-core does not understand is a build error
(``sitekit.report.build_error``), so ``mkdocs build --strict`` fails and the
post-build step reports it, instead of shipping raw TeX.
"""

from __future__ import annotations

import html
import re

import math_core

from sitekit.report import build_error

_converter = math_core.LatexToMathML(fancy_error=False)

_ARITHMATEX = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\s*'
    r"(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<block>.*?)\\\])"
    r"\s*</(?P=tag)>",
    re.DOTALL,
)
_SCRIPTLEVEL = re.compile(r'(?<=<mtable displaystyle="true") scriptlevel="0"')
# A MathML start or end tag, with its name and attributes.
_MATHML_TAG = re.compile(r"<(/?)(m[a-z]+)\b([^>]*?)(/?)>")
_STYLE_ATTRIBUTE = re.compile(r'\s(?:displaystyle|scriptlevel)="[^"]*"')
# Elements on which the HTML validator allows the style attributes.
_STYLE_ALLOWED = {"displaystyle": {"math", "mstyle", "mtable"}, "scriptlevel": {"mstyle"}}


def style_in_mstyle(mathml: str) -> str:
    """Move ``displaystyle``/``scriptlevel`` off elements where HTML forbids them onto ``<mstyle>``.

    math-core writes ``\\textstyle`` as ``<mrow displaystyle="false"
    scriptlevel="0">`` and ``\\tfrac`` as ``<mfrac displaystyle="false">``.
    MathML Core allows both attributes on every element; the HTML validator
    only on ``<mstyle>`` (and ``displaystyle`` on ``<math>``/``<mtable>``).
    Such an ``<mrow>`` becomes an ``<mstyle>`` (an mrow with style); any other
    element is wrapped in one. Browsers render the result the same.
    """
    if "displaystyle=" not in mathml and "scriptlevel=" not in mathml:
        return mathml
    out: list[str] = []
    open_tags: list[str | None] = []  # for each open element: the end tag to write, or None
    position = 0
    for tag in _MATHML_TAG.finditer(mathml):
        out.append(mathml[position : tag.start()])
        position = tag.end()
        closing, name, attributes, empty = tag.groups()
        if closing:
            out.append(open_tags.pop() or tag.group(0))
            continue
        styles = [a.strip() for a in _STYLE_ATTRIBUTE.findall(attributes)]
        misplaced = [a for a in styles if name not in _STYLE_ALLOWED[a.split("=")[0]]]
        if not misplaced:
            out.append(tag.group(0))
            if not empty:
                open_tags.append(None)
            continue
        # The attributes that may stay, the misplaced ones moved to an <mstyle>.
        kept = "".join(a for a in _STYLE_ATTRIBUTE.findall(attributes) if a.strip() not in misplaced)
        kept = _STYLE_ATTRIBUTE.sub("", attributes) + kept
        style = " ".join(misplaced)
        if name == "mrow":
            out.append(f"<mstyle {style}{kept}>")
            open_tags.append("</mstyle>")
        elif empty:
            out.append(f"<mstyle {style}><{name}{kept}/></mstyle>")
        else:
            out.append(f"<mstyle {style}><{name}{kept}>")
            open_tags.append(f"</{name}></mstyle>")
    out.append(mathml[position:])
    return "".join(out)


def tex_to_mathml(tex: str, display: bool, where) -> str:
    """Convert one TeX formula; a build error (fatal under --strict) if it fails."""
    try:
        mathml = _converter.convert_with_local_state(tex.strip(), displaystyle=display)
        # MathML Core allows scriptlevel anywhere, the HTML validator only on
        # <mstyle>; on math-core's aligned tables it only restates the default.
        return style_in_mstyle(_SCRIPTLEVEL.sub("", mathml))
    except math_core.LatexError as error:
        marker = build_error(where if isinstance(where, str) else where(tex.strip()),
                             f"cannot render TeX {tex!r}: {str(error).strip()}")
        return f"<code>{html.escape(tex)}</code>{marker}"


def _replace(match: re.Match, where) -> str:
    """Convert a match with a ``block`` or an ``inline`` group of (HTML-escaped) TeX."""
    display = match.group("block") is not None
    tex = html.unescape(match.group("block") if display else match.group("inline"))
    return tex_to_mathml(tex, display, where)


def render_math(html_text: str, where) -> str:
    """Every arithmatex formula of ``html_text`` as MathML.

    ``where`` names the page in errors: a string, or a function of the TeX
    that says where it stands.
    """
    if 'class="arithmatex"' not in html_text:
        return html_text
    return _ARITHMATEX.sub(lambda m: _replace(m, where), html_text)
