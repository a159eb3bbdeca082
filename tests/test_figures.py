"""Unit tests of sitekit/figures.py: the one way pages draw figures."""

import re

import matplotlib.pyplot as plt
import numpy as np
import pytest

from sitekit.figures import svg_figure


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


def test_svg_figure_does_not_depend_on_the_last_bit_of_the_data():
    # matplotlib hashes full-precision coordinates into its clip-path ids: a
    # largest value one bit lower moves the axis limit by a bit and, without
    # the renumbering, renames the clip path (another CPU's BLAS does that).
    def drawn(y):
        fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
        ax.plot([1, 2, 4, 8], y, "o-")
        ax.bar([1, 2], [0.1, 0.2], hatch="//")
        return svg_figure(fig, caption="c", alt="a")

    y = np.array([0.31, 0.2, 0.13, 0.0123456789])
    lower = y.copy()
    lower[0] = np.nextafter(lower[0], 0)
    first = drawn(y)
    assert first == drawn(lower)
    assert 'id="clip1"' in first and 'url(#clip1)' in first and 'id="marker1"' in first
    assert not re.search(r'id="(p|m|h)[0-9a-f]{10}"', first)
