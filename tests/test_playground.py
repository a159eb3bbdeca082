"""Unit tests of sitekit/widgets/playground.py: the HTML that embeds the soft-lookup playground.

The widget's behaviour in a browser is tested by tests/test_playground_browser.py.
"""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from sitekit.widgets.playground import MIX_STEP, TEMPERATURES, playground_html

KEYS = ["dog", "cat", "tiger", "car"]
ONE_HOT = np.eye(4)
VALUES = [10, 2, 5, 12]


class _Elements(HTMLParser):
    """Every start tag with its attributes, unescaped as a browser would read them."""

    def __init__(self):
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(markup: str) -> tuple[dict[str, str], str]:
    """The playground element's attributes and the text inside it."""
    parser = _Elements()
    parser.feed(markup)
    parser.close()
    tag, attrs = parser.elements[0]
    assert tag == "div" and attrs["class"] == "soft-lookup-playground"
    return attrs, "".join(parser.text)


def data(attrs: dict[str, str], name: str):
    return json.loads(attrs[f"data-{name}"])


def test_the_data_attributes_round_trip_as_json():
    attrs, _ = parse(playground_html(KEYS, ONE_HOT, VALUES, query=[1, 0, 0, 0], temperature=1.0))
    assert data(attrs, "keys") == KEYS
    assert data(attrs, "key-vectors") == ONE_HOT.tolist()
    assert data(attrs, "values") == [10.0, 2.0, 5.0, 12.0]
    assert data(attrs, "query") == [1.0, 0.0, 0.0, 0.0]
    assert data(attrs, "temperature") == 1.0
    assert data(attrs, "temperatures") == list(TEMPERATURES)
    assert data(attrs, "mix-step") == MIX_STEP


def test_vector_values_and_keys_that_are_not_one_hot():
    # T ≠ S and d_k ≠ d_v: S = 3 keys, d_k = 2, d_v = 5
    rng = np.random.default_rng(0)
    key_vectors = rng.normal(size=(3, 2))
    values = rng.normal(size=(3, 5))
    attrs, _ = parse(playground_html(["a", "b", "c"], key_vectors, values, [0.25, 0.5, 0.0], 0.1))
    assert np.array_equal(data(attrs, "key-vectors"), key_vectors)  # floats survive JSON exactly
    assert np.array_equal(data(attrs, "values"), values)
    assert data(attrs, "query") == [0.25, 0.5, 0.0]


def test_keys_are_shown_by_str_and_escaped():
    tricky = ['say "hi"', "<b>&", 8]
    markup = playground_html(tricky, np.eye(3), [1, 2, 3], [0, 0, 1], 1.0)
    assert "<b>" not in markup and '"hi"' not in markup
    attrs, text = parse(markup)
    assert data(attrs, "keys") == ['say "hi"', "<b>&", "8"]
    assert "JavaScript" in text and "<b>& → 2.0" in text  # a fallback without the script


def test_temperatures_are_a_log_scale_of_round_numbers():
    assert TEMPERATURES[0] == 0.001 and TEMPERATURES[-1] == 10_000
    assert {0.01, 0.1, 1.0, 10.0, 100.0} <= set(TEMPERATURES)
    ratios = np.diff(np.log10(TEMPERATURES))
    assert np.all(ratios > 0.08) and np.all(ratios < 0.12)  # ten steps per power of ten
    # three significant digits at most (0.0125, 6300.0): a reader can type them
    assert all(len(repr(t).replace(".", "").strip("0")) <= 3 for t in TEMPERATURES)


@pytest.mark.parametrize("temperature", [TEMPERATURES[0], 1.0, TEMPERATURES[-1]])
def test_any_temperature_of_the_slider_is_accepted(temperature):
    attrs, _ = parse(playground_html(KEYS, ONE_HOT, VALUES, [0, 1, 0, 0], temperature))
    assert data(attrs, "temperature") == temperature


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"key_vectors": np.eye(3)},
         "key_vectors must have shape (S, d_k) = (4, d_k), one row per key (S = len(keys)), got shape (3, 3)"),
        ({"key_vectors": np.ones(4)}, "key_vectors must have shape (S, d_k) with S = 4 keys, got shape (4,)"),
        ({"key_vectors": np.ones((4, 0))}, "got shape (4, 0)"),
        ({"values": [1, 2, 3]}, "values must have shape (S,) or (S, d_v) with S = len(keys) = 4, got shape (3,)"),
        ({"values": np.ones((4, 2, 1))},
         "values must have shape (S,) or (S, d_v) with S = 4 keys, got shape (4, 2, 1)"),
        ({"query": [1, 0, 0]}, "query must have shape (S,) = (4,), one amount per key (S = len(keys)), got shape (3,)"),
        ({"query": np.eye(4)},
         "query must have shape (S,) = (4,), one amount per key (S = len(keys)), got shape (4, 4)"),
        ({"query": [1.5, 0, 0, 0]}, "query amounts must lie in [0, 1] in steps of 0.05, got [1.5, 0.0, 0.0, 0.0]"),
        ({"query": [0.33, 0, 0, 0]}, "in steps of 0.05"),
        ({"query": [-0.05, 0, 0, 0]}, "in steps of 0.05"),
        ({"values": [1, 2, math.nan, 4]}, "values must be finite numbers"),
        ({"key_vectors": np.full((4, 4), np.inf)}, "key_vectors must be finite numbers"),
        ({"values": ["a", "b", "c", "d"]}, "values must be numbers of shape"),
        ({"temperature": 0.7}, "temperature must be one of the slider's temperatures (0.001 to 10000.0"),
        ({"temperature": 0}, "got 0"),
        ({"keys": ["dog", "dog", "cat", "car"]}, "keys must be at least one distinct, non-empty key"),
        ({"keys": [8, "8", "cat", "car"]}, "got ['8', '8', 'cat', 'car']"),
        ({"keys": []}, "got []"),
    ],
)
def test_bad_input_is_refused_with_the_shapes_in_the_message(arguments, message):
    call = {"keys": KEYS, "key_vectors": ONE_HOT, "values": VALUES, "query": [1, 0, 0, 0], "temperature": 1.0}
    call.update(arguments)
    with pytest.raises(ValueError, match=re.escape(message)):
        playground_html(**call)


def test_query_amounts_on_the_slider_steps_are_accepted_despite_rounding():
    amounts = [0.1 + 0.2, 0.35, 0.7, 1.0]  # 0.30000000000000004 is the step 0.3
    attrs, _ = parse(playground_html(KEYS, ONE_HOT, VALUES, amounts, 1.0))
    assert data(attrs, "query") == amounts
