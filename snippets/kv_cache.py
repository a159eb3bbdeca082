"""Writing to the dictionary: the KV cache and shared key tables (chapter 8).

A decoder that generates text one token at a time writes one key and one
value per step into a cache and reads them back with every later query.

- :func:`grouped_query_attention` lets ``H`` query heads share ``G`` key and
  value tables, ``H`` a multiple of ``G``: consecutive query heads read the
  same table, head ``h`` reads table ``h // (H // G)``. ``G = H`` is
  multi-head attention, ``G = 1`` multi-query attention.
- :func:`decode_with_cache` runs the multi-head self-attention layer of
  :mod:`snippets.multihead` one position at a time with a cache, optionally
  evicting all but the last ``window`` entries.

Shapes follow the site's notation: ``Q (..., H, T, d_k)``,
``K (..., G, S, d_k)``, ``V (..., G, S, d_v)``; a boolean ``mask`` is True
where a query may look at a key and broadcasts to ``(..., H, T, S)``.
"""

from __future__ import annotations

import numpy as np

# The input checks of chapters 3 and 6, reused so that these functions accept
# and refuse what attention and the multi-head layer do, with the same messages.
from snippets._checks import as_float_array, as_mask, check_finite, check_positive_int
from snippets.attention import scaled_dot_product_attention
from snippets.multihead import _check_params, merge_heads, split_heads


def _check_grouped_shapes(Q, K, V, mask) -> tuple[int, ...]:
    """Raise ValueError unless Q, K, V and mask fit; return the weights' shape (..., H, T, S)."""
    if Q.ndim < 3 or K.ndim < 3 or V.ndim < 3:
        raise ValueError(
            "Q, K and V need at least 3 dimensions, (..., H, T, d_k), (..., G, S, d_k) and "
            f"(..., G, S, d_v); got Q {Q.shape}, K {K.shape}, V {V.shape}"
        )
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(
            f"Q and K must end in the same d_k: got Q {Q.shape} (d_k = {Q.shape[-1]}) "
            f"and K {K.shape} (d_k = {K.shape[-1]})"
        )
    if K.shape[-3:-1] != V.shape[-3:-1]:
        raise ValueError(
            f"K and V must hold the same tables G and keys S, (..., G, S, d): got K {K.shape} "
            f"(G, S = {K.shape[-3:-1]}) and V {V.shape} (G, S = {V.shape[-3:-1]})"
        )
    H, G = Q.shape[-3], K.shape[-3]
    if G == 0 or H % G:
        raise ValueError(
            f"the number of query heads H must be a multiple of the number of key/value tables G: "
            f"got Q {Q.shape} (H = {H}) and K {K.shape} (G = {G})"
        )
    try:
        batch = np.broadcast_shapes(Q.shape[:-3], K.shape[:-3], V.shape[:-3])
    except ValueError:
        raise ValueError(
            f"the batch dimensions of Q {Q.shape}, K {K.shape} and V {V.shape} do not broadcast"
        ) from None
    weights_shape = (*batch, H, Q.shape[-2], K.shape[-2])
    if mask is not None:
        try:
            np.broadcast_shapes(mask.shape, weights_shape)
        except ValueError:
            raise ValueError(
                f"mask of shape {mask.shape} does not broadcast to the weights' shape "
                f"(..., H, T, S) = {weights_shape}"
            ) from None
    return weights_shape


