"""Unit tests of snippets/positions.py: token embeddings and position vectors (chapter 5)."""

import math

import numpy as np
import pytest

from snippets.positions import embed, sinusoidal_positions


# References written from the definitions with plain loops, sharing no code with the snippets.
def reference_embed(ids, table):
    """One-hot row times the table, one id at a time (chapter 2's product)."""
    ids = np.asarray(ids)
    vocab, d = table.shape
    out = np.zeros((*ids.shape, d))
    for index in np.ndindex(ids.shape):
        one_hot = [1.0 if v == ids[index] else 0.0 for v in range(vocab)]
        for j in range(d):
            out[index + (j,)] = math.fsum(one_hot[v] * table[v, j] for v in range(vocab))
    return out


def reference_positions(T, d):
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...), entry by entry."""
    out = [[0.0] * d for _ in range(T)]
    for pos in range(T):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            out[pos][2 * i] = math.sin(angle)
            out[pos][2 * i + 1] = math.cos(angle)
    return np.array(out)


@pytest.mark.parametrize("shape", [(7,), (2, 5), (3, 1, 4), ()])
@pytest.mark.parametrize("vocab, d", [(11, 6), (3, 1), (1, 9)])
def test_embed_equals_one_hot_product(shape, vocab, d):
    rng = np.random.default_rng(0)
    table = rng.normal(size=(vocab, d))
    ids = rng.integers(0, vocab, size=shape)
    rows = embed(ids, table)
    assert rows.shape == (*shape, d) and rows.dtype == np.float64
    assert np.allclose(rows, reference_embed(ids, table), rtol=0, atol=1e-15)


def test_embed_keeps_dtype_and_takes_lists():
    table32 = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert embed([3, 0], table32).dtype == np.float32
    assert embed([3, 0], table32).tolist() == [[9.0, 10.0, 11.0], [0.0, 1.0, 2.0]]
    assert embed(np.array([1], dtype=np.uint8), table32).tolist() == [[3.0, 4.0, 5.0]]


def test_embed_of_no_ids_is_empty():
    table = np.ones((5, 3))
    assert embed([], table).shape == (0, 3)
    assert embed(np.zeros((2, 0), dtype=int), table).shape == (2, 0, 3)


@pytest.mark.parametrize(
    "ids, table, error, words",
    [
        ([0, 5], np.ones((5, 2)), ValueError, ["ids", "0 .. 4", "5"]),
        ([-1], np.ones((5, 2)), ValueError, ["ids", "-1"]),
        ([0.0, 1.0], np.ones((5, 2)), TypeError, ["ids", "float64"]),
        ([True], np.ones((5, 2)), TypeError, ["ids", "bool"]),
        (["dog"], np.ones((5, 2)), TypeError, ["ids"]),
        (None, np.ones((5, 2)), TypeError, ["ids", "object"]),
        ([0], np.ones(5), ValueError, ["table", "(5,)"]),
        ([0], np.ones((2, 2, 2)), ValueError, ["table", "(2, 2, 2)"]),
        ([0], np.array([[1.0, np.nan]]), ValueError, ["table", "NaN"]),
        ([0], np.array([[1.0, np.inf]]), ValueError, ["table", "inf"]),
        ([0], np.array([["a", "b"]]), TypeError, ["table", "dtype"]),
        ([0], None, ValueError, ["table"]),
        ([[0, 1], [2]], np.ones((5, 2)), ValueError, ["ids"]),
        ([0], [[1.0, 2.0], [3.0]], ValueError, ["table"]),
    ],
)
def test_embed_refuses_bad_input(ids, table, error, words):
    with pytest.raises(error) as caught:
        embed(ids, table)
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize("T, d", [(1, 2), (7, 6), (50, 32), (13, 512)])
def test_sinusoidal_positions_equal_the_formula(T, d):
    positions = sinusoidal_positions(T, d)
    assert positions.shape == (T, d) and positions.dtype == np.float64
    assert np.allclose(positions, reference_positions(T, d), rtol=0, atol=1e-12)


def test_sinusoidal_positions_properties():
    T, d = 40, 16
    positions = sinusoidal_positions(T, d)
    assert positions[0].tolist() == [0.0, 1.0] * (d // 2)       # position 0: sin 0, cos 0
    assert np.allclose((positions**2).sum(axis=1), d / 2)      # every row has the same length
    # The dot product of two rows depends only on how far apart they are.
    gram = positions @ positions.T
    for shift in range(T):
        assert np.allclose(np.diagonal(gram, shift), gram[0, shift])
    # A longer table starts with the shorter one: positions do not depend on T.
    assert np.array_equal(sinusoidal_positions(100, d)[:T], positions)


def test_sinusoidal_positions_accept_numpy_integers():
    assert sinusoidal_positions(np.int64(3), np.int32(4)).shape == (3, 4)


@pytest.mark.parametrize(
    "T, d, words",
    [
        (5, 7, ["d", "even", "7"]),
        (5, 0, ["d", "positive", "0"]),
        (5, -2, ["d", "-2"]),
        (5, 4.0, ["d", "4.0"]),
        (5, True, ["d", "True"]),
        (0, 4, ["T", "positive", "0"]),
        (-3, 4, ["T", "-3"]),
        (2.5, 4, ["T", "2.5"]),
        ("5", 4, ["T", "'5'"]),
        (None, 4, ["T", "None"]),
    ],
)
def test_sinusoidal_positions_refuse_bad_sizes(T, d, words):
    with pytest.raises(ValueError) as caught:
        sinusoidal_positions(T, d)
    for word in words:
        assert word in str(caught.value)
