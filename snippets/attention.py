"""Soft lookup: softmax, attention, scoring functions and kernel regression (chapter 3).

Shapes follow the site's notation: queries ``Q (..., T, d_k)``, keys
``K (..., S, d_k)``, values ``V (..., S, d_v)``; leading batch dimensions
broadcast. A boolean ``mask`` is True where a query may look at a key (the
convention of PyTorch's ``scaled_dot_product_attention``).

Every function refuses what it cannot compute with a ValueError or TypeError
that names the argument, and returns only finite numbers (the checks are
snippets/_checks.py's). They cost almost nothing: instead of scanning every
input for NaN and infinity, the functions check what they computed (one
number per row, and the output) and look for the culprit only when something
is wrong. The queries are scanned, and the keys or their scores, whichever is
smaller: an infinite key can score -inf, which would pass for a masked key of
weight 0.
"""

from __future__ import annotations

import math

import numpy as np

from snippets._checks import (
    as_float_array,
    attention_arguments,
    check_axis,
    check_finite,
    check_queries_and_keys,
    explain_attention,
    keys_finite,
    overflow_error,
    real_number,
    work_dtype,
)


# --8<-- [start:softmax]
def softmax(x, axis: int = -1, temperature: float = 1.0) -> np.ndarray:
    """Turn scores into weights that are positive and sum to 1 along ``axis``.

    ``softmax(x)_i = exp(x_i / temperature) / sum_j exp(x_j / temperature)``.
    The largest score is subtracted first, which changes nothing mathematically
    and keeps ``exp`` from overflowing, so scores of 1e4 or more are fine.
    A low temperature sharpens the weights towards the largest score (a hard
    lookup); a high one flattens them towards the average. Scores of ``-inf``
    get weight 0, and a row that is ``-inf`` throughout gets all zeros.

    >>> softmax([1.0, 2.0, 3.0]).round(3).tolist()
    [0.09, 0.245, 0.665]
    >>> softmax([1.0, 2.0, 3.0], temperature=0.01).round(3).tolist()
    [0.0, 0.0, 1.0]
    >>> softmax([[0.0, -np.inf], [-np.inf, -np.inf]]).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    x = as_float_array(x, "x")
    axis = check_axis(axis, x)
    temperature = real_number(temperature, "temperature")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    top = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    with np.errstate(over="ignore", invalid="ignore"):  # a difference or a tiny temperature may overflow to -inf
        if not math.isfinite(top.sum()):   # a NaN or a +inf in x makes its row's maximum NaN or +inf
            if not (top < np.inf).all():
                check_finite(x, "x", allow_minus_inf=True)
            top[top == -np.inf] = 0  # a row of -inf keeps -inf - 0 = -inf, never NaN
        e = np.subtract(x, top, dtype=work_dtype(x.dtype))
        if temperature != 1:
            e /= temperature
        np.exp(e, out=e)
    total = np.sum(e, axis=axis, keepdims=True)
    total[total == 0] = 1  # a row of -inf: weights 0, not 0/0
    e /= total
    return e.astype(x.dtype, copy=False)
# --8<-- [end:softmax]


def _masked_(scores: np.ndarray, mask) -> np.ndarray:
    """``scores`` with -inf where ``mask`` is False, in place (a mask with more batch dimensions widens them)."""
    if mask is None:
        return scores
    shape = np.broadcast_shapes(scores.shape, mask.shape)
    if shape != scores.shape:
        scores = np.broadcast_to(scores, shape).copy()
    np.copyto(scores, -np.inf, where=~mask)
    return scores


def _softmax_rows_(scores: np.ndarray, mask) -> bool:
    """Softmax over the last axis, in place, of scores already -inf where ``mask`` is False.

    Returns False if a row cannot be normalised: its largest score is NaN or
    +inf (an input holds NaN or an infinity, or the scores overflowed), or it
    may see a key (``mask``) yet has only -inf scores. The caller then names
    the culprit.
    """
    top = np.maximum.reduce(scores, axis=-1, keepdims=True, initial=-np.inf)
    dead = None
    if not math.isfinite(top.sum()):  # one cheap check of the row maxima; look closer only if it fails
        if not (top < np.inf).all():
            return False
        dead = top == -np.inf  # rows that see no key: weights 0
        sees_a_key = scores.shape[-1] > 0 and (True if mask is None else mask.any(axis=-1, keepdims=True))
        if (dead & sees_a_key).any():
            return False
        top[dead] = 0
    scores -= top
    np.exp(scores, out=scores)
    total = np.add.reduce(scores, axis=-1, keepdims=True)
    if dead is not None:
        total[dead] = 1
    scores /= total
    return True


def _weighted_average(weights: np.ndarray, V: np.ndarray):
    """``weights @ V`` for rows of weights that sum to 1 (or 0), or None if V is not finite."""
    out = weights @ V
    if not math.isfinite(out.sum()) and not np.isfinite(out).all():
        if not np.isfinite(V).all():
            return None
        # Finite values so close to the largest float that their average
        # rounds past it: average the halves, then clip to the largest float.
        big = np.finfo(out.dtype).max
        out = np.clip((weights @ (V * 0.5)) * 2, -big, big)
    return out


def _attend(Q, K, V, mask, scale):
    """(output, weights) of scaled dot-product attention, or None if something is not finite.

    Q, K, V are float arrays of one dtype whose shapes fit; the scores array
    is computed once, with the scale folded into Q, and becomes the weights
    in place.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below, not warned about
        scores = (Q * Q.dtype.type(scale)) @ K.mT
        if not keys_finite(K, scores):
            return None
        weights = _masked_(scores, mask)
        if not _softmax_rows_(weights, mask):
            return None
        out = _weighted_average(weights, V)
    return None if out is None else (out, weights)


