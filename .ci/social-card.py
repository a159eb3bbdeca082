"""Draw the site's social preview image: docs/assets/social-card.png.

    python .ci/social-card.py

Link previews (Open Graph, Twitter cards) show this 1200 x 630 PNG; the theme
override (overrides/main.html) points og:image and twitter:image at it. It is
committed, so the build needs nothing extra, and it is served by the site
itself, never by another host. Run this script again after changing it: the
output is byte-identical for the same matplotlib version.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "assets" / "social-card.png"

INDIGO = "#303f9f"  # Material's indigo, a shade darker for contrast with white
LIGHT = "#e8eaf6"
ACCENT = "#ffca28"


def main() -> None:
    plt.rcParams.update({"font.family": "DejaVu Sans", "svg.hashsalt": "social-card"})
    fig = plt.figure(figsize=(12, 6.3), dpi=100, facecolor=INDIGO)

    fig.text(0.06, 0.80, "Attention as a", color="white", fontsize=44, weight="bold")
    fig.text(0.06, 0.67, "Soft Dictionary", color="white", fontsize=44, weight="bold")
    for line, text in enumerate(
        [
            "A transformer's attention is a Python",
            "dictionary lookup whose keys were made",
            "soft: step by step, in NumPy, with every",
            "number computed and tested.",
        ]
    ):
        fig.text(0.06, 0.53 - 0.06 * line, text, color=LIGHT, fontsize=21)
    fig.text(0.06, 0.12, 'd["dog"] \u2192 softmax(q K\u1d40/\u221ad\u2096) V',
             color=ACCENT, fontsize=28, family="DejaVu Sans Mono")

    # The same lookup, exact and soft: the weights on five keys.
    keys = ["cat", "dog", "fox", "owl", "yak"]
    scores = np.array([1.0, 3.0, 1.8, 0.4, 0.9])
    for row, (temperature, label) in enumerate([(0.05, "exact"), (1.0, "soft")]):
        weights = np.exp((scores - scores.max()) / temperature)
        weights /= weights.sum()
        ax = fig.add_axes((0.72, 0.60 - row * 0.36, 0.24, 0.24), facecolor=INDIGO)
        ax.bar(keys, weights, color=[ACCENT if key == "dog" else LIGHT for key in keys], width=0.7)
        ax.set_ylim(0, 1.0)
        ax.set_title(f"{label} lookup", color="white", fontsize=16, loc="left")
        ax.tick_params(colors="white", labelsize=13, length=0)
        ax.set_yticks([])
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        ax.spines["bottom"].set_color(LIGHT)

    OUT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUT, facecolor=INDIGO, metadata={"Software": None})
    plt.close(fig)
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
