"""Unit tests of snippets/no_match.py: softmax + 1 and attention with a sink key."""

import warnings

import numpy as np
import pytest

from snippets.attention import scaled_dot_product_attention, softmax
from snippets.no_match import attention_with_sink, softmax_one


def reference_softmax_one(scores):
    """exp(x_i) / (1 + Σ exp(x_j)) for one row, written out with Python floats."""
    top = max([0.0, *scores])  # the hidden score 0 takes part in the maximum
    e = [np.exp(x - top) for x in scores]
    return [value / (np.exp(-top) + sum(e)) for value in e]


def reference_attention_with_sink(Q, K, V, sink_score=0.0, mask=None):
    """Attention over [sink, keys...] written key by key; the sink's value is zero."""
    T, S = Q.shape[0], K.shape[0]
    out, weights = np.zeros((T, V.shape[1])), np.zeros((T, S))
    for t in range(T):
        allowed = [s for s in range(S) if mask is None or mask[t, s]]
        scores = [float(Q[t] @ K[s]) / np.sqrt(Q.shape[1]) for s in allowed]
        top = max([sink_score, *scores])
        total = np.exp(sink_score - top) + sum(np.exp(x - top) for x in scores)
        for s, x in zip(allowed, scores, strict=True):
            weights[t, s] = np.exp(x - top) / total
            out[t] += weights[t, s] * V[s]
    return out, weights


# --- softmax_one ---------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_softmax_one_equals_reference_along_every_axis(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=4, size=(3, 4, 5))
    for axis in range(3):
        got = softmax_one(x, axis=axis)
        moved = np.moveaxis(x, axis, -1)
        expected = np.array([reference_softmax_one(row) for row in moved.reshape(-1, moved.shape[-1])])
        np.testing.assert_allclose(np.moveaxis(got, axis, -1).reshape(expected.shape), expected, rtol=1e-12)
        assert (got.sum(axis=axis) < 1).all() and (got > 0).all()


def test_softmax_one_is_softmax_with_an_extra_zero_score():
    x = np.random.default_rng(1).normal(size=(6, 7))
    with_zero = softmax(np.concatenate([np.zeros((6, 1)), x], axis=1))
    np.testing.assert_allclose(softmax_one(x), with_zero[:, 1:], rtol=1e-13)
    np.testing.assert_allclose(1 - softmax_one(x).sum(-1), with_zero[:, 0], rtol=1e-12)


def test_softmax_one_is_stable_and_silent_for_huge_scores():
    x = np.array([[1e4, -1e4, 0.0, 1e4], [-1e4, -1e4, -1e4, -1e4], [-1e4, 1e4, 5e3, -5e3]])
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        weights = softmax_one(x)
    assert np.isfinite(weights).all()
    np.testing.assert_allclose(weights, [[0.5, 0, 0, 0.5], [0, 0, 0, 0], [0, 1, 0, 0]], atol=1e-300)


def test_softmax_one_limits():
    assert (softmax_one(np.full(5, -50.0)) < 1e-21).all()
    np.testing.assert_allclose(softmax_one([60.0, 0.0]).sum(), 1.0, rtol=1e-15)
    np.testing.assert_array_equal(softmax_one(np.full((2, 3), -np.inf)), np.zeros((2, 3)))
    assert softmax_one([0.0]).tolist() == [0.5]


def test_softmax_one_keeps_float32_and_handles_empty_rows():
    x32 = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert softmax_one(x32).dtype == np.float32
    assert softmax_one(np.zeros((3, 0))).shape == (3, 0)
    assert softmax_one([1, 2]).dtype == np.float64  # integers become float64


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"x": [1.0, np.nan]}, ValueError, "x contains NaN"),
        ({"x": [1.0, np.inf]}, ValueError, r"x contains \+inf"),
        ({"x": ["a", "b"]}, ValueError, "x must hold numbers"),
        ({"x": None}, ValueError, "x must hold numbers"),
        ({"x": 3.0}, ValueError, "x must have at least one dimension"),
        ({"x": [1.0, 2.0], "axis": 1}, ValueError, r"axis must lie in \[-1, 1\) for x of shape \(2,\), got 1"),
        ({"x": [1.0, 2.0], "axis": 0.5}, TypeError, "axis must be an integer, got float 0.5"),
        ({"x": [1.0, 2.0], "axis": None}, TypeError, "axis must be an integer, got NoneType None"),
    ],
)
def test_softmax_one_bad_input(kwargs, error, message):
    with pytest.raises(error, match=message):
        softmax_one(**kwargs)


