"""Unit tests of snippets/attention.py: softmax and scaled dot-product attention."""

import numpy as np
import pytest

from snippets.attention import scaled_dot_product_attention, softmax


def reference_attention(q, k, v, mask=None):
    """Attention written out key by key, independent of the snippet's vectorised code."""
    T, S = q.shape[0], k.shape[0]
    out = np.zeros((T, v.shape[1]))
    weights = np.zeros((T, S))
    for t in range(T):
        allowed = [s for s in range(S) if mask is None or mask[t, s]]
        if not allowed:
            continue
        scores = {s: float(q[t] @ k[s]) / np.sqrt(q.shape[1]) for s in allowed}
        top = max(scores.values())
        total = sum(np.exp(x - top) for x in scores.values())
        for s, x in scores.items():
            weights[t, s] = np.exp(x - top) / total
            out[t] += weights[t, s] * v[s]
    return out, weights


def test_softmax_is_stable_for_huge_logits():
    weights = softmax(np.array([1e4, -1e4, 0.0, 1e4]))
    np.testing.assert_allclose(weights, [0.5, 0.0, 0.0, 0.5])


def test_softmax_temperature_limits():
    x = np.array([1.0, 3.0, 2.0])
    np.testing.assert_array_equal(softmax(x, temperature=1e-9), [0, 1, 0])
    np.testing.assert_allclose(softmax(x, temperature=1e9), [1 / 3] * 3, rtol=1e-8)


def test_softmax_rows_of_minus_inf_are_zero():
    np.testing.assert_array_equal(softmax(np.full((2, 3), -np.inf)), np.zeros((2, 3)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"x": [1.0, np.nan]}, "NaN"),
        ({"x": [1.0, np.inf]}, r"\+inf"),
        ({"x": [1.0, 2.0], "temperature": 0}, "temperature must be > 0, got 0"),
        ({"x": ["a", "b"]}, "must hold numbers"),
    ],
)
def test_softmax_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        softmax(**kwargs)


def test_attention_equals_reference_with_t_not_s_and_dk_not_dv():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = rng.random((3, 5)) > 0.4
    mask[1] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    ref_out, ref_weights = reference_attention(q, k, v, mask)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)
    np.testing.assert_allclose(weights, ref_weights, atol=1e-12)
    assert (out[1] == 0).all() and (weights[1] == 0).all()


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (((3, 4), (5, 3), (5, 2)), r"q \(3, 4\) \(d_k = 4\) and k \(5, 3\) \(d_k = 3\)"),
        (((3, 4), (5, 4), (6, 2)), r"k \(5, 4\) \(S = 5\) and v \(6, 2\) \(S = 6\)"),
        (((4,), (5, 4), (5, 2)), r"got q \(4,\)"),
        (((2, 3, 4), (3, 5, 4), (5, 2)), "do not broadcast"),
    ],
)
def test_attention_shape_errors_name_the_shapes(shapes, message):
    q, k, v = (np.ones(shape) for shape in shapes)
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(q, k, v)


def test_attention_mask_errors():
    q, k, v = np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2))
    with pytest.raises(ValueError, match="mask must be boolean"):
        scaled_dot_product_attention(q, k, v, mask=np.ones((3, 5)))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 5\) does not broadcast .* \(3, 5\)"):
        scaled_dot_product_attention(q, k, v, mask=np.ones((4, 5), dtype=bool))
