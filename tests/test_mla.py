"""Unit tests of snippets/mla.py: multi-head latent attention (chapter 15), and rope of snippets/positions.py.

The references (tests/support/torch_reference.py) are written in PyTorch the
way DeepSeek's own inference code writes the layer's naive form: the
queries' and keys' two parts concatenated (content, then RoPE), RoPE as a
multiplication of complex numbers made of column pairs, the RoPE key
repeated for every head, and PyTorch's ``scaled_dot_product_attention`` with
``is_causal=True`` and the scale ``1/sqrt(d_head + d_rope)``; decoding reads
a latent cache in the absorbed form. They share no code with the snippet.
PyTorch is installed by ``.ci/run`` (``REQUIRE_TORCH=1``, tests/support/pytorch.py).
"""

import numpy as np
import pytest

from snippets.mla import init_mla, mla_attention, mla_decode
from snippets.positions import rope
from support import torch_reference as reference
from support.pytorch import require_torch

TOLERANCE = 1e-12


@pytest.mark.parametrize(("batch", "T", "d_model", "n_heads", "d_head", "d_latent", "d_rope"), [
    ((), 7, 12, 3, 5, 6, 4), ((2,), 5, 16, 2, 8, 3, 2), ((2, 3), 4, 10, 4, 3, 9, 6),
])
def test_mla_equals_pytorch_expanded_absorbed_and_decoded(batch, T, d_model, n_heads, d_head, d_latent, d_rope):
    require_torch()
    rng = np.random.default_rng(T + d_model)
    params = init_mla(rng, d_model, n_heads, d_head, d_latent, d_rope)
    X = rng.normal(size=(*batch, T, d_model))
    theirs = reference.mla_attention(*reference.tensors([X, params]), n_heads).numpy()
    decoded = reference.mla_decode(*reference.tensors([X, params]), n_heads).numpy()
    assert np.abs(decoded - theirs).max() < TOLERANCE
    for ours in (mla_attention(X, params, n_heads), mla_attention(X, params, n_heads, absorbed=True),
                 mla_decode(X, params, n_heads)):
        assert ours.shape == X.shape
        assert np.abs(ours - theirs).max() < TOLERANCE


def test_rope_equals_complex_rotation_and_scores_by_distance():
    require_torch()
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 6, 8))
    positions = np.array([0.0, 3.0, 1.0, 7.0, 2.5, 100.0])
    theirs = reference.rope(*reference.tensors([x, positions])).numpy()
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
