"""Unit tests of snippets/kv_cache.py: grouped-query attention and cached decoding (chapter 8)."""

import itertools
import math

import numpy as np
import pytest

from snippets.attention import scaled_dot_product_attention
from snippets.kv_cache import decode_with_cache, grouped_query_attention
from snippets.multihead import causal_mask, init_params, multi_head_attention


# A reference from the formulas, sharing no code with the snippet: explicit loops over
# the batch, the heads and the queries, its own softmax, and head h reading table
# h // (H // G) by index arithmetic.
def reference_grouped(Q, K, V, mask=None):
    batch = np.broadcast_shapes(Q.shape[:-3], K.shape[:-3], V.shape[:-3])
    H, T, S, G = Q.shape[-3], Q.shape[-2], K.shape[-2], K.shape[-3]
    allowed = np.ones((*batch, H, T, S), dtype=bool)
    if mask is not None:
        allowed = allowed & mask
    batch = allowed.shape[:-3]
    Q, K, V = (np.broadcast_to(a, (*batch, *a.shape[-3:])) for a in (Q, K, V))
    out = np.zeros((*batch, H, T, V.shape[-1]))
    weights = np.zeros((*batch, H, T, S))
    for b in itertools.product(*(range(n) for n in batch)):
        for h in range(H):
            g = h // (H // G)
            for t in range(T):
                keys = [s for s in range(S) if allowed[b][h, t, s]]
                if not keys:
                    continue
                scores = {s: float(Q[b][h, t] @ K[b][g, s]) / math.sqrt(Q.shape[-1]) for s in keys}
                top = max(scores.values())
                total = math.fsum(math.exp(x - top) for x in scores.values())
                for s in keys:
                    weights[b][h, t, s] = math.exp(scores[s] - top) / total
                out[b][h, t] = weights[b][h, t] @ V[b][g]
    return out, weights


def random_grouped(rng, batch, H, G, T, S, d_k, d_v):
    return (rng.normal(size=(*batch, H, T, d_k)), rng.normal(size=(*batch, G, S, d_k)),
            rng.normal(size=(*batch, G, S, d_v)))


@pytest.mark.parametrize("seed", range(8))
def test_grouped_equals_the_loop_reference_on_random_shapes(seed):
    rng = np.random.default_rng(seed)
    G = int(rng.integers(1, 4))
    H = G * int(rng.integers(1, 4))
    T, S = int(rng.integers(1, 6)), int(rng.integers(6, 12))   # T != S
    d_k, d_v = int(rng.integers(2, 6)), int(rng.integers(6, 9))  # d_k != d_v
    batch = [(), (2,), (2, 3)][seed % 3]
    Q, K, V = random_grouped(rng, batch, H, G, T, S, d_k, d_v)
    mask = rng.random((*batch, H, T, S)) < 0.6 if seed % 2 else None
    out, weights = grouped_query_attention(Q, K, V, mask=mask)
    ref_out, ref_weights = reference_grouped(Q, K, V, mask)
    assert out.shape == (*batch, H, T, d_v) and weights.shape == (*batch, H, T, S)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-12)


