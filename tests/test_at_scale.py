"""Unit tests of snippets/at_scale.py: chunked (online-softmax) and top-k attention."""

import tracemalloc

import numpy as np
import pytest
from test_attention import SHAPE_ERRORS

from snippets.at_scale import chunked_attention, topk_attention
from snippets.attention import scaled_dot_product_attention
from snippets.lookup import argmax_lookup, dict_as_matrices


def full_output(Q, K, V, mask=None, scale=None):
    return scaled_dot_product_attention(Q, K, V, mask=mask, scale=scale)[0]


def random_problem(seed, batch=(), T=5, S=12, d_k=6, d_v=3, masked=True):
    """Random Q, K, V with T != S and d_k != d_v, and a mask with a fully masked row."""
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(*batch, T, d_k))
    K = rng.normal(size=(*batch, S, d_k))
    V = rng.normal(size=(*batch, S, d_v))
    mask = None
    if masked:
        mask = rng.random((*batch, T, S)) < 0.5
        mask[..., 1, :] = False
    return Q, K, V, mask


def chunk_sizes(S):
    """The four kinds: 1, a divisor of S, a size that does not divide S, one larger than S."""
    divisor = next(c for c in range(2, S + 1) if S % c == 0)
    non_divisor = next(c for c in range(2, S) if S % c)
    return [1, divisor, non_divisor, S + 3]


# --- chunked_attention -------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("masked", [False, True])
def test_chunked_equals_full_attention_for_every_kind_of_chunk_size(seed, masked):
    rng = np.random.default_rng(100 + seed)
    T, S = int(rng.integers(1, 9)), int(rng.integers(5, 30))
    d_k, d_v = int(rng.integers(1, 8)), int(rng.integers(1, 8))
    batch = [(), (2,), (2, 3)][seed % 3]
    Q, K, V, mask = random_problem(seed, batch, T, S, d_k, d_v, masked)
    expected = full_output(Q, K, V, mask)
    for chunk_size in chunk_sizes(S):
        got = chunked_attention(Q, K, V, chunk_size, mask=mask)
        assert got.shape == expected.shape == (*batch, T, d_v)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    if masked and T > 1:
        assert (got[..., 1, :] == 0).all()  # the fully masked query gets zeros, not NaN


def test_chunked_broadcasts_batch_dimensions_and_masks_like_full_attention():
    rng = np.random.default_rng(7)
    Q = rng.normal(size=(2, 1, 4, 5))
    K, V = rng.normal(size=(3, 9, 5)), rng.normal(size=(3, 9, 2))
    masks = [
        rng.random(9) < 0.5,                    # (S,)
        rng.random((4, 1)) < 0.5,               # (T, 1): whole rows on or off
        rng.random((1, 9)) < 0.5,               # (1, S)
        rng.random((5, 1, 1, 4, 9)) < 0.5,      # extra leading dimensions
        np.array(True),
    ]
    for mask in masks:
        expected = full_output(Q, K, V, mask)
        for chunk_size in (1, 3, 4, 20):
            got = chunked_attention(Q, K, V, chunk_size, mask=mask)
            assert got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_chunked_custom_scale():
    Q, K, V, mask = random_problem(3)
    np.testing.assert_allclose(
        chunked_attention(Q, K, V, 5, mask=mask, scale=0.3), full_output(Q, K, V, mask, scale=0.3), atol=1e-12
    )


def test_chunked_keeps_float32():
    Q, K, V, mask = (a.astype(np.float32) if a.dtype != bool else a for a in random_problem(4))
    got = chunked_attention(Q, K, V, 5, mask=mask)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, full_output(Q, K, V, mask), atol=1e-5)


def test_chunked_huge_logits_give_no_nan_and_no_warning():
    # pytest.ini turns every warning into an error: overflow or 0/0 would fail here.
    rng = np.random.default_rng(5)
    Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]) * 100
    K = rng.choice([-1.0, 1.0], size=(11, 2)) * 100 * np.sqrt(2)   # scores of ±1e4 and 0
    V = rng.normal(size=(11, 4))
    mask = rng.random((3, 11)) < 0.7
    mask[2] = False
    for chunk_size in (1, 4, 11, 30):
        got = chunked_attention(Q, K, V, chunk_size, mask=mask)
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, full_output(Q, K, V, mask), atol=1e-12)


