"""The same soft lookup over a huge dictionary (chapter 5).

Two variants of :func:`snippets.attention.scaled_dot_product_attention`, with
its shapes and its mask convention: queries ``Q (..., T, d_k)``, keys
``K (..., S, d_k)``, values ``V (..., S, d_v)``, leading batch dimensions
broadcast, a boolean ``mask`` (True = may attend) broadcastable to
``(..., T, S)``, ``scale`` defaulting to ``1/√d_k``.

- :func:`chunked_attention` gives the same output while holding the scores of
  only ``chunk_size`` keys at a time (online softmax);
- :func:`topk_attention` lets every query look at its ``k_top`` best keys only.
"""

from __future__ import annotations

import math

import numpy as np

# The input checks of the full attention, reused so both variants accept and
# refuse exactly what it does, and its inner steps, so both compute the same.
from snippets._checks import (
    all_finite,
    as_float_array,
    as_mask,
    attention_arguments,
    check_attention_shapes,
    check_finite,
    check_positive_int,
    explain_attention,
    keys_finite,
    overflow_error,
    real_number,
    work_dtype,
)
from snippets.attention import _masked_, _softmax_rows_, _weighted_average


def _checked_inputs(Q, K, V, mask):
    """Q as a finite float array, K and V as arrays (not converted: their chunks are), the mask, the dtypes.

    K and V are only looked at, not converted or scanned (which would take
    memory proportional to their size, and they may be memory-mapped files):
    the loop converts them a chunk at a time.
    """
    Q = as_float_array(Q, "Q")
    K, V = (as_float_array(x, name) if not isinstance(x, np.ndarray) else x for x, name in ((K, "K"), (V, "V")))
    mask = as_mask(mask)
    check_attention_shapes(Q, K, V, mask)
    check_finite(Q, "Q")
    dtype = np.result_type(Q, _float_dtype(K, "K"), _float_dtype(V, "V"))
    return Q, K, V, mask, dtype


def _float_dtype(x: np.ndarray, name: str) -> np.dtype:
    """The dtype ``x`` gets as a float array, found from an empty slice of it, without reading it."""
    return as_float_array(x[..., :0, :], name).dtype


def _online_softmax(Q, K, V, chunk_size, mask, work, value_scale=1.0):
    """The chunked loop: ``(o, ell, m)`` after the last chunk, or None if a row maximum is NaN or +inf."""
    T, S = Q.shape[-2], K.shape[-2]
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], () if mask is None else mask.shape[:-2])
    m = np.full((*batch, T, 1), -np.inf, dtype=work)   # running maximum
    ell = np.zeros((*batch, T, 1), dtype=work)          # running sum
    batch = np.broadcast_shapes(batch, V.shape[:-2])
    o = np.zeros((*batch, T, V.shape[-1]), dtype=work)  # running output
    for start in range(0, S, chunk_size):
        keys = slice(start, start + chunk_size)
        k_chunk = as_float_array(K[..., keys, :], "K").astype(work, copy=False)
        v_chunk = as_float_array(V[..., keys, :], "V").astype(work, copy=False)
        if value_scale != 1:
            v_chunk = v_chunk * value_scale
        allowed = None if mask is None else mask if mask.shape[-1] == 1 else mask[..., keys]
        scores = Q @ np.swapaxes(k_chunk, -1, -2)   # the scale is folded into Q
        if not keys_finite(k_chunk, scores):       # an infinite key could pass for a masked one
            return None
        scores = _masked_(scores, allowed)
        m_new = np.maximum(m, scores.max(axis=-1, keepdims=True))
        if not (m_new < np.inf).all():   # NaN or +inf in this chunk's scores
            return None
        # Subtract a finite number: while every key so far is masked, m_new is
        # -inf, and -inf - (-inf) would be NaN. Shifting by 0 instead keeps
        # exp(-inf - 0) = 0 for those rows, which is their true weight.
        shift = np.where(m_new > -np.inf, m_new, 0)
        rescale = np.exp(m - shift)  # the sums so far were relative to exp(m)
        scores -= shift
        p = np.exp(scores, out=scores)   # (..., T, chunk): this chunk's unnormalised weights
        ell *= rescale
        ell += p.sum(axis=-1, keepdims=True)
        o *= rescale
        o += p @ v_chunk
        m = m_new
    return o, ell, m


def _explain_chunked(Q, K, V, chunk_size, scale):
    """Raise the error that says why the chunked loop met a NaN or an infinity (Q is finite)."""
    largest_key = 0.0
    for start in range(0, K.shape[-2], chunk_size):
        keys = slice(start, start + chunk_size)
        k_chunk = as_float_array(K[..., keys, :], "K")
        check_finite(k_chunk, "K")
        check_finite(as_float_array(V[..., keys, :], "V"), "V")
        largest_key = max(largest_key, float(np.abs(k_chunk).max(initial=0)))
    raise overflow_error("the scores Q Kᵀ · scale", Q.dtype,
                         {"Q": Q / Q.dtype.type(scale) if scale else Q, "K": largest_key, "scale": scale})


