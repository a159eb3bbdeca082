"""Unit tests of snippets/figures.py: the one way pages draw figures."""

import matplotlib.pyplot as plt
import pytest

from snippets.figures import svg_figure


def _figure():
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 1, 4])
    return fig


def test_svg_figure_has_caption_text_alternative_and_no_prolog():
    html = svg_figure(_figure(), caption="A parabola & more", alt='Three points on y = x² "rising"')
    assert html.startswith('<figure class="mpl-figure">') and html.endswith("</figure>")
    assert "<?xml" not in html and "<!DOCTYPE" not in html
    assert 'role="img" aria-label="Three points on y = x² &quot;rising&quot;"' in html
    assert "<figcaption>A parabola &amp; more</figcaption>" in html


def test_svg_figure_is_deterministic_and_closes_the_figure():
    before = len(plt.get_fignums())
    first = svg_figure(_figure(), caption="c", alt="a")
    second = svg_figure(_figure(), caption="c", alt="a")
    assert first == second
    assert "<dc:date>" not in first
    assert len(plt.get_fignums()) == before


@pytest.mark.parametrize(("caption", "alt"), [("", "alt"), ("caption", " ")])
def test_svg_figure_refuses_a_missing_caption_or_alternative(caption, alt):
    with pytest.raises(ValueError, match="caption and a text alternative"):
        svg_figure(_figure(), caption=caption, alt=alt)
