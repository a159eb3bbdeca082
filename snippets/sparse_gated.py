"""Choosing what to read: a learned index
over the keys, an output gate, normalised
queries and keys (chapter 17).

Three ways the models of 2025-26 decide how
much of the dictionary a query reads. Shapes
follow the site's notation:
``Q (..., T, d_k)``, ``K (..., S, d_k)``,
``V (..., S, d_v)``, a boolean ``mask``
(True = may attend) broadcastable to
``(..., T, S)``.

- :func:`lightning_indexer` scores every key
  cheaply, as DeepSeek sparse attention's
  indexer does: a few small heads, a ReLU
  instead of a softmax, and a weight per
  head chosen by the query token;
  :func:`sparse_attention` then reads only
  the ``k_top`` keys the index ranks best
  (chapter 7's top-k, with the ranking
  learned);
- :func:`gated_output` multiplies
  attention's output, entry by entry, by a
  sigmoid of the query token's state (gated
  attention, Qwen3-Next), so a head can
  answer "nothing" without a sink;
- :func:`qk_norm_attention` normalises every
  query and key (RMSNorm with a learned
  weight) before the scores (QK-norm: OLMo 2,
  Gemma 3, Qwen3), so the scores are bounded
  and their temperature is a learned number.

The sink logit per head of gpt-oss is
chapter 10's null key:
:func:`snippets.no_match.attention_with_sink`
takes one per head.
tests/test_sparse_gated.py checks every
function against a PyTorch reference.
"""

from __future__ import annotations

import numpy as np

from snippets._checks import (
    as_float_array,
    attention_arguments,
    check_eps,
    check_finite,
    check_fits,
    check_matrices,
    check_positive_int,
    check_rng,
    describe,
    explain_attention,
    finite_result,
    largest,
    work_dtype,
)
from snippets.at_scale import _top_k_keep
from snippets.attention import (
    _attend,
    _masked_,
    scaled_dot_product_attention,
)
from snippets.transformer import _normalise

INDEXER_NAMES = ("W_IQ", "W_IK", "W_Iw")


def init_indexer(rng, d_model, n_index,
                 d_index):
    """Random parameters of a lightning
    indexer, as a dict.

    ``W_IQ (d_model, n_index·d_index)``: the
    index queries of ``n_index`` heads of
    width ``d_index``;
    ``W_IK (d_model, d_index)``: one index
    key per token, shared by the heads;
    ``W_Iw (d_model, n_index)``: each head's
    weight, chosen by the query token.

    >>> params = init_indexer(
    ...     np.random.default_rng(0),
    ...     d_model=16, n_index=2, d_index=4)
    >>> for name, W in params.items():
    ...     print(name, W.shape)
    W_IQ (16, 8)
    W_IK (16, 4)
    W_Iw (16, 2)
    """
    given = {"d_model": d_model,
             "n_index": n_index,
             "d_index": d_index}
    sizes = {}
    for name, size in given.items():
        sizes[name] = check_positive_int(
            name, size, meaning="a size")
    (d_model, n_index,
     d_index) = sizes.values()
    check_rng(rng)
    shape = (d_model, n_index, d_index)
    check_fits("W_IQ", shape, np.float64,
               **sizes)
    widths = {"W_IQ": n_index * d_index,
              "W_IK": d_index,
              "W_Iw": n_index}
    params = {}
    for name, width in widths.items():
        params[name] = rng.normal(
            0.0, d_model**-0.5,
            size=(d_model, width))
    return params


def _check_indexer(params, n_index):
    p = check_matrices(params, INDEXER_NAMES,
                       "init_indexer")
    for name, W in p.items():
        check_finite(W, name)
    d_model, width = p["W_IQ"].shape
    d_index = p["W_IK"].shape[1]
    if width != n_index * d_index:
        raise ValueError(
            f"W_IQ has {width} columns, "
            "expected n_index·d_index = "
            f"{n_index}·{d_index} = "
            f"{n_index * d_index} (n_index "
            "heads of the width d_index of "
            f"W_IK {p['W_IK'].shape})")
    if p["W_Iw"].shape != (d_model, n_index):
        raise ValueError(
            "W_Iw must have shape "
            "(d_model, n_index) = "
            f"{(d_model, n_index)} (d_model "
            f"from W_IQ {p['W_IQ'].shape}), "
            f"got {p['W_Iw'].shape}")
    return p, d_model, d_index


