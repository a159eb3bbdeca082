"""The config reader of chapter 18, driven in Debian's Chromium.

The widget (docs/javascripts/config-reader.js) reads a configuration in the
reader's browser. These tests pick every shipped configuration, every number
format and context, and paste generated configurations (valid ones of every
kind of layer, under the hub's names and under the publishers' own), and
compare every number it shows with ``snippets.model_config.read_config``
computed here; and they paste bad JSON, a missing field and an inconsistent
one, and check the message. Skipped, with the reason, where Chromium or
playwright is missing (see tests/support/browser.py).
"""

from __future__ import annotations

import json
import random
import re

import pytest

from sitekit.widgets.config_reader import CONTEXTS, ELEMENT, FORMATS
from snippets.model_config import read_config
from support.browser import navigate_to_fresh_copy, open_widget

WIDGET_PAGE = "reading-a-config/index.html"
READY = f'.{ELEMENT}[data-ready="true"]'


@pytest.fixture(scope="module")
def widget(browser, server):
    tab, element, errors = open_widget(browser, server.url(WIDGET_PAGE), ELEMENT)
    yield tab, element, errors
    tab.context.close()


def shown(element) -> dict:
    def value(name):
        return json.loads(element.locator(f".cr-out dd.cr-{name}").get_attribute("data-value"))

    return {"layers": value("layers"), "cache": value("cache"), "total": value("total"),
            "active": value("active"), "limit": value("limit")}


def expected(config, context, n_bytes) -> dict:
    r = read_config(config, context=context, n_bytes=n_bytes)
    return {"layers": r["layers"], "cache": r["cache_bytes"], "total": r["total"], "active": r["active"],
            "limit": r["context_limit"]}


def paste(element, text: str) -> None:
    element.locator("textarea.cr-paste").fill(text)
    element.locator("button.cr-read").click()


def generated(seed: int) -> dict:
    """A valid configuration of a random kind, under the hub's or a publisher's names."""
    rng = random.Random(seed)
    H = rng.choice([2, 4, 8, 16])
    c = {"hidden_size": rng.choice([64, 96, 128]), "num_hidden_layers": rng.randint(1, 9),
         "num_attention_heads": H, "vocab_size": rng.randint(10, 5000)}
    kind = seed % 4
    if kind == 0:    # grouped-query, windows on some layers, a head_dim of its own
        c |= {"num_key_value_heads": rng.choice([g for g in (1, 2, H) if H % g == 0]),
              "head_dim": rng.choice([8, 24, 64]), "intermediate_size": rng.randint(1, 300),
              "sliding_window": rng.randint(1, 5000), "attention_bias": rng.random() < 0.5,
              "layer_types": [rng.choice(["full_attention", "sliding_attention"])
                              for _ in range(c["num_hidden_layers"])]}
        if seed % 8 == 4:  # Gemma 4's names: full layers with key tables of their own
            c |= {"num_global_kv_heads": 1, "global_key_size": 32, "k_eq_v_global": rng.random() < 0.5}
    elif kind == 1:  # latent attention, experts in groups, an index, DeepSeek's names
        c = {"dim": c.pop("hidden_size"), "n_layers": c.pop("num_hidden_layers"), "n_heads": H, **c}
        c |= {"kv_lora_rank": 16, "q_lora_rank": rng.choice([8, 32]), "qk_nope_head_dim": 8,
              "qk_rope_head_dim": 4, "v_head_dim": 12, "n_routed_experts": 8, "n_activated_experts": 2,
              "n_shared_experts": 1, "moe_inter_dim": 20, "inter_dim": 40, "n_dense_layers": 1,
              "n_expert_groups": 4, "n_limited_groups": 2, "score_func": "sigmoid", "route_scale": 2.5,
              "index_n_heads": 2, "index_head_dim": 8, "index_topk": 16, "original_seq_len": 256,
              "rope_factor": 4}
    elif kind == 2:  # a hybrid with a fixed-size memory, gated attention and a shared expert (Qwen's names)
        L = c["num_hidden_layers"]
        c |= {"num_key_value_heads": 2 if H % 2 == 0 else 1, "head_dim": 16,
              "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
              "linear_value_head_dim": 8, "linear_conv_kernel_dim": rng.randint(1, 4),
              rng.choice(["num_experts", "n_routed_experts"]): 16, "num_experts_per_tok": 3,
              "moe_intermediate_size": 12, "shared_expert_intermediate_size": 24, "intermediate_size": 40,
              "attn_output_gate": rng.random() < 0.5, "attention_bias": rng.random() < 0.5,
              "partial_rotary_factor": 0.25, "decoder_sparse_step": rng.randint(1, 3),
              "mlp_only_layers": sorted(rng.sample(range(L), rng.randint(0, L))),
              "max_position_embeddings": 262144}
        if seed % 8 == 2:
            c["full_attention_interval"] = rng.randint(1, 4)
        else:
            c["layer_types"] = [rng.choice(["full_attention", "linear_attention"]) for _ in range(L)]
    else:            # OpenAI's names, experts as wide as the feed-forward layer, tied tables
        c |= {"num_experts": 4, "experts_per_token": 2, "intermediate_size": 32, "tie_word_embeddings": True,
              "use_qk_norm": True, "rope_theta": 1e4, "bos_token_id": 1}
    return c


