"""Multi-head latent attention: a dictionary stored compressed (chapter 15).

DeepSeek-V2 and V3 cache one short *latent* row per token instead of every
head's key and value. Each token writes ``c = x W_DKV`` (``d_latent``
numbers), and each head reads its keys and values out of the latents::

    C   = X W_DKV            (T, d_latent)     what the cache keeps
    K_h = C W_UK[:, head h]  (T, d_head)       keys, read out of the latents
    V_h = C W_UV[:, head h]  (T, d_head)       values, the same way

Positions cannot pass through that compression (a rotation that depends on
the key's position does not commute with ``W_UK``), so each token also
writes one small key of ``d_rope`` numbers, ``rope(x W_KR)``, that every
head shares, and each head's query gets a part ``rope(x W_QR)`` that is
compared with it. A head's score is the sum of both dot products, scaled by
``1 / sqrt(d_head + d_rope)``.

The *absorbed* form never builds the keys: ``q_h K_hᵀ = (q_h W_UK,hᵀ) Cᵀ``,
so a query is moved into the latent space once and compared with the
latents themselves, and the value side reads ``(α_h C) W_UV,h``. That is
what decoding does: per step it reads the cache ``(C, K_rope)`` and never
expands it. :func:`mla_decode` runs it one token at a time.

DeepSeek also sends the queries through a latent of their own (``q_lora_rank``
numbers) and normalises the latents; neither changes the dictionary, and
neither is here. tests/test_mla.py checks every function against a PyTorch
reference.
"""

from __future__ import annotations

import numpy as np

from snippets._checks import (
    as_float_array,
    check_bool,
    check_finite,
    check_fits,
    check_keys,
    check_positive_int,
    check_rng,
    describe,
    finite_result,
    work_dtype,
)
from snippets.positions import _rotate_pairs

MLA_NAMES = ("W_DKV", "W_UK", "W_UV", "W_Q", "W_QR", "W_KR", "W_O")


def init_mla(rng, d_model, n_heads, d_head, d_latent, d_rope):
    """Random parameters of one multi-head latent attention layer, as a dict of arrays.

    ``W_DKV (d_model, d_latent)`` writes a token's latent; ``W_UK`` and
    ``W_UV (d_latent, n_heads·d_head)`` read keys and values out of it;
    ``W_Q (d_model, n_heads·d_head)`` makes the queries; ``W_QR
    (d_model, n_heads·d_rope)`` and ``W_KR (d_model, d_rope)`` the parts
    that carry positions (one RoPE key for all heads); ``W_O
    (n_heads·d_head, d_model)`` mixes the heads. Entries of size
    ``1/sqrt(fan_in)``. ``d_rope`` must be even (RoPE turns pairs).

    >>> params = init_mla(np.random.default_rng(0), d_model=16, n_heads=2, d_head=4, d_latent=6, d_rope=2)
    >>> {name: params[name].shape for name in ("W_DKV", "W_UK", "W_QR", "W_KR", "W_O")}
    {'W_DKV': (16, 6), 'W_UK': (6, 8), 'W_QR': (16, 4), 'W_KR': (16, 2), 'W_O': (8, 16)}
    """
    for name, size in (("d_model", d_model), ("n_heads", n_heads), ("d_head", d_head),
                       ("d_latent", d_latent), ("d_rope", d_rope)):
        check_positive_int(name, size)
    if d_rope % 2:
        raise ValueError(f"d_rope must be even (RoPE turns pairs of columns), got d_rope = {d_rope}")
    check_rng(rng)
    sizes = {"d_model": d_model, "n_heads": n_heads, "d_head": d_head, "d_latent": d_latent, "d_rope": d_rope}
    d_model, n_heads, d_head, d_latent, d_rope = (int(size) for size in sizes.values())   # NumPy's ints wrap
    shapes = {
        "W_DKV": (d_model, d_latent), "W_UK": (d_latent, n_heads * d_head), "W_UV": (d_latent, n_heads * d_head),
        "W_Q": (d_model, n_heads * d_head), "W_QR": (d_model, n_heads * d_rope), "W_KR": (d_model, d_rope),
        "W_O": (n_heads * d_head, d_model),
    }
    for name, shape in shapes.items():
        check_fits(name, shape, np.float64, **sizes)
    return {name: rng.normal(0.0, shape[0] ** -0.5, size=shape) for name, shape in shapes.items()}


