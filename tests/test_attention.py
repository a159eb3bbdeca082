"""Unit tests of snippets/attention.py: softmax, scaled dot-product attention,
scoring functions and Nadaraya-Watson regression, plus property tests of
attention over random shapes, masks and dtypes."""

import warnings

import numpy as np
import pytest

from snippets.attention import (
    additive_scores,
    dot_scores,
    gaussian_scores,
    nadaraya_watson,
    scaled_dot_product_attention,
    scaled_dot_scores,
    softmax,
)
from snippets.lookup import batch_matrix_lookup, dict_as_matrices, matrix_lookup


def reference_attention(Q, K, V, mask=None):
    """Attention written out key by key, independent of the snippet's vectorised code."""
    T, S = Q.shape[0], K.shape[0]
    out = np.zeros((T, V.shape[1]))
    weights = np.zeros((T, S))
    for t in range(T):
        allowed = [s for s in range(S) if mask is None or mask[t, s]]
        if not allowed:
            continue
        scores = {s: float(Q[t] @ K[s]) / np.sqrt(Q.shape[1]) for s in allowed}
        top = max(scores.values())
        total = sum(np.exp(x - top) for x in scores.values())
        for s, x in scores.items():
            weights[t, s] = np.exp(x - top) / total
            out[t] += weights[t, s] * V[s]
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
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = rng.random((3, 5)) > 0.4
    mask[1] = False
    out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    ref_out, ref_weights = reference_attention(Q, K, V, mask)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)
    np.testing.assert_allclose(weights, ref_weights, atol=1e-12)
    assert (out[1] == 0).all() and (weights[1] == 0).all()


# Bad (Q, K, V) shapes and what the error must say; test_at_scale.py reuses them,
# since its variants refuse exactly what full attention refuses.
SHAPE_ERRORS = [
    (((3, 4), (5, 3), (5, 2)), r"Q \(3, 4\) \(d_k = 4\) and K \(5, 3\) \(d_k = 3\)"),
    (((3, 4), (5, 4), (6, 2)), r"K \(5, 4\) \(S = 5\) and V \(6, 2\) \(S = 6\)"),
    (((4,), (5, 4), (5, 2)), r"got Q \(4,\)"),
    (((2, 3, 4), (3, 5, 4), (5, 2)), "do not broadcast"),
]


@pytest.mark.parametrize(("shapes", "message"), SHAPE_ERRORS)
def test_attention_shape_errors_name_the_shapes(shapes, message):
    Q, K, V = (np.ones(shape) for shape in shapes)
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(Q, K, V)


def test_attention_mask_errors():
    Q, K, V = np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2))
    with pytest.raises(ValueError, match="mask must be boolean"):
        scaled_dot_product_attention(Q, K, V, mask=np.ones((3, 5)))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 5\) does not broadcast .* \(3, 5\)"):
        scaled_dot_product_attention(Q, K, V, mask=np.ones((4, 5), dtype=bool))


