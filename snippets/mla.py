"""Multi-head latent attention: a
dictionary stored compressed (chapter 15).

DeepSeek-V2 and V3 cache one short *latent*
row per token instead of every head's key and
value. Each token writes ``c = x W_DKV``
(``d_latent`` numbers), and each head reads
its keys and values out of the latents::

    C   = X W_DKV    (T, d_latent), cached
    K_h = C W_UK,h   (T, d_head), keys
    V_h = C W_UV,h   (T, d_head), values

where ``W_UK,h`` is head h's columns of
``W_UK``, and ``W_UV,h`` of ``W_UV``.

Positions cannot pass through that
compression (a rotation that depends on the
key's position does not commute with
``W_UK``), so each token also writes one
small key of ``d_rope`` numbers,
``rope(x W_KR)``, that every head shares, and
each head's query gets a part
``rope(x W_QR)`` that is compared with it. A
head's score is the sum of both dot products,
scaled by ``1 / sqrt(d_head + d_rope)``.

The *absorbed* form never builds the keys:
``q_h K_hᵀ = (q_h W_UK,hᵀ) Cᵀ``, so a query
is moved into the latent space once and
compared with the latents themselves, and the
value side reads ``(α_h C) W_UV,h``. That is
what decoding does: per step it reads the
cache ``(C, K_rope)`` and never expands it.
:func:`mla_decode` runs it one token at a
time.

DeepSeek also sends the queries through a
latent of their own (``q_lora_rank`` numbers)
and normalises the latents; neither changes
the dictionary, and neither is here.
tests/test_mla.py checks every function
against a PyTorch reference.
"""

from __future__ import annotations

import numpy as np

from snippets._checks import (
    as_float_array,
    check_bool,
    check_finite,
    check_fits,
    check_matrices,
    check_positive_int,
    check_rng,
    describe,
    finite_result,
    work_dtype,
)
from snippets.positions import _rotate_pairs

MLA_NAMES = ("W_DKV", "W_UK", "W_UV", "W_Q",
             "W_QR", "W_KR", "W_O")


def init_mla(rng, d_model, n_heads, d_head,
             d_latent, d_rope):
    """Random parameters of one multi-head
    latent attention layer, as a dict of
    arrays.

    ``W_DKV (d_model, d_latent)`` writes a
    token's latent; ``W_UK`` and
    ``W_UV (d_latent, n_heads·d_head)`` read
    keys and values out of it;
    ``W_Q (d_model, n_heads·d_head)`` makes
    the queries;
    ``W_QR (d_model, n_heads·d_rope)`` and
    ``W_KR (d_model, d_rope)`` the parts that
    carry positions (one RoPE key for all
    heads); ``W_O (n_heads·d_head, d_model)``
    mixes the heads. Entries of size
    ``1/sqrt(fan_in)``. ``d_rope`` must be
    even (RoPE turns pairs).

    >>> params = init_mla(
    ...     np.random.default_rng(0),
    ...     d_model=16, n_heads=2, d_head=4,
    ...     d_latent=6, d_rope=2)
    >>> for name in ("W_DKV", "W_UK", "W_QR",
    ...              "W_KR", "W_O"):
    ...     print(name, params[name].shape)
    W_DKV (16, 6)
    W_UK (6, 8)
    W_QR (16, 4)
    W_KR (16, 2)
    W_O (8, 16)
    """
    sizes = {"d_model": d_model,
             "n_heads": n_heads,
             "d_head": d_head,
             "d_latent": d_latent,
             "d_rope": d_rope}
    for name, size in sizes.items():
        check_positive_int(name, size)
    if d_rope % 2:
        raise ValueError(
            "d_rope must be even (RoPE "
            "turns pairs of columns), got "
            f"d_rope = {d_rope}")
    check_rng(rng)
    # Python's ints: NumPy's would wrap round
    (d_model, n_heads, d_head, d_latent,
     d_rope) = map(int, sizes.values())
    shapes = {
        "W_DKV": (d_model, d_latent),
        "W_UK": (d_latent, n_heads * d_head),
        "W_UV": (d_latent, n_heads * d_head),
        "W_Q": (d_model, n_heads * d_head),
        "W_QR": (d_model, n_heads * d_rope),
        "W_KR": (d_model, d_rope),
        "W_O": (n_heads * d_head, d_model),
    }
    for name, shape in shapes.items():
        check_fits(name, shape, np.float64,
                   **sizes)
    params = {}
    for name, shape in shapes.items():
        fan_in = shape[0]
        params[name] = rng.normal(
            0.0, fan_in**-0.5, size=shape)
    return params


