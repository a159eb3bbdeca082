"""Unit tests of snippets/mla.py: multi-head latent attention (chapter 15), and rope of snippets/positions.py.

The reference is written in PyTorch the way DeepSeek's own inference code
writes the layer's naive form: the queries' and keys' two parts concatenated
(content, then RoPE), RoPE as a multiplication of complex numbers made of
column pairs, the RoPE key repeated for every head, and PyTorch's
``scaled_dot_product_attention`` with ``is_causal=True`` and the scale
``1/sqrt(d_head + d_rope)``. It shares no code with the snippet. PyTorch is
installed by ``.ci/run`` (``REQUIRE_TORCH=1``, tests/support/pytorch.py).
"""

import numpy as np
import pytest

from snippets.mla import init_mla, mla_attention, mla_decode
from snippets.positions import rope
from support.pytorch import require_torch

TOLERANCE = 1e-12


def torch_rope(torch, x, positions):
    """Pairs (2i, 2i+1) as complex numbers, times e^(i · position · w_i)."""
    d = x.shape[-1]
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    turn = torch.polar(torch.ones(len(positions), d // 2, dtype=x.dtype), positions[:, None] * w)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * turn).reshape(x.shape)


def torch_mla(torch, X, params, n_heads):
    t = {name: torch.from_numpy(value) for name, value in params.items()}
    x = torch.from_numpy(X)
    *batch, T, _ = x.shape
    d_rope = t["W_KR"].shape[1]
    positions = torch.arange(T, dtype=x.dtype)
    latent = x @ t["W_DKV"]
    k_nope = (latent @ t["W_UK"]).unflatten(-1, (n_heads, -1))             # (..., T, H, d_head)
    v = (latent @ t["W_UV"]).unflatten(-1, (n_heads, -1))
    k_pe = torch_rope(torch, x @ t["W_KR"], positions)                      # (..., T, d_rope)
    q_nope = (x @ t["W_Q"]).unflatten(-1, (n_heads, -1))
    q_pe = (x @ t["W_QR"]).unflatten(-1, (n_heads, -1)).transpose(-3, -2)   # (..., H, T, d_rope)
    q_pe = torch_rope(torch, q_pe, positions).transpose(-3, -2)
    q = torch.cat([q_nope, q_pe], dim=-1).transpose(-3, -2)
    k = torch.cat([k_nope, k_pe[..., None, :].expand(*batch, T, n_heads, d_rope)], dim=-1).transpose(-3, -2)
    scale = 1 / (q_nope.shape[-1] + d_rope) ** 0.5
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v.transpose(-3, -2), is_causal=True, scale=scale)
    return (out.transpose(-3, -2).flatten(-2) @ t["W_O"]).numpy()


@pytest.mark.parametrize(("batch", "T", "d_model", "n_heads", "d_head", "d_latent", "d_rope"), [
    ((), 7, 12, 3, 5, 6, 4), ((2,), 5, 16, 2, 8, 3, 2), ((2, 3), 4, 10, 4, 3, 9, 6),
])
def test_mla_equals_pytorch_expanded_absorbed_and_decoded(batch, T, d_model, n_heads, d_head, d_latent, d_rope):
    torch = require_torch()
    rng = np.random.default_rng(T + d_model)
    params = init_mla(rng, d_model, n_heads, d_head, d_latent, d_rope)
    X = rng.normal(size=(*batch, T, d_model))
    theirs = torch_mla(torch, X, params, n_heads)
    for ours in (mla_attention(X, params, n_heads), mla_attention(X, params, n_heads, absorbed=True),
                 mla_decode(X, params, n_heads)):
        assert ours.shape == X.shape
        assert np.abs(ours - theirs).max() < TOLERANCE


def test_rope_equals_complex_rotation_and_scores_by_distance():
    torch = require_torch()
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 6, 8))
    positions = np.array([0.0, 3.0, 1.0, 7.0, 2.5, 100.0])
    theirs = torch_rope(torch, torch.from_numpy(x), torch.from_numpy(positions)).numpy()
    assert np.abs(rope(x, positions) - theirs).max() < TOLERANCE
    q, k = rng.normal(size=(2, 1, 8))
    near = rope(q, np.array([5])) @ rope(k, np.array([3])).T
    far = rope(q, np.array([1002])) @ rope(k, np.array([1000])).T
    assert abs(float((near - far)[0, 0])) < 1e-9
    assert rope(x.astype(np.float32), positions).dtype == np.float32


def test_the_cache_is_the_latent_and_one_rope_key():
    """A later token never changes an earlier output: what the cache holds is all a query needs."""
    rng = np.random.default_rng(2)
    params = init_mla(rng, 16, 4, 8, 6, 2)
    X = rng.normal(size=(6, 16))
    assert np.abs(mla_attention(X[:4], params, 4) - mla_attention(X, params, 4)[:4]).max() < TOLERANCE
    assert mla_attention(X.astype(np.float32), {k: v.astype(np.float32) for k, v in params.items()}, 4).dtype \
        == np.float32


@pytest.mark.parametrize(("call", "words"), [
    (lambda p, X: mla_attention(X, p, 3), "n_heads = 3 must divide the columns of W_UK"),
    (lambda p, X: mla_attention(X[:, :5], p, 2), "X must have shape (T, d_model)"),
    (lambda p, X: mla_attention(X, {**p, "W_KR": p["W_KR"][:, :1], "W_QR": p["W_QR"][:, :2]}, 2),
     "must have an even number of columns d_rope"),
    (lambda p, X: mla_attention(X, {**p, "W_O": p["W_O"].T}, 2), "W_O has shape (16, 8), expected (8, 16)"),
    (lambda p, X: mla_attention(X, {k: v for k, v in p.items() if k != "W_UV"}, 2), "params lacks ['W_UV']"),
    (lambda p, X: mla_attention(X, p, 2, absorbed="yes"), "absorbed must be True or False"),
    (lambda p, X: init_mla(np.random.default_rng(0), 16, 2, 4, 6, 3), "d_rope must be even"),
    (lambda p, X: mla_decode(X * 1e300, p, 2), "overflow float64"),
])
def test_bad_input_is_named(call, words):
    rng = np.random.default_rng(3)
    params = init_mla(rng, 16, 2, 4, 6, 2)
    with pytest.raises((ValueError, TypeError)) as caught:
        call(params, rng.normal(size=(5, 16)))
    assert words in str(caught.value)