def test_attention_equals_reference_on_real_sized_batched_shapes():
    rng = np.random.default_rng(2)
    B, T, S, d_k, d_v = 2, 7, 11, 16, 8
    Q, K, V = rng.normal(size=(B, T, d_k)), rng.normal(size=(B, S, d_k)), rng.normal(size=(B, S, d_v))
    mask = rng.random((B, T, S)) > 0.3
    mask[1, 4] = False
    for m in (None, mask):
        out, weights = scaled_dot_product_attention(Q, K, V, mask=m)
        assert out.shape == (B, T, d_v) and weights.shape == (B, T, S)
        for b in range(B):
            ref_out, ref_weights = reference_attention(Q[b], K[b], V[b], None if m is None else m[b])
            np.testing.assert_allclose(out[b], ref_out, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(weights[b], ref_weights, rtol=1e-12, atol=1e-12)


# Property tests: the same claims over many random shapes, masks and score sizes.

def random_case(seed: int, dtype=np.float64):
    """Q, K, V and a mask with T != S, d_k != d_v, 0-2 batch dimensions and some fully masked rows."""
    rng = np.random.default_rng(seed)
    batch = tuple(int(n) for n in rng.integers(1, 4, size=rng.integers(0, 3)))
    T, S = (int(n) for n in rng.choice(np.arange(2, 10), size=2, replace=False))
    d_k, d_v = (int(n) for n in rng.choice(np.arange(1, 9), size=2, replace=False))
    spread = rng.choice([0.1, 1.0, 5.0])  # flat, ordinary and nearly one-hot weights
    Q = (spread * rng.normal(size=(*batch, T, d_k))).astype(dtype)
    K = rng.normal(size=(*batch, S, d_k)).astype(dtype)
    V = rng.normal(size=(*batch, S, d_v)).astype(dtype)
    mask = rng.random((*batch, T, S)) > 0.4
    empty_row = rng.integers(T)
    mask[..., empty_row, :] = False                          # a query that may look at nothing
    mask[..., (empty_row + 1) % T, rng.integers(S)] = True   # and one that sees at least one key
    return rng, Q, K, V, mask


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_weights_are_nonnegative_and_rows_sum_to_one_or_zero(seed):
    _, Q, K, V, mask = random_case(seed)
    out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    assert (weights >= 0).all()
    assert (weights[~mask] == 0).all()
    allowed_rows = mask.any(axis=-1)
    np.testing.assert_allclose(weights.sum(axis=-1)[allowed_rows], 1.0, rtol=1e-12)
    assert (weights[~allowed_rows] == 0).all() and (out[~allowed_rows] == 0).all()
    assert not allowed_rows.all()  # the case really has fully masked rows


@pytest.mark.parametrize("seed", SEEDS)
def test_output_is_a_convex_combination_of_the_allowed_values(seed):
    _, Q, K, V, mask = random_case(seed)
    out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    np.testing.assert_allclose(out, weights @ V, rtol=1e-12, atol=1e-12)
    # Per coordinate, the output lies between the smallest and largest allowed value.
    allowed = mask[..., :, :, None]                         # (..., T, S, 1)
    values = V[..., None, :, :]                             # (..., 1, S, d_v)
    low = np.min(np.where(allowed, values, np.inf), axis=-2)
    high = np.max(np.where(allowed, values, -np.inf), axis=-2)
    rows = mask.any(axis=-1)
    tolerance = 1e-12 * (1 + np.abs(V).max())
    assert (out[rows] >= low[rows] - tolerance).all() and (out[rows] <= high[rows] + tolerance).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_permuting_keys_and_values_together_changes_nothing(seed):
    rng, Q, K, V, mask = random_case(seed)
    order = rng.permutation(K.shape[-2])
    out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    out_p, weights_p = scaled_dot_product_attention(Q, K[..., order, :], V[..., order, :], mask=mask[..., order])
    np.testing.assert_allclose(out_p, out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights_p, weights[..., order], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("seed", SEEDS)
def test_float32_stays_float32(seed):
    _, Q, K, V, mask = random_case(seed, dtype=np.float32)
    out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    assert out.dtype == np.float32 and weights.dtype == np.float32
    out64, _ = scaled_dot_product_attention(Q.astype(np.float64), K, V, mask=mask)
    np.testing.assert_allclose(out, out64, rtol=1e-4, atol=1e-5)
    for scores in (dot_scores(Q, K), scaled_dot_scores(Q, K), gaussian_scores(Q, K, 0.5)):
        assert scores.dtype == np.float32
    assert softmax(Q).dtype == np.float32


@pytest.mark.parametrize("seed", SEEDS)
def test_one_hot_query_at_low_temperature_is_the_exact_dict_lookup(seed):
    rng = np.random.default_rng(seed)
    S, d_v = int(rng.integers(2, 9)), int(rng.integers(1, 4))
    d = {f"key{i}": rng.normal(size=d_v) * 10 for i in range(S)}
    keys, K, V = dict_as_matrices(d)
    queries = list(rng.choice(list(d), size=S + 2))         # T != S, repeats allowed
    Q = keys.encode_all(queries)
    exact = batch_matrix_lookup(Q, K, V)
    # Temperature 1e-3 is scale 1e3: the matching key's score beats the others by 1000.
    out, weights = scaled_dot_product_attention(Q, K, V, scale=1e3)
    assert (weights == Q).all()
    assert (out == exact).all()
    assert (softmax(Q @ K.T, temperature=1e-3) @ V == exact).all()
    for query, row in zip(queries, out, strict=True):
        assert (row == d[query]).all() and (row == matrix_lookup(keys.encode(query), K, V)).all()


def test_no_warnings_and_no_nan_for_huge_logits_and_fully_masked_rows():
    rng = np.random.default_rng(3)
    Q = np.array([[1e4, 0.0], [-1e4, 1e4], [0.0, 0.0]])
    K = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    V = rng.normal(size=(4, 3))
    mask = np.ones((3, 4), dtype=bool)
    mask[2] = False
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        for m in (None, mask):
            out, weights = scaled_dot_product_attention(Q, K, V, mask=m, scale=1.0)
            assert np.isfinite(out).all() and np.isfinite(weights).all()
        np.testing.assert_array_equal(weights[0], [0.5, 0, 0, 0.5])  # scores 1e4, -1e4, 0, 1e4
        assert (weights[2] == 0).all() and (out[2] == 0).all()
        assert np.isfinite(softmax(np.array([[1e4, -1e4], [-np.inf, -np.inf]]))).all()


def test_mask_without_batch_dimensions_broadcasts_over_the_batch():
    rng = np.random.default_rng(4)
    Q, K, V = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    mask = np.tril(np.ones((3, 5), dtype=bool))
    out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    for b in range(2):
        np.testing.assert_allclose(out[b], reference_attention(Q[b], K[b], V[b], mask)[0], atol=1e-12)


# Scoring functions

def test_dot_and_scaled_dot_scores_match_a_loop_and_broadcast():
    rng = np.random.default_rng(5)
    Q, K = rng.normal(size=(2, 1, 3, 4)), rng.normal(size=(3, 5, 4))
    scores = dot_scores(Q, K)
    assert scores.shape == (2, 3, 3, 5)
    for a, b, t, s in np.ndindex(scores.shape):
        assert np.isclose(scores[a, b, t, s], Q[a, 0, t] @ K[b, s], rtol=1e-12)
    np.testing.assert_allclose(scaled_dot_scores(Q, K), scores / 2, rtol=1e-12)  # 1/√4
    np.testing.assert_allclose(scaled_dot_scores(Q, K, scale=3.0), 3 * scores, rtol=1e-12)
    # The attention function is softmax of exactly these scores.
    _, weights = scaled_dot_product_attention(Q, K, rng.normal(size=(5, 2)))
    np.testing.assert_allclose(weights, softmax(scaled_dot_scores(Q, K)), rtol=1e-12)


def test_additive_scores_match_a_loop_with_queries_and_keys_of_different_sizes():
    rng = np.random.default_rng(6)
    d_q, d_k, h = 3, 5, 7
    Q, K = rng.normal(size=(2, 4, d_q)), rng.normal(size=(2, 6, d_k))
    W_Q, W_K, w_v = rng.normal(size=(d_q, h)), rng.normal(size=(d_k, h)), rng.normal(size=h)
    scores = additive_scores(Q, K, W_Q, W_K, w_v)
    assert scores.shape == (2, 4, 6)
    for b, t, s in np.ndindex(scores.shape):
        expected = w_v @ np.tanh(Q[b, t] @ W_Q + K[b, s] @ W_K)
        assert np.isclose(scores[b, t, s], expected, rtol=1e-12)
    # tanh keeps every score within ±‖w_v‖₁, however large the inputs.
    assert np.abs(additive_scores(1e6 * Q, K, W_Q, W_K, w_v)).max() <= np.abs(w_v).sum()


def test_gaussian_scores_are_the_log_of_the_gaussian_kernel():
    rng = np.random.default_rng(7)
    Q, K = rng.normal(size=(3, 2)), rng.normal(size=(5, 2))
    scores = gaussian_scores(Q, K, bandwidth=0.7)
    assert scores.shape == (3, 5)
    for t, s in np.ndindex(scores.shape):
        kernel = np.exp(-np.sum((Q[t] - K[s]) ** 2) / (2 * 0.7**2))
        assert np.isclose(np.exp(scores[t, s]), kernel, rtol=1e-12)
    assert (scores <= 0).all()
    assert (gaussian_scores(K, K)[np.diag_indices(5)] == 0).all()   # a query equal to a key: exactly 0
    # The nearest key scores highest, unlike the dot product, which prefers long keys.
    nearest = np.argmin(np.linalg.norm(Q[:, None] - K[None], axis=-1), axis=1)
    assert (np.argmax(scores, axis=1) == nearest).all()


# Nadaraya-Watson

def test_nadaraya_watson_is_a_kernel_weighted_average():
    rng = np.random.default_rng(8)
    x_keys, y = rng.uniform(0, 5, size=30), rng.normal(size=30)
    x_query = np.linspace(0, 5, 7)
    prediction = nadaraya_watson(x_query, x_keys, y, bandwidth=0.5)
    assert prediction.shape == (7,)
    for t, x in enumerate(x_query):
        kernel = np.exp(-((x - x_keys) ** 2) / (2 * 0.5**2))
        assert np.isclose(prediction[t], kernel @ y / kernel.sum(), rtol=1e-12)
    # Vector values and 2-d points work the same way.
    two_d = nadaraya_watson(rng.normal(size=(4, 2)), rng.normal(size=(6, 2)), rng.normal(size=(6, 3)), 1.0)
    assert two_d.shape == (4, 3)
    np.testing.assert_allclose(nadaraya_watson(x_query, x_keys, np.full(30, 2.5), 0.3), 2.5, rtol=1e-12)


def test_nadaraya_watson_fits_a_smooth_function_and_becomes_a_lookup_as_bandwidth_shrinks():
    rng = np.random.default_rng(9)
    x_keys = np.sort(rng.uniform(0, 6, size=200))
    y = np.sin(x_keys) + rng.normal(scale=0.3, size=200)
    grid = np.linspace(0.5, 5.5, 50)
    error = np.sqrt(np.mean((nadaraya_watson(grid, x_keys, y, 0.3) - np.sin(grid)) ** 2))
    assert error < 0.15  # well below the noise of 0.3
    # At a tiny bandwidth, querying a stored point returns its stored value exactly.
    np.testing.assert_array_equal(nadaraya_watson(x_keys[:5], x_keys, y, 1e-6), y[:5])


# Shape and argument errors name the argument and the shapes

@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: dot_scores(np.ones((3, 4)), np.ones((5, 3))),
         r"dot_scores: Q and K must end in the same d_k: got Q \(3, 4\) \(d_k = 4\) and K \(5, 3\) \(d_k = 3\)"),
        (lambda: dot_scores(np.ones(4), np.ones((5, 4))), r"dot_scores: .* got Q \(4,\) and K \(5, 4\)"),
        (lambda: scaled_dot_scores(np.ones((2, 3, 4)), np.ones((3, 5, 4))),
         r"scaled_dot_scores: the batch dimensions of Q \(2, 3, 4\) and K \(3, 5, 4\) do not broadcast"),
        (lambda: gaussian_scores(np.ones((3, 2)), np.ones((5, 3))), r"gaussian_scores: .* Q \(3, 2\) .* K \(5, 3\)"),
        (lambda: gaussian_scores(np.ones((3, 2)), np.ones((5, 2)), bandwidth=0),
         "gaussian_scores: bandwidth must be > 0, got 0"),
        (lambda: additive_scores(np.ones((3, 4)), np.ones((5, 2)), np.ones((4, 8)), np.ones((3, 8)), np.ones(8)),
         r"additive_scores: W_K must have shape \(d_k, h\) = \(2, 8\) to match K \(5, 2\) and w_v \(8,\), "
         r"got \(3, 8\)"),
        (lambda: additive_scores(np.ones((3, 4)), np.ones((5, 2)), np.ones((4, 6)), np.ones((2, 8)), np.ones(8)),
         r"W_Q must have shape \(d_q, h\) = \(4, 8\) to match Q \(3, 4\)"),
        (lambda: additive_scores(np.ones((3, 4)), np.ones((5, 2)), np.ones((4, 8)), np.ones((2, 8)), np.ones((8, 1))),
         r"w_v must have shape \(h,\), got \(8, 1\)"),
        (lambda: additive_scores(np.ones(4), np.ones((5, 2)), np.ones((4, 8)), np.ones((2, 8)), np.ones(8)),
         r"got Q \(4,\) and K \(5, 2\)"),
        (lambda: additive_scores(np.ones((2, 3, 4)), np.ones((3, 5, 2)), np.ones((4, 8)), np.ones((2, 8)), np.ones(8)),
         "do not broadcast"),
        (lambda: nadaraya_watson(np.ones((10, 2)), np.ones(5), np.ones(5), 1.0),
         r"x_query and x_keys must be points of the same dimension d: got x_query \(10, 2\) and x_keys \(5,\)"),
        (lambda: nadaraya_watson(np.ones(10), np.ones(5), np.ones(6), 1.0),
         r"y_values needs one value per key, shape \(S,\) or \(S, d_v\): "
         r"got x_keys \(5,\) \(S = 5\) and y_values \(6,\)"),
        (lambda: nadaraya_watson(np.ones(10), np.ones(5), np.ones((5, 2, 2)), 1.0),
         r"y_values needs one value per key, .* and y_values \(5, 2, 2\)"),
        (lambda: nadaraya_watson(np.ones((2, 2, 2)), np.ones(5), np.ones(5), 1.0),
         r"x_query must have shape \(n,\) or \(n, d\), got \(2, 2, 2\)"),
        (lambda: nadaraya_watson(np.ones(3), np.ones(5), np.ones(5), -1.0), "bandwidth must be > 0"),
        (lambda: nadaraya_watson(np.ones(3), np.ones(5), [1, 2, np.nan, 4, 5], 1.0), "y_values contains NaN"),
    ],
)
def test_scoring_and_regression_errors_name_argument_and_shapes(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# Issue 10 §6: the outside tester's cases, and the cheap checks that replaced the input scans.

@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: softmax([0.0, -np.inf], temperature=np.inf), ValueError, "temperature must be a finite number"),
        (lambda: softmax([1.0, 2.0], temperature="1"), TypeError, "temperature must be a real number"),
        (lambda: softmax([1.0, 2.0], axis=3), ValueError, r"axis must lie in \[-1, 1\)"),
        (lambda: scaled_dot_product_attention([[np.inf, 0.0]], np.ones((3, 2)), np.ones((3, 1))), ValueError,
         r"^Q contains \+inf"),
        (lambda: scaled_dot_product_attention(np.ones((2, 2)), [[np.nan, 0.0], [0.0, 0.0]], np.ones((2, 1))),
         ValueError, "^K contains NaN"),
        (lambda: scaled_dot_product_attention(np.ones((2, 2)), np.ones((2, 2)), [[1.0], [np.inf]]), ValueError,
         r"^V contains \+inf"),
        (lambda: scaled_dot_product_attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 1)), scale=np.nan),
         ValueError, "scale must be a finite number"),
        (lambda: scaled_dot_product_attention(np.full((1, 2), 1e200), np.full((3, 2), 1e200), np.ones((3, 1))),
         ValueError, r"the scores Q Kᵀ · scale overflow float64: Q .*, K .*"),
        (lambda: scaled_dot_product_attention([["a", "b"]], np.ones((2, 2)), np.ones((2, 1))), ValueError,
         "Q must hold numbers"),
        (lambda: nadaraya_watson([1.0], [], [], 1.0), ValueError, "x_keys must hold at least one observed point"),
        (lambda: gaussian_scores(np.ones((2, 2)), np.ones((3, 2)), bandwidth=np.nan), ValueError,
         "bandwidth must be a finite number"),
        (lambda: dot_scores(np.full((1, 2), 1e200), np.full((3, 2), 1e200)), ValueError,
         "dot_scores: the dot products overflow float64: Q .*, K "),
    ],
)
def test_bad_input_is_refused_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_extreme_but_finite_inputs_give_finite_correct_outputs():
    # Values next to the largest float: their average rounds past it unless computed with care.
    big = np.finfo(np.float64).max
    Q, K, V = np.ones((2, 3)), np.ones((4, 3)), np.full((4, 2), big)
    out, weights = scaled_dot_product_attention(Q, K, V)
    assert np.isfinite(out).all() and (out == big).all()
    # float16 inputs are computed in float32: sums of 1,000 weights and values stay finite.
    Q16, K16, V16 = np.ones((2, 4), np.float16), np.ones((1000, 4), np.float16), np.full((1000, 3), 100, np.float16)
    out16, weights16 = scaled_dot_product_attention(Q16, K16, V16)
    assert out16.dtype == weights16.dtype == np.float16 and (out16 == 100).all()
    # A tiny bandwidth: far keys get weight 0, the stored point its own value exactly.
    assert nadaraya_watson([1.0], [0.0, 1.0, 2.0], [5.0, 6.0, 7.0], 1e-300).tolist() == [6.0]
    assert softmax([[0.0, -np.inf]], temperature=1e-300).tolist() == [[1.0, 0.0]]
