"""Choosing the next token as models that serve text do: temperature, then top-k, then top-p ("Write with the model").

A model gives logits, one score per token of its vocabulary. Greedy
decoding takes the largest; sampling draws a token at random with the
probabilities ``softmax(logits / temperature)``. Two filters keep the draw
away from the long tail of unlikely tokens, each applied to the
probabilities the step before left:

- **top-k** keeps the ``k_top`` most likely tokens;
- **top-p** (nucleus sampling, Holtzman et al., 2020) keeps the most likely
  tokens until they hold ``p_top`` of the probability: a token is kept
  while the tokens more likely than it hold less than ``p_top``, so a
  confident step keeps few tokens and an unsure one many.

The kept probabilities are divided by their sum, and the token is drawn
with ``rng.choice``, as ``snippets.transformer.generate`` draws: with the
filters off (``k_top=None``, ``p_top=1.0``) the probabilities are the very
numbers it draws from, so the same seed draws the same tokens. Ties are
ranked by token id, the smaller first. tests/test_sampling.py checks the
filters against Hugging Face's in PyTorch (``TopKLogitsWarper``,
``TopPLogitsWarper``).
"""

from __future__ import annotations

import numpy as np

from snippets._checks import as_float_array, check_finite, check_positive_int, check_rng, describe, real_number
from snippets.attention import softmax


def _check_filters(temperature, k_top, p_top):
    temperature = real_number(temperature, "temperature")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 to sample (greedy decoding takes the largest logit), "
                         f"got {temperature!r}")
    if k_top is not None:
        check_positive_int("k_top", k_top, meaning="how many of the most likely tokens top-k keeps, or None for all")
    p_top = real_number(p_top, "p_top")
    if not 0 < p_top <= 1:
        raise ValueError(f"p_top must lie in (0, 1], the share of the probability top-p keeps "
                         f"(1 keeps every token), got {p_top!r}")
    return temperature, k_top, p_top


def sampling_probabilities(logits, temperature=1.0, k_top=None, p_top=1.0):
    """The probabilities a sampler draws the next token from: ``(..., n_vocab)``, 0 for the tokens filtered out.

    ``softmax(logits / temperature)``; then, if ``k_top`` is given, only
    the ``k_top`` most likely tokens are kept; then, if ``p_top < 1``, only
    the most likely of those that hold ``p_top`` of what is left. The kept
    probabilities are divided by their sum.

    >>> logits = np.log([0.5, 0.3, 0.15, 0.05])
    >>> sampling_probabilities(logits, k_top=2).round(3).tolist()
    [0.625, 0.375, 0.0, 0.0]
    >>> sampling_probabilities(logits, p_top=0.9).round(3).tolist()
    [0.526, 0.316, 0.158, 0.0]
    """
    logits = as_float_array(logits, "logits")
    if logits.ndim == 0 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have shape (..., n_vocab) with n_vocab >= 1, got {describe(logits)}")
    check_finite(logits, "logits")
    temperature, k_top, p_top = _check_filters(temperature, k_top, p_top)
    # generate's own numbers: float64, the softmax of snippets.attention
    probabilities = softmax(logits.astype(np.float64), temperature=temperature)
    n_vocab = logits.shape[-1]
    if (k_top is None or k_top >= n_vocab) and p_top == 1:
        return probabilities
    order = np.argsort(-probabilities, axis=-1, kind="stable")       # most likely first, ties by id
    ranked = np.take_along_axis(probabilities, order, axis=-1)
    if k_top is not None:
        ranked[..., k_top:] = 0.0
    if p_top < 1:
        running = np.cumsum(ranked, axis=-1)
        ahead = np.zeros_like(ranked)                                # what the more likely tokens hold
        ahead[..., 1:] = running[..., :-1]
        ranked[ahead >= p_top * running[..., -1:]] = 0.0
    kept = np.zeros_like(probabilities)
    np.put_along_axis(kept, order, ranked, axis=-1)
    return kept / kept.sum(axis=-1, keepdims=True)


def next_token(logits, rng=None, temperature=0.0, k_top=None, p_top=1.0) -> int:
    """One token id chosen from ``logits (n_vocab,)``: the largest (temperature 0), or drawn.

    Drawn with ``rng.choice`` from :func:`sampling_probabilities`: the
    draw ``snippets.transformer.generate`` makes at the same temperature,
    when ``k_top`` and ``p_top`` filter nothing.

    >>> logits = np.log([0.5, 0.3, 0.15, 0.05])
    >>> next_token(logits)
    0
    >>> rng = np.random.default_rng(14)
    >>> [next_token(logits, rng, 1.0, k_top=2) for _ in range(8)]
    [1, 0, 1, 1, 1, 0, 1, 1]
    """
    logits = as_float_array(logits, "logits")
    if logits.ndim != 1 or len(logits) == 0:
        raise ValueError(f"logits must have shape (n_vocab,) with n_vocab >= 1, one step's scores, "
                         f"got {describe(logits)}")
    temperature = real_number(temperature, "temperature")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 takes the most likely token), got {temperature!r}")
    if temperature == 0:
        check_finite(logits, "logits")
        _check_filters(1.0, k_top, p_top)
        if rng is not None:
            check_rng(rng)
        return int(logits.argmax())
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a NumPy random Generator, np.random.default_rng(seed), to sample at "
                        f"temperature = {temperature!r} (or None at temperature 0), got {describe(rng)}")
    probabilities = sampling_probabilities(logits, temperature, k_top, p_top)
    return int(rng.choice(len(probabilities), p=probabilities))
