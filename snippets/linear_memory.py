"""A dictionary of fixed size: linear attention and the delta rule (chapter 9).

Without the softmax, attention's weighted sum ``Σ_s (q · k_s) v_s`` equals
``q M`` with ``M = Σ_s k_sᵀ v_s``: the whole dictionary folds into one
``(d_k, d_v)`` matrix, and writing an entry adds an outer product to it.

Shapes follow the site's notation: queries ``Q (..., T, d_k)``, keys
``K (..., S, d_k)``, values ``V (..., S, d_v)``; leading batch dimensions
broadcast. In causal (self-attention) use the queries, keys and values come
from the same tokens, so ``T = S``: query ``t`` reads the memory after entry
``t`` was written.

- :func:`linear_attention` computes the outputs all at once (the parallel form);
- :func:`linear_attention_recurrent` computes the causal outputs one step at a
  time with a running memory ``M`` (the recurrent form), with the same result;
- :func:`delta_rule` writes entries that overwrite: ``M ← M + β k_sᵀ (v_s − k_s M)``.

Unnormalised and without a feature map: the plainest linear attention, the one
the chapter derives. float32 stays float32 (float16 is computed in float32
and returned as float16). Results that overflow raise ValueError instead of
returning inf or NaN.
"""

from __future__ import annotations

import numbers

import numpy as np

from snippets._checks import as_float_array, check_finite, work_dtype


def _finite(x, name: str) -> np.ndarray:
    """``x`` as a float array; NaN and ±inf are refused with a message naming ``name``."""
    x = as_float_array(x, name)
    check_finite(x, name)
    return x


def _batch(caller: str, **arrays: np.ndarray) -> tuple[int, ...]:
    """The broadcast batch shape of arrays ``(..., n, d)``; a message names every shape."""
    try:
        return np.broadcast_shapes(*(a.shape[:-2] for a in arrays.values()))
    except ValueError:
        shapes = ", ".join(f"{name} {a.shape}" for name, a in arrays.items())
        raise ValueError(f"{caller}: the batch dimensions of {shapes} do not broadcast") from None


def _checked_keys_and_values(K, V, caller: str) -> tuple[np.ndarray, np.ndarray]:
    K, V = _finite(K, "K"), _finite(V, "V")
    if K.ndim < 2 or V.ndim < 2:
        raise ValueError(
            f"{caller}: K and V need at least 2 dimensions, (..., S, d_k) and (..., S, d_v); "
            f"got K {K.shape} and V {V.shape}"
        )
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(
            f"{caller}: K and V must have the same number of entries S: got K {K.shape} "
            f"(S = {K.shape[-2]}) and V {V.shape} (S = {V.shape[-2]})"
        )
    return K, V


def _checked_inputs(Q, K, V, caller: str, self_attention: bool):
    """Q, K, V as finite float arrays whose shapes fit; T = S if ``self_attention``."""
    Q = _finite(Q, "Q")
    K, V = _checked_keys_and_values(K, V, caller)
    if Q.ndim < 2:
        raise ValueError(f"{caller}: Q needs at least 2 dimensions, (..., T, d_k); got Q {Q.shape}")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(
            f"{caller}: Q and K must end in the same d_k: got Q {Q.shape} (d_k = {Q.shape[-1]}) "
            f"and K {K.shape} (d_k = {K.shape[-1]})"
        )
    if self_attention and Q.shape[-2] != K.shape[-2]:
        raise ValueError(
            f"{caller}: causal attention reads the memory after each write, so it needs as many "
            f"queries as keys (T = S): got Q {Q.shape} (T = {Q.shape[-2]}) and K {K.shape} "
            f"(S = {K.shape[-2]}); use causal=False for T != S"
        )
    return Q, K, V, _batch(caller, Q=Q, K=K, V=V)


def _no_overflow(result: np.ndarray, dtype, caller: str, **inputs: np.ndarray) -> np.ndarray:
    """``result`` in ``dtype``, or a ValueError naming the inputs if it does not fit (never inf or NaN)."""
    with np.errstate(all="ignore"):
        result = result.astype(dtype, copy=False)
    if not np.isfinite(result).all():
        sizes = ", ".join(
            f"{name} (largest |entry| {float(np.abs(a).max()) if a.size else 0.0:.3g})" for name, a in inputs.items()
        )
        raise ValueError(
            f"{caller}: the result overflowed {np.dtype(dtype).name}: {sizes} are too large; "
            f"expected results within ±{np.finfo(dtype).max:.3g}"
        )
    return result


# --8<-- [start:linear_attention]
CHUNK = 64  # tokens per chunk of the causal form


def linear_attention(Q, K, V, causal: bool = True) -> np.ndarray:
    """Attention without the softmax: ``out_t = Σ_s (q_t · k_s) v_s``.

    Returns ``(..., T, d_v)``. With ``causal=True`` (the default) query ``t``
    sees the entries ``s ≤ t`` only, which needs ``T = S``. It is computed a
    chunk of ``CHUNK`` tokens at a time: inside a chunk the scores ``Q Kᵀ``
    are masked and multiplied by ``V`` (the parallel form), and the chunks
    before it are read from their folded memory ``M`` (the recurrent form),
    so it holds ``CHUNK × CHUNK`` scores at a time, never ``T × T``. With
    ``causal=False`` every query sees every entry, and the result is
    ``Q (Kᵀ V)``: one read of the folded ``(d_k, d_v)`` memory.

    >>> Q = K = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    >>> V = [[1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [100.0, 200.0, 300.0]]
    >>> linear_attention(Q, K, V).round(3).tolist()
    [[1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [211.0, 422.0, 633.0]]
    """
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"linear_attention: causal must be True or False, got {causal!r}")
    Q, K, V, batch = _checked_inputs(Q, K, V, "linear_attention", self_attention=bool(causal))
    dtype = np.result_type(Q, K, V)
    Q, K, V = (a.astype(work_dtype(dtype), copy=False) for a in (Q, K, V))  # float16 sums overflow
    with np.errstate(all="ignore"):  # overflow is reported below; underflow to 0 is fine
        out = _causal_in_chunks(Q, K, V, batch) if causal else Q @ (np.swapaxes(K, -1, -2) @ V)
    return _no_overflow(out, dtype, "linear_attention", Q=Q, K=K, V=V)