# --- attention_with_sink -------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("masked", [False, True])
def test_attention_with_sink_equals_reference(seed, masked):
    rng = np.random.default_rng(10 + seed)
    T, S = int(rng.integers(1, 7)), int(rng.integers(7, 12))
    d_k, d_v = int(rng.integers(2, 6)), int(rng.integers(6, 9))
    Q, K, V = rng.normal(size=(T, d_k)), rng.normal(size=(S, d_k)), rng.normal(size=(S, d_v))
    mask = rng.random((T, S)) < 0.6 if masked else None
    if masked:
        mask[0] = False  # a query that may look at no key
    sink_score = float(rng.normal(scale=2))
    out, weights = attention_with_sink(Q, K, V, sink_score=sink_score, mask=mask)
    ref_out, ref_weights = reference_attention_with_sink(Q, K, V, sink_score, mask)
    assert out.shape == (T, d_v) and weights.shape == (T, S)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(weights, ref_weights, rtol=1e-12, atol=1e-14)
    assert (weights.sum(-1) < 1).all()
    if masked:
        assert (weights[0] == 0).all() and (out[0] == 0).all()


def test_attention_with_sink_batches_like_attention_and_matches_softmax_one():
    rng = np.random.default_rng(3)
    B, H, T, S, d_k, d_v = 2, 3, 4, 6, 5, 2
    Q, K, V = rng.normal(size=(B, H, T, d_k)), rng.normal(size=(B, 1, S, d_k)), rng.normal(size=(B, 1, S, d_v))
    mask = rng.random((B, 1, T, S)) < 0.7
    out, weights = attention_with_sink(Q, K, V, mask=mask)
    assert out.shape == (B, H, T, d_v) and weights.shape == (B, H, T, S)
    scores = np.where(mask, Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k), -np.inf)
    np.testing.assert_allclose(weights, softmax_one(scores), rtol=1e-13)
    for b in range(B):
        for h in range(H):
            ref_out, _ = reference_attention_with_sink(Q[b, h], K[b, 0], V[b, 0], mask=mask[b, 0])
            np.testing.assert_allclose(out[b, h], ref_out, rtol=1e-12, atol=1e-14)


def test_a_very_low_sink_gives_plain_attention_and_a_very_high_one_gives_zeros():
    rng = np.random.default_rng(4)
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    plain_out, plain_weights = scaled_dot_product_attention(Q, K, V)
    out, weights = attention_with_sink(Q, K, V, sink_score=-1e4)
    np.testing.assert_allclose(out, plain_out, rtol=1e-13)
    np.testing.assert_allclose(weights, plain_weights, rtol=1e-13)
    out, weights = attention_with_sink(Q, K, V, sink_score=1e4)
    assert (out == 0).all() and (weights == 0).all()


