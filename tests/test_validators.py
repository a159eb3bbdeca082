"""Fast checks of the build's repairs for the HTML validator (issue 10 §5).

The validators themselves (.ci/validate.py: the W3C Nu checker and axe-core
on every page) need Java, npm and a browser and run in .ci/run; these tests
pin the MathML rewrite they depend on, in milliseconds.
"""

from __future__ import annotations

import re

import pytest

from sitekit.mathml import style_in_mstyle, tex_to_mathml

# Where the Nu checker accepts the two style attributes of MathML.
ALLOWED = {"displaystyle": {"math", "mstyle", "mtable"}, "scriptlevel": {"mstyle"}}


def misplaced_style(mathml: str) -> list[str]:
    return [
        f"{attribute} on <{tag}>"
        for tag, attributes in re.findall(r"<(m[a-z]+)\b([^>]*)>", mathml)
        for attribute in re.findall(r"\b(displaystyle|scriptlevel)=", attributes)
        if tag not in ALLOWED[attribute]
    ]


def balanced(mathml: str) -> bool:
    stack = []
    for closing, tag, empty in re.findall(r"<(/?)(m[a-z]+)\b[^>]*?(/?)>", mathml):
        if closing:
            if not stack or stack.pop() != tag:
                return False
        elif not empty:
            stack.append(tag)
    return not stack


@pytest.mark.parametrize(
    "tex",
    [
        r"\ell' = \ell\, e^{m - m'} + \textstyle\sum_{\text{chunk}} e^{x_s - m'}",
        r"x + {\scriptstyle y_i} + \tfrac{1}{2} + \dfrac{a}{b}",
        r"\begin{aligned} a &= \textstyle\sum_i b_i \\ c &= \displaystyle\frac{1}{\sqrt{d}} \end{aligned}",
        r"\mathrm{softmax}(Q K^\top / \sqrt{d_k})\, V",
    ],
)
@pytest.mark.parametrize("display", [True, False])
def test_math_style_attributes_only_where_html_allows_them(tex, display):
    mathml = tex_to_mathml(tex, display, "test")
    assert mathml.startswith("<math")
    assert misplaced_style(mathml) == []
    assert balanced(mathml)


def test_textstyle_becomes_mstyle_with_the_same_content():
    mathml = style_in_mstyle(
        '<math><mi>a</mi><mrow displaystyle="false" scriptlevel="0"><mrow><mi>b</mi></mrow>'
        '<mfrac displaystyle="false"><mn>1</mn><mn>2</mn></mfrac></mrow></math>'
    )
    assert mathml == (
        '<math><mi>a</mi><mstyle displaystyle="false" scriptlevel="0"><mrow><mi>b</mi></mrow>'
        '<mstyle displaystyle="false"><mfrac><mn>1</mn><mn>2</mn></mfrac></mstyle></mstyle></math>'
    )