def _causal_in_chunks(Q, K, V, batch) -> np.ndarray:
    """Causal linear attention, ``CHUNK`` tokens at a time, with the memory ``M`` of the chunks before."""
    T = Q.shape[-2]
    out = np.empty((*batch, T, V.shape[-1]), dtype=Q.dtype)
    M = np.zeros((*batch, K.shape[-1], V.shape[-1]), dtype=Q.dtype)  # Σ k_sᵀ v_s of the chunks so far
    future = ~np.tril(np.ones((CHUNK, CHUNK), dtype=bool))
    for start in range(0, T, CHUNK):
        rows = slice(start, start + CHUNK)
        q, k, v = Q[..., rows, :], K[..., rows, :], V[..., rows, :]
        n = q.shape[-2]
        scores = q @ np.swapaxes(k, -1, -2)             # (..., n, n): this chunk's entries
        np.copyto(scores, 0, where=future[:n, :n])      # s > t is not written yet
        out[..., rows, :] = q @ M + scores @ v          # the chunks before, then this one
        M += np.swapaxes(k, -1, -2) @ v                 # write the chunk
    return out
# --8<-- [end:linear_attention]


# --8<-- [start:linear_attention_recurrent]
def linear_attention_recurrent(Q, K, V) -> np.ndarray:
    """Causal linear attention one step at a time, with a running memory ``M``.

    At step ``t`` the entry ``(k_t, v_t)`` is written, ``M ← M + k_tᵀ v_t``,
    then the query reads it, ``out_t = q_t M``. ``M`` is ``(..., d_k, d_v)``
    whatever the length ``T``. Returns ``(..., T, d_v)``, equal to
    ``linear_attention(Q, K, V, causal=True)``; needs ``T = S``.

    >>> Q = K = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    >>> V = [[1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [100.0, 200.0, 300.0]]
    >>> linear_attention_recurrent(Q, K, V).round(3).tolist()
    [[1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [211.0, 422.0, 633.0]]
    """
    Q, K, V, batch = _checked_inputs(Q, K, V, "linear_attention_recurrent", self_attention=True)
    dtype = np.result_type(Q, K, V)
    work = work_dtype(dtype)
    M = np.zeros((*batch, K.shape[-1], V.shape[-1]), dtype=work)
    out = np.zeros((*batch, Q.shape[-2], V.shape[-1]), dtype=work)
    with np.errstate(all="ignore"):  # overflow is reported below; underflow to 0 is fine
        for t in range(Q.shape[-2]):  # the loop is the algorithm: one write and one read per step
            M = M + K[..., t, :, None] * V[..., t, None, :]
            out[..., t, :] = (Q[..., t, None, :] @ M)[..., 0, :]
    return _no_overflow(out, dtype, "linear_attention_recurrent", Q=Q, K=K, V=V)
# --8<-- [end:linear_attention_recurrent]


# --8<-- [start:delta_rule]
def delta_rule(K, V, beta: float = 1.0) -> np.ndarray:
    """Write the entries in order with the delta rule; return the memory ``M``.

    Starting from ``M = 0``, each entry reads what the memory holds for its
    key, ``k_s M``, and moves it a fraction ``beta`` of the way towards
    ``v_s``: ``M ← M + β k_sᵀ (v_s − k_s M)``. With a key of length 1 and
    ``beta = 1`` the key then reads exactly ``v_s``: a second write to the
    same key overwrites the first instead of adding to it. ``K`` is
    ``(..., S, d_k)``, ``V`` is ``(..., S, d_v)``; returns ``(..., d_k, d_v)``.

    >>> K = [[1.0, 0.0], [1.0, 0.0]]          # the same unit key, written twice
    >>> V = [[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]]
    >>> (K[0] @ delta_rule(K, V, beta=1.0)).round(3).tolist()
    [5.0, 5.0, 5.0]
    """
    if isinstance(beta, (bool, np.bool_)) or not isinstance(beta, numbers.Real):
        raise TypeError(f"delta_rule: beta must be a real number between 0 and 1, got {beta!r}")
    if not 0 <= beta <= 1:
        raise ValueError(f"delta_rule: beta must be between 0 and 1 (inclusive), got {beta!r}")
    K, V = _checked_keys_and_values(K, V, "delta_rule")
    batch = _batch("delta_rule", K=K, V=V)
    dtype = np.result_type(K, V)
    work = work_dtype(dtype)
    M = np.zeros((*batch, K.shape[-1], V.shape[-1]), dtype=work)
    step = np.asarray(beta, dtype=work)
    with np.errstate(all="ignore"):  # overflow is reported below; underflow to 0 is fine
        for s in range(K.shape[-2]):  # the loop is the algorithm: each write sees the ones before
            k, v = K[..., s, :], V[..., s, :]
            stored = (k[..., None, :] @ M)[..., 0, :]
            M = M + step * k[..., :, None] * (v - stored)[..., None, :]
    return _no_overflow(M, dtype, "delta_rule", K=K, V=V)
# --8<-- [end:delta_rule]
