"""Unit tests of snippets.heads.logit_contributions: each part's direct share of the next token's logit.

The reference builds the residual stream part by part from the formulas,
head by head with its own softmax, and reads each part through the final
layer norm with the norm's own σ: a loop that shares no code with the snippet.
"""

import math

import numpy as np
import pytest

from snippets.heads import ablate_heads, logit_contributions
from snippets.switches import reading_mask, switched_logits, switched_params
from snippets.transformer import gpt_forward, init_gpt
from tools import train


def layer_norm(x, weight, bias):
    return (x - x.mean()) / np.sqrt(x.var() + 1e-5) * weight + bias


def gelu(z):
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))


def reference_parts(ids, params, n_heads, mask):
    """Every part written into each position's stream: {name: (T, d)} and heads (T, L, H, d)."""
    T, d = len(ids), params["W_E"].shape[1]
    d_head = d // n_heads
    x = params["W_E"][ids] + params["W_pos"][:T]
    parts = {"embedding": x.copy(), "biases": np.zeros((T, d)), "feed_forward": [], "heads": []}
    for b in params["blocks"]:
        h = np.array([layer_norm(row, b["ln_1_weight"], b["ln_1_bias"]) for row in x])
        heads = np.zeros((T, n_heads, d))
        for i in range(n_heads):
            cols = slice(i * d_head, (i + 1) * d_head)
            Q, K, V = (h @ b[f"W_{n}"][:, cols] + b[f"b_{n}"][cols] for n in "QKV")
            scores = np.where(mask, Q @ K.T / math.sqrt(d_head), -np.inf)
            alpha = np.exp(scores - scores.max(axis=1, keepdims=True))
            alpha /= alpha.sum(axis=1, keepdims=True)
            heads[:, i] = alpha @ V @ b["W_O"][cols]
        x = x + heads.sum(axis=1) + b["b_O"]
        parts["heads"].append(heads)
        parts["biases"] += b["b_O"]
        ffn = gelu(np.array([layer_norm(row, b["ln_2_weight"], b["ln_2_bias"]) for row in x]) @ b["W_1"] + b["b_1"])
        ffn = ffn @ b["W_2"] + b["b_2"]
        x = x + ffn
        parts["feed_forward"].append(ffn)
    parts["heads"] = np.stack(parts["heads"], axis=1)
    parts["feed_forward"] = np.stack(parts["feed_forward"], axis=1)
    return parts, x


def reference_shares(ids, params, n_heads, mask=None):
    mask = np.tri(len(ids), dtype=bool) if mask is None else mask
    parts, x = reference_parts(ids, params, n_heads, mask)
    shares = {name: [] for name in parts}
    for t in range(len(ids) - 1):
        sigma = np.sqrt(x[t].var() + 1e-5)
        reads = params["ln_f_weight"] * params["W_E"][ids[t + 1]] / sigma
        for name, part in parts.items():
            shares[name].append((part[t] - part[t].mean(axis=-1, keepdims=True)) @ reads)
        shares["biases"][-1] += params["ln_f_bias"] @ params["W_E"][ids[t + 1]]
    return {name: np.array(values) for name, values in shares.items()}


def test_the_shares_equal_a_part_by_part_reference_and_add_up_to_the_logits():
    params = init_gpt(11, 16, 12, 2, 3, 24, np.random.default_rng(4))
    ids = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3])
    shares = logit_contributions(ids, params, 3)
    expected = reference_shares(ids, params, 3)
    assert shares["heads"].shape == (9, 2, 3) and shares["feed_forward"].shape == (9, 2)
    for name in expected:
        assert np.abs(shares[name] - expected[name]).max() < 1e-12, name
    total = sum(share.reshape(9, -1).sum(axis=1) for share in shares.values())
    assert np.abs(total - gpt_forward(ids, params, 3)[np.arange(9), ids[1:]]).max() < 1e-12


def test_a_head_switched_off_has_no_share_and_a_batch_is_its_rows():
    params, log = train.load_run()
    vocab = log["vocab"]
    ids = np.random.default_rng(0).integers(0, len(vocab), size=(2, 20))
    shares = logit_contributions(ids, ablate_heads(params, [(1, 2), (0, 0)], 4), 4)
    assert not shares["heads"][..., 1, 2].any() and not shares["heads"][..., 0, 0].any()
    assert shares["heads"][..., 1, 1].any()
    alone = logit_contributions(ids[1], ablate_heads(params, [(1, 2), (0, 0)], 4), 4)
    assert all(np.abs(alone[name] - shares[name][1]).max() < 1e-12 for name in alone)


@pytest.mark.parametrize("removed", [["causal mask"], ["cache"], ["scale", "positions", "causal mask", "cache"]])
def test_with_a_switched_mask_the_shares_add_up_to_the_switched_logits(removed):
    params, _ = train.load_run()
    ids = np.random.default_rng(1).integers(0, 108, size=24)
    mask = reading_mask(24, 10, removed)
    changed = switched_params(params, 4, removed)
    shares = logit_contributions(ids, changed, 4, mask=mask)
    expected = reference_shares(ids, changed, 4, mask)
    for name in expected:
        assert np.abs(shares[name] - expected[name]).max() < 1e-11, name
    total = sum(share.reshape(23, -1).sum(axis=1) for share in shares.values())
    logits = switched_logits(ids, params, 4, 10, removed)
    assert np.abs(total - logits[np.arange(23), ids[1:]]).max() < 1e-11


@pytest.mark.parametrize(("call", "words"), [
    (lambda p: logit_contributions([1], p, 2), "at least 2 positions"),
    (lambda p: logit_contributions([1, 2, 3], p, 2, mask=np.ones((2, 2), bool)), r"boolean \(T, T\) = \(3, 3\)"),
    (lambda p: logit_contributions([1, 2, 3], p, 2, mask=np.eye(3, dtype=bool)[::-1] & False), "read no position"),
    (lambda p: logit_contributions([1, 2, 3], p, 2, mask=np.ones((3, 3))), "boolean"),
])
def test_bad_input_gets_a_clear_error(call, words):
    params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    with pytest.raises(ValueError, match=words):
        call(params)
