"""snippets/model_config.py: a model's configuration read as dictionary choices (chapter 18).

The shipped excerpts (docs/configs/) are read and their counts compared with
what each publisher states; the cache is compared with chapter 8's and
chapter 15's formulas, layer by layer; the parameter counts with chapter 16's
count of DeepSeek-V3 and gpt-oss-120b; and every inconsistent field gets a
message naming it.
"""

from __future__ import annotations

import json

import pytest

from sitekit.pages import ROOT
from snippets.model_config import ALIASES, FIELDS, KNOWN, LAYER_KINDS, NAMES, NUMBERS, SIZES, read_config

CONFIGS = {path.stem: json.loads(path.read_text(encoding="utf-8"))
           for path in sorted((ROOT / "docs" / "configs").glob("*.json"))}


def test_the_shipped_configs():
    assert set(CONFIGS) == {"deepseek-v3.2-exp", "gemma-3-27b", "gemma-4-31b", "gpt-oss-120b",
                            "qwen3-next-80b-a3b"}
    for name, shipped in CONFIGS.items():
        for key in ("model", "publisher", "released", "source", "license", "excerpt", "stated", "config"):
            assert shipped.get(key), (name, key)
        assert shipped["source"].startswith("https://github.com/") and "/blob/" in shipped["source"]
        reading = read_config(shipped["config"])
        assert reading["unknown"] == [], (name, reading["unknown"])


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_totals_against_what_the_publisher_states(name):
    """Each difference is the one chapter 18 explains."""
    shipped = CONFIGS[name]
    reading = read_config(shipped["config"])
    total, active = reading["total"], reading["active"]
    stated = shipped["stated"]
    if name == "deepseek-v3.2-exp":
        # V3's 671B, plus the indexer of V3.2 (0.85B): 671.9B
        assert round(total / 1e9, 1) == 671.9
        indexer = 61 * (1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64)
        assert total - indexer == 671_026_419_200       # chapter 16's count of DeepSeek-V3
        assert active - indexer == 36_625_618_432
        assert round(indexer / 1e9, 2) == 0.85
    elif name == "gpt-oss-120b":
        # chapter 16's count less the biases and sinks no field announces
        assert total == 116_829_156_672 - 36 * (128 * (2 * 2880 + 2880) + 128 + (64 + 16) * 64 + 2880 + 64)
        assert round(total / 1e9) == stated["total"] / 1e9 == 117
        assert round(active / 1e9, 1) == stated["active"] / 1e9 == 5.1
    elif name == "gemma-3-27b":
        assert total == active and round(total / 1e9) == stated["total"] / 1e9 == 27
    elif name == "qwen3-next-80b-a3b":
        # modeling_qwen3_next.py's shapes, counted by hand: a Gated DeltaNet layer (in_proj_qkvz,
        # in_proj_ba, conv1d, A_log and dt_bias, norm, out_proj), a gated attention layer (q_proj
        # twice as wide, k_proj, v_proj, o_proj), an expert layer (router, 512 experts, the shared one)
        d, key_dim, value_dim = 2048, 16 * 128, 32 * 128
        conv_dim = 2 * key_dim + value_dim
        delta_net = d * (2 * key_dim + 2 * value_dim) + d * 64 + conv_dim * 4 + 2 * 32 + 128 + value_dim * d
        gated = d * 16 * 256 * 2 + 2 * d * 2 * 256 + 16 * 256 * d
        router, expert = 512 * d, 3 * d * 512
        layers = 36 * delta_net + 12 * gated + 48 * (2 * d) + d
        assert total == layers + 48 * (router + 513 * expert) + 2 * 151936 * d
        assert active == layers + 48 * (router + 11 * expert) + 151936 * d
        # left out, in no field: the shared expert's one-row gate and the QK-norm weights
        assert 48 * d + 12 * 2 * 256 == 104_448
        assert round(total / 1e9) == stated["total"] / 1e9 == 80
        # the overview's "3B active": the layers alone, without the output table, round to it
        assert round(active / 1e9, 2) == 3.56 and round((active - 151936 * d) / 1e9) == 3
        assert stated["active"] / 1e9 == 3
    else:
        # Gemma 4 31B: 30.7B of text model; the name rounds and covers an image encoder
        assert total == active and round(total / 1e9, 1) == 30.7 and stated["total"] / 1e9 == 31