# --8<-- [start:scaled_dot_product_attention]
def scaled_dot_product_attention(Q, K, V, mask=None, scale=None):
    """Soft lookup of every query in a dictionary of keys and values.

    Returns ``(output, weights)``: ``weights = softmax(Q Kᵀ · scale)`` of shape
    ``(..., T, S)``, one row of weights per query, and ``output = weights V``
    of shape ``(..., T, d_v)``. ``scale`` defaults to ``1/√d_k``. Where
    ``mask`` is False the weight is 0; a query that may look at no key gets
    zero weights and a zero output. float32 stays float32.

    >>> Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])          # T = 3, d_k = 2
    >>> K = np.array([[1.0, 0.0], [0.0, 1.0]])                      # S = 2
    >>> V = np.array([[10.0, 0.0, 1.0], [20.0, 1.0, 0.0]])          # d_v = 3
    >>> output, weights = scaled_dot_product_attention(Q, K, V)
    >>> weights.round(3).tolist()
    [[0.67, 0.33], [0.33, 0.67], [0.5, 0.5]]
    >>> output.round(2).tolist()
    [[13.3, 0.33, 0.67], [16.7, 0.67, 0.33], [15.0, 0.5, 0.5]]
    """
    Q, K, V, mask, scale, dtype = attention_arguments(Q, K, V, mask, scale)
    result = _attend(Q, K, V, mask, scale)
    if result is None:
        explain_attention(Q, K, V, scale)
    output, weights = result
    return output.astype(dtype, copy=False), weights.astype(dtype, copy=False)
# --8<-- [end:scaled_dot_product_attention]


def _check_additive_parameters(Q, K, W_Q, W_K, w_v) -> None:
    """Raise ValueError unless W_Q (d_q, h), W_K (d_k, h) and w_v (h,) fit Q and K."""
    if Q.ndim < 2 or K.ndim < 2:
        raise ValueError(
            "additive_scores: Q and K need at least 2 dimensions, (..., T, d_q) and (..., S, d_k); "
            f"got Q {Q.shape} and K {K.shape}"
        )
    if w_v.ndim != 1:
        raise ValueError(f"additive_scores: w_v must have shape (h,), got {w_v.shape}")
    h = w_v.shape[0]
    for W_name, W, x_name, x, size in (("W_Q", W_Q, "Q", Q, "d_q"), ("W_K", W_K, "K", K, "d_k")):
        if W.shape != (x.shape[-1], h):
            raise ValueError(
                f"additive_scores: {W_name} must have shape ({size}, h) = {(x.shape[-1], h)} "
                f"to match {x_name} {x.shape} and w_v {w_v.shape}, got {W.shape}"
            )
    if Q.shape[:-2] != K.shape[:-2]:
        try:
            np.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
        except ValueError:
            raise ValueError(f"additive_scores: the batch dimensions of Q {Q.shape} and K {K.shape} "
                             "do not broadcast") from None


