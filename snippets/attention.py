"""Soft lookup: softmax weights and scaled dot-product attention (chapter 3).

Shapes follow the site's notation: queries ``q (..., T, d_k)``, keys
``k (..., S, d_k)``, values ``v (..., S, d_v)``; leading batch dimensions
broadcast. A boolean ``mask`` is True where a query may look at a key (the
convention of PyTorch's ``scaled_dot_product_attention``).
"""

from __future__ import annotations

import numpy as np


def _as_float_array(x, name: str) -> np.ndarray:
    """``x`` as a floating-point array (integers become float64); NaN is refused."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        if not (np.issubdtype(x.dtype, np.integer) or x.dtype == bool):
            raise ValueError(f"{name} must hold numbers, got dtype {x.dtype}")
        x = x.astype(np.float64)
    if np.isnan(x).any():
        raise ValueError(f"{name} contains NaN")
    return x


# --8<-- [start:softmax]
def softmax(x, axis: int = -1, temperature: float = 1.0) -> np.ndarray:
    """Turn scores into weights that are positive and sum to 1 along ``axis``.

    ``softmax(x)_i = exp(x_i / temperature) / sum_j exp(x_j / temperature)``.
    The largest score is subtracted first, which changes nothing mathematically
    and keeps ``exp`` from overflowing, so scores of 1e4 or more are fine.
    A low temperature sharpens the weights towards the largest score (a hard
    lookup); a high one flattens them towards the average. Scores of ``-inf``
    get weight 0, and a row that is ``-inf`` throughout gets all zeros.
    """
    x = _as_float_array(x, "x")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    if np.isposinf(x).any():
        raise ValueError("x contains +inf: a score must be finite, or -inf to exclude a key")
    top = np.max(x, axis=axis, keepdims=True) if x.size else x
    top = np.where(np.isfinite(top), top, 0)  # a row of -inf keeps -inf - 0 = -inf, never NaN
    with np.errstate(over="ignore"):  # a tiny temperature may send (x - top) / t to -inf: weight 0
        shifted = (x - top) / temperature
    e = np.exp(shifted)
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1)
# --8<-- [end:softmax]


def _check_attention_shapes(q, k, v, mask):
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(
            "q, k and v need at least 2 dimensions, (..., T, d_k), (..., S, d_k) and (..., S, d_v); "
            f"got q {q.shape}, k {k.shape}, v {v.shape}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must end in the same d_k: got q {q.shape} (d_k = {q.shape[-1]}) "
            f"and k {k.shape} (d_k = {k.shape[-1]})"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of keys S: got k {k.shape} (S = {k.shape[-2]}) "
            f"and v {v.shape} (S = {v.shape[-2]})"
        )
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the batch dimensions of q {q.shape}, k {k.shape} and v {v.shape} do not broadcast"
        ) from None
    scores_shape = (*batch, q.shape[-2], k.shape[-2])
    if mask is not None:
        if mask.dtype != bool:
            raise ValueError(
                f"mask must be boolean (True = may attend), got dtype {mask.dtype}"
            )
        try:
            np.broadcast_shapes(mask.shape, scores_shape)
        except ValueError:
            raise ValueError(
                f"mask of shape {mask.shape} does not broadcast to the scores' shape "
                f"(..., T, S) = {scores_shape}"
            ) from None


# --8<-- [start:scaled_dot_product_attention]
def scaled_dot_product_attention(q, k, v, mask=None, scale=None):
    """Soft lookup of every query in a dictionary of keys and values.

    Returns ``(output, weights)``: ``weights = softmax(q kᵀ · scale)`` of shape
    ``(..., T, S)``, one row of weights per query, and ``output = weights v``
    of shape ``(..., T, d_v)``. ``scale`` defaults to ``1/√d_k``. Where
    ``mask`` is False the weight is 0; a query that may look at no key gets
    zero weights and a zero output. float32 stays float32.
    """
    q, k, v = (_as_float_array(a, name) for a, name in ((q, "q"), (k, "k"), (v, "v")))
    mask = None if mask is None else np.asarray(mask)
    _check_attention_shapes(q, k, v, mask)
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    scores = (q @ np.swapaxes(k, -1, -2)) * np.asarray(scale, dtype=q.dtype)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf).astype(scores.dtype, copy=False)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights
# --8<-- [end:scaled_dot_product_attention]