def _check_mla(params, n_heads):
    """The parameters as finite float arrays,
    and the sizes (d_model, d_head, d_latent,
    d_rope) they imply."""
    check_positive_int("n_heads", n_heads)
    p = check_matrices(params, MLA_NAMES,
                       "init_mla")
    d_model, d_latent = p["W_DKV"].shape
    d_rope = p["W_KR"].shape[1]
    width = p["W_UK"].shape[1]
    rope_width = p["W_QR"].shape[1]
    if (width % n_heads
            or rope_width % n_heads):
        raise ValueError(
            f"n_heads = {n_heads} must "
            "divide the columns of W_UK "
            f"{p['W_UK'].shape} "
            "(n_heads·d_head) and of W_QR "
            f"{p['W_QR'].shape} "
            "(n_heads·d_rope)")
    d_head = width // n_heads
    if d_rope % 2:
        raise ValueError(
            f"W_KR {p['W_KR'].shape} must "
            "have an even number of columns "
            "d_rope (RoPE turns pairs of "
            "columns)")
    expected = {
        "W_UK": (d_latent, n_heads * d_head),
        "W_UV": (d_latent, n_heads * d_head),
        "W_Q": (d_model, n_heads * d_head),
        "W_QR": (d_model, n_heads * d_rope),
        "W_KR": (d_model, d_rope),
        "W_O": (n_heads * d_head, d_model),
    }
    for name, shape in expected.items():
        if p[name].shape != shape:
            raise ValueError(
                f"{name} has shape "
                f"{p[name].shape}, expected "
                f"{shape} (d_model = "
                f"{d_model} and d_latent = "
                f"{d_latent} from W_DKV, "
                f"d_head = {d_head} from "
                f"W_UK, d_rope = {d_rope} "
                "from W_KR, n_heads = "
                f"{n_heads})")
    for name, W in p.items():
        check_finite(W, name)
    sizes = d_model, d_head, d_latent, d_rope
    return p, sizes


def _checked_call(X, params, n_heads):
    p, sizes = _check_mla(params, n_heads)
    d_model = sizes[0]
    X = as_float_array(X, "X")
    if (X.ndim < 2 or X.shape[-1] != d_model
            or X.shape[-2] == 0):
        raise ValueError(
            "X must have shape (T, d_model) "
            "or (..., T, d_model) with "
            "T >= 1 and d_model = "
            f"{d_model} (from W_DKV "
            f"{p['W_DKV'].shape}), got "
            f"{describe(X)}")
    check_finite(X, "X")
    dtype = np.result_type(X, *p.values())
    work = work_dtype(dtype)
    X = X.astype(work, copy=False)
    p = {name: value.astype(work, copy=False)
         for name, value in p.items()}
    return X, p, sizes, dtype


def _heads(A, n_heads):
    """(..., T, n_heads·w) ->
    (..., n_heads, T, w)."""
    lead = A.shape[:-1]
    split = A.reshape(*lead, n_heads, -1)
    return np.swapaxes(split, -3, -2)


def _per_head(W, n_heads):
    """(d_latent, n_heads·w) ->
    (n_heads, d_latent, w): head h's
    columns."""
    d_latent = W.shape[0]
    split = W.reshape(d_latent, n_heads, -1)
    return np.swapaxes(split, 0, 1)