# --8<-- [start:chunked_attention]
def chunked_attention(Q, K, V, chunk_size, mask=None, scale=None):
    """Scaled dot-product attention computed over the keys in chunks (online softmax).

    Returns the output ``(..., T, d_v)`` of ``scaled_dot_product_attention``,
    but reads keys and values ``chunk_size`` at a time (they may even be
    memory-mapped files) and never holds more than ``T × chunk_size`` scores
    per batch element. Three running arrays carry what the chunks seen so far
    contribute: the largest score ``m (..., T, 1)``, the sum of exponentials
    ``ell (..., T, 1)`` (the ℓ of the page) and the weighted sum of values
    ``o (..., T, d_v)``, both sums measured relative to ``exp(m)``.

    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 2))
    >>> chunked = chunked_attention(Q, K, V, chunk_size=4)           # chunks of 4, 4 and 2 keys
    >>> chunked.shape
    (3, 2)
    >>> from snippets.attention import scaled_dot_product_attention
    >>> bool(np.allclose(chunked, scaled_dot_product_attention(Q, K, V)[0], rtol=0, atol=1e-12))
    True
    """
    chunk_size = check_positive_int("chunk_size", chunk_size, meaning="the number of keys per chunk")
    Q, K, V, mask, dtype = _checked_inputs(Q, K, V, mask)
    if scale is None:
        scale = 1.0 / np.sqrt(Q.shape[-1]) if Q.shape[-1] else 1.0
    scale = real_number(scale, "scale")
    work = work_dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected, not warned about
        scaled = Q.astype(work, copy=False) * work.type(scale)
    if not all_finite(scaled):
        raise overflow_error("the scaled queries Q · scale", work, {"Q": Q, "scale": scale})
    Q = scaled
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected, not warned about
        state = _online_softmax(Q, K, V, chunk_size, mask, work)
        if state is None:
            _explain_chunked(Q, K, V, chunk_size, scale)
        o, ell, m = state
        dead = m == -np.inf   # rows that saw no key: output 0
        if dead.any() and K.shape[-2] > 0:
            sees_a_key = True if mask is None else mask.any(axis=-1, keepdims=True)
            if (dead & sees_a_key).any():   # every score -inf, yet a key is allowed
                _explain_chunked(Q, K, V, chunk_size, scale)
        o /= np.where(ell > 0, ell, 1)   # a row that saw no key keeps o = 0
        output = o
        if not math.isfinite(output.sum()) and not np.isfinite(output).all():
            for start in range(0, K.shape[-2], chunk_size):
                check_finite(as_float_array(V[..., start:start + chunk_size, :], "V"), "V")
            # Finite values whose sums overflow: add them scaled by a power of
            # two at least S, then scale back, clipping to the largest float.
            exponent = max(1, math.ceil(math.log2(max(K.shape[-2], 2))))
            o, ell, _ = _online_softmax(Q, K, V, chunk_size, mask, work, value_scale=2.0**-exponent)
            big = np.finfo(work).max
            output = np.clip(np.ldexp(o / np.where(ell > 0, ell, 1), exponent), -big, big)
    return output.astype(dtype, copy=False)
# --8<-- [end:chunked_attention]


def _top_k_keep(scores, k_top):
    """True at each row's ``k_top`` largest scores (1 <= k_top <= S); ties go to the lower index, -inf is never kept.

    Shared by :func:`topk_attention` (which ranks keys by their attention
    scores) and :func:`snippets.sparse_gated.sparse_attention` (which ranks
    them by an indexer's scores).
    """
    S = scores.shape[-1]
    # The k_top-th largest score of each row, found in O(S) by partitioning.
    threshold = np.partition(scores, S - k_top, axis=-1)[..., S - k_top, None]
    above = scores > threshold
    # Keys tied with the threshold fill the places left, lowest index first.
    tied = scores == threshold
    places_left = k_top - above.sum(axis=-1, keepdims=True)
    keep = above | (tied & (np.cumsum(tied, axis=-1) <= places_left))
    return keep & (scores > -np.inf)                # a masked key is never kept


# --8<-- [start:topk_attention]
def topk_attention(Q, K, V, k_top, mask=None, scale=None):
    """Attention in which every query looks only at its ``k_top`` best-scoring keys.

    Returns the output ``(..., T, d_v)``. The softmax runs over the kept keys
    only. Ties at the boundary go to the key with the lower index (as
    ``np.argmax`` does); masked keys are never kept, and a query with fewer
    than ``k_top`` allowed keys keeps all of them. ``k_top = 1`` returns the
    value of the best key (the hard lookup of chapter 2); ``k_top >= S`` is
    full attention.

    >>> Q = np.array([[1.0, 0.0]])
    >>> K = np.array([[3.0, 0.0], [2.0, 0.0], [-1.0, 0.0]])
    >>> V = np.array([[1.0], [2.0], [3.0]])
    >>> topk_attention(Q, K, V, k_top=1).round(3).tolist()          # the best key's value
    [[1.0]]
    >>> topk_attention(Q, K, V, k_top=2).round(3).tolist()          # the two best keys, softmax-weighted
    [[1.33]]
    """
    k_top = check_positive_int("k_top", k_top, meaning="the number of keys each query keeps")
    Q, K, V, mask, scale, dtype = attention_arguments(Q, K, V, mask, scale)
    S = K.shape[-2]
    k_top = min(k_top, S)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected, not warned about
        scores = (Q * Q.dtype.type(scale)) @ np.swapaxes(K, -1, -2)
        if not keys_finite(K, scores):   # an infinite key could score -inf and pass for a masked one
            explain_attention(Q, K, V, scale)
        scores = _masked_(scores, mask)
        if S and not (scores.max(axis=-1) < np.inf).all():   # NaN or +inf among the scores
            explain_attention(Q, K, V, scale)
        if S:
            np.copyto(scores, -np.inf, where=~_top_k_keep(scores, k_top))
        # The user's mask tells a query that may see no key from a failure.
        output = _weighted_average(scores, V) if _softmax_rows_(scores, mask) else None
    if output is None:
        explain_attention(Q, K, V, scale)
    return output.astype(dtype, copy=False)
# --8<-- [end:topk_attention]