def test_chunked_every_key_masked_gives_zeros():
    Q, K, V, _ = random_problem(6)
    got = chunked_attention(Q, K, V, 4, mask=np.zeros((5, 12), dtype=bool))
    assert (got == 0).all() and got.shape == (5, 3)


def test_chunked_with_no_keys_matches_full_attention():
    Q, K, V = np.ones((3, 4)), np.ones((0, 4)), np.ones((0, 2))
    np.testing.assert_array_equal(chunked_attention(Q, K, V, 2), full_output(Q, K, V))


def test_chunked_converts_integers_and_refuses_nan_and_non_numbers():
    Q, K, V = np.arange(6).reshape(2, 3), np.arange(12).reshape(4, 3) % 5, np.arange(8).reshape(4, 2)
    np.testing.assert_allclose(chunked_attention(Q, K, V, 3), full_output(Q, K, V), atol=1e-12)
    for name, bad in (("K", K.astype(float)), ("V", V.astype(float))):
        bad[-1, 0] = np.nan
        args = {"Q": Q, "K": K, "V": V, name: bad}
        with pytest.raises(ValueError, match=f"{name} contains NaN"):
            chunked_attention(args["Q"], args["K"], args["V"], 3)
    with pytest.raises(ValueError, match="V must hold numbers"):
        chunked_attention(Q, K, np.full((4, 2), "a"), 3)


@pytest.mark.parametrize("bad", [0, -3, 2.5, 4.0, True, "4", None])
def test_chunked_refuses_bad_chunk_sizes(bad):
    Q, K, V, _ = random_problem(0)
    message = r"chunk_size must be a positive integer .*, got " + repr(bad).replace(".", r"\.")
    with pytest.raises(ValueError, match=message):
        chunked_attention(Q, K, V, bad)


def test_chunked_accepts_numpy_integers():
    Q, K, V, mask = random_problem(1)
    np.testing.assert_allclose(chunked_attention(Q, K, V, np.int64(5), mask=mask), full_output(Q, K, V, mask),
                               atol=1e-12)


@pytest.mark.parametrize("function", [chunked_attention, topk_attention])
@pytest.mark.parametrize(("shapes", "message"), SHAPE_ERRORS)
def test_shape_errors_name_the_shapes(function, shapes, message):
    Q, K, V = (np.ones(shape) for shape in shapes)
    with pytest.raises(ValueError, match=message):
        function(Q, K, V, 2)


@pytest.mark.parametrize("function", [chunked_attention, topk_attention])
def test_mask_errors(function):
    Q, K, V = np.ones((3, 4)), np.ones((5, 4)), np.ones((5, 2))
    with pytest.raises(ValueError, match="mask must be boolean"):
        function(Q, K, V, 2, mask=np.ones((3, 5)))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 5\) does not broadcast .* \(3, 5\)"):
        function(Q, K, V, 2, mask=np.ones((4, 5), dtype=bool))


def peak_bytes(function, *args):
    """The peak of memory allocated while ``function(*args)`` runs, as on the at-scale page.

    tracemalloc counts every thread's allocations: tests/conftest.py runs this
    module before the browser tests' thread starts.
    """
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    try:
        function(*args)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_chunked_peak_memory_does_not_grow_with_S_while_full_attention_does():
    rng = np.random.default_rng(8)
    T, d_k, d_v, chunk_size = 32, 16, 8, 128
    full, chunked = [], []
    key_counts = (1024, 4096, 16384)
    for S in key_counts:
        Q, K, V = rng.normal(size=(T, d_k)), rng.normal(size=(S, d_k)), rng.normal(size=(S, d_v))
        full.append(peak_bytes(scaled_dot_product_attention, Q, K, V))
        chunked.append(peak_bytes(chunked_attention, Q, K, V, chunk_size))
    assert max(chunked) / min(chunked) < 1.2
    # linear in S: every extra key costs at least 95% of its T weights, and not much more
    assert full[-1] - full[0] > 0.95 * T * (key_counts[-1] - key_counts[0]) * 8
    # the weights, and little else
    assert all(f <= 1.3 * T * S * 8 + 100_000 for f, S in zip(full, key_counts, strict=True))
    assert all(f >= T * S * 8 for f, S in zip(full, key_counts, strict=True))        # at least the weights
    assert max(chunked) < full[0]