def test_the_cache_layer_by_layer():
    deepseek = read_config(CONFIGS["deepseek-v3.2-exp"]["config"], context=1)
    assert deepseek["cache_bytes"] == 61 * (512 + 64 + 128) * 2      # latent, RoPE key, index key
    assert deepseek["context_limit"] == 4096 * 40
    gpt = read_config(CONFIGS["gpt-oss-120b"]["config"], context=1000)
    per_layer = 2 * 8 * 64 * 2
    assert gpt["cache_bytes"] == 18 * per_layer * 1000 + 18 * per_layer * 128
    assert gpt["layers"][:2] == ["sliding_attention", "full_attention"]
    gemma = read_config(CONFIGS["gemma-3-27b"]["config"], context=4096, n_bytes=1)
    assert gemma["cache_bytes"] == (10 * 4096 + 52 * 1024) * 2 * 16 * 128
    assert gemma["layers"].count("full_attention") == 10
    # Gemma 4: 16 tables of 256 in the windowed layers, 4 of 512 in the full ones,
    # keys and values both cached though one projection makes them
    gemma4 = read_config(CONFIGS["gemma-4-31b"]["config"], context=4096)
    assert gemma4["cache_bytes"] == (50 * 1024 * 2 * 16 * 256 + 10 * 4096 * 2 * 4 * 512) * 2
    # Qwen3-Next: chapter 17's hybrid, its 36 memories in 32-bit numbers and their convolutions'
    # last 3 inputs in 16-bit ones (73.7 MiB), beside 12 full layers of 2 tables of 256
    qwen = read_config(CONFIGS["qwen3-next-80b-a3b"]["config"], context=1000)
    fixed = 36 * (32 * 128 * 128 * 4 + 3 * (2 * 16 * 128 + 32 * 128) * 2)
    assert round(fixed / 2**20, 1) == 73.7
    assert qwen["cache_bytes"] == 12 * 2 * 2 * 256 * 2 * 1000 + fixed
    assert qwen["layers"][:4] == ["linear_attention"] * 3 + ["full_attention"]
    # chapter 17: the hybrid's cache is the all-full model's at 1,048 tokens
    all_full = 48 * 2 * 2 * 256 * 2
    assert fixed // (all_full - 12 * 2 * 2 * 256 * 2) == 1048


def test_full_layers_with_key_tables_of_their_own():
    """Gemma 4's fields change the full layers only; one projection for keys and values saves weights."""
    base = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4,
            "head_dim": 16, "vocab_size": 10, "sliding_window": 4,
            "layer_types": ["sliding_attention", "full_attention"]}
    plain = read_config(base, context=100)
    wide = read_config(base | {"num_global_key_value_heads": 2, "global_head_dim": 32}, context=100)
    shared = read_config(base | {"num_global_key_value_heads": 2, "global_head_dim": 32,
                                 "attention_k_eq_v": True}, context=100)
    window = 4 * 2 * 4 * 16 * 2
    assert plain["cache_bytes"] == window + 100 * 2 * 4 * 16 * 2
    assert wide["cache_bytes"] == shared["cache_bytes"] == window + 100 * 2 * 2 * 32 * 2
    full = 64 * (8 + 2 * 2) * 32 + 8 * 32 * 64
    assert wide["total"] - plain["total"] == full - (64 * (8 + 2 * 4) * 16 + 8 * 16 * 64)
    assert wide["total"] - shared["total"] == 64 * 2 * 32
    renamed = {"num_global_kv_heads": 2, "global_key_size": 32, "k_eq_v_global": True}
    assert read_config(base | renamed)["total"] == shared["total"]
    with pytest.raises(ValueError, match="num_global_key_value_heads = 3 must divide num_attention_heads = 8"):
        read_config(base | {"num_global_key_value_heads": 3})