def _finite_scores(scores: np.ndarray, caller: str, what: str, **arguments) -> np.ndarray:
    """``scores`` if finite; otherwise the error naming the argument that is not finite, or the overflow."""
    if np.isfinite(scores).all():
        return scores
    arrays = {}
    for name, value in arguments.items():
        value = np.asarray(value)
        check_finite(value, f"{caller}: {name}")
        arrays[name] = value
    raise overflow_error(f"{caller}: {what}", scores.dtype, arrays)


# --8<-- [start:dot_scores]
def dot_scores(Q, K) -> np.ndarray:
    """Score every query against every key by their dot product.

    ``Q (..., T, d_k)``, ``K (..., S, d_k)`` -> scores ``(..., T, S)``,
    entry ``[t, s] = q_t · k_s``. Large when the two point the same way,
    and larger for longer vectors: a key's length counts as much as its
    direction.

    >>> dot_scores([[1.0, 0.0], [1.0, 1.0]], [[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]]).round(3).tolist()
    [[1.0, 0.0, 3.0], [1.0, 2.0, 6.0]]
    """
    Q, K = as_float_array(Q, "Q"), as_float_array(K, "K")
    check_queries_and_keys(Q, K, "dot_scores")
    with np.errstate(over="ignore", invalid="ignore"):
        scores = Q @ np.swapaxes(K, -1, -2)
    return _finite_scores(scores, "dot_scores", "the dot products", Q=Q, K=K)
# --8<-- [end:dot_scores]


# --8<-- [start:scaled_dot_scores]
def scaled_dot_scores(Q, K, scale=None) -> np.ndarray:
    """Dot-product scores times ``scale``, by default ``1/√d_k``.

    Shapes as :func:`dot_scores`. For entries of variance 1, ``q · k`` has
    variance ``d_k``; the default scale brings the scores back to variance
    1 whatever ``d_k`` is, so softmax does not saturate in high dimensions.

    >>> scaled_dot_scores([[1.0, 1.0, 1.0, 1.0]], [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, -1.0, 0.0]]).round(3).tolist()
    [[2.0, 0.5]]
    """
    Q, K = as_float_array(Q, "Q"), as_float_array(K, "K")
    check_queries_and_keys(Q, K, "scaled_dot_scores")
    if scale is None:
        scale = 1.0 / np.sqrt(Q.shape[-1]) if Q.shape[-1] else 1.0
    scale = real_number(scale, "scale")
    with np.errstate(over="ignore", invalid="ignore"):
        scores = Q @ np.swapaxes(K, -1, -2)
        scores *= scores.dtype.type(scale)
    return _finite_scores(scores, "scaled_dot_scores", "the scaled dot products", Q=Q, K=K, scale=scale)
# --8<-- [end:scaled_dot_scores]


# --8<-- [start:additive_scores]
def additive_scores(Q, K, W_Q, W_K, w_v) -> np.ndarray:
    """Additive (Bahdanau) scores ``a(q, k) = w_vᵀ tanh(q W_Q + k W_K)``.

    ``Q (..., T, d_q)`` and ``K (..., S, d_k)`` may differ in size: each
    is projected into a shared space of size ``h`` by ``W_Q (d_q, h)`` and
    ``W_K (d_k, h)``; the two are added and squashed by tanh, and
    ``w_v (h,)`` reads one number off. Returns scores ``(..., T, S)``.

    >>> Q, K = np.ones((2, 3)), np.ones((4, 5))                  # d_q = 3, d_k = 5
    >>> W_Q, W_K, w_v = np.zeros((3, 6)), np.zeros((5, 6)), np.ones(6)   # h = 6
    >>> additive_scores(Q, K, W_Q, W_K, w_v).shape
    (2, 4)
    """
    Q, K = as_float_array(Q, "Q"), as_float_array(K, "K")
    W_Q = as_float_array(W_Q, "W_Q")
    W_K = as_float_array(W_K, "W_K")
    w_v = as_float_array(w_v, "w_v")
    _check_additive_parameters(Q, K, W_Q, W_K, w_v)
    # tanh(±inf) is ±1: an infinity would be squashed into an ordinary score, so look for it first.
    for name, x in (("Q", Q), ("K", K), ("W_Q", W_Q), ("W_K", W_K), ("w_v", w_v)):
        check_finite(x, f"additive_scores: {name}")
    with np.errstate(over="ignore", invalid="ignore"):
        # (..., T, 1, h) + (..., 1, S, h): every query meets every key.
        hidden = np.tanh((Q @ W_Q)[..., :, None, :] + (K @ W_K)[..., None, :, :])
        scores = hidden @ w_v
    return _finite_scores(scores, "additive_scores", "the projections", Q=Q, K=K, W_Q=W_Q, W_K=W_K, w_v=w_v)
