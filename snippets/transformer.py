"""The transformer block and a whole tiny GPT, in NumPy (chapter 13).

A transformer keeps one vector of ``d_model`` numbers per token, the residual
stream, and passes it through a stack of blocks. A pre-norm block reads the
stream twice and writes back by addition::

    x = x + attention(layer_norm_1(x))       # a lookup among the tokens
    x = x + feed_forward(layer_norm_2(x))    # a lookup in the weights

Attention is the multi-head layer of :mod:`snippets.multihead` (parameters
``W_Q … b_O``); the feed-forward layer is ``gelu(x W_1 + b_1) W_2 + b_2``. A
GPT puts token and position embeddings (``W_E``, ``W_pos``) in front of the
blocks, a final layer norm after them, and reads its logits with the same
token table, transposed (weight tying): ``logits = x W_Eᵀ``.

Shapes: token ids ``(T,)`` or ``(B, T)``; the stream ``(..., T, d_model)``;
logits ``(..., T, vocab_size)``. Float32 parameters give float32 results.
tests/test_transformer.py checks the block against PyTorch's
``TransformerEncoderLayer(norm_first=True)`` with a tanh GELU.

``_forward`` is the library's one GPT forward pass: :func:`gpt_forward`,
:func:`transformer_block` and :func:`generate` run it, and chapter 14's
training (snippets/training.py) and head scores (snippets/heads.py) run it
keeping every layer's values, which the backward pass and the scores read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from snippets._checks import (
    all_finite,
    as_float_array,
    as_mask,
    check_eps,
    check_finite,
    check_fits,
    check_head_sizes,
    check_keys,
    check_positive_int,
    check_rng,
    describe,
    finite_result,
    overflow_error,
    real_number,
    work_dtype,
)
from snippets.attention import _masked_, _softmax_rows_, softmax
from snippets.multihead import PARAMETER_NAMES, _check_params, _split_heads, count_parameters, init_params

FEED_FORWARD_NAMES = ("W_1", "b_1", "W_2", "b_2")
NORM_NAMES = ("ln_1_weight", "ln_1_bias", "ln_2_weight", "ln_2_bias")
BLOCK_NAMES = PARAMETER_NAMES + FEED_FORWARD_NAMES + NORM_NAMES
GPT_NAMES = ("W_E", "W_pos", "blocks", "ln_f_weight", "ln_f_bias")
LAYER_NORM_EPS = 1e-5   # GPT-2's, and PyTorch's default


# --- Layer norm, RMSNorm and GELU ---------------------------------------------


NORM_CHUNK = 2**20   # bytes of x a norm works on at a time (see _normalise)
NORM_TILE = 8192     # numbers NumPy runs in one loop (its buffer size; see _normalise)


def _normalise_rows(rows, eps, centre, out, spread, stat) -> bool:
    """Normalise ``rows (n, d)`` into ``out``; False if a row's sums are not finite.

    ``spread (n, d)`` and ``stat (n, 1)`` are scratch space. A row's mean
    and scale are copied across its row of ``spread`` before they meet
    ``rows``: ``rows - mean[:, None]`` gives the same bits, but NumPy's
    arithmetic on a broadcast column takes about twice as long as on two
    (n, d) arrays, and its broadcasting copy does not.
    """
    d = rows.shape[-1]
    if centre:
        np.einsum("ri->r", rows, out=stat[:, 0])
        np.copyto(spread, np.divide(stat, d, out=stat))   # the means
        rows = np.subtract(rows, spread, out=out)
    np.einsum("ri,ri->r", rows, rows, out=stat[:, 0])
    stat /= d                                            # the mean squares
    if not np.isfinite(stat).all():
        return False
    stat += eps
    np.sqrt(stat, out=stat)
    np.copyto(spread, np.divide(1, stat, out=stat))
    np.multiply(rows, spread, out=out)
    return True


def _normalise(x, eps, centre: bool, weight, bias=None, name="x", keep=False):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis.

    Without ``centre``, ``x / sqrt(mean(x²) + eps) * weight`` (no bias).
    With ``keep``, returns ``(out, normed, inv_std)``: also the rows before
    ``weight`` and ``bias``, and ``1 / sqrt(var + eps)`` of every row
    ``(..., 1)``, which the backward pass reads.
    ``weight`` and ``bias`` have x's dtype. Every step runs on a chunk of
    NORM_CHUNK bytes of rows before the next chunk, so that the chunk stays
    in the CPU's cache. einsum sums each row in one pass, with no temporary
    (NumPy's own loop, not BLAS: the same bits under every BLAS kernel).

    A row whose sums are not finite holds NaN or inf (the error names
    ``name``) or has squares that overflow. Then each row of its chunk is
    divided by the power of two that brings its largest entry below 1, and
    eps by its square: exact in floating point, so every bit of the result
    is the one an unbounded exponent would give. eps is never less than the
    dtype's smallest normal number: ``1 / sqrt(mean_square + eps)`` stays
    finite, and a constant row becomes 0, not 0/0.
    """
    tiny = np.finfo(x.dtype).tiny
    eps = max(eps, tiny)
    d = x.shape[-1]
    out = np.empty(x.shape, x.dtype)
    rows, out_rows = x.reshape(-1, d), out.reshape(-1, d)
    # weight and bias repeated k times: k rows of a chunk, seen as one row
    # of k*d numbers, meet them in one loop instead of k (d may be short)
    k = max(1, min(len(rows), NORM_TILE // d))
    step = max(1, min(len(rows), NORM_CHUNK // (d * x.itemsize) // k * k))
    weight = np.concatenate([weight] * k)   # as np.tile, at half its cost on small x
    bias = None if bias is None else np.concatenate([bias] * k)
    spread, stat = np.empty((step, d), x.dtype), np.empty((step, 1), x.dtype)
    if keep:
        normed, inv_std = np.empty(x.shape, x.dtype), np.empty((*x.shape[:-1], 1), x.dtype)
        normed_rows, inv_std_rows = normed.reshape(-1, d), inv_std.reshape(-1, 1)
    for start in range(0, len(rows), step):
        part = rows[start:start + step]
        into = out_rows[start:start + step]
        scratch = spread[:len(into)], stat[:len(into)]
        shift = 0
        if not _normalise_rows(part, eps, centre, into, *scratch):
            check_finite(part, name)
            largest = np.abs(part).max(axis=-1, keepdims=True)
            shift = np.maximum(np.frexp(largest)[1], 0)
            eps_rows = np.ldexp(np.asarray(eps, x.dtype), -2 * shift)
            part = np.ldexp(part, -shift)
            _normalise_rows(part, np.maximum(eps_rows, tiny), centre, into, *scratch)
        if keep:   # 1/std of the rows as given: the scaled rows' times 2**-shift
            normed_rows[start:start + step] = into
            np.ldexp(scratch[1], -shift, out=inv_std_rows[start:start + step])
        wide = math.gcd(len(into), k) * d   # k rows at a time (fewer if k does not divide them)
        into = into.reshape(-1, wide)
        into *= weight[:wide]
        if bias is not None:
            into += bias[:wide]
    return (out, normed, inv_std) if keep else out


def _layer_norm(x, weight, bias, keep=False):
    """Layer norm, and with ``keep`` what its backward reads, ``(normed, inv_std, weight)`` (else None)."""
    if not keep:
        return _normalise(x, LAYER_NORM_EPS, True, weight, bias), None
    out, normed, inv_std = _normalise(x, LAYER_NORM_EPS, True, weight, bias, keep=True)
    return out, (normed, inv_std, weight)


def _norm_result(result, dtype, what, a):
    """``result`` as ``dtype``, looked at for overflow only if it can overflow.

    A normalised entry lies within ±√d (its square is at most its row's sum
    of squares, d times the mean square; eps at least the smallest normal
    number keeps the squares' underflow from mattering), so the result lies
    within ±(√d·max|weight| + max|bias|). When that fits in ``dtype`` with a
    factor of 2 to spare for rounding, no entry needs looking at.
    """
    bound = math.sqrt(a["x"].shape[-1]) * float(np.abs(a["weight"]).max())
    if "bias" in a:
        bound += float(np.abs(a["bias"]).max())
    if bound <= np.finfo(dtype).max / 2:
        return result.astype(dtype, copy=False)
    return finite_result(result, dtype, what, a)


# A Python float: NumPy multiplies it in the array's own precision (a NumPy float64
# would turn float32 input into float64 from the first block's feed-forward layer on).
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _gelu(x, keep=False):
    """GELU of the float array ``x``, and with ``keep`` the tanh inside it, which the backward reads (else None)."""
    # x * x * x, not x**3: NumPy computes a cube through pow(), about 100 times slower
    # (it was most of gpt_forward's time). 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))) with
    # the operations of the formula in its order, in place: two temporaries instead of eight.
    t = np.multiply(0.044715, x, out=np.empty_like(x))   # an array, even for one number
    t *= x
    t *= x
    t += x
    t *= SQRT_2_OVER_PI
    np.tanh(t, out=t)
    if keep:
        out = t + 1
        out *= 0.5 * x
        return out, t
    t += 1
    t *= 0.5 * x
    return t, None


def _norm_arguments(x, named):
    """x and the vectors in ``named`` as float arrays of the dtype to compute in; and the result's dtype."""
    x = as_float_array(x, "x")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"x must have shape (..., d) with d >= 1, got {describe(x)}")
    arrays = {"x": x}
    for name, value in named.items():
        value = as_float_array(value, name)
        if value.shape != x.shape[-1:]:
            raise ValueError(
                f"{name} must have shape (d,) = ({x.shape[-1]},), the last axis of x {x.shape}; "
                f"got {value.shape}"
            )
        arrays[name] = value
    for name in named:   # not x: its sums find NaN or inf in it (_normalise)
        check_finite(arrays[name], name)
    dtype = np.result_type(*arrays.values())
    work = work_dtype(dtype)
    return {name: value.astype(work, copy=False) for name, value in arrays.items()}, dtype


def layer_norm(x, weight, bias, eps=LAYER_NORM_EPS):
    """Give every row mean 0 and variance 1, then scale by ``weight`` and shift by ``bias``.

    ``x (..., d)``; ``weight`` and ``bias`` are ``(d,)``. Each row becomes
    ``(x - mean) / sqrt(variance + eps) * weight + bias``: whatever the size
    of the numbers in a row, what the next layer reads has the same scale.

    >>> layer_norm([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]], np.ones(3), np.zeros(3)).round(3).tolist()
    [[-1.225, 0.0, 1.225], [-1.225, 0.0, 1.225]]
    """
    a, dtype = _norm_arguments(x, {"weight": weight, "bias": bias})
    eps = check_eps(eps)
    with np.errstate(over="ignore", invalid="ignore"):
        result = _normalise(a["x"], eps, True, a["weight"], a["bias"])
    return _norm_result(result, dtype, "layer_norm's output would", a)


def rms_norm(x, weight, eps=1e-6):
    """Layer norm without the centring and the bias: ``x / sqrt(mean(x²) + eps) * weight``.

    ``x (..., d)``, ``weight (d,)``. Used instead of layer norm by Llama and
    most recent models: one pass fewer, and no bias to learn.

    >>> rms_norm([[3.0, 4.0]], np.ones(2)).round(4).tolist()
    [[0.8485, 1.1314]]
    """
    a, dtype = _norm_arguments(x, {"weight": weight})
    eps = check_eps(eps)
    with np.errstate(over="ignore", invalid="ignore"):
        result = _normalise(a["x"], eps, False, a["weight"])
    return _norm_result(result, dtype, "rms_norm's output would", a)


def gelu(x):
    """GELU in GPT-2's tanh form: ``0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))``.

    A smooth ReLU: close to ``x`` for large positive ``x``, close to 0 for
    large negative ``x``, and slightly negative in between.

    >>> gelu([-3.0, -0.5, 0.0, 0.5, 3.0]).round(4).tolist()
    [-0.0036, -0.1543, 0.0, 0.3457, 2.9964]
    """
    x = as_float_array(x, "x")
    check_finite(x, "x")
    with np.errstate(over="ignore", invalid="ignore"):   # x³ may overflow: tanh(±inf) is ±1
        result, _ = _gelu(x.astype(work_dtype(x.dtype), copy=False))
    return finite_result(result, x.dtype, "gelu's output would", {"x": x})


# --- One block ------------------------------------------------------------------


def init_block(d_model, n_heads, d_ff, rng):
    """Random parameters of one pre-norm block, as a dict of arrays.

    The attention parameters of :func:`snippets.multihead.init_params`
    (``W_Q … b_O``, self attention), the feed-forward layer ``W_1
    (d_model, d_ff)``, ``b_1 (d_ff,)``, ``W_2 (d_ff, d_model)``, ``b_2
    (d_model,)``, and the two layer norms' ``ln_1_weight``, ``ln_1_bias``,
    ``ln_2_weight``, ``ln_2_bias``, all ``(d_model,)``. Weights have
    entries of size ``1/sqrt(fan_in)``; biases are small, and layer-norm
    weights near 1, but none is exactly 0 or 1, so that a parameter a
    program forgets to use changes its result.

    >>> params = init_block(8, 2, 32, np.random.default_rng(0))
    >>> {name: params[name].shape for name in ("W_Q", "W_1", "b_1", "W_2", "ln_2_weight")}
    {'W_Q': (8, 8), 'W_1': (8, 32), 'b_1': (32,), 'W_2': (32, 8), 'ln_2_weight': (8,)}
    """
    check_positive_int("d_ff", d_ff)
    params = init_params(d_model, n_heads, rng)   # checks d_model, n_heads and rng
    check_fits("W_1", (d_model, d_ff), np.float64, d_model=d_model, d_ff=d_ff)
    params["W_1"] = rng.normal(0.0, d_model**-0.5, size=(d_model, d_ff))
    params["b_1"] = rng.normal(0.0, 0.1, size=d_ff)
    params["W_2"] = rng.normal(0.0, d_ff**-0.5, size=(d_ff, d_model))
    params["b_2"] = rng.normal(0.0, 0.1, size=d_model)
    for norm in ("ln_1", "ln_2"):
        params[f"{norm}_weight"] = 1 + rng.normal(0.0, 0.1, size=d_model)
        params[f"{norm}_bias"] = rng.normal(0.0, 0.1, size=d_model)
    return params


def _check_block(params, n_heads, where: str = ""):
    """A block's parameters as finite float arrays, and its d_model; ``where`` prefixes the messages."""
    check_keys(params, BLOCK_NAMES, "init_block", f"{where}params")
    try:
        p, d_model, d_kv = _check_params(params, n_heads)   # the attention part, as snippets.multihead checks it
    except (TypeError, ValueError) as error:
        raise type(error)(f"{where}{error}") from None
    if d_kv != d_model:
        raise ValueError(f"{where}W_K has shape {p['W_K'].shape}: a block attends to itself, so it must be "
                         f"(d_model, d_model) = {(d_model, d_model)}")
    for name in FEED_FORWARD_NAMES + NORM_NAMES:
        p[name] = as_float_array(params[name], f"{where}{name}")
    W_1 = p["W_1"]
    if W_1.ndim != 2 or W_1.shape[0] != d_model or W_1.shape[1] == 0:
        raise ValueError(f"{where}W_1 must have shape (d_model, d_ff) with d_model = {d_model} and d_ff >= 1, "
                         f"got {W_1.shape}")
    d_ff = W_1.shape[1]
    expected = {"b_1": (d_ff,), "W_2": (d_ff, d_model)} | dict.fromkeys(("b_2",) + NORM_NAMES, (d_model,))
    for name, shape in expected.items():
        if p[name].shape != shape:
            raise ValueError(f"{where}{name} has shape {p[name].shape}, expected {shape} "
                             f"(d_model = {d_model}, d_ff = {d_ff} from W_1 {W_1.shape})")
    for name in FEED_FORWARD_NAMES + NORM_NAMES:
        check_finite(p[name], f"{where}{name}")
    return p, d_model


def _linear(x, W, b):
    """``x @ W + b``, the bias added in place."""
    out = x @ W
    out += b
    return out


def _merged_matmul(a, b):
    """``a (..., H, T, S) @ b (..., H, S, d_head)``, the heads merged: ``(..., T, H·d_head)``.

    Each head's product is written straight into its columns, the inverse of
    :func:`~snippets.multihead._split_heads` without a copy.
    """
    *batch, H, T, _ = np.broadcast_shapes(a.shape[:-1] + (1,), b.shape[:-2] + (1, 1))
    out = np.empty((*batch, T, H, b.shape[-1]), dtype=np.result_type(a, b))
    np.matmul(a, b, out=np.swapaxes(out, -3, -2))
    return out.reshape(*batch, T, H * b.shape[-1])


def _attention(x, p, n_heads, mask, cache=None, start=0):
    """Multi-head self-attention of the normalised rows ``x (..., T, d_model)``, and what its backward reads.

    ``mask`` (True = may look, or None) broadcasts to the weights ``(..., H,
    T, S)``. With a ``cache`` ``(K, V)``, each ``(B, H, max, d_head)``, the
    rows' keys and values are written at positions ``start`` on, and the
    queries read every position written so far (generating). Returns the
    output and ``(x, Q, K, V, weights, heads, scale)``; raises ValueError if a
    row of scores overflowed.
    """
    Q, K, V = (_split_heads(_linear(x, p[f"W_{n}"], p[f"b_{n}"]), n_heads) for n in "QKV")
    if cache is not None:
        end = start + x.shape[-2]
        cache[0][:, :, start:end], cache[1][:, :, start:end] = K, V
        K, V = cache[0][:, :, :end], cache[1][:, :, :end]
    scale = 1.0 / math.sqrt(Q.shape[-1])
    weights = _masked_((Q * Q.dtype.type(scale)) @ np.swapaxes(K, -1, -2), mask)
    if not _softmax_rows_(weights, mask):
        raise ValueError("the scores overflow")
    heads = _merged_matmul(weights, V)
    return _linear(heads, p["W_O"], p["b_O"]), (x, Q, K, V, weights, heads, scale)


def _block(x, p, n_heads, mask, keep=False, cache=None, start=0):
    """One pre-norm block on the stream ``x (..., T, d_model)``, and with ``keep`` the values its backward reads.

    The values: ``(ln_1, attention, ln_2, normed, z, hidden, tanh)``, LN₁'s
    and LN₂'s, attention's (:func:`_attention`), LN₂'s output, ``z = normed
    W_1 + b_1``, ``hidden = gelu(z)`` and GELU's tanh.
    """
    h, ln_1 = _layer_norm(x, p["ln_1_weight"], p["ln_1_bias"], keep)
    attended, attention = _attention(h, p, n_heads, mask, cache, start)
    attended += x                                        # x + attention(LN₁(x)), in place
    x = attended
    normed, ln_2 = _layer_norm(x, p["ln_2_weight"], p["ln_2_bias"], keep)
    z = _linear(normed, p["W_1"], p["b_1"])
    hidden, tanh = _gelu(z, keep)
    out = hidden @ p["W_2"]                              # x + FFN(LN₂(x)), in place
    out += x
    out += p["b_2"]
    return out, ((ln_1, attention, ln_2, normed, z, hidden, tanh) if keep else None)


def transformer_block(x, params, n_heads, mask=None):
    """One pre-norm block: ``x + attention(LN₁(x))``, then ``+ FFN(LN₂(x))``.

    ``x (T, d_model)`` or ``(B, T, d_model)`` (any batch dimensions);
    ``params`` as :func:`init_block` makes them; ``mask`` as in
    :func:`snippets.multihead.multi_head_attention`, True where a query
    may look (``causal_mask(T)`` for a decoder). Returns the new stream,
    the same shape as ``x``.

    >>> from snippets.multihead import causal_mask
    >>> rng = np.random.default_rng(0)
    >>> params = init_block(d_model=8, n_heads=2, d_ff=32, rng=rng)
    >>> x = rng.normal(size=(5, 8))                  # T = 5 tokens
    >>> transformer_block(x, params, n_heads=2, mask=causal_mask(5)).shape
    (5, 8)
    """
    check_positive_int("n_heads", n_heads)
    p, d_model = _check_block(params, n_heads)
    x = as_float_array(x, "x")
    if x.ndim < 2 or x.shape[-1] != d_model:
        raise ValueError(f"x must have shape (T, d_model) or (B, T, d_model) with d_model = {d_model} "
                         f"(from W_Q {p['W_Q'].shape}), got {x.shape}")
    check_finite(x, "x")
    mask = as_mask(mask)
    if mask is not None:
        weights_shape = (*x.shape[:-2], n_heads, x.shape[-2], x.shape[-2])
        try:
            np.broadcast_shapes(mask.shape, weights_shape)
        except ValueError:
            raise ValueError(f"mask of shape {mask.shape} does not broadcast to the weights' shape "
                             f"(..., n_heads, T, T) = {weights_shape}, from x {x.shape}") from None
    dtype = np.result_type(x, *p.values())
    work = work_dtype(dtype)
    x, p = x.astype(work, copy=False), {name: value.astype(work, copy=False) for name, value in p.items()}
    try:   # the arguments are checked: what fails now is a sum too large for the dtype
        with np.errstate(over="ignore", invalid="ignore"):
            result, _ = _block(x, p, n_heads, mask)
    except ValueError:
        result = None
    return finite_result(result, dtype, "the block's projections or sums", {"x": x, **p})


# --- A whole GPT ----------------------------------------------------------------


def init_gpt(vocab_size, max_len, d_model, n_layers, n_heads, d_ff, rng):
    """Random parameters of a GPT with tied embeddings, as a dict.

    ``W_E (vocab_size, d_model)``, the token table, read again transposed
    for the logits; ``W_pos (max_len, d_model)``, one learned row per
    position; ``blocks``, a list of ``n_layers`` dicts from
    :func:`init_block`; ``ln_f_weight``, ``ln_f_bias (d_model,)``, the
    final layer norm. The tables have entries of size ``1/sqrt(d_model)``,
    which gives logits of size about 1.

    >>> params = init_gpt(11, 16, 8, n_layers=2, n_heads=2, d_ff=32, rng=np.random.default_rng(0))
    >>> params["W_E"].shape, params["W_pos"].shape, len(params["blocks"])
    ((11, 8), (16, 8), 2)
    """
    for name, size in (("vocab_size", vocab_size), ("max_len", max_len), ("n_layers", n_layers), ("d_ff", d_ff)):
        check_positive_int(name, size)
    check_head_sizes(d_model, n_heads)
    check_rng(rng)
    check_fits("W_E", (vocab_size, d_model), np.float64, vocab_size=vocab_size, d_model=d_model)
    check_fits("W_pos", (max_len, d_model), np.float64, max_len=max_len, d_model=d_model)
    check_fits("W_1", (d_model, d_ff), np.float64, d_model=d_model, d_ff=d_ff)
    per_block = count_gpt_parameters(1, 1, d_model, 1, d_ff) - 4 * int(d_model)   # one block, no tables
    check_fits("the blocks' parameters", (n_layers, per_block), np.float64, n_layers=n_layers, d_model=d_model,
               d_ff=d_ff)
    blocks = [init_block(d_model, n_heads, d_ff, rng) for _ in range(n_layers)]
    return {
        "W_E": rng.normal(0.0, d_model**-0.5, size=(vocab_size, d_model)),
        "W_pos": rng.normal(0.0, d_model**-0.5, size=(max_len, d_model)),
        "blocks": blocks,
        "ln_f_weight": 1 + rng.normal(0.0, 0.1, size=d_model),
        "ln_f_bias": rng.normal(0.0, 0.1, size=d_model),
    }


def _check_gpt(params, n_heads):
    """init_gpt's dict of finite float arrays, blocks included, in the dtype to compute in; and the result's dtype."""
    check_positive_int("n_heads", n_heads)
    check_keys(params, GPT_NAMES, "init_gpt")
    p = {name: as_float_array(params[name], name) for name in GPT_NAMES if name != "blocks"}
    W_E = p["W_E"]
    if W_E.ndim != 2 or 0 in W_E.shape:
        raise ValueError(f"W_E must be a matrix (vocab_size, d_model) with both sizes >= 1, got shape {W_E.shape}")
    d_model = W_E.shape[1]
    if p["W_pos"].ndim != 2 or p["W_pos"].shape[1] != d_model or len(p["W_pos"]) == 0:
        raise ValueError(f"W_pos must have shape (max_len, d_model) with max_len >= 1 and d_model = {d_model} "
                         f"(from W_E {W_E.shape}), got {p['W_pos'].shape}")
    for name in ("ln_f_weight", "ln_f_bias"):
        if p[name].shape != (d_model,):
            raise ValueError(f"{name} must have shape (d_model,) = ({d_model},) (from W_E {W_E.shape}), "
                             f"got {p[name].shape}")
    for name, value in p.items():
        check_finite(value, name)
    blocks = params["blocks"]
    if not isinstance(blocks, Sequence) or isinstance(blocks, (str, bytes)) or not blocks:
        raise TypeError(f"blocks must be a non-empty list of block dicts (see init_block), got {describe(blocks)}")
    checked = []
    for i, block in enumerate(blocks):
        b, d_block = _check_block(block, n_heads, where=f"blocks[{i}]: ")
        if d_block != d_model:
            raise ValueError(f"blocks[{i}] has d_model = {d_block} (from its W_Q), but W_E {W_E.shape} has {d_model}")
        checked.append(b)
    dtype = np.result_type(*p.values(), *(value for b in checked for value in b.values()))
    work = work_dtype(dtype)
    p = {name: value.astype(work, copy=False) for name, value in p.items()}
    p["blocks"] = [{name: value.astype(work, copy=False) for name, value in b.items()} for b in checked]
    return {name: p[name] for name in GPT_NAMES}, dtype


def _check_tokens(tokens, W_E, W_pos, min_len=1, name="tokens") -> np.ndarray:
    """Token ids as an integer array (..., T), every id a row of W_E, with T >= ``min_len``.

    The model reads the first ``T - min_len + 1`` positions (a loss reads
    all but the last, which it guesses), one row of ``W_pos`` each.
    """
    try:
        ids = np.asarray(tokens)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be an array of token ids, got {describe(tokens)}: {error}") from None
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integer token ids, got {describe(ids)}")
    if ids.ndim == 0 or ids.shape[-1] < min_len or ids.size == 0:
        raise ValueError(f"{name} must have shape (T,) or (B, T) with T >= {min_len} and B >= 1, got shape {ids.shape}")
    T = ids.shape[-1]
    if T - min_len + 1 > len(W_pos):
        read = "" if min_len == 1 else f" (the model reads T - {min_len - 1} of them)"
        raise ValueError(f"{name} has T = {T} positions{read}, more than max_len = {len(W_pos)}, "
                         f"the rows of W_pos {W_pos.shape}")
    if ids.min() < 0 or ids.max() >= len(W_E):
        raise ValueError(f"{name} must lie in 0 .. vocab_size - 1 = 0 .. {len(W_E) - 1} "
                         f"(the rows of W_E {W_E.shape}), got ids from {ids.min()} to {ids.max()}")
    return ids


def _forward(ids, p, n_heads, what, keep=False, caches=None, start=0, mask=None):
    """The logits ``(..., T, vocab_size)`` of checked ids ``(..., T)``; with ``keep``, ``(logits, values)``.

    ``p`` as :func:`_check_gpt` returns it. ``values`` is ``(final, ln_f,
    blocks)``: the final layer norm's output and what its backward reads,
    and each block's values (:func:`_block`). With ``caches``, one ``(K, V)``
    per block (:func:`_attention`), the ids are positions ``start`` on, and
    only the last position's logits ``(B, vocab_size)`` are made
    (generating). A sum too large for the dtype raises the overflow error
    naming the largest parameters; ``what`` says what overflowed.
    """
    T = ids.shape[-1]
    if mask is None:   # position start + t sees 0 .. start + t: causal
        mask = np.tri(T, start + T, k=start, dtype=bool)
    kept = []
    try:   # the arguments are checked: what fails now is a sum too large for the dtype
        with np.errstate(over="ignore", invalid="ignore"):
            x = p["W_E"][ids] + p["W_pos"][start:start + T]
            for i, block in enumerate(p["blocks"]):
                x, values = _block(x, block, n_heads, mask, keep, None if caches is None else caches[i], start)
                kept.append(values)
            final, ln_f = _layer_norm(x if caches is None else x[:, -1], p["ln_f_weight"], p["ln_f_bias"], keep)
            logits = final @ p["W_E"].T
    except ValueError:
        logits = None
    if logits is None or not all_finite(logits):
        raise _gpt_overflow(what, p)
    return (logits, (final, ln_f, kept)) if keep else logits


def _gpt_overflow(what, p) -> ValueError:
    """The error for checked parameters ``p`` whose sums overflow: it names the three largest."""
    arrays = {f"params[{name!r}]": p[name] for name in GPT_NAMES if name != "blocks"}
    for i, block in enumerate(p["blocks"]):
        arrays |= {f"params['blocks'][{i}][{name!r}]": value for name, value in block.items()}
    return overflow_error(what, p["W_E"].dtype, arrays, most=3)


def gpt_forward(tokens, params, n_heads):
    """Next-token logits for every position: ``(..., T)`` token ids -> ``(..., T, vocab_size)``.

    The ids are embedded (``W_E[tokens] + W_pos[:T]``) and pass through
    every block with a causal mask, then the final layer norm; the logits
    are each row's dot products with every token's embedding,
    ``x @ W_E.T``. The softmax of row ``t`` is the model's guess for the
    token after position ``t``.

    >>> params = init_gpt(11, 16, 8, n_layers=2, n_heads=2, d_ff=32, rng=np.random.default_rng(0))
    >>> logits = gpt_forward([3, 1, 4, 1, 5], params, n_heads=2)
    >>> logits.shape                                 # T = 5 positions, 11 tokens
    (5, 11)
    """
    p, dtype = _check_gpt(params, n_heads)
    ids = _check_tokens(tokens, p["W_E"], p["W_pos"])
    logits = _forward(ids, p, n_heads, "gpt_forward: the stream or the logits")
    return finite_result(logits, dtype, "gpt_forward: the logits", {"W_E": p["W_E"]})


# --- Generating -----------------------------------------------------------------


def _next_tokens(logits, temperature, rng):
    """The most likely token of every row (temperature 0), or one drawn from softmax(logits / temperature)."""
    if temperature == 0:
        return logits.argmax(axis=-1)
    probabilities = softmax(logits.astype(np.float64), temperature=temperature)
    return np.array([rng.choice(len(row), p=row) for row in probabilities])


def _generation(tokens, params, n_heads, n_new, temperature, rng):
    """The checked arguments of :func:`generate`: the ids it fills in, and a generator of its steps.

    The generator chooses one token a step and then yields ``(t, caches)``:
    ``t`` the position just filled in ``out``, ``caches`` one ``(K, V)`` per
    block, each ``(B, H, max, d_head)``, of which positions ``0 .. t - 1``
    hold the keys and values written so far.
    """
    p, _ = _check_gpt(params, n_heads)
    ids = _check_tokens(tokens, p["W_E"], p["W_pos"])
    check_positive_int("n_new", n_new, allow_zero=True)
    n_new = int(n_new)   # a Python int: T + n_new must not wrap around
    T, max_len = ids.shape[-1], len(p["W_pos"])
    if T + n_new > max_len:
        raise ValueError(f"n_new = {n_new} tokens after the T = {T} of tokens make {T + n_new} positions, "
                         f"more than max_len = {max_len}, the rows of W_pos {p['W_pos'].shape}")
    temperature = real_number(temperature, "temperature")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 picks the most likely token), got {temperature!r}")
    if (rng is not None or temperature > 0) and not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a NumPy random Generator, np.random.default_rng(seed), to sample at "
                        f"temperature > 0 (or None for temperature 0), got {describe(rng)}")
    out = np.empty((*ids.shape[:-1], T + n_new), np.int64)
    out[..., :T] = ids
    sequences = out.reshape(-1, T + n_new)                  # (B, T + n_new), a view of out
    d_model = p["W_E"].shape[1]
    shape = (len(sequences), n_heads, T + n_new, d_model // n_heads)
    caches = [(np.zeros(shape, p["W_E"].dtype), np.zeros(shape, p["W_E"].dtype)) for _ in p["blocks"]]

    def steps():
        start = 0                                           # the first position not yet in the caches
        for t in range(T, T + n_new):                       # the prompt first (prefill), then one token a step
            # (B, vocab_size): the guess after position t - 1
            logits = _forward(sequences[:, start:t], p, n_heads, "generate: the stream or the logits",
                              caches=caches, start=start)
            sequences[:, t] = _next_tokens(logits, temperature, rng)
            start = t
            yield t, caches

    return out, steps()


def generate(tokens, params, n_heads, n_new, temperature=0.0, rng=None):
    """Append ``n_new`` tokens, one at a time, each chosen from the model's guess for the next.

    ``temperature = 0`` takes the most likely token (greedy); a temperature
    above 0 draws it from ``softmax(logits / temperature)`` with
    ``rng.choice``, so ``rng`` is then required. Every block keeps a KV
    cache: the prompt's keys and values are computed at once (prefill), then
    one position per new token (decode), and the tokens are those that
    running :func:`gpt_forward` on the whole sequence at every step would
    choose. Returns the ids ``(..., T + n_new)``, int64, prompt first.
    :func:`generate_steps` does the same one token at a time, with the cache
    on view.

    >>> params = init_gpt(11, 16, 8, n_layers=2, n_heads=2, d_ff=32, rng=np.random.default_rng(0))
    >>> sampled = generate([3, 1, 4], params, 2, n_new=5, temperature=1.0, rng=np.random.default_rng(1))
    >>> sampled.shape, sampled[:3].tolist()          # the prompt, then 5 new tokens
    ((8,), [3, 1, 4])
    >>> greedy = generate([3, 1, 4], params, 2, n_new=5)
    >>> bool((greedy == generate([3, 1, 4], params, 2, n_new=5)).all())   # greedy: no randomness
    True
    """
    out, steps = _generation(tokens, params, n_heads, n_new, temperature, rng)
    for _ in steps:
        pass
    return out


def generate_steps(tokens, params, n_heads, n_new, temperature=0.0, rng=None):
    """:func:`generate`, one new token at a time, with every block's KV cache on view.

    The arguments are those of :func:`generate`, and the tokens the same.
    Returns an iterator that yields ``(ids, cache)`` after each new token:
    ``ids (..., T + i)``, the prompt and the ``i`` tokens chosen so far, and
    ``cache``, one ``(K, V)`` per block, each ``(..., n_heads, S, d_head)``:
    the keys and values written so far, one per token the model has read
    (``S = T + i - 1``: the newest token is written at the next step).

    >>> params = init_gpt(11, 16, 8, n_layers=2, n_heads=2, d_ff=32, rng=np.random.default_rng(0))
    >>> for ids, cache in generate_steps([3, 1, 4], params, 2, n_new=3):
    ...     K, V = cache[0]                          # block 0's keys and values
    ...     print(ids.shape, K.shape, V.shape)
    (4,) (2, 3, 4) (2, 3, 4)
    (5,) (2, 4, 4) (2, 4, 4)
    (6,) (2, 5, 4) (2, 5, 4)
    """
    out, steps = _generation(tokens, params, n_heads, n_new, temperature, rng)   # checked now, not at the first step
    batch = out.shape[:-1]

    def written(array, t):
        """Positions 0 .. t - 1 of a cache (B, H, max, d_head), as (..., H, t, d_head)."""
        _, H, _, d_head = array.shape
        return array[:, :, :t].reshape(*batch, H, t, d_head)

    return ((out[..., :t + 1].copy(), [(written(K, t), written(V, t)) for K, V in caches])
            for t, caches in steps)


def count_gpt_parameters(vocab_size, max_len, d_model, n_layers, d_ff):
    """How many numbers a GPT of these sizes learns, with tied embeddings: a Python int.

    The tables ``(vocab_size + max_len) · d_model``; per block the
    attention layer's ``4 d_model² + 4 d_model`` (as
    :func:`snippets.multihead.count_parameters` counts them), the
    feed-forward layer's ``2 d_model d_ff + d_ff + d_model`` and two layer
    norms' ``4 d_model``; the final layer norm's ``2 d_model``. The number
    of heads does not change it. GPT-2 small:

    >>> count_gpt_parameters(vocab_size=50257, max_len=1024, d_model=768, n_layers=12, d_ff=3072)
    124439808
    """
    for name, size in (("vocab_size", vocab_size), ("max_len", max_len), ("d_model", d_model),
                       ("n_layers", n_layers), ("d_ff", d_ff)):
        check_positive_int(name, size)
    n_vocab, n_pos, d_model, L, d_ff = (int(size) for size in (vocab_size, max_len, d_model, n_layers, d_ff))
    attention = count_parameters(d_model, n_layers=L)
    per_block = 2 * d_model * d_ff + d_ff + d_model + 4 * d_model
    return (n_vocab + n_pos) * d_model + attention + L * per_block + 2 * d_model
