"""Unit tests of snippets/linear_memory.py: linear attention and the delta rule (chapter 9)."""

import numpy as np
import pytest

from snippets.linear_memory import CHUNK, delta_rule, linear_attention, linear_attention_recurrent

# --- references: plain loops over single entries, no batch dimensions ---------


def reference_linear_attention(Q, K, V, causal):
    """out_t = Σ_s (q_t · k_s) v_s over s ≤ t (causal) or over every s."""
    T, S, d_v = Q.shape[0], K.shape[0], V.shape[1]
    out = np.zeros((T, d_v))
    for t in range(T):
        for s in range(S):
            if causal and s > t:
                continue
            score = sum(Q[t, i] * K[s, i] for i in range(Q.shape[1]))
            out[t] += score * V[s]
    return out


def reference_delta_rule(K, V, beta):
    d_k, d_v = K.shape[1], V.shape[1]
    M = np.zeros((d_k, d_v))
    for k, v in zip(K, V, strict=True):
        stored = np.array([sum(k[i] * M[i, j] for i in range(d_k)) for j in range(d_v)])
        for i in range(d_k):
            for j in range(d_v):
                M[i, j] += beta * k[i] * (v[j] - stored[j])
    return M


def for_each_batch(function, batch, *arrays):
    """Apply a reference made for single (n, d) arrays to every batch index."""
    results = [function(*(np.broadcast_to(a, (*batch, *a.shape[-2:]))[index] for a in arrays))
               for index in np.ndindex(*batch)]
    return np.array(results).reshape(*batch, *results[0].shape)


def random_sizes(seed):
    rng = np.random.default_rng(300 + seed)
    T, S = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    while S == T:
        S = int(rng.integers(1, 9))
    d_k, d_v = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    while d_v == d_k:
        d_v = int(rng.integers(1, 7))
    batch = [(), (2,), (2, 3)][seed % 3]
    return rng, T, S, d_k, d_v, batch


# --- linear_attention --------------------------------------------------------


@pytest.mark.parametrize("seed", range(9))
def test_non_causal_equals_the_loop_with_T_not_S(seed):
    rng, T, S, d_k, d_v, batch = random_sizes(seed)
    Q, K, V = rng.normal(size=(*batch, T, d_k)), rng.normal(size=(*batch, S, d_k)), rng.normal(size=(*batch, S, d_v))
    got = linear_attention(Q, K, V, causal=False)
    expected = for_each_batch(lambda q, k, v: reference_linear_attention(q, k, v, causal=False), batch, Q, K, V)
    assert got.shape == (*batch, T, d_v)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(9))
def test_causal_parallel_and_recurrent_forms_equal_the_loop(seed):
    rng, T, _, d_k, d_v, batch = random_sizes(seed)
    Q, K, V = (rng.normal(size=(*batch, T, d)) for d in (d_k, d_k, d_v))
    expected = for_each_batch(lambda q, k, v: reference_linear_attention(q, k, v, causal=True), batch, Q, K, V)
    parallel = linear_attention(Q, K, V)
    recurrent = linear_attention_recurrent(Q, K, V)
    assert parallel.shape == recurrent.shape == (*batch, T, d_v)
    np.testing.assert_allclose(parallel, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(recurrent, expected, rtol=1e-12, atol=1e-12)


def test_batch_dimensions_broadcast():
    rng = np.random.default_rng(1)
    Q = rng.normal(size=(2, 1, 5, 4))
    K, V = rng.normal(size=(3, 5, 4)), rng.normal(size=(5, 2))
    for causal in (True, False):
        got = linear_attention(Q, K, V, causal=causal)
        assert got.shape == (2, 3, 5, 2)
        for b, h in np.ndindex(2, 3):
            expected = reference_linear_attention(Q[b, 0], K[h], V, causal)
            np.testing.assert_allclose(got[b, h], expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(linear_attention_recurrent(Q, K, V), linear_attention(Q, K, V), atol=1e-12)


def test_the_last_causal_output_is_a_read_of_the_folded_memory():
    rng = np.random.default_rng(2)
    Q, K, V = rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 5))
    M = K.T @ V  # every entry written: Σ k_sᵀ v_s
    np.testing.assert_allclose(linear_attention(Q, K, V)[-1], Q[-1] @ M, atol=1e-12)
    np.testing.assert_allclose(linear_attention(Q, K, V, causal=False), Q @ M, atol=1e-12)


def test_orthonormal_keys_read_back_exactly_up_to_d_k_entries():
    rng = np.random.default_rng(3)
    d_k, d_v = 6, 4
    basis, _ = np.linalg.qr(rng.normal(size=(d_k, d_k)))
    K, V = basis.T, rng.normal(size=(d_k, d_v))  # rows: d_k orthonormal keys
    np.testing.assert_allclose(linear_attention(K, K, V, causal=False), V, atol=1e-12)
    np.testing.assert_allclose(K @ delta_rule(K, V), V, atol=1e-12)