def _check_mla(params, n_heads):
    """The parameters as finite float arrays, and the sizes (d_model, d_head, d_latent, d_rope) they imply."""
    check_positive_int("n_heads", n_heads)
    check_keys(params, MLA_NAMES, "init_mla")
    p = {name: as_float_array(params[name], name) for name in MLA_NAMES}
    for name, value in p.items():
        if value.ndim != 2 or 0 in value.shape:
            raise ValueError(f"{name} must be a non-empty matrix, got shape {value.shape}")
    d_model, d_latent = p["W_DKV"].shape
    d_rope = p["W_KR"].shape[1]
    width = p["W_UK"].shape[1]
    if width % n_heads or p["W_QR"].shape[1] % n_heads:
        raise ValueError(f"n_heads = {n_heads} must divide the columns of W_UK {p['W_UK'].shape} "
                         f"(n_heads·d_head) and of W_QR {p['W_QR'].shape} (n_heads·d_rope)")
    d_head = width // n_heads
    if d_rope % 2:
        raise ValueError(f"W_KR {p['W_KR'].shape} must have an even number of columns d_rope "
                         "(RoPE turns pairs of columns)")
    expected = {
        "W_UK": (d_latent, n_heads * d_head), "W_UV": (d_latent, n_heads * d_head),
        "W_Q": (d_model, n_heads * d_head), "W_QR": (d_model, n_heads * d_rope), "W_KR": (d_model, d_rope),
        "W_O": (n_heads * d_head, d_model),
    }
    for name, shape in expected.items():
        if p[name].shape != shape:
            raise ValueError(f"{name} has shape {p[name].shape}, expected {shape} (d_model = {d_model} and "
                             f"d_latent = {d_latent} from W_DKV, d_head = {d_head} from W_UK, d_rope = {d_rope} "
                             f"from W_KR, n_heads = {n_heads})")
    for name, value in p.items():
        check_finite(value, name)
    return p, (d_model, d_head, d_latent, d_rope)


def _checked_call(X, params, n_heads):
    p, sizes = _check_mla(params, n_heads)
    X = as_float_array(X, "X")
    if X.ndim < 2 or X.shape[-1] != sizes[0] or X.shape[-2] == 0:
        raise ValueError(f"X must have shape (T, d_model) or (..., T, d_model) with T >= 1 and d_model = "
                         f"{sizes[0]} (from W_DKV {p['W_DKV'].shape}), got {describe(X)}")
    check_finite(X, "X")
    dtype = np.result_type(X, *p.values())
    work = work_dtype(dtype)
    return X.astype(work, copy=False), {k: v.astype(work, copy=False) for k, v in p.items()}, sizes, dtype


def _heads(A, n_heads):
    """(..., T, n_heads·w) -> (..., n_heads, T, w)."""
    return np.swapaxes(A.reshape(*A.shape[:-1], n_heads, -1), -3, -2)


def _per_head(W, n_heads):
    """(d_latent, n_heads·w) -> (n_heads, d_latent, w): head h's columns."""
    return np.swapaxes(W.reshape(W.shape[0], n_heads, -1), 0, 1)


def _softmax_masked(scores, mask):
    scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    e = np.exp(scores)
    return e / e.sum(axis=-1, keepdims=True)


def _writes(X, p, start=0):
    """What each token writes into the cache: its latent (..., T, d_latent) and its RoPE key (..., T, d_rope)."""
    positions = np.arange(start, start + X.shape[-2], dtype=np.float64)
    return X @ p["W_DKV"], _rotate_pairs(X @ p["W_KR"], positions)


def _queries(X, p, n_heads, start=0):
    """Each head's query parts: for content (..., H, T, d_head) and for positions (..., H, T, d_rope)."""
    positions = np.arange(start, start + X.shape[-2], dtype=np.float64)
    return _heads(X @ p["W_Q"], n_heads), _rotate_pairs(_heads(X @ p["W_QR"], n_heads), positions)


def _latent_lookup(Q_C, Q_R, C, K_R, p, n_heads, scale, mask):
    """The absorbed form: scores against the latents, values read out after the weighted sum."""
    Q_latent = Q_C @ np.swapaxes(_per_head(p["W_UK"], n_heads), -1, -2)      # (..., H, T, d_latent)
    scores = (Q_latent @ np.swapaxes(C, -1, -2)[..., None, :, :]
              + Q_R @ np.swapaxes(K_R, -1, -2)[..., None, :, :]) * scale
    alpha = _softmax_masked(scores, mask)
    read = (alpha @ C[..., None, :, :]) @ _per_head(p["W_UV"], n_heads)      # (..., H, T, d_head)
    return _merge(read) @ p["W_O"]