def lightning_indexer(X_q, X_kv, params,
                      n_index):
    """The index scores ``(..., T, S)``: how
    much each query should read each key,
    cheaply.

    ``X_q (..., T, d_model)`` are the states
    that ask, ``X_kv (..., S, d_kv)`` the
    states that keys come from (the same ones
    in self-attention). Head ``j`` of the
    indexer scores a key by
    ``ReLU(q_j · k)``, with
    ``q_j = x_q W_IQ`` (its columns
    ``j·d_index`` onwards) and
    ``k = x_kv W_IK``; the index score adds
    the heads up, each times its weight
    ``x_q W_Iw``. No softmax: only the
    ranking of the keys matters. (DeepSeek
    also multiplies by constant positive
    factors, which change no ranking, and
    computes in 8-bit floats.)

    >>> rng = np.random.default_rng(0)
    >>> params = init_indexer(
    ...     rng, d_model=8, n_index=2,
    ...     d_index=4)
    >>> X = rng.normal(size=(3, 8))
    >>> index = lightning_indexer(
    ...     X, X, params, n_index=2)
    >>> for row in index.round(2).tolist():
    ...     print(row)
    [0.05, 0.0, -0.74]
    [0.47, 0.05, 1.05]
    [0.3, 1.05, -0.23]
    """
    n_index = check_positive_int(
        "n_index", n_index,
        meaning="how many index heads")
    p, d_model, d_index = _check_indexer(
        params, n_index)
    X_q = as_float_array(X_q, "X_q")
    X_kv = as_float_array(X_kv, "X_kv")
    inputs = (("X_q", X_q, "W_IQ"),
              ("X_kv", X_kv, "W_IK"))
    for name, X, W in inputs:
        rows = p[W].shape[0]
        if X.ndim < 2 or X.shape[-1] != rows:
            raise ValueError(
                f"{name} must have shape "
                f"(..., T or S, {rows}), "
                f"the rows of {W} "
                f"{p[W].shape}, got "
                f"{describe(X)}")
        check_finite(X, name)
    try:
        np.broadcast_shapes(X_q.shape[:-2],
                            X_kv.shape[:-2])
    except ValueError:
        raise ValueError(
            "the batch dimensions of X_q "
            f"{X_q.shape} and X_kv "
            f"{X_kv.shape} do not broadcast"
        ) from None
    arrays = {"X_q": X_q, "X_kv": X_kv, **p}
    dtype = np.result_type(*arrays.values())
    work = work_dtype(dtype)
    cast = {
        name: value.astype(work, copy=False)
        for name, value in arrays.items()}
    with np.errstate(over="ignore",
                     invalid="ignore"):
        index = _index_scores(cast, n_index,
                              d_index)
    return finite_result(
        index, dtype,
        "the indexer's scores would", arrays)


def _index_scores(a, n_index, d_index):
    """Each head's ``ReLU(q_j · k)`` times
    its weight, summed over the heads; ``a``
    holds X_q, X_kv and the indexer's
    matrices."""
    q = a["X_q"] @ a["W_IQ"]
    # (..., T, n_index, d_index)
    lead = q.shape[:-1]
    q = q.reshape(*lead, n_index, d_index)
    # (..., S, d_index)
    k = a["X_kv"] @ a["W_IK"]
    # (..., T, n_index)
    w = a["X_q"] @ a["W_Iw"]
    q = np.swapaxes(q, -2, -3)
    k = np.swapaxes(k, -1, -2)
    # one index key per token, for all heads
    k = k[..., None, :, :]
    # (..., n_index, T, S)
    match = np.maximum(q @ k, 0)
    w = np.swapaxes(w, -1, -2)[..., None]
    return (w * match).sum(axis=-3)


