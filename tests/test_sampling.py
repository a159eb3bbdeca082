"""Unit tests of snippets/sampling.py: temperature, top-k and top-p, as the model writer samples.

The reference is Hugging Face's order of warpers (temperature, top-k, top-p,
then the softmax) written in PyTorch (tests/support/torch_reference.py), and
the draws are snippets.transformer.generate's: with the filters off, the
same seed draws the same tokens.
"""

import numpy as np
import pytest

from snippets.attention import softmax
from snippets.sampling import next_token, sampling_probabilities
from snippets.transformer import generate, gpt_forward, init_gpt
from support import torch_reference as reference
from support.pytorch import require_torch


def kept_margin(logits, temperature, k_top, p_top) -> float:
    """How far the top-p cut lies from a tie: the smallest |mass ahead - p_top · mass kept by top-k|."""
    if p_top == 1:
        return np.inf
    ranked = -np.sort(-softmax(logits, temperature=temperature), axis=-1)[..., :k_top]
    ahead = np.cumsum(ranked, axis=-1) - ranked
    return float(np.abs(ahead - p_top * ranked.sum(axis=-1, keepdims=True)).min())


@pytest.mark.parametrize(("temperature", "k_top", "p_top"), [
    (1.0, None, 1.0), (0.7, 5, 1.0), (0.7, None, 0.9), (1.3, 20, 0.8), (0.5, 3, 0.5), (2.0, 1, 1.0), (1.0, 108, 0.95),
])
def test_the_probabilities_equal_hugging_faces_warpers_in_pytorch(temperature, k_top, p_top):
    torch = require_torch()
    logits = np.random.default_rng(46).normal(0, 3, size=(40, 108))
    assert kept_margin(logits, temperature, k_top, p_top) > 1e-9     # no row cut next to a tie
    ours = sampling_probabilities(logits, temperature, k_top, p_top)
    theirs = reference.sampling_probabilities(torch.from_numpy(logits), temperature, k_top, p_top).numpy()
    assert np.array_equal(ours == 0, theirs == 0)                     # the same kept tokens
    assert np.abs(ours - theirs).max() < 1e-12
    assert np.allclose(ours.sum(axis=-1), 1, rtol=0, atol=1e-12)


def test_without_filters_the_numbers_are_generates_softmax_bit_for_bit():
    logits = np.random.default_rng(0).normal(size=(3, 11))
    for temperature in (0.3, 1.0, 1.7):
        expected = softmax(logits, temperature=temperature)
        for k_top, p_top in ((None, 1.0), (11, 1.0), (50, 1.0)):
            assert np.array_equal(sampling_probabilities(logits, temperature, k_top, p_top), expected)


def test_top_k_keeps_the_k_likeliest_and_top_p_the_smallest_set_that_reaches_p():
    p = np.array([0.1, 0.4, 0.05, 0.3, 0.15])
    logits = np.log(p)
    assert np.flatnonzero(sampling_probabilities(logits, k_top=2)).tolist() == [1, 3]
    for p_top, kept in ((0.3, [1]), (0.39, [1]), (0.41, [1, 3]), (0.69, [1, 3]), (0.71, [1, 3, 4]), (1.0, [0, 1, 2, 3, 4])):
        assert np.flatnonzero(sampling_probabilities(logits, p_top=p_top)).tolist() == kept
    # top-p reads what top-k left: of 0.4 and 0.3, 0.4 alone holds 4/7 > 0.5
    assert np.flatnonzero(sampling_probabilities(logits, k_top=2, p_top=0.5)).tolist() == [1]
    both = sampling_probabilities(logits, k_top=3, p_top=0.9)
    assert np.allclose(both, np.array([0, 0.4, 0, 0.3, 0.15]) / 0.85, rtol=0, atol=1e-15)
    # ties are ranked by id, the smaller first
    assert np.flatnonzero(sampling_probabilities(np.zeros(4), k_top=2)).tolist() == [0, 1]


def test_next_token_draws_what_generate_draws_with_the_same_seed():
    params = init_gpt(13, 24, 12, 2, 3, 20, np.random.default_rng(1))
    prompt = [3, 1, 4, 1, 5]
    for seed in range(5):
        for temperature in (0.7, 1.5):
            expected = generate(prompt, params, 3, n_new=15, temperature=temperature, rng=np.random.default_rng(seed))
            rng, out = np.random.default_rng(seed), list(prompt)
            for _ in range(15):
                out.append(next_token(gpt_forward(out, params, 3)[-1], rng, temperature))
            assert out == expected.tolist(), (seed, temperature)
    assert next_token(gpt_forward(prompt, params, 3)[-1]) == generate(prompt, params, 3, n_new=1)[-1]


def test_one_kept_token_is_the_greedy_choice_and_the_draws_follow_the_kept_probabilities():
    logits = np.random.default_rng(3).normal(size=30)
    rng = np.random.default_rng(0)
    assert {next_token(logits, rng, 1.0, k_top=1) for _ in range(20)} == {int(logits.argmax())}
    assert {next_token(logits, rng, 0.8, p_top=1e-6) for _ in range(20)} == {int(logits.argmax())}
    kept = sampling_probabilities(logits, 1.0, k_top=4, p_top=0.9)
    draws = np.bincount([next_token(logits, rng, 1.0, 4, 0.9) for _ in range(4000)], minlength=30) / 4000
    assert set(np.flatnonzero(draws)) <= set(np.flatnonzero(kept))
    assert np.abs(draws - kept).max() < 0.03


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda: sampling_probabilities([1.0, 2.0], temperature=0), ValueError, "temperature must be > 0"),
    (lambda: sampling_probabilities([1.0, 2.0], k_top=0), ValueError, "k_top must be a positive integer"),
    (lambda: sampling_probabilities([1.0, 2.0], p_top=0.0), ValueError, r"p_top must lie in \(0, 1\]"),
    (lambda: sampling_probabilities([1.0, 2.0], p_top=1.5), ValueError, r"p_top must lie in \(0, 1\]"),
    (lambda: sampling_probabilities([1.0, np.nan]), ValueError, "logits contains NaN"),
    (lambda: sampling_probabilities(np.ones((2, 0))), ValueError, "n_vocab >= 1"),
    (lambda: next_token([[1.0, 2.0]]), ValueError, r"shape \(n_vocab,\)"),
    (lambda: next_token([1.0, 2.0], temperature=-1), ValueError, "temperature must be >= 0"),
    (lambda: next_token([1.0, 2.0], temperature=0.5), TypeError, "rng must be a NumPy random Generator"),
])
def test_bad_input_gets_a_clear_error(call, error, words):
    with pytest.raises(error, match=words):
        call()
