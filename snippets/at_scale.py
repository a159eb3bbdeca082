"""The same soft lookup over a huge dictionary (chapter 5).

Two variants of :func:`snippets.attention.scaled_dot_product_attention`, with
its shapes and its mask convention: queries ``q (..., T, d_k)``, keys
``k (..., S, d_k)``, values ``v (..., S, d_v)``, leading batch dimensions
broadcast, a boolean ``mask`` (True = may attend) broadcastable to
``(..., T, S)``, ``scale`` defaulting to ``1/√d_k``.

- :func:`chunked_attention` gives the same output while holding the scores of
  only ``chunk_size`` keys at a time (online softmax);
- :func:`topk_attention` lets every query look at its ``k_top`` best keys only.
"""

from __future__ import annotations

import numbers

import numpy as np

# The input checks of the full attention, reused so both variants accept and
# refuse exactly what it does.
from snippets.attention import _as_float_array, _check_attention_shapes, scaled_dot_product_attention


def _positive_int(value, name: str, meaning: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer ({meaning}), got {value!r}")
    return int(value)


def _checked_inputs(q, k, v, mask, convert_keys_and_values=True):
    """q, k, v as float arrays, mask as a boolean array with at least 2 dimensions (or None).

    With ``convert_keys_and_values=False``, k and v are only looked at, not
    converted or scanned for NaN (which would take memory proportional to their
    size): the caller converts them a chunk at a time.
    """
    q = _as_float_array(q, "q")
    if convert_keys_and_values:
        k, v = _as_float_array(k, "k"), _as_float_array(v, "v")
    else:
        k, v = np.asarray(k), np.asarray(v)
    mask = None if mask is None else np.asarray(mask)
    _check_attention_shapes(q, k, v, mask)
    if mask is not None and mask.ndim < 2:
        # A mask of shape (S,) or () broadcasts like one of shape (1, S) or (1, 1).
        mask = mask.reshape((1,) * (2 - mask.ndim) + mask.shape)
    return q, k, v, mask


def _float_dtype(x: np.ndarray, name: str) -> np.dtype:
    """The dtype ``x`` gets as a float array, found from an empty slice of it, without reading it."""
    return _as_float_array(x[..., :0, :], name).dtype


# --8<-- [start:chunked_attention]
def chunked_attention(q, k, v, chunk_size, mask=None, scale=None):
    """Scaled dot-product attention computed over the keys in chunks (online softmax).

    Returns the output ``(..., T, d_v)`` of ``scaled_dot_product_attention``,
    but reads keys and values ``chunk_size`` at a time (they may even be
    memory-mapped files) and never holds more than ``T × chunk_size`` scores
    per batch element. Three running arrays carry what the chunks seen so far
    contribute: the largest score ``m (..., T, 1)``, the sum of exponentials
    ``ell (..., T, 1)`` (the ℓ of the page) and the weighted sum of values
    ``o (..., T, d_v)``, both sums measured relative to ``exp(m)``.
    """
    chunk_size = _positive_int(chunk_size, "chunk_size", "the number of keys per chunk")
    # k and v are converted to floats, and checked for NaN, a chunk at a time below.
    q, k, v, mask = _checked_inputs(q, k, v, mask, convert_keys_and_values=False)
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    T, S = q.shape[-2], k.shape[-2]
    dtype = np.result_type(q, _float_dtype(k, "k"), _float_dtype(v, "v"))
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                () if mask is None else mask.shape[:-2])
    m = np.full((*batch, T, 1), -np.inf, dtype=dtype)   # running maximum
    ell = np.zeros((*batch, T, 1), dtype=dtype)          # running sum
    o = np.zeros((*batch, T, v.shape[-1]), dtype=dtype)  # running output
    for start in range(0, S, chunk_size):
        keys = slice(start, start + chunk_size)
        k_chunk = _as_float_array(k[..., keys, :], "k")
        v_chunk = _as_float_array(v[..., keys, :], "v")
        scores = (q @ np.swapaxes(k_chunk, -1, -2)) * np.asarray(scale, dtype=q.dtype)
        if mask is not None:
            allowed = mask if mask.shape[-1] == 1 else mask[..., keys]
            scores = np.where(allowed, scores, -np.inf)
        m_new = np.maximum(m, scores.max(axis=-1, keepdims=True))
        # Subtract a finite number: while every key so far is masked, m_new is
        # -inf, and -inf - (-inf) would be NaN. Shifting by 0 instead keeps
        # exp(-inf - 0) = 0 for those rows, which is their true weight.
        shift = np.where(np.isfinite(m_new), m_new, 0)
        rescale = np.exp(m - shift)  # the sums so far were relative to exp(m)
        p = np.exp(scores - shift)   # (..., T, chunk): this chunk's unnormalised weights
        ell = ell * rescale + p.sum(axis=-1, keepdims=True)
        o = o * rescale + p @ v_chunk
        m = m_new
    return o / np.where(ell > 0, ell, 1)   # a row that saw no key keeps o = 0
# --8<-- [end:chunked_attention]


# --8<-- [start:topk_attention]
def topk_attention(q, k, v, k_top, mask=None, scale=None):
    """Attention in which every query looks only at its ``k_top`` best-scoring keys.

    Returns the output ``(..., T, d_v)``. The softmax runs over the kept keys
    only. Ties at the boundary go to the key with the lower index (as
    ``np.argmax`` does); masked keys are never kept, and a query with fewer
    than ``k_top`` allowed keys keeps all of them. ``k_top = 1`` returns the
    value of the best key (the hard lookup of chapter 2); ``k_top >= S`` is
    full attention.
    """
    k_top = _positive_int(k_top, "k_top", "the number of keys each query keeps")
    q, k, v, mask = _checked_inputs(q, k, v, mask)
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    S = k.shape[-2]
    if S == 0:
        return scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)[0]
    k_top = min(k_top, S)
    scores = (q @ np.swapaxes(k, -1, -2)) * np.asarray(scale, dtype=q.dtype)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    # The k_top-th largest score of each row, found in O(S) by partitioning.
    threshold = np.partition(scores, S - k_top, axis=-1)[..., S - k_top, None]
    above = scores > threshold
    # Keys tied with the threshold fill the places left, lowest index first.
    tied = scores == threshold
    places_left = k_top - above.sum(axis=-1, keepdims=True)
    keep = above | (tied & (np.cumsum(tied, axis=-1) <= places_left))
    keep &= scores > -np.inf                # a masked key is never kept
    return scaled_dot_product_attention(q, k, v, mask=keep, scale=scale)[0]
# --8<-- [end:topk_attention]
