"""Unit tests of snippets/lookup.py: exact lookup written with matrices."""

import numpy as np
import pytest

from snippets.lookup import (
    OneHotVocabulary,
    argmax_lookup,
    batch_matrix_lookup,
    dict_as_matrices,
    matrix_lookup,
)

ANIMALS = {"dog": 10, "cat": 2, "tiger": 5, 8: 12}


def test_encode_decode_round_trip_for_every_token():
    vocabulary = OneHotVocabulary(["a", "b", ("tuple", 1), 8])
    for token in vocabulary.tokens:
        vector = vocabulary.encode(token)
        assert vector.shape == (4,) and vector.sum() == 1
        assert vocabulary.decode(vector) == token
    matrix = vocabulary.encode_all(vocabulary.tokens)
    assert (matrix == np.eye(4)).all()
    assert vocabulary.decode_all(matrix) == vocabulary.tokens


def test_encode_all_of_nothing_is_an_empty_matrix():
    assert OneHotVocabulary(["x", "y", "z"]).encode_all([]).shape == (0, 3)


def test_unknown_token_names_the_token_and_the_vocabulary():
    with pytest.raises(ValueError, match=r"unknown token 'lion': expected one of \['dog', 'cat', 'tiger', 8\]"):
        OneHotVocabulary(ANIMALS).encode("lion")


def test_repeated_tokens_are_refused():
    with pytest.raises(ValueError, match=r"^tokens must be distinct, one row each, got repeated tokens \['a'\] in the 4 tokens$"):
        OneHotVocabulary(["a", "b", "a", "a"])


@pytest.mark.parametrize(
    ("vector", "message"),
    [
        ([0, 1, 0], r"shape \(4,\), got shape \(3,\)"),
        ([[0, 1, 0, 0]], r"shape \(4,\), got shape \(1, 4\)"),
        ([0, 0, 0, 0], "a single 1"),
        ([1, 1, 0, 0], "a single 1"),
        ([0.5, 0, 0, 0], "a single 1"),
        ([2, 0, 0, 0], "a single 1"),
    ],
)
def test_decode_refuses_what_is_not_one_hot(vector, message):
    with pytest.raises(ValueError, match=message):
        OneHotVocabulary(ANIMALS).decode(vector)


def test_decode_all_checks_the_matrix_shape():
    with pytest.raises(ValueError, match=r"shape \(n, 4\), got shape \(4,\)"):
        OneHotVocabulary(ANIMALS).decode_all([1, 0, 0, 0])


def test_dict_as_matrices_numbers_and_vectors():
    keys, K, V = dict_as_matrices(ANIMALS)
    assert keys.tokens == list(ANIMALS)
    assert (np.eye(4) == K).all()
    assert V.shape == (4, 1) and V.ravel().tolist() == [10, 2, 5, 12]
    _, _, V2 = dict_as_matrices({"a": [1, 2, 3], "b": [4, 5, 6]})
    assert V2.shape == (2, 3)


def test_dict_as_matrices_refuses_empty_and_ragged():
    with pytest.raises(ValueError, match="empty"):
        dict_as_matrices({})
    with pytest.raises(ValueError, match="one length"):
        dict_as_matrices({"a": [1, 2], "b": [1, 2, 3]})


def test_matrix_lookup_is_exactly_the_dict_for_every_key():
    keys, K, V = dict_as_matrices(ANIMALS)
    for key, value in ANIMALS.items():
        assert matrix_lookup(keys.encode(key), K, V).tolist() == [value]
        assert argmax_lookup(keys.encode(key), K, V).tolist() == [value]


def test_batch_matrix_lookup_is_the_loop_over_queries():
    keys, K, V = dict_as_matrices(ANIMALS)
    queries = ["tiger", 8, "dog", "tiger"]
    answers = batch_matrix_lookup(keys.encode_all(queries), K, V)
    assert answers.shape == (4, 1)
    assert answers.ravel().tolist() == [ANIMALS[q] for q in queries]


def test_lookup_with_general_keys_and_values_t_not_s_dk_not_dv():
    rng = np.random.default_rng(0)
    T, S, d_k, d_v = 3, 5, 4, 2
    Q, K, V = rng.normal(size=(T, d_k)), rng.normal(size=(S, d_k)), rng.normal(size=(S, d_v))
    out = batch_matrix_lookup(Q, K, V)
    assert out.shape == (T, d_v)
    np.testing.assert_allclose(out, np.stack([matrix_lookup(q, K, V) for q in Q]), rtol=1e-12)
    assert argmax_lookup(Q[0], K, V).tolist() == V[np.argmax(K @ Q[0])].tolist()


@pytest.mark.parametrize("lookup", [matrix_lookup, argmax_lookup])
def test_single_lookups_name_both_shapes(lookup):
    K, V = np.eye(4), np.ones((4, 2))
    message = rf"{lookup.__name__}: q must have shape \(4,\) to match K \(4, 4\), got shape \(3,\)"
    with pytest.raises(ValueError, match=message):
        lookup(np.ones(3), K, V)
    message = r"V must have shape \(S, d_v\) with S = 4 rows like K \(4, 4\), got shape \(3, 2\)"
    with pytest.raises(ValueError, match=message):
        lookup(np.ones(4), K, np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"K must have shape \(S, d_k\), got shape \(4,\)"):
        lookup(np.ones(4), np.ones(4), V)


def test_batch_lookup_names_both_shapes():
    with pytest.raises(ValueError, match=r"Q must have shape \(T, 4\) to match K \(4, 4\), got shape \(2, 3\)"):
        batch_matrix_lookup(np.ones((2, 3)), np.eye(4), np.ones((4, 1)))
    with pytest.raises(ValueError, match=r"got shape \(4,\)"):
        batch_matrix_lookup(np.ones(4), np.eye(4), np.ones((4, 1)))


# Issue 10 §6: the outside tester's cases.

def test_outside_testers_cases_are_refused():
    K, V = np.eye(3), np.ones((3, 2))
    with pytest.raises(ValueError, match=r"argmax_lookup: q contains NaN"):
        argmax_lookup([np.nan, 0.0, 0.0], K, V)
    with pytest.raises(ValueError, match=r"d\['b'\] must hold numbers"):
        dict_as_matrices({"a": 1.0, "b": None})
    with pytest.raises(ValueError, match=r"d\['b'\] contains NaN"):
        dict_as_matrices({"a": 1.0, "b": float("nan")})
    with pytest.raises(TypeError, match="d must be a dict"):
        dict_as_matrices([("a", 1.0)])
    with pytest.raises(ValueError, match=r"K must hold at least one key"):
        argmax_lookup(np.ones(2), np.ones((0, 2)), np.ones((0, 1)))
    with pytest.raises(ValueError, match="overflow"):
        matrix_lookup(np.full(3, 1e200), np.full((2, 3), 1e200), np.ones((2, 1)))
    with pytest.raises(TypeError, match=r"tokens\[1\] must be hashable"):
        OneHotVocabulary(["a", ["b"]])
    with pytest.raises(ValueError, match=r"unknown token 'z' at tokens\[1\]"):
        OneHotVocabulary(["x", "y"]).encode_all(["x", "z"])