def sparse_attention(Q, K, V, index, k_top,
                     mask=None, scale=None):
    """Attention that reads, for every query,
    only the ``k_top`` keys its ``index``
    ranks best.

    ``index (..., T, S)`` ranks the keys (the
    output of :func:`lightning_indexer`, or
    any scores); the ``k_top`` best of each
    row among those ``mask`` allows are kept
    (ties go to the lower index), and the
    result is ordinary scaled dot-product
    attention over the kept keys:
    ``(output (..., T, d_v),
    weights (..., T, S))``, every other
    weight exactly 0. A query allowed fewer
    than ``k_top`` keys reads them all;
    ``k_top >= S`` is full attention.

    >>> Q = np.array([[1.0, 0.0]])
    >>> K = np.array([[3.0, 0.0], [2.0, 0.0],
    ...               [-1.0, 0.0]])
    >>> V = np.array([[1.0], [2.0], [3.0]])
    >>> output, weights = sparse_attention(
    ...     Q, K, V, index=[[0.0, 5.0, 9.0]],
    ...     k_top=2)
    >>> # keys 1 and 2 are read
    >>> (weights.round(3).tolist(),
    ...  output.round(3).tolist())
    ([[0.0, 0.893, 0.107]], [[2.107]])
    """
    k_top = check_positive_int(
        "k_top", k_top,
        meaning="the number of keys each "
                "query reads")
    Q, K, V, mask, scale, dtype = (
        attention_arguments(Q, K, V, mask,
                            scale))
    index = as_float_array(index, "index")
    T, S = Q.shape[-2], K.shape[-2]
    batch = np.broadcast_shapes(
        Q.shape[:-2], K.shape[:-2],
        V.shape[:-2])
    if (index.ndim < 2
            or index.shape[-2:] != (T, S)):
        raise ValueError(
            "index must have shape "
            f"(..., T, S) = (..., {T}, {S})"
            ", one score per query of Q "
            f"{Q.shape} and key of K "
            f"{K.shape}, got "
            f"{describe(index)}")
    try:
        np.broadcast_shapes(index.shape[:-2],
                            batch)
    except ValueError:
        raise ValueError(
            "the batch dimensions of index "
            f"{index.shape} do not "
            "broadcast with those of "
            f"Q, K and V {batch}"
        ) from None
    check_finite(index, "index")
    ranked = index.astype(Q.dtype, copy=True)
    ranked = _masked_(ranked, mask)
    keep = (
        _top_k_keep(ranked, min(k_top, S))
        if S else ranked > -np.inf)
    result = _attend(Q, K, V, keep, scale)
    if result is None:
        explain_attention(Q, K, V, scale)
    output, weights = (
        array.astype(dtype, copy=False)
        for array in result)
    return output, weights


def gated_output(heads, X, W_G):
    """Attention's output times a gate:
    ``heads · sigmoid(X W_G)``, entry by
    entry.

    ``heads (..., T, d_out)``: the heads'
    answers side by side, before ``W_O``;
    ``X (..., T, d_model)``: the states the
    queries came from;
    ``W_G (d_model, d_out)``. Each entry of
    each answer is scaled by a number between
    0 and 1 that the query token chooses:
    near 0, the head adds nothing, whatever
    its weights were (gated attention, Qiu et
    al. 2025; Qwen3-Next).

    >>> heads = np.array([[2.0, 4.0]])
    >>> # open halfway; shut
    >>> gated = gated_output(
    ...     heads, [[1.0]],
    ...     W_G=[[0.0, -30.0]])
    >>> gated.round(3).tolist()
    [[1.0, 0.0]]
    """
    heads = as_float_array(heads, "heads")
    X = as_float_array(X, "X")
    W_G = as_float_array(W_G, "W_G")
    if W_G.ndim != 2:
        raise ValueError(
            "W_G must be a matrix "
            f"(d_model, d_out), got "
            f"{describe(W_G)}")
    d_model, d_out = W_G.shape
    if X.ndim < 1 or X.shape[-1] != d_model:
        raise ValueError(
            "X must have shape (..., T, "
            f"d_model) with d_model = "
            f"{d_model} (the rows of W_G "
            f"{W_G.shape}), got "
            f"{describe(X)}")
    if (heads.ndim < 1
            or heads.shape[-1] != d_out):
        raise ValueError(
            "heads must have shape (..., T, "
            f"d_out) with d_out = {d_out} "
            "(the columns of W_G "
            f"{W_G.shape}), got "
            f"{describe(heads)}")
    # one gate per answer: a broadcast would
    # gate answers with others' states
    if heads.shape[:-1] != X.shape[:-1]:
        raise ValueError(
            "heads and X must have the same "
            "leading shape (..., T), one "
            "state per answer, got heads "
            f"{heads.shape} and X {X.shape}")
    arrays = {"heads": heads, "X": X,
              "W_G": W_G}
    for name, value in arrays.items():
        check_finite(value, name)
    dtype = np.result_type(*arrays.values())
    work = work_dtype(dtype)
    with np.errstate(over="ignore",
                     invalid="ignore"):
        gated = _gated(heads, X, W_G, work)
    return finite_result(
        gated, dtype,
        "the gate's input X W_G would",
        arrays)