def test_float32_stays_float32_float16_too_and_integers_become_float64():
    for dtype in (np.float32, np.float16):
        Q = np.ones((3, 2), dtype=dtype)
        assert linear_attention(Q, Q, Q).dtype == dtype
        assert linear_attention_recurrent(Q, Q, Q).dtype == dtype
        assert delta_rule(Q, Q, 0.5).dtype == dtype
    with pytest.raises(ValueError, match="overflowed float16"):
        linear_attention(np.full((2, 2), 200, dtype=np.float16), np.full((2, 2), 200, dtype=np.float16),
                         np.full((2, 2), 200, dtype=np.float16))
    ints = np.arange(6).reshape(3, 2)
    assert linear_attention(ints, ints, ints).dtype == np.float64
    assert linear_attention(ints, ints, ints).tolist() == reference_linear_attention(ints, ints, ints, True).tolist()


def parallel_form(Q, K, V):
    """Causal linear attention all at once: the (T, T) scores with the future zeroed, times V."""
    return np.tril(Q @ np.swapaxes(K, -1, -2)) @ V


@pytest.mark.parametrize("T", [1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5])
def test_causal_chunks_equal_the_parallel_form(T):
    rng = np.random.default_rng(T)
    Q = rng.normal(size=(2, 1, T, 7))          # batches broadcast: (2, 1) with (3,) and ()
    K, V = rng.normal(size=(3, T, 7)), rng.normal(size=(T, 5))
    got = linear_attention(Q, K, V)
    assert got.shape == (2, 3, T, 5)
    assert np.abs(got - parallel_form(Q, K, V)).max() < 1e-12
    # float32 in float32, to its own precision
    got32 = linear_attention(*(a.astype(np.float32) for a in (Q, K, V)))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, parallel_form(Q, K, V), rtol=1e-4, atol=1e-4)


def test_causal_memory_grows_with_T_times_the_chunk_not_T_squared():
    # T = 2**17 tokens: the (T, T) scores of the parallel form would take 137 GB of float64.
    T = 2**17
    Q, K, V = np.full((T, 1), 0.5), np.ones((T, 1)), np.ones((T, 1))
    out = linear_attention(Q, K, V)
    assert out.shape == (T, 1) and out[-1, 0] == 0.5 * T and out[CHUNK, 0] == 0.5 * (CHUNK + 1)


def test_empty_inputs_give_empty_or_zero_results():
    assert linear_attention(np.ones((0, 3)), np.ones((0, 3)), np.ones((0, 2))).shape == (0, 2)
    assert linear_attention_recurrent(np.ones((0, 3)), np.ones((0, 3)), np.ones((0, 2))).shape == (0, 2)
    no_entries = linear_attention(np.ones((4, 3)), np.ones((0, 3)), np.ones((0, 2)), causal=False)
    assert no_entries.tolist() == np.zeros((4, 2)).tolist()
    assert delta_rule(np.ones((0, 3)), np.ones((0, 2))).tolist() == np.zeros((3, 2)).tolist()


# --- delta_rule --------------------------------------------------------------


@pytest.mark.parametrize("seed", range(9))
@pytest.mark.parametrize("beta", [0.0, 0.3, 1.0])
def test_delta_rule_equals_the_loop(seed, beta):
    rng, _, S, d_k, d_v, batch = random_sizes(seed)
    K, V = rng.normal(size=(*batch, S, d_k)), rng.normal(size=(*batch, S, d_v))
    got = delta_rule(K, V, beta)
    expected = for_each_batch(lambda k, v: reference_delta_rule(k, v, beta), batch, K, V)
    assert got.shape == (*batch, d_k, d_v)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_delta_rule_overwrites_where_the_additive_write_adds():
    k = np.array([0.6, 0.8, 0.0])  # a key of length 1
    v1, v2 = np.array([1.0, 2.0]), np.array([-3.0, 0.5])
    K, V = np.stack([k, k]), np.stack([v1, v2])
    np.testing.assert_allclose(k @ delta_rule(K, V, beta=1.0), v2, atol=1e-15)
    np.testing.assert_allclose(k @ (K.T @ V), v1 + v2, atol=1e-15)
    # beta = 0.5 moves halfway twice: 0.5 v1, then 0.5 v1 + 0.5 (v2 - 0.5 v1)
    np.testing.assert_allclose(k @ delta_rule(K, V, beta=0.5), 0.25 * v1 + 0.5 * v2, atol=1e-15)
    assert delta_rule(K, V, beta=0.0).tolist() == np.zeros((3, 2)).tolist()


def test_delta_rule_batches_broadcast():
    rng = np.random.default_rng(4)
    K, V = rng.normal(size=(2, 1, 5, 3)), rng.normal(size=(4, 5, 2))
    got = delta_rule(K, V, 0.7)
    assert got.shape == (2, 4, 3, 2)
    for b, h in np.ndindex(2, 4):
        np.testing.assert_allclose(got[b, h], reference_delta_rule(K[b, 0], V[h], 0.7), atol=1e-12)


