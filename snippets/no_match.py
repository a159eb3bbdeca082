"""When no key matches: softmax + 1 and attention with a sink key (chapter 10).

A Python dict answers a missing key with ``KeyError``, or with a default
through ``db.get(key, default)``. Softmax cannot say "no match": its weights
always sum to 1. These functions add a hidden *null key* (a sink) whose value
is zero, so the weights over the real keys may sum to less than 1 and a query
that matches nothing reads (close to) zero: ``db.get(q, 0)``.

Shapes follow the site's notation: ``Q (..., T, d_k)``, ``K (..., S, d_k)``,
``V (..., S, d_v)``; a boolean ``mask`` is True where a query may look at a key.
"""

from __future__ import annotations

import numpy as np

from snippets._checks import (
    as_float_array,
    attention_arguments,
    check_axis,
    check_finite,
    explain_attention,
    real_number,
    work_dtype,
)
from snippets.attention import _masked_, _weighted_average


def _softmax_beside_null(x: np.ndarray, null_score, axis: int) -> np.ndarray:
    """Weights of the real scores ``x`` in a softmax that also holds one ``null_score``.

    ``x`` holds no NaN and no +inf; -inf entries get weight 0. ``null_score``
    is a number, or an array that broadcasts against ``x`` with ``axis``
    kept (one per head). The null score takes part in the maximum, so the
    number subtracted is finite and no ``exp`` overflows.
    """
    top = np.maximum(np.max(x, axis=axis, keepdims=True, initial=-np.inf), null_score)
    e = np.exp(np.subtract(x, top, dtype=work_dtype(x.dtype)))
    e /= np.exp(null_score - top) + np.sum(e, axis=axis, keepdims=True)
    return e.astype(x.dtype, copy=False)


# --8<-- [start:softmax_one]
def softmax_one(x, axis: int = -1) -> np.ndarray:
    """Softmax with an extra score of 0 that owns no value: ``exp(x_i) / (1 + Σ_j exp(x_j))``.

    The weights are positive and sum to *less* than 1; the rest is the weight
    of a hidden null key. When every score is far below 0 the weights all go
    to 0 (nothing matched); when one score is far above 0 it gets weight 1.
    Scores of ``-inf`` get weight 0. The largest of the scores and 0 is
    subtracted first, so scores of ±1e4 neither overflow nor give NaN.

    >>> softmax_one([0.0, 0.0, 0.0]).round(3).tolist()
    [0.25, 0.25, 0.25]
    >>> softmax_one([-1e4, -1e4]).round(3).tolist()
    [0.0, 0.0]
    >>> softmax_one([1e4, 0.0]).round(3).tolist()
    [1.0, 0.0]
    """
    x = as_float_array(x, "x")
    axis = check_axis(axis, x)
    check_finite(x, "x", allow_minus_inf=True)
    return _softmax_beside_null(x, 0.0, axis)
# --8<-- [end:softmax_one]


def _sink_scores(sink_score, Q):
    """``sink_score`` as a float, or as an array (H, 1, 1) of one finite score per head of ``Q (..., H, T, d_k)``."""
    if np.ndim(sink_score) == 0 or isinstance(sink_score, (str, bytes)):
        return real_number(sink_score, "sink_score")
    sinks = as_float_array(sink_score, "sink_score")
    if sinks.ndim != 1 or Q.ndim < 3 or sinks.shape[0] != Q.shape[-3]:
        heads = f"H = {Q.shape[-3]} heads of Q {Q.shape}" if Q.ndim >= 3 else f"Q {Q.shape}, which has no head axis"
        raise ValueError(f"sink_score must be one number, or one per head, shape (H,), for Q of shape "
                         f"(..., H, T, d_k): got shape {sinks.shape} for {heads}")
    check_finite(sinks, "sink_score")
    return sinks.astype(Q.dtype)[:, None, None]


# --8<-- [start:attention_with_sink]
def attention_with_sink(Q, K, V, sink_score=0.0, mask=None, scale=None):
    """Scaled dot-product attention with a null key: a soft ``db.get(q, 0)``.

    Every query also sees a sink, a key whose (scaled) score is ``sink_score``
    for every query and whose value is zero. ``sink_score`` is one number,
    or one per head, shape ``(H,)``, for ``Q`` of shape ``(..., H, T, d_k)``:
    gpt-oss learns such a sink logit for each of its heads (chapter 17). Returns ``(output, weights)``:
    ``weights (..., T, S)`` over the real keys only, each row summing to at
    most 1 (the sink takes the rest), and ``output = weights V`` of shape
    ``(..., T, d_v)``. The weights are :func:`softmax_one` of the scores
    ``Q Kᵀ · scale - sink_score``; ``scale`` defaults to
    ``1/√d_k``. Where ``mask`` is False the weight is 0, and a query that may
    look at no key puts all its weight on the sink and reads zeros.

    >>> output, weights = attention_with_sink([[1.0, 0.0]], [[8.0, 0.0], [-8.0, 0.0]], [[2.0], [4.0]])
    >>> weights.round(3).tolist(), output.round(3).tolist()
    ([[0.997, 0.0]], [[1.993]])
    >>> output, weights = attention_with_sink([[1.0, 0.0]], [[8.0, 0.0], [-8.0, 0.0]], [[2.0], [4.0]],
    ...                                       sink_score=20.0)
    >>> weights.round(3).tolist(), output.round(3).tolist()
    ([[0.0, 0.0]], [[0.0]])
    >>> Q2 = np.ones((2, 1, 2))                                        # H = 2 heads, one query and key each
    >>> _, weights = attention_with_sink(Q2, Q2, Q2, sink_score=np.array([0.0, 5.0]))
    >>> weights.round(3).tolist()                                      # head 1's sink takes more
    [[[0.804]], [[0.027]]]
    """
    Q, K, V, mask, scale, dtype = attention_arguments(Q, K, V, mask, scale)
    sink_score = _sink_scores(sink_score, Q)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below, not warned about
        scores = (Q * Q.dtype.type(scale)) @ np.swapaxes(K, -1, -2)
        output = None
        if np.isfinite(scores if mask is None else np.where(mask, scores, 0)).all():
            scores = _masked_(scores, mask)
            weights = _softmax_beside_null(scores, sink_score, axis=-1)
            output = _weighted_average(weights, V)
    if output is None:  # K or V holds NaN or an infinity, or the scores overflowed
        explain_attention(Q, K, V, scale)
    return output.astype(dtype, copy=False), weights.astype(dtype, copy=False)
# --8<-- [end:attention_with_sink]