def test_grouped_equals_attention_with_each_table_repeated_for_consecutive_heads():
    rng = np.random.default_rng(1)
    Q, K, V = random_grouped(rng, (2,), 6, 3, 4, 7, 5, 2)
    expected = scaled_dot_product_attention(Q, np.repeat(K, 2, axis=-3), np.repeat(V, 2, axis=-3))
    for got, want in zip(grouped_query_attention(Q, K, V), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # Tiling the tables instead gives the same shapes and other numbers.
    tiled = scaled_dot_product_attention(Q, np.tile(K, (2, 1, 1)), np.tile(V, (2, 1, 1)))[0]
    assert tiled.shape == expected[0].shape and not np.allclose(tiled, expected[0])


def test_grouped_with_only_the_values_batched_is_attention_with_the_tables_repeated():
    """Issue 44: V alone batched failed inside NumPy's reshape; the weights' batch is Q's and K's, as in attention."""
    rng = np.random.default_rng(2)
    Q, K, V = rng.normal(size=(4, 3, 8)), rng.normal(size=(2, 5, 8)), rng.normal(size=(3, 2, 5, 6))
    out, weights = grouped_query_attention(Q, K, V)
    expected = scaled_dot_product_attention(Q, np.repeat(K, 2, axis=-3), np.repeat(V, 2, axis=-3))
    assert out.shape == (3, 4, 3, 6) and weights.shape == (4, 3, 5)
    for got, want in zip((out, weights), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_G_equal_H_is_multi_head_and_G_1_is_multi_query():
    rng = np.random.default_rng(2)
    H, T, S, d_k, d_v = 4, 3, 8, 5, 6
    Q, K, V = random_grouped(rng, (2,), H, H, T, S, d_k, d_v)
    for got, want in zip(grouped_query_attention(Q, K, V), scaled_dot_product_attention(Q, K, V), strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    one_K, one_V = K[:, :1], V[:, :1]
    out, weights = grouped_query_attention(Q, one_K, one_V)
    for h in range(H):  # every head asks the one shared table
        expected = scaled_dot_product_attention(Q[:, h], one_K[:, 0], one_V[:, 0])
        np.testing.assert_allclose(out[:, h], expected[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(weights[:, h], expected[1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("mask_shape", [(7,), (3, 7), (4, 3, 7), (1, 3, 7), (2, 4, 3, 7), (2, 1, 1, 7)])
def test_grouped_masks_broadcast_like_the_weights(mask_shape):
    rng = np.random.default_rng(3)
    Q, K, V = random_grouped(rng, (2,), 4, 2, 3, 7, 5, 6)
    mask = rng.random(mask_shape) < 0.5
    out, weights = grouped_query_attention(Q, K, V, mask=mask)
    ref_out, ref_weights = reference_grouped(Q, K, V, mask)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-12)
    hidden = ~np.broadcast_to(mask, np.broadcast_shapes(mask.shape, weights.shape))
    assert (np.broadcast_to(weights, hidden.shape)[hidden] == 0).all()


def test_grouped_fully_masked_query_gets_zeros_and_float32_stays():
    rng = np.random.default_rng(4)
    Q, K, V = (a.astype(np.float32) for a in random_grouped(rng, (), 4, 2, 3, 5, 4, 6))
    mask = np.ones((4, 3, 5), dtype=bool)
    mask[2, 1] = False
    out, weights = grouped_query_attention(Q, K, V, mask=mask)
    assert out.dtype == weights.dtype == np.float32
    assert (out[2, 1] == 0).all() and (weights[2, 1] == 0).all() and np.isfinite(out).all()


@pytest.mark.parametrize(("shapes", "message"), [
    (((4, 3, 5), (2, 6, 4), (2, 6, 2)), r"Q \(4, 3, 5\) \(d_k = 5\) and K \(2, 6, 4\) \(d_k = 4\)"),
    (((4, 3, 5), (2, 6, 5), (2, 7, 2)), r"K \(2, 6, 5\) \(G, S = \(2, 6\)\) and V \(2, 7, 2\)"),
    (((4, 3, 5), (2, 6, 5), (1, 6, 2)), r"K \(2, 6, 5\) .* V \(1, 6, 2\)"),
    (((4, 3, 5), (3, 6, 5), (3, 6, 2)), r"Q \(4, 3, 5\) \(H = 4\) and K \(3, 6, 5\) \(G = 3\)"),
    (((4, 3, 5), (0, 6, 5), (0, 6, 2)), r"\(G = 0\)"),
    (((3, 5), (6, 5), (6, 2)), r"got Q \(3, 5\), K \(6, 5\), V \(6, 2\)"),
    (((2, 4, 3, 5), (3, 2, 6, 5), (3, 2, 6, 2)), "do not broadcast"),
])
def test_grouped_shape_errors_name_the_shapes(shapes, message):
    Q, K, V = (np.ones(shape) for shape in shapes)
    with pytest.raises(ValueError, match=message):
        grouped_query_attention(Q, K, V)


def test_grouped_bad_values_and_masks_are_refused_by_name():
    Q, K, V = np.ones((4, 3, 5)), np.ones((2, 6, 5)), np.ones((2, 6, 2))
    with pytest.raises(ValueError, match="mask must be boolean"):
        grouped_query_attention(Q, K, V, mask=np.ones((3, 6)))
    with pytest.raises(ValueError, match=r"mask of shape \(3, 3, 6\) .* \(4, 3, 6\)"):
        grouped_query_attention(Q, K, V, mask=np.ones((3, 3, 6), dtype=bool))
    for name in "QKV":
        arrays = {"Q": Q, "K": K, "V": V}
        arrays[name] = arrays[name].copy()
        arrays[name][0, 0, 0] = np.inf
        with pytest.raises(ValueError, match=rf"{name} contains \+inf"):
            grouped_query_attention(**arrays)
        arrays[name][0, 0, 0] = np.nan
        with pytest.raises(ValueError, match=f"{name} contains NaN"):
            grouped_query_attention(**arrays)
    with pytest.raises(ValueError, match="K must hold numbers"):
        grouped_query_attention(Q, np.full((2, 6, 5), "a"), V)
    with pytest.raises(ValueError, match=r"overflow float64: Q .* K "):
        grouped_query_attention(np.full((4, 3, 5), 1e200), np.full((2, 6, 5), 1e200), V)


# --- decode_with_cache --------------------------------------------------------


def reference_decode(x, params, n_heads, window=None):
    """Recompute the layer from scratch at every step on the tokens seen so far; keep the last row."""
    T = x.shape[-2]
    rows = []
    for t in range(T):
        first = 0 if window is None else max(0, t + 1 - window)
        seen = x[..., first : t + 1, :]
        rows.append(multi_head_attention(seen, seen, params, n_heads)[0][..., -1:, :])
    return np.concatenate(rows, axis=-2)


@pytest.mark.parametrize("seed", range(6))
def test_decode_equals_causal_self_attention_and_recomputing(seed):
    rng = np.random.default_rng(10 + seed)
    n_heads = int(rng.integers(1, 4))
    d_model = n_heads * int(rng.integers(1, 4))
    T = int(rng.integers(1, 9))
    x = rng.normal(size=(2, T, d_model) if seed % 2 else (T, d_model))
    params = init_params(d_model, n_heads, rng)
    cached = decode_with_cache(x, params, n_heads)
    causal, _ = multi_head_attention(x, x, params, n_heads, mask=causal_mask(T))
    assert cached.shape == x.shape
    np.testing.assert_allclose(cached, causal, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cached, reference_decode(x, params, n_heads), rtol=0, atol=1e-12)


@pytest.mark.parametrize("window", [1, 2, 4, 9, 20])
def test_decode_with_a_window_equals_a_banded_mask(window):
    rng = np.random.default_rng(20)
    T, d_model, H = 9, 6, 2
    x = rng.normal(size=(2, T, d_model))
    params = init_params(d_model, H, rng)
    cached = decode_with_cache(x, params, H, window=window)
    positions = np.arange(T)
    band = causal_mask(T) & (positions[:, None] - positions[None, :] < window)
    banded, _ = multi_head_attention(x, x, params, H, mask=band)
    np.testing.assert_allclose(cached, banded, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cached, reference_decode(x, params, H, window), rtol=0, atol=1e-12)
    full = decode_with_cache(x, params, H)
    np.testing.assert_allclose(cached[:, :window], full[:, :window], rtol=0, atol=1e-12)
    assert (window >= T) == np.allclose(cached, full)


def test_decode_dtypes_and_empty_input():
    rng = np.random.default_rng(5)
    params = {name: a.astype(np.float32) for name, a in init_params(4, 2, rng).items()}
    x = rng.normal(size=(3, 4)).astype(np.float32)
    assert decode_with_cache(x, params, 2).dtype == np.float32
    assert decode_with_cache(x.astype(np.float64), params, 2).dtype == np.float64
    assert decode_with_cache(np.zeros((0, 4)), params, 2).shape == (0, 4)


def test_decode_bad_inputs_are_refused_by_name():
    rng = np.random.default_rng(6)
    params = init_params(6, 2, rng)
    x = rng.normal(size=(4, 6))
    with pytest.raises(ValueError, match=r"x must have shape \(T, d_model\) .* d_model = 6 .* got \(4, 5\)"):
        decode_with_cache(x[:, :5], params, 2)
    with pytest.raises(ValueError, match=r"got \(6,\)"):
        decode_with_cache(x[0], params, 2)
    with pytest.raises(ValueError, match="not divisible by n_heads = 4"):
        decode_with_cache(x, params, 4)
    with pytest.raises(ValueError, match=r"is self attention.*\(6, 6\), got \(5, 6\)"):
        decode_with_cache(x, init_params(6, 2, rng, d_kv=5), 2)
    with pytest.raises(ValueError, match="window must be a positive integer, got 0"):
        decode_with_cache(x, params, 2, window=0)
    with pytest.raises(ValueError, match=r"x contains \+inf"):
        decode_with_cache(np.full((4, 6), np.inf), params, 2)
    with pytest.raises(ValueError, match="x contains NaN"):
        decode_with_cache(np.full((4, 6), np.nan), params, 2)
    broken = dict(params)
    broken["W_O"] = np.full((6, 6), -np.inf)
    with pytest.raises(ValueError, match=r"W_O contains -inf"):
        decode_with_cache(x, broken, 2)
    with pytest.raises(ValueError, match=r"decode_with_cache: the projections or scores overflow float64: x"):
        decode_with_cache(np.full((4, 6), 1e200), params, 2)
    with pytest.raises(ValueError, match=r"x must hold numbers"):
        decode_with_cache(np.full((4, 6), "a"), params, 2)