# --8<-- [end:additive_scores]


def _gaussian(Q, K, bandwidth: float) -> np.ndarray:
    """``-‖q - k‖² / (2σ²)`` for every pair; -inf where it overflows (call it under np.errstate)."""
    # Differences, not ‖q‖² - 2 q·k + ‖k‖²: that shortcut can round to a
    # negative distance, and a query equal to a key should score exactly 0.
    # Dividing by σ before squaring keeps a tiny σ from turning 0/0 into NaN.
    difference = (Q[..., :, None, :] - K[..., None, :, :]) / bandwidth
    return -0.5 * np.sum(difference**2, axis=-1)


def _check_bandwidth(bandwidth, caller: str) -> float:
    bandwidth = real_number(bandwidth, f"{caller}: bandwidth")
    if not bandwidth > 0:
        raise ValueError(f"{caller}: bandwidth must be > 0, got {bandwidth!r}")
    return bandwidth


# --8<-- [start:gaussian_scores]
def gaussian_scores(Q, K, bandwidth: float = 1.0) -> np.ndarray:
    """Gaussian-kernel scores ``-‖q - k‖² / (2σ²)``, with ``σ = bandwidth``.

    ``exp`` of a score is the Gaussian kernel ``exp(-‖q - k‖² / (2σ²))``,
    so softmax weighs each key by the kernel, normalised. The nearest key
    scores highest, whatever the lengths of the vectors. Shapes as
    :func:`dot_scores`: ``(..., T, d_k)``, ``(..., S, d_k)`` -> ``(..., T, S)``.

    >>> gaussian_scores([[0.0, 0.0]], [[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]]).round(3).tolist()
    [[-0.5, -1.0, -2.0]]
    """
    Q, K = as_float_array(Q, "Q"), as_float_array(K, "K")
    check_queries_and_keys(Q, K, "gaussian_scores")
    bandwidth = _check_bandwidth(bandwidth, "gaussian_scores")
    with np.errstate(over="ignore", invalid="ignore"):
        scores = _gaussian(Q, K, bandwidth)
    return _finite_scores(scores, "gaussian_scores", "the squared distances / (2 bandwidth²)",
                          Q=Q, K=K, bandwidth=bandwidth)
# --8<-- [end:gaussian_scores]


def _as_points(x, name: str) -> np.ndarray:
    """``x`` as points in rows, ``(n, d)``; a 1-d array is n points with d = 1."""
    x = as_float_array(x, name)
    if x.ndim not in (1, 2):
        raise ValueError(
            f"nadaraya_watson: {name} must have shape (n,) or (n, d), got {x.shape}")
    check_finite(x, f"nadaraya_watson: {name}")
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

    >>> x_keys, y_values = [0.0, 1.0, 2.0, 3.0], [0.0, 10.0, 20.0, 30.0]
    >>> nadaraya_watson([1.0, 1.5], x_keys, y_values, bandwidth=0.1).round(3).tolist()
    [10.0, 15.0]
    """
    queries = _as_points(x_query, "x_query")
    keys = _as_points(x_keys, "x_keys")
    y_values = as_float_array(y_values, "y_values")
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
    if keys.shape[0] == 0:
        raise ValueError(
            "nadaraya_watson: x_keys must hold at least one observed point to average over, "
            f"got x_keys {np.shape(x_keys)}")
    check_finite(y_values, "nadaraya_watson: y_values")
    bandwidth = _check_bandwidth(bandwidth, "nadaraya_watson")
    work = work_dtype(queries.dtype, keys.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        # A score of -inf (a key very far away, for this bandwidth) is a weight of 0,
        # unless every key of a query is that far: then no weight can be given.
        weights = _gaussian(queries.astype(work), keys.astype(work), bandwidth)
        if not _softmax_rows_(weights, None):
            raise overflow_error("nadaraya_watson: every squared distance / (2 bandwidth²) of a query",
                                 work, {"x_query": queries, "x_keys": keys, "bandwidth": bandwidth})
        return _weighted_average(weights, y_values)
# --8<-- [end:nadaraya_watson]