def _softmax_masked(scores, mask):
    scores = np.where(mask, scores, -np.inf)
    largest = scores.max(axis=-1,
                         keepdims=True)
    exps = np.exp(scores - largest)
    total = exps.sum(axis=-1, keepdims=True)
    return exps / total


def _positions(X, start):
    """The positions of X's tokens, the first
    at ``start``."""
    T = X.shape[-2]
    return np.arange(start, start + T,
                     dtype=np.float64)


def _writes(X, p, start=0):
    """What each token writes into the cache:
    its latent (..., T, d_latent) and its
    RoPE key (..., T, d_rope)."""
    positions = _positions(X, start)
    C = X @ p["W_DKV"]
    K_R = _rotate_pairs(X @ p["W_KR"],
                        positions)
    return C, K_R


def _queries(X, p, n_heads, start=0):
    """Each head's query parts: for content
    (..., H, T, d_head) and for positions
    (..., H, T, d_rope)."""
    positions = _positions(X, start)
    Q_C = _heads(X @ p["W_Q"], n_heads)
    Q_R = _heads(X @ p["W_QR"], n_heads)
    return Q_C, _rotate_pairs(Q_R, positions)


def _transposed(A):
    """A with its last two axes swapped: keys
    as columns, for ``Q @ Kᵀ``."""
    return np.swapaxes(A, -1, -2)


def _latent_lookup(Q_C, Q_R, C, K_R, p,
                   n_heads, scale, mask):
    """The absorbed form: scores against the
    latents, values read out after the
    weighted sum."""
    W_UK = _per_head(p["W_UK"], n_heads)
    W_UV = _per_head(p["W_UV"], n_heads)
    # (..., H, T, d_latent)
    Q_latent = Q_C @ _transposed(W_UK)
    # a head axis: every head reads the same
    # latents and the same RoPE keys
    C = C[..., None, :, :]
    K_R = K_R[..., None, :, :]
    content = Q_latent @ _transposed(C)
    position = Q_R @ _transposed(K_R)
    scores = (content + position) * scale
    alpha = _softmax_masked(scores, mask)
    # (..., H, T, d_head)
    read = (alpha @ C) @ W_UV
    return _merge(read) @ p["W_O"]


def _merge(heads):
    """(..., H, T, w) -> (..., T, H·w)."""
    moved = np.swapaxes(heads, -3, -2)
    lead = moved.shape[:-2]
    return moved.reshape(*lead, -1)


def _causal(T):
    """Token t may read tokens 0 to t."""
    every = np.ones((T, T), dtype=bool)
    return np.tril(every)


def _expanded(X, p, n_heads, scale):
    T = X.shape[-2]
    C, K_R = _writes(X, p)
    Q_C, Q_R = _queries(X, p, n_heads)
    K_C = _heads(C @ p["W_UK"], n_heads)
    V = _heads(C @ p["W_UV"], n_heads)
    # a head axis: the RoPE keys are shared
    K_R = K_R[..., None, :, :]
    content = Q_C @ _transposed(K_C)
    position = Q_R @ _transposed(K_R)
    scores = (content + position) * scale
    mask = _causal(T)
    alpha = _softmax_masked(scores, mask)
    return _merge(alpha @ V) @ p["W_O"]


def _absorbed(X, p, n_heads, scale):
    T = X.shape[-2]
    C, K_R = _writes(X, p)
    Q_C, Q_R = _queries(X, p, n_heads)
    mask = _causal(T)
    return _latent_lookup(
        Q_C, Q_R, C, K_R, p, n_heads, scale,
        mask)