def test_a_hybrid_and_a_dense_model():
    hybrid = {"hidden_size": 2048, "num_hidden_layers": 8, "num_attention_heads": 16,
              "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 1000,
              "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
              "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}
    reading = read_config(hybrid, context=10, n_bytes=2, state_bytes=4)
    assert reading["layers"] == ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + [
        "full_attention"]
    state = 6 * (32 * 128 * 128 * 4 + 3 * (2 * 16 * 128 + 32 * 128) * 2)   # slip 2: 24,576 per layer
    assert 3 * (2 * 16 * 128 + 32 * 128) == 24_576
    assert reading["cache_bytes"] == 2 * 2 * 2 * 256 * 10 * 2 + state
    mha = read_config({"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "intermediate_size": 4, "vocab_size": 3, "tie_word_embeddings": True})
    assert mha["total"] == mha["active"] == 4 * 8 * 8 + 3 * 8 * 4 + 2 * 8 + 8 + 3 * 8


def test_an_output_gate_and_where_the_experts_are():
    """attn_output_gate doubles W_Q's width; decoder_sparse_step and mlp_only_layers place experts."""
    base = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "vocab_size": 10}
    plain = read_config(base)
    gated = read_config(base | {"attn_output_gate": True})
    # 4 layers, each W_Q 4 heads of 16 wider
    assert gated["total"] - plain["total"] == 4 * 64 * 4 * 16
    assert gated["cache_bytes"] == plain["cache_bytes"]          # the gate is computed, not cached
    biased = {"attention_bias": True}
    assert (read_config(base | biased | {"attn_output_gate": True})["total"]
            - read_config(base | biased)["total"]) == 4 * (64 * 4 * 16 + 4 * 16)
    moe = base | {"intermediate_size": 8, "n_routed_experts": 4, "num_experts_per_tok": 1,
                  "moe_intermediate_size": 8}
    expert, dense = 4 * 64 + 4 * 3 * 64 * 8, 3 * 64 * 8
    every = read_config(moe)["total"]
    # experts in layers 1 and 3, where (i + 1) is even; layer 3 listed dense
    stepped = read_config(moe | {"decoder_sparse_step": 2})["total"]
    assert every - stepped == 2 * (expert - dense)
    listed = read_config(moe | {"decoder_sparse_step": 2, "mlp_only_layers": [3]})["total"]
    assert every - listed == 3 * (expert - dense)
    assert read_config(moe | {"partial_rotary_factor": 0.25})["total"] == every   # RoPE has no weights


def test_aliases_and_unknown_fields():
    assert set(ALIASES.values()) <= KNOWN == set(FIELDS)
    assert set(SIZES) | set(NUMBERS) | set(NAMES) <= KNOWN
    assert all(kind in LAYER_KINDS for kind in ("full_attention", "linear_attention"))
    base = {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 3}
    renamed = {"dim": 8, "n_layers": 1, "n_heads": 2, "vocab_size": 3, "zzz": 1}
    assert read_config(renamed)["total"] == read_config(base)["total"]
    assert read_config(renamed)["unknown"] == ["zzz"]


@pytest.mark.parametrize(("change", "message"), [
    ({"dim": 9}, r"hidden_size = 8 and dim = 9 name the same field \(hidden_size\)"),
    ({"num_key_value_heads": 3}, "num_key_value_heads = 3 must divide num_attention_heads = 2"),
    ({"num_attention_heads": 3}, "head_dim is missing and hidden_size = 8 is not a multiple"),
    ({"layer_types": ["full_attention", "x"]}, r"layer_types = \['full_attention', 'x'\]: expected a list of 1 layer kinds"),
    ({"layer_types": ["window"]}, r"layer_types\[0\] = 'window': expected one of"),
    ({"layer_types": ["sliding_attention"]}, "sliding_window is missing"),
    ({"n_routed_experts": 4, "num_experts_per_tok": 5, "intermediate_size": 4},
     "num_experts_per_tok = 5 must be at most the 4 experts"),
    ({"n_routed_experts": 4, "num_experts_per_tok": 1}, "moe_intermediate_size is missing"),
    ({"n_routed_experts": 4, "num_experts_per_tok": 1, "intermediate_size": 4, "n_group": 3},
     "n_group = 3 must divide the 4 experts"),
    ({"head_dim": 2.5}, r"head_dim = 2.5: expected a whole number >= 1"),
    ({"n_routed_experts": 4, "num_experts_per_tok": 1, "intermediate_size": 4, "mlp_only_layers": [1]},
     r"mlp_only_layers = \[1\]: expected a list of layer numbers from 0 to 0"),
    ({"n_routed_experts": 4, "num_experts_per_tok": 1, "intermediate_size": 4, "decoder_sparse_step": 0},
     "decoder_sparse_step = 0: expected a whole number >= 1"),
    ({"full_attention_interval": 2, "linear_num_key_heads": 3, "linear_num_value_heads": 4,
      "linear_key_head_dim": 2, "linear_value_head_dim": 2, "num_hidden_layers": 2},
     "linear_num_value_heads = 4 must be a multiple of linear_num_key_heads = 3"),
    ({"partial_rotary_factor": 1.5}, r"partial_rotary_factor = 1.5: expected a number in \(0, 1\]"),
    ({"attn_output_gate": "yes"}, "attn_output_gate = 'yes': expected true or false"),
    ({"rope_theta": float("nan")}, "rope_theta = nan: expected a finite number"),
    ({"scoring_func": 1}, "scoring_func = 1: expected a string"),
    ({"kv_lora_rank": 4, "qk_nope_head_dim": 2, "v_head_dim": 2, "index_topk": 2, "index_n_heads": 1,
      "index_head_dim": 2}, "index_topk needs q_lora_rank"),
])
def test_inconsistent_fields_are_named(change, message):
    config = {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 3, **change}
    with pytest.raises(ValueError, match=message):
        read_config(config)


def test_missing_fields_and_bad_arguments():
    with pytest.raises(ValueError, match="vocab_size is missing"):
        read_config({"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2})
    with pytest.raises(TypeError, match="config must be a dict"):
        read_config([("hidden_size", 8)])
    with pytest.raises(ValueError, match="context = 0: expected a whole number >= 1"):
        read_config({"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 3},
                    context=0)