# --8<-- [start:grouped_query_attention]
def grouped_query_attention(Q, K, V, mask=None):
    """H query heads reading G shared key/value tables, consecutive heads per table.

    ``Q (..., H, T, d_k)``, ``K (..., G, S, d_k)``, ``V (..., G, S, d_v)``
    with ``H`` a multiple of ``G``. Head ``h`` looks up in table
    ``h // (H // G)``: with H = 4 and G = 2, heads 0, 1 read table 0 and heads
    2, 3 read table 1. Returns ``(output, weights)`` of shapes
    ``(..., H, T, d_v)`` and ``(..., H, T, S)``, as
    ``scaled_dot_product_attention`` would with each table repeated for its
    heads, but the tables are never copied. As there, the weights' batch
    dimensions are those of Q, K and the mask (the values play no part).

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> Q = rng.normal(size=(4, 3, 8))      # H = 4 heads, T = 3 queries
    >>> K = rng.normal(size=(2, 5, 8))      # G = 2 tables, S = 5 keys
    >>> V = rng.normal(size=(2, 5, 6))      # d_v = 6
    >>> output, weights = grouped_query_attention(Q, K, V)
    >>> output.shape, weights.shape
    ((4, 3, 6), (4, 3, 5))
    """
    Q, K, V = as_float_array(Q, "Q"), as_float_array(K, "K"), as_float_array(V, "V")
    mask = as_mask(mask)
    *_, H, T, S = _check_grouped_shapes(Q, K, V, mask)
    G = K.shape[-3]
    # Group the query heads, (..., G, H/G, T, d_k), and give every table an axis
    # of size 1, (..., G, 1, S, d): broadcasting hands table g to its H/G heads.
    # Attention checks the values (NaN, infinities, overflow) and names Q, K, V.
    grouped_Q = Q.reshape(*Q.shape[:-3], G, H // G, T, Q.shape[-1])
    if mask is not None and mask.ndim >= 3:  # the mask has a head axis: group it too
        mask = np.broadcast_to(mask, np.broadcast_shapes(mask.shape, (H, T, S)))
        mask = mask.reshape(*mask.shape[:-3], G, H // G, T, S)
    output, weights = scaled_dot_product_attention(
        grouped_Q, K[..., :, None, :, :], V[..., :, None, :, :], mask=mask
    )
    return output.reshape(*output.shape[:-4], H, T, V.shape[-1]), weights.reshape(*weights.shape[:-4], H, T, S)
# --8<-- [end:grouped_query_attention]


def _overflow(x, params, dtype) -> ValueError:
    """The error for finite inputs whose projections or scores do not fit in ``dtype``."""
    largest = ", ".join(
        f"{name} (largest |entry| {np.abs(a).max(initial=0):.3g})" for name, a in {"x": x, **params}.items()
    )
    return ValueError(
        f"decode_with_cache: the projections or scores overflow {np.dtype(dtype).name}: {largest} "
        f"are too large; expected results within ±{np.finfo(dtype).max:.3g}"
    )


# --8<-- [start:decode_with_cache]
def decode_with_cache(x, params, n_heads, window=None):
    """Causal multi-head self attention computed one position at a time with a KV cache.

    ``x (T, d_model)`` or ``(B, T, d_model)`` are the states of the tokens in
    the order they arrive; ``params`` are those of
    :func:`snippets.multihead.init_params` with ``d_kv = d_model``. At step
    ``t`` the token's key and value are appended to the cache, and its query
    (used once, never stored) reads the cache. Returns the output
    ``(T, d_model)`` or ``(B, T, d_model)``, equal to
    ``multi_head_attention(x, x, params, n_heads, mask=causal_mask(T))[0]``.
    With ``window = W`` only the last W entries are read (a sliding window:
    older entries are evicted).

    >>> import numpy as np
    >>> from snippets.multihead import causal_mask, init_params, multi_head_attention
    >>> rng = np.random.default_rng(0)
    >>> params = init_params(8, 2, rng)
    >>> x = rng.normal(size=(5, 8))
    >>> cached = decode_with_cache(x, params, n_heads=2)
    >>> recomputed, _ = multi_head_attention(x, x, params, 2, mask=causal_mask(5))
    >>> cached.shape, bool(np.allclose(cached, recomputed))
    ((5, 8), True)
    """
    p, d_model, d_kv = _check_params(params, n_heads)   # float arrays, finite
    x = as_float_array(x, "x")
    check_finite(x, "x")
    if d_kv != d_model:
        raise ValueError(
            "decode_with_cache is self attention: keys come from x like queries, so "
            f"W_K must be (d_model, d_model) = {(d_model, d_model)}, got {p['W_K'].shape}"
        )
    if x.ndim not in (2, 3) or x.shape[-1] != d_model:
        raise ValueError(
            f"x must have shape (T, d_model) or (B, T, d_model) with d_model = {d_model} "
            f"(from W_Q {p['W_Q'].shape}), got {x.shape}"
        )
    if window is not None:
        check_positive_int("window", window)
    dtype = np.result_type(x, *p.values())
    work = np.result_type(dtype, np.float32)  # float16 sums overflow at 65504: compute in float32
    x = x.astype(work, copy=False)
    W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O = (
        p[name].astype(work, copy=False) for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
    )
    *batch, T, _ = x.shape
    K_cache = np.zeros((*batch, n_heads, T, d_model // n_heads), work)  # (..., H, T, d_head)
    V_cache = np.zeros_like(K_cache)
    output = np.zeros((*batch, T, d_model), work)
    for t in range(T):  # the loop is the algorithm: a token arrives, is written, asks
        x_t = x[..., t : t + 1, :]                                          # (..., 1, d_model)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected, not warned about
            k_t, v_t, q_t = x_t @ W_K + b_K, x_t @ W_V + b_V, x_t @ W_Q + b_Q
        if not (np.isfinite(k_t).all() and np.isfinite(v_t).all() and np.isfinite(q_t).all()):
            raise _overflow(x, p, work)
        K_cache[..., t : t + 1, :] = split_heads(k_t, n_heads)             # write
        V_cache[..., t : t + 1, :] = split_heads(v_t, n_heads)
        first = 0 if window is None else max(0, t + 1 - window)
        try:
            heads, _ = scaled_dot_product_attention(                        # (..., H, 1, d_head)
                split_heads(q_t, n_heads), K_cache[..., first : t + 1, :], V_cache[..., first : t + 1, :]
            )
        except ValueError:  # finite projections whose scores overflow
            raise _overflow(x, p, work) from None
        with np.errstate(over="ignore", invalid="ignore"):
            output[..., t : t + 1, :] = merge_heads(heads) @ W_O + b_O
    if not np.isfinite(output).all():
        raise _overflow(x, p, work)
    return output.astype(dtype, copy=False)
# --8<-- [end:decode_with_cache]
