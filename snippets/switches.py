"""The trained GPT with a part switched off, to see what each part is for ("Write with the model").

Each switch removes one thing the chapters built, and the model in the
reader's browser has the same switches (tests/test_model_writer_browser.py
checks that it computes what these functions compute):

- ``"scale"``: every head's scores lose their ``1/√d_head`` (chapter 3);
- ``"positions"``: the position rows ``W_pos`` are not added (chapter 5);
- ``"causal mask"``: the prompt is read at once (the prefill) with no
  causal mask, so each of its words reads the whole prompt, the words
  after it too (chapters 6 and 8);
- ``"cache"``: the words the model writes add no key and no value to the
  caches, so each reads the prompt's only (chapter 8);

and any head can be switched off, as :func:`snippets.heads.ablate_heads`
does (chapter 14). The first two change the weights: with ``W_Q`` and
``b_Q`` multiplied by ``√d_head``, the usual scaled scores are the unscaled
ones. The last two change which positions a query may read, a mask
(:func:`reading_mask`): writing a text one token at a time with a cache
computes what the whole text computes under the causal mask (chapter 8),
so a cache that takes no more writes is a mask too.
"""

from __future__ import annotations

import math

import numpy as np

from snippets._checks import check_fits, check_positive_int, describe
from snippets.heads import _model_arguments, _reading_mask, ablate_heads
from snippets.sampling import next_token
from snippets.transformer import _forward

SWITCHES = ("scale", "positions", "causal mask", "cache")


def _check_removed(removed) -> set[str]:
    if isinstance(removed, (str, bytes)) or not isinstance(removed, (list, tuple)):
        raise TypeError(f"removed must be a list of the parts to switch off, from {list(SWITCHES)}, "
                        f"got {describe(removed)}")
    unknown = [part for part in removed if part not in SWITCHES]
    if unknown:
        raise ValueError(f"removed holds {unknown[0]!r}, not a part that can be switched off: "
                         f"expected names from {list(SWITCHES)}")
    return set(removed)


def switched_params(params, n_heads: int, removed=(), heads=()):
    """A copy of ``params`` without the ``"scale"`` and ``"positions"`` of ``removed``, and without ``heads``.

    ``heads`` lists the ``(layer, head)`` pairs switched off, as
    :func:`snippets.heads.ablate_heads` takes them; ``"causal mask"`` and ``"cache"`` are not in the weights
    (see :func:`reading_mask`) and leave them as they are.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> changed = switched_params(params, 2, removed=["scale", "positions"])
    >>> float(np.abs(changed["W_pos"]).max())
    0.0
    >>> ratio = changed["blocks"][0]["W_Q"] / params["blocks"][0]["W_Q"]
    >>> float(ratio.min()), float(ratio.max())       # √d_head = √4
    (2.0, 2.0)
    """
    parts = _check_removed(removed)
    out = ablate_heads(params, heads, n_heads)     # a copy, checked
    if "positions" in parts:
        out["W_pos"] = np.zeros_like(out["W_pos"])
    if "scale" in parts:
        d_head = out["W_E"].shape[1] // n_heads
        for block in out["blocks"]:              # (√d_head q) · k / √d_head = q · k
            block["W_Q"] = block["W_Q"] * math.sqrt(d_head)
            block["b_Q"] = block["b_Q"] * math.sqrt(d_head)
    return out


def reading_mask(T: int, n_prompt: int, removed=()) -> np.ndarray:
    """Where each of ``T`` positions may read, ``(T, T)``, True = may: the causal mask, or what ``removed`` makes it.

    The first ``n_prompt`` positions are the prompt. Without ``"causal
    mask"``, each of them reads the whole prompt; without ``"cache"``,
    each later position reads the prompt only (its own key was never
    written).

    >>> reading_mask(4, 2, removed=["causal mask", "cache"]).astype(int).tolist()
    [[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]]
    """
    check_positive_int("T", T)
    check_positive_int("n_prompt", n_prompt)
    check_fits("the mask", (T, T), bool, T=T)
    if n_prompt > T:
        raise ValueError(f"n_prompt must be at most T = {T}, the prompt being the first positions, got {n_prompt}")
    parts = _check_removed(removed)
    mask = np.tri(T, dtype=bool)
    if "causal mask" in parts:
        mask[:n_prompt, :n_prompt] = True
    if "cache" in parts:
        mask[n_prompt:] = False
        mask[n_prompt:, :n_prompt] = True
    return mask


def switched_logits(tokens, params, n_heads: int, n_prompt: int, removed=(), heads=()):
    """The logits ``(..., T, n_vocab)`` of the model with the parts ``removed`` and the ``heads`` switched off.

    ``tokens (..., T)``, of which the first ``n_prompt`` are the prompt;
    with nothing switched off, these are ``gpt_forward``'s logits.

    >>> from snippets.transformer import gpt_forward, init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> plain = switched_logits([1, 2, 3], params, 2, n_prompt=2)
    >>> bool(np.allclose(plain, gpt_forward([1, 2, 3], params, 2)))
    True
    >>> switched_logits([1, 2, 3], params, 2, 2, removed=["positions"]).shape
    (3, 5)
    """
    batch, _, shape = _model_arguments(tokens, params, n_heads, min_len=1)
    mask = _reading_mask(reading_mask(shape[-1], n_prompt, removed), shape[-1])
    _, p, _ = _model_arguments(tokens, switched_params(params, n_heads, removed, heads), n_heads, min_len=1)
    logits, _ = _forward(batch, p, n_heads, "switched_logits: the stream", keep=True, mask=mask)
    return logits.reshape(*shape, -1)


def switched_generate(tokens, params, n_heads: int, n_new: int, removed=(), heads=(), temperature=0.0,
                      k_top=None, p_top=1.0, rng=None):
    """``tokens (T,)``, the prompt, and ``n_new`` tokens the switched model writes after it, one at a time.

    Each token is :func:`snippets.sampling.next_token` of the last row of
    :func:`switched_logits` on the text so far (the whole text again at
    every step: no cache is kept, the mask says what one would hold).
    With nothing switched off, the tokens are ``generate``'s.

    >>> from snippets.transformer import generate, init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> out = switched_generate([1, 2, 3], params, 2, n_new=4)
    >>> out.tolist() == generate([1, 2, 3], params, 2, n_new=4).tolist()
    True
    """
    _, _, shape = _model_arguments(tokens, params, n_heads, min_len=1)
    if len(shape) != 1:
        raise ValueError(f"tokens must be one prompt, shape (T,), got shape {shape}")
    ids = np.asarray(tokens)
    check_positive_int("n_new", n_new, allow_zero=True)
    T, max_len = len(ids), len(params["W_pos"])
    if T + n_new > max_len:
        raise ValueError(f"n_new = {n_new} tokens after the T = {T} of tokens make {T + n_new} positions, "
                         f"more than max_len = {max_len}, the rows of W_pos")
    out = ids.astype(np.int64)
    for _ in range(n_new):
        logits = switched_logits(out, params, n_heads, T, removed, heads)[-1]
        out = np.append(out, next_token(logits, rng, temperature, k_top, p_top))
    return out
