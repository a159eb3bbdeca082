"""The soft-lookup playground: an interactive widget for a page (chapter 3).

A page embeds it from an executed block with ``html="true"`` that prints
``playground_html(...)``. That prints an empty ``<div
class="soft-lookup-playground">`` whose ``data-`` attributes carry the
dictionary, the starting query and the slider settings as JSON;
``docs/javascripts/playground.js`` (loaded by widgets.js where the element is) finds the element
and draws the widget: a slider per key that sets how much of that key the
query contains, a temperature slider, a bar per key for its attention weight,
and the returned value. This module is the one source of the data and of the
sliders' settings; the script only reads them.

The script computes what :func:`snippets.attention.softmax` computes, for the
query vector ``q = query @ key_vectors`` (a mix of the key vectors):
``scores = key_vectors @ q``, ``weights = softmax(scores / temperature)``,
``output = weights @ values``. tests/test_playground_browser.py checks the
numbers it shows against that function.
"""

from __future__ import annotations

import html
from collections.abc import Hashable, Sequence

import numpy as np

from sitekit.widgets import data_attribute

# The widget's declaration (sitekit/widgets/__init__.py).
ELEMENT = "soft-lookup-playground"
NAME = "soft-lookup playground"
SCRIPT = "javascripts/playground.js"

# The temperature slider moves along these temperatures: ten steps per power of
# ten from 0.001 to 10000, so equal slider moves multiply the temperature by
# equal factors (a log scale) and every position is a round number that a
# reader can type into Python. 0.001 is cold enough to put all the weight on
# the best key when scores differ by 0.05 (exp(-50) rounds to 0); 10000 hot
# enough to give equal weights, to 3 decimals, for scores of size about 1.
_PER_DECADE = ("1", "1.25", "1.6", "2", "2.5", "3.2", "4", "5", "6.3", "8")
TEMPERATURES: tuple[float, ...] = tuple(
    float(f"{mantissa}e{exponent}") for exponent in range(-3, 4) for mantissa in _PER_DECADE
) + (1e4,)

# The query sliders: how much of each key the query contains, from 0 to 1.
MIX_STEP = 0.05



def _finite_array(x, name: str, ndim: tuple[int, ...], expected: str) -> np.ndarray:
    """``x`` as float64 with one of the dimensions ``ndim``; a message names the shapes."""
    try:
        array = np.asarray(x)
        if array.dtype.kind not in "biuf":  # strings, None, complex numbers, objects
            raise TypeError
        array = array.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers of shape {expected}, got {x!r}") from None
    if array.ndim not in ndim:
        raise ValueError(f"{name} must have shape {expected}, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite numbers (no NaN or inf), got {array.tolist()}")
    return array


# --8<-- [start:playground_html]
def playground_html(
    keys: Sequence[Hashable],
    key_vectors,
    values,
    query,
    temperature: float = 1.0,
) -> str:
    """HTML for the playground; print it from a block with ``html="true"``.

    ``keys`` are ``S`` distinct keys, shown by their ``str()``;
    ``key_vectors`` is ``K`` of shape ``(S, d_k)``, one row per key;
    ``values`` is ``V`` of shape ``(S,)`` (numbers) or ``(S, d_v)`` (vectors);
    ``query`` is the starting mix, shape ``(S,)``: how much of each key the
    query contains, from 0 to 1 in steps of ``MIX_STEP``, so the query vector
    is ``query @ key_vectors``, shape ``(d_k,)``. ``temperature`` is the
    starting temperature, one of ``TEMPERATURES``.

    >>> markup = playground_html(["dog", "cat"], np.eye(2), [10, 2], query=[1.0, 0.0])
    >>> markup.startswith('<div class="soft-lookup-playground"'), "dog → 10.0" in markup
    (True, True)
    """
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
        raise TypeError(f"keys must be a sequence of keys (a list, say), got {type(keys).__name__} {keys!r:.60}")
    labels = [str(key) for key in keys]
    S = len(labels)
    if S == 0 or len(set(labels)) != S or not all(labels):
        raise ValueError(f"keys must be at least one distinct, non-empty key, got {labels!r}")
    K = _finite_array(key_vectors, "key_vectors", (2,), f"(S, d_k) with S = {S} keys")
    V = _finite_array(values, "values", (1, 2), f"(S,) or (S, d_v) with S = {S} keys")
    mix = _finite_array(query, "query", (1,), f"(S,) = ({S},), one amount per key (S = len(keys))")
    if K.shape[0] != S or K.shape[1] == 0:
        raise ValueError(f"key_vectors must have shape (S, d_k) = ({S}, d_k), one row per key (S = len(keys)), "
                         f"got shape {K.shape}")
    if V.shape[0] != S or V.size == 0:
        raise ValueError(f"values must have shape (S,) or (S, d_v) with S = len(keys) = {S}, got shape {V.shape}")
    if mix.shape != (S,):
        raise ValueError(f"query must have shape (S,) = ({S},), one amount per key (S = len(keys)), "
                         f"got shape {mix.shape}")
    steps = mix / MIX_STEP if (mix >= 0).all() and (mix <= 1).all() else None   # (no overflow: |mix| <= 1)
    if steps is None or not np.allclose(steps, np.round(steps), rtol=0, atol=1e-9):
        raise ValueError(f"query amounts must lie in [0, 1] in steps of {MIX_STEP}, got {mix.tolist()}")
    if isinstance(temperature, (bool, np.bool_)) or not isinstance(temperature, (int, float, np.integer, np.floating)):
        raise TypeError(f"temperature must be a number, one of the slider's temperatures, got {temperature!r:.60}")
    if temperature not in TEMPERATURES:
        raise ValueError(
            f"temperature must be one of the slider's temperatures ({TEMPERATURES[0]} to "
            f"{TEMPERATURES[-1]}, e.g. 0.1, 1.0, 10.0), got {temperature!r}"
        )
    fallback = ", ".join(f"{label} → {value}" for label, value in zip(labels, V.tolist(), strict=True))
    attributes = " ".join(
        [
            f'class="{ELEMENT}"',
            data_attribute("widget-script", SCRIPT),
            data_attribute("keys", labels),
            data_attribute("key-vectors", K.tolist()),
            data_attribute("values", V.tolist()),
            data_attribute("query", mix.tolist()),
            data_attribute("temperature", float(temperature)),
            data_attribute("temperatures", list(TEMPERATURES)),
            data_attribute("mix-step", MIX_STEP),
        ]
    )
    # Shown until the script replaces it, and to readers without JavaScript.
    return (
        f"<div {attributes}>\n"
        f"<p>Soft-lookup playground (it needs JavaScript). Keys and values: "
        f"{html.escape(fallback)}.</p>\n</div>"
    )
# --8<-- [end:playground_html]
