"""Soft lookup: softmax, attention, scoring functions and kernel regression (chapter 3).

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
    _check_queries_and_keys(q, k)
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


def _check_batches_broadcast(q, k, prefix: str) -> None:
    """Raise ValueError unless the leading (batch) dimensions of q and k broadcast."""
    try:
        np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    except ValueError:
        raise ValueError(
            f"{prefix}the batch dimensions of q {q.shape} and k {k.shape} do not broadcast"
        ) from None


def _check_queries_and_keys(q, k, caller: str | None = None) -> None:
    """Raise ValueError unless q (..., T, d_k) and k (..., S, d_k) fit, batch dimensions too."""
    prefix = f"{caller}: " if caller else ""
    if q.ndim < 2 or k.ndim < 2:
        raise ValueError(
            f"{prefix}q and k need at least 2 dimensions, (..., T, d_k) and (..., S, d_k); "
            f"got q {q.shape} and k {k.shape}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"{prefix}q and k must end in the same d_k: got q {q.shape} (d_k = {q.shape[-1]}) "
            f"and k {k.shape} (d_k = {k.shape[-1]})"
        )
    _check_batches_broadcast(q, k, prefix)


def _check_additive_parameters(q, k, W_q, W_k, w_v) -> None:
    """Raise ValueError unless W_q (d_q, h), W_k (d_k, h) and w_v (h,) fit q and k."""
    if q.ndim < 2 or k.ndim < 2:
        raise ValueError(
            "additive_scores: q and k need at least 2 dimensions, (..., T, d_q) and (..., S, d_k); "
            f"got q {q.shape} and k {k.shape}"
        )
    if w_v.ndim != 1:
        raise ValueError(f"additive_scores: w_v must have shape (h,), got {w_v.shape}")
    h = w_v.shape[0]
    for W_name, W, x_name, x, size in (("W_q", W_q, "q", q, "d_q"), ("W_k", W_k, "k", k, "d_k")):
        if W.shape != (x.shape[-1], h):
            raise ValueError(
                f"additive_scores: {W_name} must have shape ({size}, h) = {(x.shape[-1], h)} "
                f"to match {x_name} {x.shape} and w_v {w_v.shape}, got {W.shape}"
            )
    _check_batches_broadcast(q, k, "additive_scores: ")


# --8<-- [start:dot_scores]
def dot_scores(q, k) -> np.ndarray:
    """Score every query against every key by their dot product.

    ``q (..., T, d_k)``, ``k (..., S, d_k)`` -> scores ``(..., T, S)``,
    entry ``[t, s] = q_t · k_s``. Large when the two point the same way,
    and larger for longer vectors: a key's length counts as much as its
    direction.
    """
    q, k = _as_float_array(q, "q"), _as_float_array(k, "k")
    _check_queries_and_keys(q, k, "dot_scores")
    return q @ np.swapaxes(k, -1, -2)
# --8<-- [end:dot_scores]


# --8<-- [start:scaled_dot_scores]
def scaled_dot_scores(q, k, scale=None) -> np.ndarray:
    """Dot-product scores times ``scale``, by default ``1/√d_k``.

    Shapes as :func:`dot_scores`. For entries of variance 1, ``q · k`` has
    variance ``d_k``; the default scale brings the scores back to variance
    1 whatever ``d_k`` is, so softmax does not saturate in high dimensions.
    """
    q, k = _as_float_array(q, "q"), _as_float_array(k, "k")
    _check_queries_and_keys(q, k, "scaled_dot_scores")
    if scale is None:
        scale = 1.0 / np.sqrt(q.shape[-1])
    scores = q @ np.swapaxes(k, -1, -2)
    return scores * np.asarray(scale, dtype=scores.dtype)
# --8<-- [end:scaled_dot_scores]


# --8<-- [start:additive_scores]
def additive_scores(q, k, W_q, W_k, w_v) -> np.ndarray:
    """Additive (Bahdanau) scores ``a(q, k) = w_vᵀ tanh(q W_q + k W_k)``.

    ``q (..., T, d_q)`` and ``k (..., S, d_k)`` may differ in size: each
    is projected into a shared space of size ``h`` by ``W_q (d_q, h)`` and
    ``W_k (d_k, h)``; the two are added and squashed by tanh, and
    ``w_v (h,)`` reads one number off. Returns scores ``(..., T, S)``.
    """
    q, k = _as_float_array(q, "q"), _as_float_array(k, "k")
    W_q = _as_float_array(W_q, "W_q")
    W_k = _as_float_array(W_k, "W_k")
    w_v = _as_float_array(w_v, "w_v")
    _check_additive_parameters(q, k, W_q, W_k, w_v)
    # (..., T, 1, h) + (..., 1, S, h): every query meets every key.
    hidden = np.tanh((q @ W_q)[..., :, None, :] + (k @ W_k)[..., None, :, :])
    return hidden @ w_v
# --8<-- [end:additive_scores]


# --8<-- [start:gaussian_scores]
def gaussian_scores(q, k, bandwidth: float = 1.0) -> np.ndarray:
    """Gaussian-kernel scores ``-‖q - k‖² / (2σ²)``, with ``σ = bandwidth``.

    ``exp`` of a score is the Gaussian kernel ``exp(-‖q - k‖² / (2σ²))``,
    so softmax weighs each key by the kernel, normalised. The nearest key
    scores highest, whatever the lengths of the vectors. Shapes as
    :func:`dot_scores`: ``(..., T, d_k)``, ``(..., S, d_k)`` -> ``(..., T, S)``.
    """
    q, k = _as_float_array(q, "q"), _as_float_array(k, "k")
    _check_queries_and_keys(q, k, "gaussian_scores")
    if not bandwidth > 0:
        raise ValueError(
            f"gaussian_scores: bandwidth must be > 0, got {bandwidth!r}")
    # Differences, not ‖q‖² - 2 q·k + ‖k‖²: that shortcut can round to a
    # negative distance, and a query equal to a key should score exactly 0.
    difference = q[..., :, None, :] - k[..., None, :, :]
    return -np.sum(difference**2, axis=-1) / (2 * bandwidth**2)
# --8<-- [end:gaussian_scores]


def _as_points(x, name: str) -> np.ndarray:
    """``x`` as points in rows, ``(n, d)``; a 1-d array is n points with d = 1."""
    x = _as_float_array(x, name)
    if x.ndim not in (1, 2):
        raise ValueError(
            f"nadaraya_watson: {name} must have shape (n,) or (n, d), got {x.shape}")
    return x[:, None] if x.ndim == 1 else x


# --8<-- [start:nadaraya_watson]
def nadaraya_watson(x_query, x_keys, y_values, bandwidth: float) -> np.ndarray:
    """Kernel regression as a soft lookup: predict ``y`` at each query point.

    The observed points ``x_keys`` are the keys and ``y_values`` the
    values. A query point gets the average of all values, each weighted by
    a Gaussian kernel of its distance to the query: softmax of
    :func:`gaussian_scores`. Shapes: ``x_query (T,)`` or ``(T, d)``,
    ``x_keys (S,)`` or ``(S, d)``, ``y_values (S,)`` or ``(S, d_v)``;
    the result is ``(T,)`` or ``(T, d_v)``, like ``y_values``.
    """
    queries = _as_points(x_query, "x_query")
    keys = _as_points(x_keys, "x_keys")
    y_values = _as_float_array(y_values, "y_values")
    if queries.shape[1] != keys.shape[1]:
        raise ValueError(
            "nadaraya_watson: x_query and x_keys must be points of the same "
            f"dimension d: got x_query {np.shape(x_query)} "
            f"and x_keys {np.shape(x_keys)}")
    if y_values.ndim not in (1, 2) or y_values.shape[0] != keys.shape[0]:
        raise ValueError(
            "nadaraya_watson: y_values needs one value per key, shape (S,) or "
            f"(S, d_v): got x_keys {np.shape(x_keys)} (S = {keys.shape[0]}) "
            f"and y_values {y_values.shape}")
    weights = softmax(gaussian_scores(queries, keys, bandwidth), axis=-1)
    return weights @ y_values
# --8<-- [end:nadaraya_watson]