# --- topk_attention ----------------------------------------------------------


def test_top1_is_the_argmax_lookup_of_chapter_2_on_a_one_hot_dict():
    d = {"dog": 10, "cat": 2, "tiger": 5, 8: 12, "lion": 7}
    keys, K, V = dict_as_matrices(d)
    queries = ["tiger", 8, "dog"]
    Q = keys.encode_all(queries)
    got = topk_attention(Q, K, V, 1)
    assert got.ravel().tolist() == [d[query] for query in queries]
    assert got.ravel().tolist() == [argmax_lookup(Q, K, V)[0] for Q in Q]


@pytest.mark.parametrize("seed", range(4))
def test_top1_returns_the_value_of_the_best_key(seed):
    Q, K, V, _ = random_problem(seed, batch=(2,), T=4, S=15, d_k=5, d_v=3)
    best = np.argmax(Q @ np.swapaxes(K, -1, -2), axis=-1)
    expected = np.take_along_axis(V, best[..., None], axis=-2)
    np.testing.assert_array_equal(topk_attention(Q, K, V, 1), expected)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("masked", [False, True])
def test_top_S_and_more_is_full_attention(seed, masked):
    Q, K, V, mask = random_problem(seed, batch=(3,), masked=masked)
    expected = full_output(Q, K, V, mask)
    for k_top in (12, 13, 100):
        np.testing.assert_allclose(topk_attention(Q, K, V, k_top, mask=mask), expected, rtol=0, atol=1e-15)


def test_topk_equals_attention_over_the_k_best_keys():
    rng = np.random.default_rng(9)
    Q, K, V = rng.normal(size=(4, 3)), rng.normal(size=(10, 3)), rng.normal(size=(10, 2))
    scores = Q @ K.T / np.sqrt(3)
    for k_top in (2, 5):
        for t in range(4):
            best = np.argsort(-scores[t], kind="stable")[:k_top]
            weights = np.exp(scores[t, best] - scores[t, best].max())
            expected = weights / weights.sum() @ V[best]
            np.testing.assert_allclose(topk_attention(Q[t : t + 1], K, V, k_top)[0], expected, atol=1e-14)


def test_topk_ties_go_to_the_lower_index():
    Q = np.zeros((2, 3))        # every score is 0: all keys tie
    K = np.ones((6, 3))
    V = np.arange(12.0).reshape(6, 2)
    np.testing.assert_array_equal(topk_attention(Q, K, V, 1), [V[0], V[0]])
    np.testing.assert_allclose(topk_attention(Q, K, V, 3), [V[:3].mean(axis=0)] * 2)
    # a tie at the boundary behind a strictly better key: the better key, then the lowest tied index
    Q, K = np.array([[1.0]]), np.array([[0.0], [1.0], [0.0], [1.0], [2.0]])
    V = np.arange(5.0)[:, None]
    scores = np.array([0.0, 1.0, 0.0, 1.0, 2.0])
    weights = np.exp(scores[[4, 1]] - 2.0)
    np.testing.assert_allclose(topk_attention(Q, K, V, 2), [[weights @ V[[4, 1], 0] / weights.sum()]])


