"""Unit tests of sitekit/widgets/attention_viewer.py: the HTML that embeds the attention viewer of chapter 14.

The viewer's behaviour in a browser is tested by tests/test_attention_viewer_browser.py.
"""

import html
import json
import re

import numpy as np
import pytest

from sitekit.widgets.attention_viewer import DECIMALS, attention_viewer_html


def causal_weights(T, n_layers=2, n_heads=3, seed=0):
    rng = np.random.default_rng(seed)
    scores = np.where(np.tri(T, dtype=bool), rng.normal(size=(n_layers, n_heads, T, T)), -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def data(markup, name):
    raw = re.search(rf'data-{name}="([^"]*)"', markup).group(1)
    return json.loads(html.unescape(raw))


def test_the_attributes_carry_the_tokens_and_every_lower_triangle_rounded():
    sentences = [["the", "cat", "<sat>"], ["a", "b"]]
    weights = [causal_weights(3), causal_weights(2, seed=1)]
    markup = attention_viewer_html(sentences, weights, layer=1, head=2)
    assert markup.startswith('<div class="attention-viewer" ')
    assert data(markup, "sentences") == sentences
    assert (data(markup, "layer"), data(markup, "head"), data(markup, "query")) == (1, 2, 2)
    rows = data(markup, "weights")
    assert len(rows) == 2 and len(rows[0]) == 2 and len(rows[0][0]) == 3
    for i, w in enumerate(weights):
        for t in range(len(sentences[i])):
            assert rows[i][1][2][t] == np.round(w[1, 2, t, : t + 1], DECIMALS).tolist()
    assert "&lt;sat&gt;" in markup and "<sat>" not in markup      # tokens are escaped


@pytest.mark.parametrize("kwargs, words", [
    ({"sentences": "the cat", "weights": []}, "list of sentences"),
    ({"sentences": [[]], "weights": [np.zeros((1, 1, 0, 0))]}, "1 to 64 tokens"),
    ({"sentences": [["a", "b"]], "weights": [np.ones((1, 1, 2, 2)) / 2]}, "not causal"),
    ({"sentences": [["a", "b"]], "weights": [np.ones((1, 1, 3, 3))]}, "T = 2"),
    ({"sentences": [["a", "b"]], "weights": [causal_weights(2)], "layer": 2}, "layer"),
    ({"sentences": [["a", "b"]], "weights": [causal_weights(2)], "query": 2}, "query"),
    ({"sentences": [["a", "b"]], "weights": [causal_weights(2) * np.nan]}, "from 0 to 1"),
])
def test_bad_input_gets_a_clear_error(kwargs, words):
    with pytest.raises((ValueError, TypeError), match=words):
        attention_viewer_html(**kwargs)
