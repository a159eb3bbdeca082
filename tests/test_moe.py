"""Unit tests of snippets/moe.py: a mixture of experts (chapter 16).

The PyTorch references (tests/support/torch_reference.py): the router's
scores, ``torch.topk``, a softmax over the kept scores scattered into a row
of zeros; each expert chapter 13's feed-forward layer with PyTorch's tanh
GELU, run on the tokens that chose it (``nonzero``), its answers added back
with ``index_add_``. They share no code with the snippet.
"""

import numpy as np
import pytest

from snippets.moe import init_moe, moe_forward, router_weights
from support import torch_reference as reference
from support.pytorch import require_torch

TOLERANCE = 1e-12


@pytest.mark.parametrize(("shape", "d_model", "d_ff", "n_experts", "top_k"), [
    ((9,), 8, 12, 4, 2), ((2, 7), 6, 5, 8, 3), ((3, 2, 4), 5, 7, 3, 1), ((11,), 4, 6, 5, 5),
])
def test_router_and_layer_equal_pytorch(shape, d_model, d_ff, n_experts, top_k):
    require_torch()
    rng = np.random.default_rng(d_model * n_experts)
    params = init_moe(rng, d_model, d_ff, n_experts)
    X = rng.normal(size=(*shape, d_model))
    arguments = reference.tensors([X, params])
    weights, out = (function(*arguments, top_k).numpy() for function in (reference.router_weights, reference.moe_forward))
    ours = router_weights(X, params, top_k)
    assert ours.shape == (*shape, n_experts)
    assert np.abs(ours - weights).max() < TOLERANCE
    assert ((ours > 0).sum(axis=-1) == top_k).all() and np.allclose(ours.sum(axis=-1), 1, rtol=0, atol=1e-12)
    assert np.abs(moe_forward(X, params, top_k) - out).max() < TOLERANCE


def test_one_expert_is_the_feed_forward_layer_and_float32_stays():
    rng = np.random.default_rng(4)
    params = init_moe(rng, 6, 10, 1)
    X = rng.normal(size=(4, 6))
    p = params["experts"][0]
    z = X @ p["W_1"] + p["b_1"]
    ffn = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3))) @ p["W_2"] + p["b_2"]
    assert np.abs(moe_forward(X, params, 1) - ffn).max() < TOLERANCE
    single = {"W_router": params["W_router"].astype(np.float32),
              "experts": [{k: v.astype(np.float32) for k, v in p.items()}]}
    assert moe_forward(X.astype(np.float32), single, 1).dtype == np.float32
    assert moe_forward(np.zeros((0, 6)), params, 1).shape == (0, 6)


@pytest.mark.parametrize(("call", "words"), [
    (lambda p, X: router_weights(X, p, 5), "top_k = 5 must be at most n_experts = 4"),
    (lambda p, X: moe_forward(X, {**p, "experts": p["experts"][:3]}, 2), "experts holds 3 experts"),
    (lambda p, X: moe_forward(X, {**p, "experts": [*p["experts"][:3], {"W_1": 1}]}, 2), "experts[3] lacks"),
    (lambda p, X: moe_forward(X[:, :3], p, 2), "X must have shape (T, d_model)"),
    (lambda p, X: router_weights(X, p, 0), "top_k must be a positive integer"),
    (lambda p, X: moe_forward(X * 1e10, {**p, "experts": [{**e, "W_2": e["W_2"] * 1e300} for e in p["experts"]]}, 2),
     "overflow float64"),
])
def test_bad_input_is_named(call, words):
    rng = np.random.default_rng(5)
    params = init_moe(rng, 8, 16, 4)
    with pytest.raises((ValueError, TypeError)) as caught:
        call(params, rng.normal(size=(5, 8)))
    assert words in str(caught.value)


def test_the_message_blames_the_array_that_is_wrong():
    """A W_router that disagrees with X and the experts is named; so is a W_1 that disagrees with its b_1 and W_2."""
    rng = np.random.default_rng(0)
    params = init_moe(rng, d_model=8, d_ff=16, n_experts=4)
    X = rng.normal(size=(3, 8))
    narrow = params | {"W_router": rng.normal(size=(6, 4))}
    with pytest.raises(ValueError, match=r"W_router has shape \(6, 4\), expected 8 rows \(d_model\)"):
        moe_forward(X, narrow, top_k=2)
    wide_w1 = [dict(expert) for expert in params["experts"]]
    wide_w1[0]["W_1"] = rng.normal(size=(8, 20))
    with pytest.raises(ValueError, match=r"experts\[0\]\['W_1'\] has shape \(8, 20\), expected \(8, 16\)"):
        moe_forward(X, params | {"experts": wide_w1}, top_k=2)
    # a b_1 that disagrees with W_1 and W_2 is still b_1's
    short_b1 = [dict(expert) for expert in params["experts"]]
    short_b1[1]["b_1"] = np.zeros(15)
    with pytest.raises(ValueError, match=r"experts\[1\]\['b_1'\] has shape \(15,\), expected \(16,\)"):
        moe_forward(X, params | {"experts": short_b1}, top_k=2)
    # a W_2 that is a number, not a matrix, is W_2's (it used to be an IndexError)
    scalar_w2 = [dict(expert) for expert in params["experts"]]
    scalar_w2[2]["W_2"] = np.float64(1.0)
    with pytest.raises(ValueError, match=r"experts\[2\]\['W_2'\] has shape \(\), expected \(16, 8\)"):
        moe_forward(X, params | {"experts": scalar_w2}, top_k=2)
