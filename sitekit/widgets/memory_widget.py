"""The fixed-size memory widget: two writes, two keys, one matrix (chapter 9).

A page embeds it from an executed block with ``html="true"`` that prints
``memory_widget_html(...)``: an empty ``<div class="memory-widget">`` whose
``data-`` attributes carry the two values and the sliders' settings as JSON.
``docs/javascripts/memory-widget.js`` (loaded by widgets.js where the element is) finds the element
and draws the widget: a slider for the angle between a new key and an old
one, a slider for the delta rule's ``β``, and a table of what each key reads
back from a memory filled by additive writes and from one filled by the delta
rule. This module is the one source of the data; the script only reads it.

The keys are two-dimensional and of length 1: the old key ``[1, 0]``, the new
key ``[cos θ, sin θ]`` for the angle ``θ``. With ``K`` these two rows and
``V`` the two values, the script computes what
``snippets.linear_memory.linear_attention(K, K, V, causal=False)`` (the
additive memory ``Kᵀ V``, read by both keys) and ``K @ delta_rule(K, V, β)``
compute. tests/test_memory_widget_browser.py checks the numbers it shows
against those functions.
"""

from __future__ import annotations

import html
import numbers

import numpy as np

from sitekit.widgets import data_attribute

# The widget's declaration (sitekit/widgets/__init__.py).
ELEMENT = "memory-widget"
NAME = "memory widget"
SCRIPT = "javascripts/memory-widget.js"

# The angle slider moves in steps of 5 degrees from 0 (the same key) to 180
# (the opposite key); 90 is the orthonormal case.
ANGLE_STEP = 5
ANGLES: tuple[int, ...] = tuple(range(0, 181, ANGLE_STEP))
# β moves in tenths from 0 (the delta rule writes nothing) to 1 (full overwrite).
BETAS: tuple[float, ...] = tuple(i / 10 for i in range(11))



def _value(x, name: str) -> np.ndarray:
    """A value vector ``(d_v,)`` of finite numbers; a message names ``name``."""
    try:
        array = np.asarray(x)
    except (TypeError, ValueError):  # ragged nested lists, say
        raise ValueError(f"{name} must be a vector of numbers, shape (d_v,), got {x!r}") from None
    if array.dtype.kind not in "biuf":  # complex, strings, None, objects
        raise ValueError(f"{name} must be a vector of real numbers, shape (d_v,), got {x!r}")
    array = array.astype(np.float64)
    if array.ndim != 1 or not 1 <= array.size <= 6:
        raise ValueError(f"{name} must have shape (d_v,) with 1 <= d_v <= 6, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite numbers (no NaN or inf), got {array.tolist()}")
    return array


# --8<-- [start:memory_widget_html]
def memory_widget_html(old_value, new_value, angle: int = 30, beta: float = 1.0) -> str:
    """HTML for the memory widget; print it from a block with ``html="true"``.

    ``old_value`` and ``new_value`` are the values ``(d_v,)`` written under
    the old key and then under the new key (the same ``d_v``, at most 6).
    ``angle`` is the starting angle between the keys in degrees, one of
    ``ANGLES``; ``beta`` the starting ``β`` of the delta rule, one of ``BETAS``.

    >>> memory_widget_html([1, 0], [0, 1]).startswith('<div class="memory-widget"')
    True
    """
    old, new = _value(old_value, "old_value"), _value(new_value, "new_value")
    if old.shape != new.shape:
        raise ValueError(
            f"old_value and new_value must have the same shape (d_v,), got {old.shape} and {new.shape}"
        )
    if isinstance(angle, bool) or not isinstance(angle, numbers.Integral) or angle not in ANGLES:
        raise ValueError(
            f"angle must be a whole number of degrees from 0 to 180 in steps of {ANGLE_STEP}, got {angle!r}"
        )
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real) or beta not in BETAS:
        raise ValueError(f"beta must be one of 0, 0.1, ..., 1 (the slider's steps), got {beta!r}")
    attributes = " ".join(
        [
            f'class="{ELEMENT}"',
            data_attribute("widget-script", SCRIPT),
            data_attribute("old-value", old.tolist()),
            data_attribute("new-value", new.tolist()),
            data_attribute("angle", int(angle)),
            data_attribute("angle-step", ANGLE_STEP),
            data_attribute("beta", float(beta)),
            data_attribute("betas", list(BETAS)),
        ]
    )
    # Shown until the script replaces it, and to readers without JavaScript.
    return (
        f"<div {attributes}>\n"
        f"<p>Memory widget (it needs JavaScript): the old key [1, 0] stores "
        f"{html.escape(str(old.tolist()))}, a new key at {int(angle)}° stores "
        f"{html.escape(str(new.tolist()))}.</p>\n</div>"
    )
# --8<-- [end:memory_widget_html]