def test_attention_with_sink_scale_and_float32():
    rng = np.random.default_rng(5)
    Q, K, V = (rng.normal(size=shape).astype(np.float32) for shape in ((2, 3), (4, 3), (4, 5)))
    out, weights = attention_with_sink(Q, K, V, scale=2.0)
    assert out.dtype == weights.dtype == np.float32
    expected = softmax_one(2.0 * (Q.astype(float) @ K.T.astype(float)))
    np.testing.assert_allclose(weights, expected, rtol=1e-5)


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (((3, 4), (5, 3), (5, 2)), r"\(3, 4\) \(d_k = 4\) and K \(5, 3\) \(d_k = 3\)"),
        (((3, 4), (5, 4), (6, 2)), r"\(5, 4\) \(S = 5\) and V \(6, 2\) \(S = 6\)"),
        (((4,), (5, 4), (5, 2)), r"\(4,\)"),
        (((2, 3, 4), (3, 5, 4), (5, 2)), "do not broadcast"),
    ],
)
def test_attention_with_sink_shape_errors(shapes, message):
    Q, K, V = (np.ones(shape) for shape in shapes)
    with pytest.raises(ValueError, match=f"(?i){message}"):
        attention_with_sink(Q, K, V)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"sink_score": np.inf}, ValueError, "sink_score must be a finite number, got inf"),
        ({"sink_score": "0"}, TypeError, "sink_score must be a real number, got str '0'"),
        ({"sink_score": None}, TypeError, "sink_score must be a real number, got NoneType None"),
        ({"scale": np.nan}, ValueError, "scale must be a finite number, got nan"),
        ({"scale": "1"}, TypeError, "scale must be a real number"),
        ({"mask": np.ones((3, 5))}, ValueError, "mask must be boolean"),
        ({"mask": np.ones((4, 5), dtype=bool)}, ValueError, r"mask of shape \(4, 5\) does not broadcast"),
        ({"V": np.full((5, 2), np.inf)}, ValueError, r"V contains \+inf"),
        ({"K": np.full((5, 4), -np.inf)}, ValueError, "K contains -inf"),
        ({"Q": np.full((3, 4), np.nan)}, ValueError, "(?i)Q contains NaN"),
        ({"Q": np.full((3, 4), 1e200), "K": np.full((5, 4), 1e200)}, ValueError, "overflow"),
    ],
)
def test_attention_with_sink_bad_input(kwargs, error, message):
    arguments = {"Q": np.ones((3, 4)), "K": np.ones((5, 4)), "V": np.ones((5, 2)), **kwargs}
    with pytest.raises(error, match=message):
        attention_with_sink(**arguments)


# --- one sink per head (gpt-oss, chapter 17) ----------------------------------------


@pytest.mark.parametrize(("batch", "H", "T", "d_k"), [((), 3, 4, 8), ((2,), 4, 5, 4), ((2, 1), 2, 3, 6)])
def test_a_sink_per_head_equals_gpt_oss_and_the_scalar_sink_of_each_head(batch, H, T, d_k):
    """gpt-oss's reference: the heads' sink logits join the scores as one more column, dropped after the softmax."""
    from support import torch_reference as reference
    from support.pytorch import require_torch

    require_torch()
    rng = np.random.default_rng(H * T)
    Q, K, V = (rng.normal(size=(*batch, H, T, d)) for d in (d_k, d_k, 3))
    sinks = rng.normal(scale=2, size=H)
    mask = np.tril(np.ones((T, T), dtype=bool))
    out, weights = attention_with_sink(Q, K, V, sink_score=sinks, mask=mask)
    expected_out, expected_weights = reference.numpy(reference.attention_with_sink(*reference.tensors([Q, K, V, sinks, mask])))
    assert np.abs(out - expected_out).max() < 1e-12 and np.abs(weights - expected_weights).max() < 1e-12
    for h in range(H):   # head h alone, with chapter 10's one number
        one = attention_with_sink(Q[..., h, :, :], K[..., h, :, :], V[..., h, :, :], sink_score=float(sinks[h]), mask=mask)
        assert np.abs(one[0] - out[..., h, :, :]).max() < 1e-12


@pytest.mark.parametrize(("sinks", "words"), [
    (np.zeros(3), "got shape (3,) for H = 2 heads"), (np.zeros((2, 1)), "got shape (2, 1)"),
    (np.array([0.0, np.nan]), "sink_score contains NaN"),
])
def test_sinks_per_head_must_match_the_heads(sinks, words):
    Q = np.ones((2, 3, 4))
    with pytest.raises(ValueError) as caught:
        attention_with_sink(Q, Q, Q, sink_score=sinks)
    assert words in str(caught.value)