def test_every_shipped_config_every_format_and_context(widget):
    tab, element, errors = widget
    pick, fmt, context = (element.locator(f"select.cr-{name}") for name in ("pick", "format", "context"))
    configs = json.loads(element.get_attribute("data-configs"))
    assert len(configs) == 5
    for i, shipped in enumerate(configs):
        pick.select_option(str(i))
        for name, n_bytes in FORMATS.items():
            fmt.select_option(name)
            for n in (CONTEXTS[0], 131072, CONTEXTS[-1]):
                context.select_option(str(n))
                assert shown(element) == expected(shipped["config"], n, n_bytes), (shipped["model"], name, n)
        rows = element.locator(".cr-fields dt.cr-field")
        assert rows.count() == len(shipped["config"])
        assert "Every field is one this reader knows" in element.locator(".cr-unknown").inner_text()
    assert errors == []


@pytest.mark.parametrize("seed", range(16))
def test_generated_configs_equal_read_config(widget, seed):
    tab, element, errors = widget
    element.locator("select.cr-format").select_option("16-bit")
    element.locator("select.cr-context").select_option("4096")
    config = generated(seed)
    paste(element, json.dumps(config))
    assert element.locator(".cr-error").count() == 0, element.locator(".cr-error").inner_text()
    assert shown(element) == expected(config, 4096, 2)
    unknown = read_config(config)["unknown"]
    if unknown:
        assert ", ".join(unknown) in element.locator(".cr-unknown").inner_text()
    assert errors == []


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "This is not JSON"),
    ('{"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2}',
     "vocab_size is missing: a model config must give it"),
    ('{"hidden_size": 8, "dim": 9, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 3}',
     "hidden_size = 8 and dim = 9 name the same field (hidden_size) with two values"),
    ('{"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 3, '
     '"num_key_value_heads": 3}', "num_key_value_heads = 3 must divide num_attention_heads = 2"),
    ("[1, 2]", "a config.json holds one JSON object"),
    ('{"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 3, '
     '"intermediate_size": 4, "num_experts": 4, "num_experts_per_tok": 1, "mlp_only_layers": [2]}',
     "mlp_only_layers = [2]: expected a list of layer numbers from 0 to 1"),
    ('{"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 3, '
     '"partial_rotary_factor": 2}', "partial_rotary_factor = 2: expected a number in (0, 1]"),
    ('{"hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 3, '
     '"full_attention_interval": 2, "linear_num_key_heads": 3, "linear_num_value_heads": 4, '
     '"linear_key_head_dim": 2, "linear_value_head_dim": 2}',
     "linear_num_value_heads = 4 must be a multiple of linear_num_key_heads = 3"),
])
def test_bad_input_gets_a_clear_message(widget, text, message):
    tab, element, errors = widget
    paste(element, text)
    assert message in element.locator(".cr-error").inner_text()
    if text.startswith("{") and "not json" not in text:
        with pytest.raises(ValueError, match=re.escape(message.split(":")[0])):
            read_config(json.loads(text))


def test_links_lead_to_the_chapters(widget):
    tab, element, errors = widget
    element.locator("select.cr-pick").select_option("0")
    hrefs = {element.locator(".cr-fields a").nth(i).get_attribute("href")
             for i in range(element.locator(".cr-fields a").count())}
    assert "../latent-and-paged-caches/" in hrefs and "../experts/" in hrefs


def test_it_starts_again_after_instant_navigation(widget):
    tab, element, errors = widget
    navigate_to_fresh_copy(tab, READY)
    assert tab.locator(READY).count() == 1
    assert errors == []