def mla_attention(X, params, n_heads, *,
                  absorbed=False):
    """Causal multi-head latent attention
    over ``X (T, d_model)`` (or
    ``(..., T, d_model)``).

    ``params`` as :func:`init_mla` makes
    them. Token ``t`` is at position ``t``
    for RoPE (chapter 13's rotation of column
    pairs); each head scores
    ``(q_h · k_h + q_rope,h · k_rope)``
    divided by ``sqrt(d_head + d_rope)``
    against the tokens up to its own. With
    ``absorbed=False`` the keys and values
    are expanded out of the latents; with
    ``absorbed=True`` each query is moved
    into the latent space and compared with
    the latents directly. Both give the same
    ``(T, d_model)`` output, up to rounding.

    >>> rng = np.random.default_rng(0)
    >>> params = init_mla(
    ...     rng, d_model=16, n_heads=2,
    ...     d_head=4, d_latent=6, d_rope=2)
    >>> X = rng.normal(size=(5, 16))
    >>> out = mla_attention(X, params,
    ...                     n_heads=2)
    >>> absorbed = mla_attention(
    ...     X, params, 2, absorbed=True)
    >>> out.shape, bool(np.allclose(
    ...     out, absorbed,
    ...     rtol=0, atol=1e-12))
    ((5, 16), True)
    """
    check_bool("absorbed", absorbed)
    X, p, sizes, dtype = _checked_call(
        X, params, n_heads)
    _, d_head, _, d_rope = sizes
    scale = 1.0 / np.sqrt(d_head + d_rope)
    form = (_absorbed if absorbed
            else _expanded)
    with np.errstate(over="ignore",
                     invalid="ignore",
                     divide="ignore"):
        result = form(X, p, n_heads, scale)
    return finite_result(
        result, dtype,
        "mla_attention's projections or "
        "sums would", {"X": X, **p})


def mla_decode(X, params, n_heads):
    """:func:`mla_attention` run as
    generation does: one token at a time,
    with a latent cache.

    Step ``t`` writes token ``t``'s latent
    and RoPE key into the cache
    (``d_latent + d_rope`` numbers per token,
    whatever the number of heads) and reads
    it in the absorbed form with token
    ``t``'s query. Returns the
    ``(T, d_model)`` outputs (or
    ``(..., T, d_model)``), equal to the
    causal whole-sequence form up to
    rounding.

    >>> rng = np.random.default_rng(0)
    >>> params = init_mla(
    ...     rng, d_model=16, n_heads=2,
    ...     d_head=4, d_latent=6, d_rope=2)
    >>> X = rng.normal(size=(5, 16))
    >>> bool(np.allclose(
    ...     mla_decode(X, params, 2),
    ...     mla_attention(X, params, 2),
    ...     rtol=0, atol=1e-12))
    True
    """
    X, p, sizes, dtype = _checked_call(
        X, params, n_heads)
    _, d_head, d_latent, d_rope = sizes
    scale = 1.0 / np.sqrt(d_head + d_rope)
    with np.errstate(over="ignore",
                     invalid="ignore",
                     divide="ignore"):
        result = _decoded(X, p, n_heads,
                          scale, d_latent,
                          d_rope)
    return finite_result(
        result, dtype,
        "mla_decode's projections or sums "
        "would", {"X": X, **p})


def _decoded(X, p, n_heads, scale, d_latent,
             d_rope):
    """One token at a time: token t writes
    its latent and RoPE key into the cache,
    and its query reads the cache up to
    itself."""
    *batch, T, _ = X.shape
    C = np.empty((*batch, T, d_latent),
                 X.dtype)
    K_R = np.empty((*batch, T, d_rope),
                   X.dtype)
    steps = []
    for t in range(T):
        now = slice(t, t + 1)
        so_far = slice(0, t + 1)
        x = X[..., now, :]
        c, k_rope = _writes(x, p, start=t)
        C[..., now, :] = c
        K_R[..., now, :] = k_rope
        Q_C, Q_R = _queries(x, p, n_heads,
                            start=t)
        # all t + 1 entries so far are read
        mask = np.ones((1, t + 1), bool)
        steps.append(_latent_lookup(
            Q_C, Q_R, C[..., so_far, :],
            K_R[..., so_far, :], p, n_heads,
            scale, mask))
    return np.concatenate(steps, axis=-2)
