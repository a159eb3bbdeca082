"""Unit tests of sitekit/widgets/config_reader.py: the HTML that embeds the config reader of chapter 18.

The widget's behaviour in a browser is tested by tests/test_config_reader_browser.py.
"""

from __future__ import annotations

import html
import json
import re

import pytest

from sitekit.pages import ROOT
from sitekit.widgets.config_reader import CONTEXTS, FORMATS, SCRIPT, config_reader_html
from snippets.model_config import ALIASES, FIELDS, LAYER_KINDS, NAMES, NUMBERS, SIZES

SHIPPED = [json.loads(path.read_text(encoding="utf-8")) for path in sorted((ROOT / "docs/configs").glob("*.json"))]


def attributes(markup: str) -> dict[str, object]:
    """The data- attributes of the widget element, decoded from JSON."""
    found = dict(re.findall(r'data-([\w-]+)="([^"]*)"', markup.split(">", 1)[0]))
    return {name: json.loads(html.unescape(value)) for name, value in found.items()}


def test_the_element_carries_the_configs_and_the_fields():
    markup = config_reader_html(SHIPPED)
    assert markup.startswith('<div class="config-reader" ')
    data = attributes(markup)
    assert data["widget-script"] == SCRIPT
    assert [c["model"] for c in data["configs"]] == [s["model"] for s in SHIPPED]
    assert all(c["config"] == s["config"] and c["source"] == s["source"] for c, s in
               zip(data["configs"], SHIPPED, strict=True))
    assert data["fields"] == {name: list(value) for name, value in FIELDS.items()}
    assert data["aliases"] == ALIASES
    assert data["contexts"] == list(CONTEXTS) and 131072 in CONTEXTS
    assert data["formats"] == FORMATS
    assert data["checks"] == {"sizes": SIZES, "numbers": list(NUMBERS), "names": list(NAMES),
                              "kinds": list(LAYER_KINDS)}
    assert "needs JavaScript" in markup and "gpt-oss-120b" in markup


@pytest.mark.parametrize(("configs", "message"), [
    ([], "configs must be a non-empty list"),
    ([{"model": "x", "source": "s"}], r"configs\[0\] must have a 'config'"),
    ([{"model": "x", "source": "s", "config": {"hidden_size": 8}}], "num_hidden_layers is missing"),
])
def test_bad_configs_are_refused(configs, message):
    with pytest.raises(ValueError, match=message):
        config_reader_html(configs)


def test_a_name_with_markup_is_escaped():
    config = {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 3}
    markup = config_reader_html([{"model": "<b>x</b>", "source": "https://example.org", "config": config}])
    assert "<b>" not in markup
