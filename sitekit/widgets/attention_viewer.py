"""The attention viewer: where every head of a trained model looks, word by word (chapter 14).

A page embeds it from an executed block with ``html="true"`` that prints
``attention_viewer_html(sentences, weights)``: an empty
``<div class="attention-viewer">`` whose ``data-`` attributes carry the
sentences' tokens and every head's attention weights as JSON.
``docs/javascripts/attention-viewer.js`` (loaded by widgets.js where the element is) finds the
element and draws the viewer: a choice of sentence, layer and head, and the
sentence's words as buttons. Pressing a word (a click or a tap) or moving to
it with the keyboard shades every word by the weight the chosen head puts on
it from there, and writes the weights under the words; pointing at a word
moves nothing. Each word's button is named by the word (punctuation by its
name, "full stop"), its place and its weight.

The weights are those of ``snippets.heads.attention_weights``, computed
when the site is built and rounded to ``DECIMALS`` places; only the lower
triangle is sent (position t looks at positions 0 .. t, never later).
tests/test_attention_viewer_browser.py checks the numbers the viewer shows
against those functions.
"""

from __future__ import annotations

import html

import numpy as np

from sitekit.widgets import data_attribute

# The widget's declaration (sitekit/widgets/__init__.py).
ELEMENT = "attention-viewer"
NAME = "attention viewer"
SCRIPT = "javascripts/attention-viewer.js"

DECIMALS = 2          # what the viewer shows, and all it is sent
MAX_SENTENCES = 12
MAX_TOKENS = 64


def _check_sentences(sentences) -> list[list[str]]:
    if isinstance(sentences, (str, bytes)) or not isinstance(sentences, (list, tuple)):
        raise TypeError(f"sentences must be a list of sentences, each a list of tokens, got {type(sentences).__name__}")
    if not 1 <= len(sentences) <= MAX_SENTENCES:
        raise ValueError(f"sentences must hold 1 to {MAX_SENTENCES} sentences, got {len(sentences)}")
    checked = []
    for i, tokens in enumerate(sentences):
        if isinstance(tokens, str) or not isinstance(tokens, (list, tuple)):
            raise TypeError(f"sentences[{i}] must be a list of tokens (strings), got {type(tokens).__name__}")
        if not 1 <= len(tokens) <= MAX_TOKENS:
            raise ValueError(f"sentences[{i}] must hold 1 to {MAX_TOKENS} tokens, got {len(tokens)}")
        if not all(isinstance(token, str) and token.strip() for token in tokens):
            raise ValueError(f"sentences[{i}] must hold non-empty strings (tokens), got {list(tokens)[:8]!r}")
        checked.append([str(token) for token in tokens])
    return checked


def _check_weights(weights, sentences) -> list[np.ndarray]:
    if isinstance(weights, (str, bytes)) or not isinstance(weights, (list, tuple)) or len(weights) != len(sentences):
        raise ValueError(
            f"weights must be a list with one array (n_layers, n_heads, T, T) for each of the "
            f"{len(sentences)} sentences, got {type(weights).__name__} {str(weights)[:40]}"
        )
    checked, shape = [], None
    for i, (w, tokens) in enumerate(zip(weights, sentences, strict=True)):
        try:
            array = np.asarray(w, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"weights[{i}] must be an array of numbers (n_layers, n_heads, T, T)") from None
        T = len(tokens)
        if array.ndim != 4 or array.shape[2:] != (T, T) or 0 in array.shape:
            raise ValueError(f"weights[{i}] must have shape (n_layers, n_heads, T, T) with T = {T}, got {array.shape}")
        if shape is not None and array.shape[:2] != shape:
            raise ValueError(f"weights[{i}] has {array.shape[:2]} layers and heads, weights[0] has {shape}")
        shape = array.shape[:2]
        if not np.isfinite(array).all() or array.min() < 0 or array.max() > 1 + 1e-9:
            raise ValueError(f"weights[{i}] must hold attention weights, numbers from 0 to 1")
        if np.triu(array, k=1).any():
            raise ValueError(f"weights[{i}] is not causal: a position puts weight on a later one")
        checked.append(array)
    return checked


# --8<-- [start:attention_viewer_html]
def attention_viewer_html(sentences, weights, layer: int = 0, head: int = 0, query: int | None = None) -> str:
    """HTML for the attention viewer; print it from a block with ``html="true"``.

    ``sentences`` is a list of sentences, each a list of tokens;
    ``weights[i]`` holds sentence i's attention weights, shape
    ``(n_layers, n_heads, T, T)``, as ``snippets.heads.attention_weights``
    returns them. ``layer`` and ``head`` are the head shown first, and
    ``query`` the position of the first sentence whose lookup is shown
    first (by default its last token).

    >>> w = np.array([[[[1.0, 0.0], [0.25, 0.75]]]])          # 1 layer, 1 head, T = 2
    >>> attention_viewer_html([["hello", "world"]], [w]).startswith('<div class="attention-viewer"')
    True
    """
    sentences = _check_sentences(sentences)
    arrays = _check_weights(weights, sentences)
    n_layers, n_heads = arrays[0].shape[:2]
    query = len(sentences[0]) - 1 if query is None else query
    for name, index, size in (("layer", layer, n_layers), ("head", head, n_heads), ("query", query, len(sentences[0]))):
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < size:
            raise ValueError(f"{name} must be an integer from 0 to {size - 1}, got {index!r}")
    # [sentence][layer][head][t]: the weights of position t on positions 0 .. t.
    rows = [
        [[[np.round(a[lay, h, t, : t + 1], DECIMALS).tolist() for t in range(a.shape[-1])]
          for h in range(n_heads)] for lay in range(n_layers)]
        for a in arrays
    ]
    attributes = " ".join([
        data_attribute("widget-script", SCRIPT),
        data_attribute("sentences", sentences),
        data_attribute("weights", rows),
        data_attribute("layer", int(layer)),
        data_attribute("head", int(head)),
        data_attribute("query", int(query)),
    ])
    # Shown until the script replaces it, and to readers without JavaScript.
    return (
        f'<div class="{ELEMENT}" {attributes}>\n<p>The attention viewer needs JavaScript. It shows where each of the '
        f"{n_layers * n_heads} heads looks in {len(sentences)} sentences, the first of which is: "
        f"{html.escape(' '.join(sentences[0]))}</p>\n</div>"
    )
# --8<-- [end:attention_viewer_html]