def test_topk_never_keeps_a_masked_key_and_uses_all_allowed_when_too_few():
    rng = np.random.default_rng(10)
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 2))
    scores = Q @ K.T
    mask = np.ones((3, 8), dtype=bool)
    mask[0, np.argmax(scores[0])] = False        # hide query 0's best key
    mask[1] = False
    mask[1, [2, 5]] = True                       # query 1 may see two keys only
    mask[2] = False                              # query 2 sees none
    got = topk_attention(Q, K, V, 1, mask=mask)
    allowed_scores = np.where(mask[0], scores[0], -np.inf)
    np.testing.assert_array_equal(got[0], V[np.argmax(allowed_scores)])
    got3 = topk_attention(Q, K, V, 3, mask=mask)
    np.testing.assert_allclose(got3[1], full_output(Q, K, V, mask)[1], atol=1e-15)
    assert (got[2] == 0).all() and (got3[2] == 0).all()


def test_topk_error_shrinks_to_zero_as_k_grows():
    rng = np.random.default_rng(11)
    T, S, d_k, d_v = 16, 256, 8, 4
    K, V = rng.normal(size=(S, d_k)), rng.normal(size=(S, d_v))
    Q = K[rng.integers(0, S, size=T)] + 0.5 * rng.normal(size=(T, d_k))
    full = full_output(Q, K, V)
    errors = [np.abs(topk_attention(Q, K, V, k_top) - full).max(axis=-1).mean() for k_top in (1, 4, 16, 64, S)]
    assert all(np.diff(errors) < 0)
    assert errors[-1] < 1e-15


def test_topk_keeps_float32_and_handles_huge_logits():
    rng = np.random.default_rng(12)
    Q = (rng.normal(size=(3, 2)) * 100).astype(np.float32)
    K = (rng.normal(size=(9, 2)) * 100).astype(np.float32)
    V = rng.normal(size=(9, 4)).astype(np.float32)
    for k_top in (1, 3, 9):
        got = topk_attention(Q, K, V, k_top)
        assert got.dtype == np.float32 and np.isfinite(got).all()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_topk_refuses_bad_k_top(bad):
    Q, K, V, _ = random_problem(0)
    with pytest.raises(ValueError, match=r"k_top must be a positive integer .*, got " + repr(bad).replace(".", r"\.")):
        topk_attention(Q, K, V, bad)


def test_topk_with_no_keys_gives_zeros():
    got = topk_attention(np.ones((3, 4)), np.ones((0, 4)), np.ones((0, 2)), 2)
    assert got.shape == (3, 2) and (got == 0).all()


# Issue 10 §6: the outside tester's cases.

def test_topk_refuses_a_nan_scale():
    Q, K, V, _ = random_problem(0)
    with pytest.raises(ValueError, match="scale must be a finite number, got nan"):
        topk_attention(Q, K, V, 2, scale=float("nan"))
    with pytest.raises(ValueError, match="scale must be a finite number, got nan"):
        chunked_attention(Q, K, V, 2, scale=float("nan"))


@pytest.mark.parametrize("chunk_size", [1, 7, 100, 2000])
def test_chunked_stays_finite_wherever_full_attention_is(chunk_size):
    big = np.finfo(np.float64).max
    Q, K, V = np.ones((2, 3)), np.ones((50, 3)), np.full((50, 2), 0.9 * big)
    np.testing.assert_allclose(chunked_attention(Q, K, V, chunk_size), full_output(Q, K, V), rtol=1e-12)
    V[::2] = big
    got = chunked_attention(Q, K, V, chunk_size)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, full_output(Q, K, V), rtol=1e-12)
    # float16 values of 100 over 1,000 keys: 1,000 × 100 overflows float16, not the average
    Q16, K16, V16 = np.ones((2, 4), np.float16), np.ones((1000, 4), np.float16), np.full((1000, 3), 100, np.float16)
    got16 = chunked_attention(Q16, K16, V16, chunk_size)
    assert got16.dtype == np.float16 and (got16 == 100).all()


def test_chunked_and_topk_name_the_argument_that_is_not_finite():
    Q, K, V, _ = random_problem(1)
    for function in (chunked_attention, topk_attention):
        for name, array in (("Q", Q), ("K", K), ("V", V)):
            bad = {"Q": Q, "K": K, "V": V}
            bad[name] = array.copy()
            bad[name][0, 0] = np.inf
            with pytest.raises(ValueError, match=rf"^{name} contains \+inf"):
                function(bad["Q"], bad["K"], bad["V"], 3)
