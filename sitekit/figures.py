"""Figures for the pages: drawn by matplotlib at build time, inlined as SVG.

Every figure on the site goes through :func:`svg_figure`, so every figure has
a caption and a text alternative, and every build writes the same bytes, on
every machine; its colours are the palette below.
"""

from __future__ import annotations

import html
import io
import re

import matplotlib
import matplotlib.figure

matplotlib.use("Agg")  # no display at build time or in CI

import matplotlib.pyplot as plt  # after matplotlib.use: the backend must be chosen first

plt.rcParams.update(
    {
        # Fixed ids inside the SVG: two builds give byte-identical pages.
        "svg.hashsalt": "attention-as-a-soft-dictionary",
        # Text stays text: smaller pages, selectable and readable by screen readers.
        "svg.fonttype": "none",
        "font.family": "sans-serif",
        "font.size": 11,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "figure.figsize": (6.4, 3.6),
    }
)

# The figures' palette: Material's indigo (the site's primary colour) and the
# accents the pages use. Pages name a colour, never write one
# (tests/test_pages.py), so the figures change together.
INDIGO = "#3f51b5"  # indigo 500: the main series
INDIGO_LIGHT = "#c5cae9"  # indigo 100: fills, the keys not chosen
INDIGO_MID = "#7986cb"  # indigo 300
INDIGO_DARK = "#283593"  # indigo 800: text on a pale fill
INDIGO_PALE = "#e8eaf6"  # indigo 50: box fills
PINK = "#d81b60"  # pink 600: the accent, a second series
ORANGE = "#ff9800"  # orange 500: a third series
ORANGE_DARK = "#e65100"  # orange 900: reference lines and their labels
DEEP_ORANGE = "#ff7043"  # deep orange 400
PEACH = "#f4b183"
GREY = "#9e9e9e"  # grey 500: grids, edges, samples
GREY_DARK = "#424242"  # grey 800: arrows between boxes
WHITE = "#ffffff"

# Keys that would stamp the build date or tool versions into every SVG.
_NO_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}

# matplotlib names a clip path, a marker, a hatch or an image after a hash of
# its content, and that content holds coordinates at full precision: one data
# value that differs in its last bit (another BLAS kernel, another CPU) moves
# an axis limit by a bit and renames the clip path, though every coordinate
# the SVG prints, to 6 decimals, stays the same. These ids are renumbered in
# order of appearance instead.
_HASHED_ID = re.compile(r'id="(p|m|h|image)([0-9a-f]{10})"')
_KINDS = {"p": "clip", "m": "marker", "h": "hatch", "image": "image"}


def _numbered_ids(svg: str) -> str:
    """``svg`` with matplotlib's hashed ids replaced by ``clip1``, ``marker1``, ... (and references to them)."""
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for kind, digest in _HASHED_ID.findall(svg):
        if kind + digest not in names:
            counts[kind] = counts.get(kind, 0) + 1
            names[kind + digest] = f"{_KINDS[kind]}{counts[kind]}"
    if not names:
        return svg
    pattern = re.compile(r'(id="|#)(' + "|".join(map(re.escape, names)) + r')(?=[")])')
    return pattern.sub(lambda found: found.group(1) + names[found.group(2)], svg)


def svg_figure(fig: plt.Figure, caption: str, alt: str) -> str:
    """Return ``fig`` as an HTML ``<figure>``: inline SVG, caption, text alternative.

    ``caption`` is shown under the figure; ``alt`` describes what the figure
    shows for readers who cannot see it (it becomes the SVG's accessible name).
    The figure is closed, so pages that draw many figures do not pile them up.

    >>> fig, ax = plt.subplots()
    >>> _ = ax.plot([0, 1, 2], [0, 1, 4])
    >>> markup = svg_figure(fig, caption="A parabola.", alt="Three points rising ever faster.")
    >>> markup.startswith('<figure class="mpl-figure">'), "<figcaption>A parabola.</figcaption>" in markup
    (True, True)
    """
    if not isinstance(fig, matplotlib.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure (plt.subplots()), got {type(fig).__name__}")
    for name, text in (("caption", caption), ("alt", alt)):
        if not isinstance(text, str):
            plt.close(fig)
            raise TypeError(f"{name} must be a string, got {type(text).__name__} {text!r:.60}")
    if not caption.strip() or not alt.strip():
        plt.close(fig)
        raise ValueError(
            f"a figure needs a caption and a text alternative; got caption={caption!r}, alt={alt!r}"
        )
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", facecolor="white", metadata=_NO_METADATA)
    plt.close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]  # drop the XML prolog and DOCTYPE: not valid inside HTML
    svg = _numbered_ids(svg)
    label = html.escape(alt, quote=True)
    svg = svg.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)
    return (
        '<figure class="mpl-figure">\n'
        f"{svg}"
        f"<figcaption>{html.escape(caption)}</figcaption>\n"
        "</figure>"
    )