def _gated(heads, X, W_G, work):
    """``heads · sigmoid(X W_G)`` in
    ``work``, or None if the gate's input
    overflowed."""
    X = X.astype(work, copy=False)
    W_G = W_G.astype(work, copy=False)
    z = X @ W_G
    # a NaN in z is inf - inf in the product:
    # the gate's input overflowed
    if np.isnan(z).any():
        return None
    # sigmoid(z) = (1 + tanh(z/2)) / 2: no
    # exp to overflow, and ±inf give exactly
    # 1 and 0
    gate = 0.5 + 0.5 * np.tanh(0.5 * z)
    heads = heads.astype(work, copy=False)
    return heads * gate


def qk_norm_attention(Q, K, V, q_weight,
                      k_weight, eps=1e-6,
                      mask=None, scale=None):
    """Attention over normalised queries and
    keys (QK-norm): RMSNorm each row of Q and
    K first.

    Each query becomes
    ``q / rms(q) · q_weight`` and each key
    ``k / rms(k) · k_weight`` (``rms`` is the
    root mean square of a row, with ``eps``
    inside the root; ``q_weight`` and
    ``k_weight`` are ``(d_k,)``), then
    attention runs as usual. Every normalised
    row has length at most
    ``√d_k · max|weight|``, so no score can
    exceed ``d_k · max|q_weight| ·
    max|k_weight| · scale``, however large
    the inputs: the weights are a learned
    temperature. Returns
    ``(output, weights)``.

    >>> # a huge query: plain attention would
    >>> # be one-hot
    >>> Q = np.array([[1000.0, 0.0]])
    >>> K = np.array([[1.0, 0.0],
    ...               [0.0, 1.0]])
    >>> V = np.array([[1.0], [0.0]])
    >>> output, weights = qk_norm_attention(
    ...     Q, K, V, q_weight=np.ones(2),
    ...     k_weight=np.ones(2))
    >>> weights.round(3).tolist()
    [[0.804, 0.196]]
    """
    Q = as_float_array(Q, "Q")
    K = as_float_array(K, "K")
    q_weight = as_float_array(q_weight,
                              "q_weight")
    k_weight = as_float_array(k_weight,
                              "k_weight")
    eps = check_eps(eps)
    Q_norm = _rms_normed(Q, "Q", q_weight,
                         "q_weight", eps)
    K_norm = _rms_normed(K, "K", k_weight,
                         "k_weight", eps)
    try:
        dtype = np.result_type(
            Q, K, q_weight, k_weight)
        Q = Q_norm.astype(dtype, copy=False)
        K = K_norm.astype(dtype, copy=False)
        return scaled_dot_product_attention(
            Q, K, V, mask, scale)
    except ValueError as error:
        if "overflow" not in str(error):
            raise
        given_scale = (
            "1/√d_k" if scale is None
            else repr(scale))
        raise ValueError(
            "the scores of the normalised "
            "queries and keys overflow: "
            "q_weight (largest |entry| "
            f"{largest(q_weight):.3g}), "
            "k_weight (largest |entry| "
            f"{largest(k_weight):.3g}) or "
            f"scale ({given_scale}) are too "
            "large") from None


def _rms_normed(x, name, weight, weight_name,
                eps):
    """The rows of x (Q or K) RMS-normalised
    and scaled by their weight, in their
    work dtype."""
    if x.ndim < 2 or x.shape[-1] == 0:
        raise ValueError(
            f"{name} must have shape "
            "(..., T or S, d_k) with "
            f"d_k >= 1, got {describe(x)}")
    d_k = x.shape[-1]
    if weight.shape != (d_k,):
        raise ValueError(
            f"{weight_name} must have shape "
            f"(d_k,) = ({d_k},), the last "
            f"axis of {name} {x.shape}; got "
            f"{weight.shape}")
    check_finite(x, name)
    check_finite(weight, weight_name)
    work = work_dtype(x.dtype, weight.dtype)
    x_work = x.astype(work, copy=False)
    w_work = weight.astype(work, copy=False)
    # RMSNorm: rows scaled, not centred
    with np.errstate(over="ignore",
                     invalid="ignore"):
        normed = _normalise(
            x_work, eps, False, w_work,
            name=name)
    if not np.isfinite(normed).all():
        raise ValueError(
            f"{weight_name} (largest "
            "|entry| "
            f"{largest(weight):.3g}) is too "
            "large: the normalised "
            f"{name} overflow {work.name}")
    return normed