def _merge(heads):
    """(..., H, T, w) -> (..., T, H·w)."""
    moved = np.swapaxes(heads, -3, -2)
    return moved.reshape(*moved.shape[:-2], -1)


def _expanded(X, p, n_heads, scale):
    T = X.shape[-2]
    C, K_R = _writes(X, p)
    Q_C, Q_R = _queries(X, p, n_heads)
    K_C, V = _heads(C @ p["W_UK"], n_heads), _heads(C @ p["W_UV"], n_heads)
    scores = (Q_C @ np.swapaxes(K_C, -1, -2) + Q_R @ np.swapaxes(K_R, -1, -2)[..., None, :, :]) * scale
    alpha = _softmax_masked(scores, np.tril(np.ones((T, T), dtype=bool)))
    return _merge(alpha @ V) @ p["W_O"]


def _absorbed(X, p, n_heads, scale):
    T = X.shape[-2]
    C, K_R = _writes(X, p)
    Q_C, Q_R = _queries(X, p, n_heads)
    return _latent_lookup(Q_C, Q_R, C, K_R, p, n_heads, scale, np.tril(np.ones((T, T), dtype=bool)))


def mla_attention(X, params, n_heads, *, absorbed=False):
    """Causal multi-head latent attention over ``X (T, d_model)`` (or ``(..., T, d_model)``).

    ``params`` as :func:`init_mla` makes them. Token ``t`` is at position
    ``t`` for RoPE (chapter 13's rotation of column pairs); each head scores
    ``(q_h · k_h + q_rope,h · k_rope) / sqrt(d_head + d_rope)`` against the
    tokens up to its own. With ``absorbed=False`` the keys and values are
    expanded out of the latents; with ``absorbed=True`` each query is moved
    into the latent space and compared with the latents directly. Both give
    the same ``(T, d_model)`` output, up to rounding.

    >>> rng = np.random.default_rng(0)
    >>> params = init_mla(rng, d_model=16, n_heads=2, d_head=4, d_latent=6, d_rope=2)
    >>> X = rng.normal(size=(5, 16))
    >>> out = mla_attention(X, params, n_heads=2)
    >>> out.shape, bool(np.allclose(out, mla_attention(X, params, 2, absorbed=True), rtol=0, atol=1e-12))
    ((5, 16), True)
    """
    check_bool("absorbed", absorbed)
    X, p, (_, d_head, _, d_rope), dtype = _checked_call(X, params, n_heads)
    scale = 1.0 / np.sqrt(d_head + d_rope)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        result = (_absorbed if absorbed else _expanded)(X, p, n_heads, scale)
    return finite_result(result, dtype, "mla_attention's projections or sums would", {"X": X, **p})


def mla_decode(X, params, n_heads):
    """:func:`mla_attention` run as generation does: one token at a time, with a latent cache.

    Step ``t`` writes token ``t``'s latent and RoPE key into the cache
    (``d_latent + d_rope`` numbers per token, whatever the number of heads)
    and reads it in the absorbed form with token ``t``'s query. Returns the
    ``(T, d_model)`` outputs (or ``(..., T, d_model)``), equal to the
    causal whole-sequence form up to rounding.

    >>> rng = np.random.default_rng(0)
    >>> params = init_mla(rng, d_model=16, n_heads=2, d_head=4, d_latent=6, d_rope=2)
    >>> X = rng.normal(size=(5, 16))
    >>> bool(np.allclose(mla_decode(X, params, 2), mla_attention(X, params, 2), rtol=0, atol=1e-12))
    True
    """
    X, p, (_, d_head, d_latent, d_rope), dtype = _checked_call(X, params, n_heads)
    scale = 1.0 / np.sqrt(d_head + d_rope)
    T = X.shape[-2]
    C = np.empty((*X.shape[:-2], T, d_latent), X.dtype)      # the cache: latents ...
    K_R = np.empty((*X.shape[:-2], T, d_rope), X.dtype)      # ... and the shared RoPE keys
    steps = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for t in range(T):
            x = X[..., t : t + 1, :]
            C[..., t : t + 1, :], K_R[..., t : t + 1, :] = _writes(x, p, start=t)
            Q_C, Q_R = _queries(x, p, n_heads, start=t)
            steps.append(_latent_lookup(Q_C, Q_R, C[..., : t + 1, :], K_R[..., : t + 1, :], p, n_heads,
                                        scale, np.ones((1, t + 1), dtype=bool)))
        result = np.concatenate(steps, axis=-2)
    return finite_result(result, dtype, "mla_decode's projections or sums would", {"X": X, **p})
