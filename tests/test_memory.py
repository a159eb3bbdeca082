"""Unit tests of snippets/memory.py: retrieval from a modern Hopfield (associative) memory."""

import numpy as np
import pytest

from snippets.attention import scaled_dot_product_attention
from snippets.memory import hopfield_retrieve


def reference_retrieve(X, xi, tau, steps):
    """The update ξ ← softmax(ξ Xᵀ / τ) X for one cue, written pattern by pattern."""
    xi = [float(value) for value in xi]
    for _ in range(steps):
        scores = [sum(a * b for a, b in zip(xi, pattern, strict=True)) / tau for pattern in X]
        top = max(scores)
        e = [np.exp(score - top) for score in scores]
        weights = [value / sum(e) for value in e]
        xi = [sum(w * pattern[i] for w, pattern in zip(weights, X, strict=True)) for i in range(len(xi))]
    return np.array(xi)


@pytest.mark.parametrize("seed", range(6))
def test_retrieve_equals_reference_for_one_cue_and_a_batch(seed):
    rng = np.random.default_rng(seed)
    N, d, T = int(rng.integers(2, 9)), int(rng.integers(3, 12)), int(rng.integers(2, 5))
    X = rng.choice([-1.0, 1.0], size=(N, d))
    cues = X[rng.integers(0, N, size=T)] + rng.normal(scale=0.8, size=(T, d))
    tau, steps = float(rng.uniform(0.5, 20.0)), int(rng.integers(1, 4))
    batch = hopfield_retrieve(X, cues, tau, steps=steps)
    assert batch.shape == (T, d)
    for t in range(T):
        expected = reference_retrieve(X, cues[t], tau, steps)
        np.testing.assert_allclose(hopfield_retrieve(X, cues[t], tau, steps=steps), expected, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(batch[t], expected, rtol=1e-12, atol=1e-14)


def test_one_step_is_attention_with_the_patterns_as_keys_and_values():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(9, 6))
    cues = rng.normal(size=(4, 6))
    tau = 1.4
    expected, _ = scaled_dot_product_attention(cues, X, X, scale=1 / tau)
    np.testing.assert_allclose(hopfield_retrieve(X, cues, tau), expected, rtol=1e-13)


def test_the_three_regimes_of_the_temperature():
    X = np.array([[1.0, 1, 1, 1, -1, -1], [1, 1, 1, -1, -1, -1], [-1, -1, 1, 1, 1, 1]])
    cue = np.array([1.0, 1, 1, 0, -1, -1])  # halfway between the first two, far from the third
    np.testing.assert_allclose(hopfield_retrieve(X, cue, temperature=1e9), X.mean(axis=0), atol=1e-7)
    blend = hopfield_retrieve(X, cue, temperature=1.0)
    np.testing.assert_allclose(blend, (X[0] + X[1]) / 2, atol=0.02)  # the two similar ones
    np.testing.assert_allclose(hopfield_retrieve(X, X[0] + 0.1, temperature=0.05), X[0], atol=1e-12)


def test_a_corrupted_cue_is_completed_and_a_stored_pattern_is_a_fixed_point():
    rng = np.random.default_rng(8)
    N, d = 20, 64
    X = rng.choice([-1.0, 1.0], size=(N, d))
    cue = X[3].copy()
    cue[:16] *= -1  # a quarter of the entries flipped
    np.testing.assert_allclose(hopfield_retrieve(X, cue, temperature=0.5), X[3], atol=1e-9)
    np.testing.assert_allclose(hopfield_retrieve(X, X, temperature=0.5, steps=3), X, atol=1e-12)


def test_a_tiny_temperature_picks_one_pattern_without_warnings():
    X = np.array([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(hopfield_retrieve(X, [0.9, -1.0, 0.0], temperature=1e-6), X[0])
    assert hopfield_retrieve(X.astype(np.float32), X[1].astype(np.float32), 0.5).dtype == np.float32


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"patterns": np.ones(4)}, ValueError, r"patterns must have shape \(N, d\).*got \(4,\)"),
        ({"patterns": np.ones((0, 4))}, ValueError, r"patterns must have shape \(N, d\).*got \(0, 4\)"),
        ({"cue": np.ones(5)}, ValueError, r"cue must have shape \(d,\) or \(T, d\) with d = 4.*got \(5,\)"),
        ({"cue": np.ones((2, 2, 4))}, ValueError, r"cue must have shape .* got \(2, 2, 4\)"),
        ({"cue": [1.0, np.nan, 0.0, 0.0]}, ValueError, "cue contains NaN"),
        ({"cue": [1.0, np.inf, 0.0, 0.0]}, ValueError, r"cue contains \+inf"),
        ({"patterns": np.full((3, 4), -np.inf)}, ValueError, "patterns contains -inf"),
        ({"patterns": [["a"] * 4]}, ValueError, "patterns must hold numbers"),
        ({"temperature": 0}, ValueError, r"temperature must be > 0, got 0.0"),
        ({"temperature": np.inf}, ValueError, "temperature must be a finite number, got inf"),
        ({"temperature": None}, TypeError, "temperature must be a real number, got NoneType None"),
        ({"steps": 0}, ValueError, "steps must be an integer >= 1, got int 0"),
        ({"steps": 1.5}, ValueError, "steps must be an integer >= 1, got float 1.5"),
        ({"temperature": 1e-308, "cue": [10.0, 10.0, 10.0, 10.0]}, ValueError, "overflow float64 at temperature"),
        ({"temperature": 1e-50, "patterns": np.ones((3, 4), np.float32), "cue": np.ones(4, np.float32)},
         ValueError, "overflow float32"),
    ],
)
def test_retrieve_bad_input(kwargs, error, message):
    arguments = {"patterns": np.ones((3, 4)), "cue": np.ones(4), "temperature": 1.0, **kwargs}
    with pytest.raises(error, match=message):
        hopfield_retrieve(**arguments)