# --- bad inputs ----------------------------------------------------------------

SHAPE_ERRORS = [
    (((3, 4), (5, 3), (5, 2)), False, r"Q \(3, 4\) \(d_k = 4\) and K \(5, 3\) \(d_k = 3\)"),
    (((3, 4), (5, 4), (6, 2)), False, r"K \(5, 4\) \(S = 5\) and V \(6, 2\) \(S = 6\)"),
    (((4,), (5, 4), (5, 2)), False, r"Q needs at least 2 dimensions.* got Q \(4,\)"),
    (((3, 4), (4,), (5, 2)), False, r"K and V need at least 2 dimensions"),
    (((2, 3, 4), (3, 5, 4), (5, 2)), False, r"batch dimensions of Q \(2, 3, 4\), K \(3, 5, 4\), V \(5, 2\)"),
    (((3, 4), (5, 4), (5, 2)), True, r"T = S.* Q \(3, 4\) \(T = 3\) and K \(5, 4\) \(S = 5\)"),
]


@pytest.mark.parametrize(("shapes", "causal", "message"), SHAPE_ERRORS)
def test_shape_errors_name_the_shapes(shapes, causal, message):
    Q, K, V = (np.ones(shape) for shape in shapes)
    with pytest.raises(ValueError, match=message):
        linear_attention(Q, K, V, causal=causal)
    with pytest.raises(ValueError, match=r"^linear_attention_recurrent: "):  # every case is bad for it too
        linear_attention_recurrent(Q, K, V)


def test_recurrent_form_needs_T_equal_S():
    with pytest.raises(ValueError, match=r"linear_attention_recurrent: .*T = S"):
        linear_attention_recurrent(np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2)))


@pytest.mark.parametrize(
    ("K", "V", "message"),
    [
        (np.ones((3, 4)), np.ones((2, 5)), r"K \(3, 4\) \(S = 3\) and V \(2, 5\) \(S = 2\)"),
        (np.ones(4), np.ones((1, 5)), r"K and V need at least 2 dimensions"),
        (np.ones((2, 3, 4)), np.ones((3, 3, 5)), r"batch dimensions of K \(2, 3, 4\), V \(3, 3, 5\)"),
    ],
)
def test_delta_rule_shape_errors(K, V, message):
    with pytest.raises(ValueError, match=message):
        delta_rule(K, V)


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (np.array([[np.nan, 1.0]]), ValueError, "Q contains NaN"),
        (np.array([[np.inf, 1.0]]), ValueError, r"Q contains \+inf"),
        (np.array([[-np.inf, 1.0]]), ValueError, "Q contains -inf"),
        (np.array([["a", "b"]]), ValueError, "Q must hold numbers"),
        (None, ValueError, "Q must hold numbers"),
    ],
)
def test_non_finite_or_non_numeric_queries_are_refused(bad, error, message):
    ok = np.ones((1, 2))
    with pytest.raises(error, match=message):
        linear_attention(bad, ok, ok)
    with pytest.raises(error, match=message):
        linear_attention_recurrent(bad, ok, ok)
    with pytest.raises(error, match=message.replace("Q", "K")):
        delta_rule(bad, ok)


def test_causal_must_be_a_bool():
    ok = np.ones((2, 2))
    with pytest.raises(TypeError, match="causal must be True or False, got 'yes'"):
        linear_attention(ok, ok, ok, causal="yes")


@pytest.mark.parametrize(
    ("beta", "error", "message"),
    [
        (1.5, ValueError, "beta must be between 0 and 1 .*got 1.5"),
        (-0.1, ValueError, "beta must be between 0 and 1 .*got -0.1"),
        (float("nan"), ValueError, "beta must be between 0 and 1 .*got nan"),
        ("1", TypeError, "beta must be a real number .*got '1'"),
        (True, TypeError, "beta must be a real number .*got True"),
        (None, TypeError, "beta must be a real number .*got None"),
    ],
)
def test_bad_beta_is_refused(beta, error, message):
    with pytest.raises(error, match=message):
        delta_rule(np.ones((2, 2)), np.ones((2, 3)), beta)


def test_underflow_is_fine_and_gives_zeros():
    tiny = np.full((3, 2), 1e-300)
    assert linear_attention(tiny, tiny, tiny).tolist() == np.zeros((3, 2)).tolist()
    assert delta_rule(tiny, tiny).tolist() == np.zeros((2, 2)).tolist()


def test_overflow_is_an_error_not_inf():
    huge = np.full((2, 2), 1e200)
    for function in (linear_attention, linear_attention_recurrent):
        with pytest.raises(ValueError, match="overflowed float64"):
            function(huge, huge, huge)
    with pytest.raises(ValueError, match="delta_rule: the result overflowed"):
        delta_rule(huge, huge)
