"""The config reader: a model's config.json read field by field in the page (chapter 18).

A page embeds it from an executed block with ``html="true"`` that prints
``config_reader_html(configs)``: an element of class ``config-reader`` whose
``data-`` attributes carry the shipped configurations (docs/configs/), and
``snippets.model_config``'s ``FIELDS`` and ``ALIASES``, as JSON.
``docs/javascripts/config-reader.js`` (loaded by widgets.js where the element
is) lets the reader pick a shipped configuration or paste a config.json, and
shows what each field sets (with a link to its chapter), the fields it does
not know, every layer's kind, the cache against the context length, and the
total and active parameters: what ``snippets.model_config.read_config``
computes, which tests/test_config_reader_browser.py checks over every shipped
configuration and generated ones. Nothing leaves the page: a pasted
config.json is read by the script in the reader's browser.
"""

from __future__ import annotations

import html

from sitekit.widgets import data_attribute
from snippets.model_config import ALIASES, FIELDS, LAYER_KINDS, NAMES, NUMBERS, SIZES, read_config

# The widget's declaration (sitekit/widgets/__init__.py).
ELEMENT = "config-reader"
NAME = "config reader"
SCRIPT = "javascripts/config-reader.js"

# The context lengths the reader picks from, and the plot's axis.
CONTEXTS: tuple[int, ...] = tuple(2**p for p in range(10, 21))
# The number formats of the cache: name -> bytes per number.
FORMATS = {"16-bit": 2, "8-bit": 1, "32-bit": 4}


def _shipped(configs) -> list[dict]:
    if not isinstance(configs, list) or not configs:
        raise ValueError(f"configs must be a non-empty list of shipped configurations "
                         f"(docs/configs/*.json, read by json.load), got {configs!r:.80}")
    shown = []
    for i, shipped in enumerate(configs):
        if not isinstance(shipped, dict):
            raise ValueError(f"configs[{i}] must be a dict, got {type(shipped).__name__}")
        for key in ("model", "source", "config"):
            if not isinstance(shipped.get(key), str if key != "config" else dict):
                raise ValueError(f"configs[{i}] must have a {key!r} "
                                 f"({'a dict' if key == 'config' else 'a string'}), got {shipped.get(key)!r:.60}")
        read_config(shipped["config"])  # a shipped configuration must read
        shown.append({key: shipped[key] for key in ("model", "source", "config")})
    return shown


# --8<-- [start:config_reader_html]
def config_reader_html(configs) -> str:
    """HTML for the config reader; print it from a block with ``html="true"``.

    ``configs`` is a list of shipped configurations, each a dict with
    ``model`` (its name), ``source`` (its address) and ``config`` (the
    fields), as docs/configs/*.json hold them.

    >>> config = {"hidden_size": 8, "num_hidden_layers": 1,
    ...           "num_attention_heads": 2, "vocab_size": 3}
    >>> shipped = [{"model": "tiny", "source": "https://example.org",
    ...             "config": config}]
    >>> config_reader_html(shipped).startswith('<div class="config-reader"')
    True
    """
    shown = _shipped(configs)
    attributes = " ".join(
        [
            f'class="{ELEMENT}"',
            data_attribute("widget-script", SCRIPT),
            data_attribute("configs", shown),
            data_attribute("fields", FIELDS),
            data_attribute("aliases", ALIASES),
            # what read_config checks each field for, so that the script checks the same
            data_attribute("checks", {"sizes": SIZES, "numbers": list(NUMBERS), "names": list(NAMES),
                                      "kinds": list(LAYER_KINDS)}),
            data_attribute("contexts", list(CONTEXTS)),
            data_attribute("formats", FORMATS),
        ]
    )
    names = ", ".join(html.escape(s["model"]) for s in shown)
    # Shown until the script replaces it, and to readers without JavaScript.
    return (
        f"<div {attributes}>\n"
        f"<p>Config reader (it needs JavaScript): it reads {names}, "
        f"or a config.json you paste, field by field.</p>\n</div>"
    )
# --8<-- [end:config_reader_html]
