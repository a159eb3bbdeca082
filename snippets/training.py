"""Training the tiny GPT of chapter 13 in NumPy: backpropagation, Adam and head scores (chapter 14).

The model is ``snippets.transformer``'s: token and position embeddings, pre-norm
blocks (``x + attention(LN₁(x))``, then ``+ FFN(LN₂(x))``, causal, tanh GELU),
a final layer norm, and logits from the transposed embedding table. Its
parameters are the dict of ``init_gpt``: ``W_E``, ``W_pos``, ``blocks`` (a
list of dicts with the attention weights ``W_Q … b_O`` of ``snippets.multihead``
and ``W_1, b_1, W_2, b_2, ln_1_weight, ln_1_bias, ln_2_weight, ln_2_bias``),
``ln_f_weight`` and ``ln_f_bias``.

:func:`gpt_loss_and_grads` runs the model forward, keeping what each layer
needs, then backward, layer by layer in reverse, and returns the loss and its
gradient with the structure of ``params``. :func:`adam_step` moves the
parameters downhill, :func:`train` repeats it on windows of a token stream.
:func:`previous_token_scores`, :func:`prefix_matching_scores`,
:func:`copying_scores` and :func:`token_circuits` say what each attention head
does, and :func:`ablate_heads` removes heads to see what they were for.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Mapping

import numpy as np

from snippets.attention import _describe, _largest, _overflow_error
from snippets.multihead import causal_mask
from snippets.transformer import _overflow

BLOCK_NAMES = (
    "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O",
    "W_1", "b_1", "W_2", "b_2", "ln_1_weight", "ln_1_bias", "ln_2_weight", "ln_2_bias",
)
TOP_NAMES = ("W_E", "W_pos", "ln_f_weight", "ln_f_bias")
LN_EPS = 1e-5
GELU_C = math.sqrt(2.0 / math.pi)


# --- Checks -------------------------------------------------------------------


def _check_n_heads(n_heads, d_model: int) -> int:
    if isinstance(n_heads, (bool, np.bool_)) or not isinstance(n_heads, (int, np.integer)):
        raise TypeError(f"n_heads must be a positive integer, got {_describe(n_heads)}")
    if n_heads < 1 or d_model % n_heads:
        raise ValueError(
            f"n_heads must be a positive integer dividing d_model = {d_model}, got {n_heads}"
        )
    return int(n_heads)


def _float_array(value, name: str) -> np.ndarray:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be an array of numbers, got {_describe(value)}: {error}") from None
    if array.dtype.kind in "biu":
        array = array.astype(np.float64)
    if array.dtype.kind != "f":
        raise ValueError(f"{name} must hold real numbers, got {_describe(array)}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} contains NaN or inf: expected finite numbers")
    return array


def _all_finite(result) -> bool:
    if isinstance(result, np.ndarray):   # first: isinstance(array, Mapping) is slow
        return bool(np.isfinite(result).all())
    if isinstance(result, Mapping):
        return all(_all_finite(value) for value in result.values())
    if isinstance(result, (list, tuple)):
        return all(_all_finite(value) for value in result)
    return bool(np.isfinite(result).all())


def _overflow_checked(function):
    """``function`` with no overflow warning: a result that is not finite is refused, naming the largest parameters.

    Parameters can be finite and still too large for the sums of a forward
    pass (snippets/transformer.py refuses them the same way).
    """
    signature = inspect.signature(function)

    @functools.wraps(function)
    def checked(*args, **kwargs):
        try:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                result = function(*args, **kwargs)
        except np.linalg.LinAlgError:  # an overflowed matrix handed to NumPy's linear algebra
            result = np.inf
        if not _all_finite(result):
            params = _check_params(signature.bind(*args, **kwargs).arguments["params"])
            arrays = {_params_name(name): params[name] for name in TOP_NAMES}
            for i, block in enumerate(params["blocks"]):
                arrays |= {_params_name(name, i): value for name, value in block.items()}
            raise _overflow(f"{function.__name__}: the parameters", params["W_E"].dtype, arrays)
        return result

    return checked


def _params_name(name: str, layer: int | None = None) -> str:
    return f"params[{name!r}]" if layer is None else f"params['blocks'][{layer}][{name!r}]"


def _check_params(params, where=_params_name) -> dict:
    """``params`` as a dict of float arrays of one dtype, shapes checked against each other.

    ``where(name)`` and ``where(name, layer)`` say how an error message names a parameter.
    """
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be the dict of init_gpt (W_E, W_pos, blocks, ...), got {_describe(params)}")
    missing = [name for name in (*TOP_NAMES, "blocks") if name not in params]
    if missing:
        raise ValueError(f"params lacks {missing}: expected the keys of init_gpt, {[*TOP_NAMES, 'blocks']}")
    blocks = params["blocks"]
    if isinstance(blocks, (str, bytes, Mapping)) or not hasattr(blocks, "__len__") or len(blocks) == 0:
        raise ValueError(f"params['blocks'] must be a non-empty list of block dicts, got {_describe(blocks)}")
    p = {name: _float_array(params[name], where(name)) for name in TOP_NAMES}
    p["blocks"] = []
    for i, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            raise TypeError(f"params['blocks'][{i}] must be a dict of arrays, got {_describe(block)}")
        lacking = [name for name in BLOCK_NAMES if name not in block]
        if lacking:
            raise ValueError(f"params['blocks'][{i}] lacks {lacking}: expected the keys {list(BLOCK_NAMES)}")
        p["blocks"].append({name: _float_array(block[name], where(name, i)) for name in BLOCK_NAMES})
    if p["W_E"].ndim != 2 or p["W_E"].shape[0] < 1 or p["W_E"].shape[1] < 1:
        raise ValueError(f"{where('W_E')} must be a non-empty matrix (vocab_size, d_model), got shape {p['W_E'].shape}")
    d = p["W_E"].shape[1]
    d_ff = p["blocks"][0]["W_1"].shape[-1] if p["blocks"][0]["W_1"].ndim == 2 else None
    expected = {"W_pos": (None, d), "ln_f_weight": (d,), "ln_f_bias": (d,)}
    block_expected = dict.fromkeys(("W_Q", "W_K", "W_V", "W_O"), (d, d))
    block_expected |= dict.fromkeys(("b_Q", "b_K", "b_V", "b_O", "b_2"), (d,))
    block_expected |= dict.fromkeys(("ln_1_weight", "ln_1_bias", "ln_2_weight", "ln_2_bias"), (d,))
    block_expected |= {"W_1": (d, d_ff), "b_1": (d_ff,), "W_2": (d_ff, d)}

    def check(name, array, shape):
        fits = array.ndim == len(shape) and all(s is None or s == n for s, n in zip(shape, array.shape, strict=True))
        if not fits or array.size == 0:
            readable = tuple("any" if s is None else s for s in shape)
            raise ValueError(
                f"{name} has shape {array.shape}, expected {readable} "
                f"(d_model = {d} from W_E {p['W_E'].shape}, d_ff = {d_ff} from blocks[0]['W_1'])"
            )

    for name, shape in expected.items():
        check(where(name), p[name], shape)
    for i, block in enumerate(p["blocks"]):
        for name, shape in block_expected.items():
            check(where(name, i), block[name], shape)
    dtype = np.result_type(*(p[name] for name in TOP_NAMES), *(a for b in p["blocks"] for a in b.values()))
    return _map(lambda a: a.astype(dtype, copy=False), p)


def _check_tokens(tokens, vocab_size: int, max_len: int, min_len: int = 2, name: str = "tokens") -> np.ndarray:
    try:
        array = np.asarray(tokens)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be an array of token ids of one length, got {_describe(tokens)}: {error}") from None
    if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must be integer token ids, got {_describe(array)}")
    if array.ndim < 1 or array.shape[-1] < min_len or array.size == 0:
        raise ValueError(f"{name} must have shape (..., T) with T >= {min_len}, got shape {array.shape}")
    if array.shape[-1] - (min_len - 1) > max_len:
        raise ValueError(
            f"{name} has T = {array.shape[-1]} but W_pos has max_len = {max_len} rows, one per position "
            f"the model reads: T must be at most {max_len + min_len - 1}, or W_pos needs more rows"
        )
    if array.min() < 0 or array.max() >= vocab_size:
        raise ValueError(
            f"{name} must be ids in 0 .. {vocab_size - 1} (the rows of W_E), "
            f"got ids from {array.min()} to {array.max()}"
        )
    return array


def _map(function, params: dict) -> dict:
    """``params`` with ``function`` applied to every array, the structure kept."""
    blocks = [{name: function(block[name]) for name in BLOCK_NAMES} for block in params["blocks"]]
    # The order of init_gpt's dict: W_E, W_pos, blocks, ln_f_weight, ln_f_bias.
    return {"W_E": function(params["W_E"]), "W_pos": function(params["W_pos"]), "blocks": blocks,
            "ln_f_weight": function(params["ln_f_weight"]), "ln_f_bias": function(params["ln_f_bias"])}


def _ordered_like(grads: dict, params) -> dict:
    """``grads`` with its keys in the order of ``params``' keys (those of the model)."""
    out = {name: grads[name] for name in params if name in grads}
    out["blocks"] = [
        {name: g[name] for name in block if name in g} for g, block in zip(grads["blocks"], params["blocks"], strict=True)
    ]
    return {name: out[name] for name in params if name in out}


def _leaves(params: dict) -> list[np.ndarray]:
    return [params[name] for name in TOP_NAMES] + [b[name] for b in params["blocks"] for name in BLOCK_NAMES]


# --- The forward pass, keeping what the backward pass needs -------------------


def _row_mean(x):
    """``x.mean(axis=-1, keepdims=True)``: for float32 and float64 the same sum and division, without ``mean``'s overhead."""
    if x.dtype not in (np.float32, np.float64):   # mean adds float16 up in float32
        return x.mean(axis=-1, keepdims=True)
    return x.sum(axis=-1, keepdims=True) / x.shape[-1]


def _layer_norm(x, weight, bias):
    # (x - mean) / √(variance + LN_EPS) · weight + bias, the arithmetic in
    # place: the same operations in the same order, fewer temporary arrays.
    normed = x - _row_mean(x)
    inv_std = _row_mean(normed * normed)
    inv_std += LN_EPS
    np.sqrt(inv_std, out=inv_std)
    np.divide(1.0, inv_std, out=inv_std)
    normed *= inv_std
    out = normed * weight
    out += bias
    return out, (normed, inv_std, weight)


def _layer_norm_backward(d_out, cache):
    """Gradients of ``LN(x)·w + b``: with respect to x, w and b."""
    normed, inv_std, weight = cache
    # d_normed = d_out · w, then inv_std · (d_normed - mean(d_normed) -
    # normed · mean(d_normed · normed)), in place in d_normed's array.
    d_x = d_out * weight
    product = d_x * normed
    mean_product = _row_mean(product)
    d_x -= _row_mean(d_x)
    d_x -= np.multiply(normed, mean_product, out=product)
    d_x *= inv_std
    axes = tuple(range(d_out.ndim - 1))
    d_weight = np.multiply(d_out, normed, out=product).sum(axis=axes)
    return d_x, d_weight, d_out.sum(axis=axes)


def _gelu(z):
    # GELU_C * (z + 0.044715 * z * z * z), then its tanh, in place: the same
    # operations in the same order as written out, without five temporary arrays.
    tanh = 0.044715 * z
    tanh *= z
    tanh *= z
    tanh += z
    tanh *= GELU_C
    np.tanh(tanh, out=tanh)
    out = 0.5 * z
    out *= 1.0 + tanh
    return out, tanh


def _gelu_backward(d_out, z, tanh):
    # d_out times GELU's slope, 0.5 * (1 + tanh) + 0.5 * z * (1 - tanh * tanh)
    # * GELU_C * (1 + 3 * 0.044715 * z * z), in place as in _gelu.
    slope = 1.0 + tanh
    slope *= 0.5
    squared = tanh * tanh
    np.subtract(1.0, squared, out=squared)
    inner = 0.5 * z
    inner *= squared
    inner *= GELU_C
    np.multiply(3 * 0.044715, z, out=squared)
    squared *= z
    squared += 1.0
    inner *= squared
    slope += inner
    slope *= d_out
    return slope


def _split(x, n_heads):
    """(B, T, d_model) -> (B, H, T, d_head)."""
    B, T, d = x.shape
    return x.reshape(B, T, n_heads, d // n_heads).transpose(0, 2, 1, 3)


def _linear(x, W, b):
    """``x @ W + b``, the bias added in place."""
    out = x @ W
    out += b
    return out


def _merged_matmul(a, b):
    """``a (B, H, T, S) @ b (B, H, S, d_head)``, the heads merged: ``(B, T, d_model)``.

    Each head's product is written straight into its columns, the inverse of
    :func:`_split` without a copy.
    """
    B, H, T, _ = a.shape
    out = np.empty((B, T, H, b.shape[-1]), dtype=np.result_type(a, b))
    np.matmul(a, b, out=out.transpose(0, 2, 1, 3))
    return out.reshape(B, T, -1)


@functools.lru_cache(maxsize=8)
def _future(T):
    """(T, T), True above the diagonal: where position t would look ahead of itself (not ``causal_mask``)."""
    future = ~causal_mask(T)
    future.flags.writeable = False
    return future


def _attention(x, p, n_heads):
    """Causal multi-head self-attention of ``x (B, T, d_model)``, and its cache."""
    T = x.shape[1]
    Q = _split(_linear(x, p["W_Q"], p["b_Q"]), n_heads)
    K = _split(_linear(x, p["W_K"], p["b_K"]), n_heads)
    V = _split(_linear(x, p["W_V"], p["b_V"]), n_heads)
    scale = 1.0 / math.sqrt(Q.shape[-1])
    scores = Q @ K.transpose(0, 1, 3, 2)
    scores *= scale
    np.copyto(scores, -np.inf, where=_future(T))     # far faster than scores[..., future] = -inf
    scores -= scores.max(axis=-1, keepdims=True, initial=-np.inf)   # initial: the same maximum, faster
    weights = np.exp(scores, out=scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    heads = _merged_matmul(weights, V)
    out = _linear(heads, p["W_O"], p["b_O"])
    return out, (x, Q, K, V, weights, heads, scale)


def _attention_backward(d_out, p, cache):
    """Gradients of causal attention: with respect to its input x and its eight parameters."""
    x, Q, K, V, weights, heads, scale = cache
    n_heads = Q.shape[1]
    grads = {
        "W_O": _flat(heads).T @ _flat(d_out),
        "b_O": d_out.sum(axis=(0, 1)),
    }
    d_heads = _split(d_out @ _transposed(p["W_O"]), n_heads)         # (B, H, T, d_head)
    d_weights = d_heads @ _transposed(V)                              # (B, H, T, S)
    d_V = _merged_matmul(weights.transpose(0, 1, 3, 2), d_heads)      # (B, T, d_model)
    # Softmax backward: each row's weights sum to one, so a row's gradient
    # loses its weighted mean (the weights times the centred d_weights),
    # computed in d_weights' own array.
    d_scores = d_weights
    d_scores -= (d_weights * weights).sum(axis=-1, keepdims=True)
    d_scores *= weights
    d_scores *= scale
    d_Q = _merged_matmul(d_scores, K)
    d_K = _merged_matmul(d_scores.transpose(0, 1, 3, 2), Q)
    d_x = np.zeros_like(x)
    for name, d_proj in (("Q", d_Q), ("K", d_K), ("V", d_V)):
        grads[f"W_{name}"] = _flat(x).T @ _flat(d_proj)
        grads[f"b_{name}"] = d_proj.sum(axis=(0, 1))
        d_x += d_proj @ _transposed(p[f"W_{name}"])
    return d_x, grads


def _flat(x):
    return x.reshape(-1, x.shape[-1])


def _transposed(W):
    """``W``'s matrices transposed (``W.T`` for a matrix), copied into an array of
    their own, for the backward pass's ``d_out @ W.T``.

    With a batch ``d_out`` (more than 2-D), NumPy hands the matrices to BLAS
    one by one, and OpenBLAS repacks a transposed ``W`` for each: up to 1.7
    times slower. On the training run's shapes the numbers are the same to the
    last bit under both of its kernels (Haswell, SkylakeX); on some small shapes
    OpenBLAS takes another path for the copy, which can change the last bit.
    """
    return np.ascontiguousarray(np.swapaxes(W, -1, -2))


def _add_rows(table, rows, values):
    """``np.add.at(table, rows, values)`` for a 2-D ``table``: ``values[i]`` added into row ``rows[i]``, in order.

    The same additions in the same order, on the flat array's indices,
    which NumPy's ``ufunc.at`` does about five times faster than rows.
    """
    if not table.flags.c_contiguous:   # reshape(-1) would be a copy
        np.add.at(table, rows, values)
        return
    width = table.shape[1]
    flat = (rows.astype(np.intp)[:, None] * width + np.arange(width)).ravel()
    np.add.at(table.reshape(-1), flat, values.reshape(-1))


def _block(x, block, n_heads):
    """One transformer block on the residual stream ``x (B, T, d_model)``, and its cache."""
    normed, ln_1 = _layer_norm(x, block["ln_1_weight"], block["ln_1_bias"])
    attended, attention = _attention(normed, block, n_heads)
    attended += x                                        # x + attended
    x = attended
    normed, ln_2 = _layer_norm(x, block["ln_2_weight"], block["ln_2_bias"])
    z = _linear(normed, block["W_1"], block["b_1"])
    hidden, tanh = _gelu(z)
    out = hidden @ block["W_2"]                          # x + hidden @ W_2 + b_2, in place
    out += x
    out += block["b_2"]
    x = out
    return x, (ln_1, attention, ln_2, normed, z, hidden, tanh)


def _stream_into(tokens, p, n_heads, layer):
    """The residual stream ``(B, T, d_model)`` of ``tokens (B, T)`` as it enters block ``layer``."""
    T = tokens.shape[1]
    x = p["W_E"][tokens] + p["W_pos"][:T]
    for block in p["blocks"][:layer]:
        x, _ = _block(x, block, n_heads)
    return x


def _forward(tokens, p, n_heads):
    """Logits ``(B, T, vocab_size)`` of ``tokens (B, T)``, and every layer's cache."""
    T = tokens.shape[1]
    x = p["W_E"][tokens] + p["W_pos"][:T]
    caches = []
    for block in p["blocks"]:
        x, cache = _block(x, block, n_heads)
        caches.append(cache)
    final, ln_f = _layer_norm(x, p["ln_f_weight"], p["ln_f_bias"])
    logits = final @ p["W_E"].T
    return logits, (final, ln_f, caches)


# --8<-- [start:backward]
def _backward(d_logits, tokens, p, cache):
    """Every gradient, from d_logits = ∂loss/∂logits: the forward pass in reverse."""
    final, ln_f, caches = cache
    # W_E read the logits out: its first share
    grads = {"W_E": _flat(d_logits).T @ _flat(final)}
    d_x, grads["ln_f_weight"], grads["ln_f_bias"] = (
        _layer_norm_backward(d_logits @ p["W_E"], ln_f))
    block_grads = []
    for block, cached in zip(reversed(p["blocks"]), reversed(caches), strict=True):
        ln_1, attention, ln_2, normed, z, hidden, tanh = cached
        # x + FFN(LN_2(x)): the FFN's share of d_x
        grad = {"W_2": _flat(hidden).T @ _flat(d_x), "b_2": d_x.sum(axis=(0, 1))}
        d_hidden = d_x @ _transposed(block["W_2"])
        d_z = _gelu_backward(d_hidden, z, tanh)
        grad["W_1"], grad["b_1"] = _flat(normed).T @ _flat(d_z), d_z.sum(axis=(0, 1))
        d_normed = d_z @ _transposed(block["W_1"])
        d_in, grad["ln_2_weight"], grad["ln_2_bias"] = (
            _layer_norm_backward(d_normed, ln_2))
        # the residual adds: d_x passes on, plus the branch's
        d_x = d_x + d_in
        # x + Attn(LN_1(x)): the same, for attention
        d_in, attention_grads = _attention_backward(d_x, block, attention)
        grad |= attention_grads
        d_in, grad["ln_1_weight"], grad["ln_1_bias"] = (
            _layer_norm_backward(d_in, ln_1))
        d_x = d_x + d_in
        block_grads.append(grad)
    grads["blocks"] = block_grads[::-1]
    T = tokens.shape[1]
    grads["W_pos"] = np.zeros_like(p["W_pos"])
    grads["W_pos"][:T] = d_x.sum(axis=0)
    # W_E's second share: each row's gradient, into its token's row
    _add_rows(grads["W_E"], tokens.ravel(), _flat(d_x))
    return grads
# --8<-- [end:backward]


def _cross_entropy(logits, targets):
    """Mean of ``-log softmax(logits)[target]``, and its gradient with respect to the logits."""
    # The arithmetic in place where it can be, the same operations in the same order.
    log_probs = logits - logits.max(axis=-1, keepdims=True, initial=-np.inf)
    d_logits = np.exp(log_probs)
    log_probs -= np.log(d_logits.sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    np.exp(log_probs, out=d_logits)
    np.put_along_axis(d_logits, targets[..., None], np.take_along_axis(d_logits, targets[..., None], axis=-1) - 1, axis=-1)
    d_logits /= targets.size
    return -picked, d_logits


@_overflow_checked
# --8<-- [start:gpt_loss_and_grads]
def gpt_loss_and_grads(tokens, params, n_heads: int):
    """The next-token loss of the GPT on ``tokens``, and its gradient.

    ``tokens`` are ids of shape ``(T,)`` or ``(..., T)``; the model reads
    ``tokens[..., :-1]`` and is scored on guessing ``tokens[..., 1:]``. The
    loss is the mean cross-entropy, minus the log of the probability given
    to the token that came next, over all those positions. Returns ``(loss, grads)``: a float, and a dict with the keys
    and shapes of ``params`` holding ``∂loss/∂(each parameter)``.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(vocab_size=5, max_len=8, d_model=8, n_layers=2, n_heads=2, d_ff=16,
    ...                   rng=np.random.default_rng(0))
    >>> loss, grads = gpt_loss_and_grads([[1, 2, 3, 1, 2], [0, 4, 0, 4, 0]], params, n_heads=2)
    >>> round(loss, 2), grads["blocks"][1]["W_Q"].shape
    (2.04, (8, 8))
    """
    p = _check_params(params)
    n_heads = _check_n_heads(n_heads, p["W_E"].shape[1])
    tokens = _check_tokens(tokens, p["W_E"].shape[0], p["W_pos"].shape[0])
    batch = tokens.reshape(-1, tokens.shape[-1])
    logits, cache = _forward(batch[:, :-1], p, n_heads)
    losses, d_logits = _cross_entropy(logits, batch[:, 1:])
    grads = _backward(d_logits, batch[:, :-1], p, cache)
    return float(losses.mean()), _ordered_like(grads, params)
# --8<-- [end:gpt_loss_and_grads]




def _tree_map(function, tree, *others):
    """``function`` applied to the arrays of ``tree`` (and the matching arrays of ``others``), the structure kept."""
    if isinstance(tree, Mapping):
        return {key: _tree_map(function, tree[key], *(other[key] for other in others)) for key in tree}
    if isinstance(tree, (list, tuple)):
        return [_tree_map(function, item, *(other[i] for other in others)) for i, item in enumerate(tree)]
    return function(tree, *others)


def _check_tree(tree, like, name: str, path: str = ""):
    """``tree`` as arrays of the structure and shapes of ``like``; a message names the first difference."""
    where = f"{name}{path}"
    if isinstance(like, np.ndarray) and isinstance(tree, np.ndarray):   # first: isinstance(array, Mapping) is slow
        return _check_leaf(tree, like, where)
    if isinstance(like, Mapping):
        if not isinstance(tree, Mapping):
            raise TypeError(f"{where} must be a dict like params, got {_describe(tree)}")
        missing = [key for key in like if key not in tree]
        if missing:
            raise ValueError(f"{where} lacks {missing}: it must have the keys of params")
        return {key: _check_tree(tree[key], like[key], name, f"{path}[{key!r}]") for key in like}
    if isinstance(like, (list, tuple)):
        if isinstance(tree, (str, bytes, Mapping)) or not hasattr(tree, "__len__") or len(tree) != len(like):
            raise ValueError(f"{where} must be a list of {len(like)} items like params, got {_describe(tree)}")
        return [_check_tree(item, like[i], name, f"{path}[{i}]") for i, item in enumerate(tree)]
    if isinstance(tree, (Mapping, list, tuple)):
        raise TypeError(f"{where} must be an array like params{path} {np.shape(like)}, got {_describe(tree)}")
    return _check_leaf(tree, like, where)


def _check_leaf(tree, like, where: str):
    array = _float_array(tree, where)
    if array.shape != np.shape(like):
        raise ValueError(f"{where} has shape {array.shape}, expected {np.shape(like)}, the shape of the parameter")
    return array


def _tree_leaves(tree) -> list:
    if isinstance(tree, np.ndarray):   # first: isinstance(array, Mapping) is slow
        return [tree]
    if isinstance(tree, Mapping):
        return [leaf for value in tree.values() for leaf in _tree_leaves(value)]
    if isinstance(tree, (list, tuple)):
        return [leaf for value in tree for leaf in _tree_leaves(value)]
    return [tree]


def _dtype_of(tree) -> str:
    leaves = _tree_leaves(tree)
    return str(np.result_type(*leaves)) if leaves else "float64"


def _positive(value, name: str, below_one: bool = False) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {_describe(value)}")
    value = float(value)
    if not (math.isfinite(value) and value > 0 and (value < 1 or not below_one)):
        expected = "a number strictly between 0 and 1" if below_one else "a finite number > 0"
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return value


# --- Adam ---------------------------------------------------------------------


# --8<-- [start:adam_step]
def adam_step(params, grads, state=None, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    """One step of Adam: move every parameter against its gradient, scaled entry by entry.

    Adam keeps two running averages for every entry: ``exp_avg``, of the
    gradient (the way downhill, smoothed over steps), and ``exp_avg_sq``, of
    its square (how steep the slope there usually is); the names are
    PyTorch's. The step is ``lr · exp_avg / √exp_avg_sq``, so every entry
    moves by about ``lr``, whether its own slope is steep or flat.
    ``params`` and ``grads`` are arrays or dicts and lists of arrays of one
    structure (``grads`` as returned by :func:`gpt_loss_and_grads`);
    ``state`` is what the previous step returned, ``None`` at the start.
    Returns ``(new_params, new_state)``; the inputs are left unchanged.

    >>> params, state = adam_step({"w": np.array([1.0, -2.0])}, {"w": np.array([0.5, -40.0])}, lr=0.1)
    >>> params["w"].round(3).tolist(), state["step"]
    ([0.9, -1.9], 1)
    """
    p = _check_tree(params, params, "params") if isinstance(params, (Mapping, list, tuple)) else _float_array(params, "params")
    g = _check_tree(grads, p, "grads")
    lr, beta1, beta2, eps = (_positive(lr, "lr"), _positive(beta1, "beta1", True),
                             _positive(beta2, "beta2", True), _positive(eps, "eps"))
    if state is None:
        state = {"step": 0, "exp_avg": _tree_map(np.zeros_like, p), "exp_avg_sq": _tree_map(np.zeros_like, p)}
    elif not isinstance(state, Mapping) or not {"step", "exp_avg", "exp_avg_sq"} <= set(state):
        raise TypeError(f"state must be None or the state adam_step returned, got {_describe(state)}")
    t = state["step"] + 1
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below, not warned about
        new_params, avg, avg_sq, finite = _adam_update(p, g, state, t, lr, beta1, beta2, eps)
    if not finite:
        params_, grads_ = (max(_tree_leaves(tree), key=_largest) for tree in (p, g))
        raise _overflow_error("the Adam step's new parameters", _dtype_of(p),
                              params=params_, grads=grads_, lr=lr)
    return new_params, {"step": t, "exp_avg": avg, "exp_avg_sq": avg_sq}
# --8<-- [end:adam_step]


def _adam_update(p, g, state, t, lr, beta1, beta2, eps):
    """The new parameters and averages as trees like ``p``, and whether all their entries are finite."""
    trees = (p, g, _check_tree(state["exp_avg"], p, "state['exp_avg']"),
             _check_tree(state["exp_avg_sq"], p, "state['exp_avg_sq']"))
    leaves = [_tree_leaves(tree) for tree in trees]
    if len({leaf.dtype for leaf in leaves[0] + leaves[1] + leaves[2] + leaves[3]}) == 1:
        # One dtype: every entry of every array at once, each tree's leaves
        # laid end to end (the same arithmetic, entry by entry, in one pass).
        flat = (np.concatenate([leaf.ravel() for leaf in tree]) for tree in leaves)
        new = _adam_arithmetic(*flat, t, lr, beta1, beta2, eps)
        finite = all(np.isfinite(array).all() for array in new)
        return (*(_unflatten(array, leaves[0], p) for array in new), finite)
    new = [_adam_arithmetic(*arrays, t, lr, beta1, beta2, eps) for arrays in zip(*leaves, strict=True)]
    finite = all(np.isfinite(array).all() for arrays in new for array in arrays)
    return (*(_rebuild(iter(arrays), p) for arrays in (list(zip(*new, strict=True)) or [(), (), ()])), finite)


def _adam_arithmetic(p, g, avg, avg_sq, t, lr, beta1, beta2, eps):
    """New ``(p, avg, avg_sq)`` from arrays: the averages, and the step against the gradient."""
    avg = beta1 * avg + (1 - beta1) * g
    avg_sq = beta2 * avg_sq + (1 - beta2) * g * g
    # The averages start at zero, so early on they are too small: divide by 1 - beta**t.
    return p - lr * (avg / (1 - beta1**t)) / (np.sqrt(avg_sq / (1 - beta2**t)) + eps), avg, avg_sq


def _unflatten(flat, leaves, like):
    """The arrays of ``flat``, cut into the shapes of ``leaves``, in the structure of ``like``."""
    parts, start = [], 0
    for leaf in leaves:
        part = flat[start:start + leaf.size].reshape(leaf.shape)
        parts.append(part[()] if leaf.ndim == 0 else part)
        start += leaf.size
    return _rebuild(iter(parts), like)


def _rebuild(arrays, like):
    """The structure of ``like`` (dicts, lists, arrays) holding the next arrays of the iterator ``arrays``."""
    if isinstance(like, np.ndarray):
        return next(arrays)
    if isinstance(like, Mapping):
        return {key: _rebuild(arrays, like[key]) for key in like}
    if isinstance(like, (list, tuple)):
        return [_rebuild(arrays, item) for item in like]
    return next(arrays)


# --- Text, windows and losses -------------------------------------------------


def tokenize(text):
    """Split ``text`` into word tokens and number them, as chapter 5 does.

    Lines that start with ``#`` are comments, not text. Returns ``(ids,
    vocab)``: the sorted list of distinct tokens, and every token's place in
    it, as an int64 array.

    >>> ids, vocab = tokenize("# a comment\\nthe cat saw the dog .")
    >>> vocab, ids.tolist()
    (['.', 'cat', 'dog', 'saw', 'the'], [4, 1, 3, 4, 2, 0])
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {_describe(text)}")
    words = " ".join(line for line in text.splitlines() if not line.startswith("#")).split()
    if not words:
        raise ValueError("text holds no tokens (only whitespace and # comment lines)")
    vocab = sorted(set(words))
    index = {word: i for i, word in enumerate(vocab)}
    return np.array([index[word] for word in words], dtype=np.int64), vocab


def random_windows(ids, batch_size: int, length: int, rng):
    """``batch_size`` windows of ``length`` consecutive tokens, from random places in ``ids``.

    >>> random_windows(np.arange(100), 2, 5, np.random.default_rng(0)).tolist()
    [[81, 82, 83, 84, 85], [61, 62, 63, 64, 65]]
    """
    ids = _check_tokens(ids, np.iinfo(np.int64).max, np.iinfo(np.int64).max, min_len=1, name="ids")
    if ids.ndim != 1:
        raise ValueError(f"ids must be one stream of token ids, shape (N,), got shape {ids.shape}")
    for name, size in (("batch_size", batch_size), ("length", length)):
        if isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"{name} must be a positive integer, got {size!r}")
    if length > len(ids):
        raise ValueError(f"length = {length} is longer than ids ({len(ids)} tokens)")
    if int(batch_size) * int(length) > 10**8:
        raise ValueError(f"batch_size × length = {batch_size} × {length} tokens is more than a batch of 10**8 can hold")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a NumPy random Generator, np.random.default_rng(seed), got {_describe(rng)}")
    starts = rng.integers(0, len(ids) - length + 1, size=batch_size)
    return ids[starts[:, None] + np.arange(length)]


def _model_arguments(tokens, params, n_heads, min_len=2):
    p = _check_params(params)
    n_heads = _check_n_heads(n_heads, p["W_E"].shape[1])
    tokens = _check_tokens(tokens, p["W_E"].shape[0], p["W_pos"].shape[0], min_len)
    return tokens.reshape(-1, tokens.shape[-1]), p, n_heads, tokens.shape


@_overflow_checked
def token_losses(tokens, params, n_heads: int):
    """The loss at every position: ``-log p(tokens[..., t + 1])``, shape ``(..., T - 1)``.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 1, 2, 16, np.random.default_rng(0))
    >>> token_losses([1, 2, 3, 1, 2], params, n_heads=2).round(2).tolist()
    [1.8, 2.4, 2.68, 1.25]
    """
    batch, p, n_heads, shape = _model_arguments(tokens, params, n_heads)
    logits, _ = _forward(batch[:, :-1], p, n_heads)
    losses, _ = _cross_entropy(logits, batch[:, 1:])
    return losses.reshape(*shape[:-1], shape[-1] - 1)


@_overflow_checked
def in_context_learning_score(tokens, params, n_heads: int, early: int = 5, late: int = 50):
    """Loss at token ``late`` of a context minus loss at token ``early``: an adaptation of Olsson et al.'s score.

    Averaged over the rows of ``tokens (B, T)``. Negative when the model
    guesses better late in a text than early, which it can only do by using
    what it read earlier in the same text. Olsson et al. (2022) take the
    loss at the 500th token minus the loss at the 50th, in contexts of
    hundreds of tokens; chapter 14's windows hold 64 tokens, so it takes the
    50th minus the 5th (``late = 50``, ``early = 5``), the same question
    asked of a shorter text.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 1, 2, 16, np.random.default_rng(0))
    >>> round(in_context_learning_score([[1, 2, 3, 1, 2, 3, 1]], params, 2, early=1, late=5), 2)
    2.24
    """
    batch, p, n_heads, shape = _model_arguments(tokens, params, n_heads)
    for name, index in (("early", early), ("late", late)):
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"{name} must be a token index, an integer, got {_describe(index)}")
    if not 1 <= early < late <= shape[-1] - 1:
        raise ValueError(
            f"need 1 <= early < late <= T - 1 = {shape[-1] - 1} (token indices, predicted "
            f"from the tokens before them), got early = {early}, late = {late}"
        )
    logits, _ = _forward(batch[:, :late], p, n_heads)
    losses, _ = _cross_entropy(logits, batch[:, 1:late + 1])
    return float(losses[:, late - 1].mean() - losses[:, early - 1].mean())


# --8<-- [start:train]
def train(params, ids, n_heads: int, steps: int, batch_size: int, context: int, lr, rng):
    """The training loop: ``steps`` Adam steps on random windows of the token stream ``ids``.

    Each step reads ``batch_size`` windows of ``context + 1`` tokens, takes
    the loss and its gradient, and moves the parameters with
    :func:`adam_step`. ``lr`` is a number, or a function of the step
    (1, 2, ...) that returns one. Returns an iterator that yields
    ``(step, loss, params)`` after each step, so that the caller decides
    what to measure, log or show while it runs.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 1, 2, 16, np.random.default_rng(0))
    >>> ids = np.array([0, 1, 2, 3, 4] * 20)             # a text that repeats
    >>> losses = [loss for _, loss, _ in train(params, ids, 2, 60, 8, 6, 0.01, np.random.default_rng(0))]
    >>> round(losses[0], 1), round(losses[-1], 2)
    (2.2, 0.08)
    """
    p = _check_params(params)
    n_heads = _check_n_heads(n_heads, p["W_E"].shape[1])
    for name, size in (("steps", steps), ("batch_size", batch_size), ("context", context)):
        if isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"{name} must be a positive integer, got {size!r}")
    if context > p["W_pos"].shape[0]:
        raise ValueError(f"context = {context} is longer than the model reads, max_len = {p['W_pos'].shape[0]}")
    ids = _check_tokens(ids, p["W_E"].shape[0], np.iinfo(np.int64).max, min_len=1, name="ids")
    if ids.ndim != 1 or len(ids) < context + 1:
        raise ValueError(f"ids must be one stream of at least context + 1 = {context + 1} token ids, got shape {ids.shape}")
    if not callable(lr):
        _positive(lr, "lr")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a NumPy random Generator, np.random.default_rng(seed), got {_describe(rng)}")

    def steps_():
        params, state = p, None
        for step in range(1, steps + 1):
            batch = random_windows(ids, batch_size, context + 1, rng)
            loss, grads = gpt_loss_and_grads(batch, params, n_heads)
            rate = lr(step) if callable(lr) else lr
            params, state = adam_step(params, grads, state, lr=rate)
            yield step, loss, params

    return steps_()
# --8<-- [end:train]


def attention_backward(x, params, n_heads: int, d_out):
    """The backward pass of causal multi-head self-attention, on its own.

    ``x (..., T, d_model)`` is what the layer reads, ``params`` the dict of
    ``snippets.multihead.init_params`` (``W_Q … b_O``), and ``d_out`` the
    gradient of some loss with respect to the layer's output (the shape of
    ``x``). Returns ``(d_x, grads)``: the gradient with respect to ``x`` and
    a dict with the gradient of each of the eight parameters.

    >>> from snippets.multihead import init_params
    >>> rng = np.random.default_rng(0)
    >>> d_x, grads = attention_backward(rng.normal(size=(5, 8)), init_params(8, 2, rng), 2,
    ...                                 rng.normal(size=(5, 8)))
    >>> d_x.shape, grads["W_Q"].shape, grads["b_O"].shape
    ((5, 8), (8, 8), (8,))
    """
    from snippets.multihead import _check_params as _check_attention_params

    p, d_model, d_kv = _check_attention_params(params, n_heads)
    if d_kv != d_model:
        raise ValueError(f"params must be a self-attention layer, W_K and W_V (d_model, d_model); got d_kv = {d_kv}")
    x = _float_array(x, "x")
    d_out = _float_array(d_out, "d_out")
    if x.ndim < 2 or x.shape[-1] != d_model or x.shape[-2] < 1:
        raise ValueError(f"x must have shape (..., T, d_model) with d_model = {d_model}, got shape {x.shape}")
    if d_out.shape != x.shape:
        raise ValueError(f"d_out must have the shape of x {x.shape}, the layer's output, got {d_out.shape}")
    dtype = np.result_type(x, d_out, *p.values())
    batch = x.reshape(-1, *x.shape[-2:]).astype(dtype, copy=False)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below, not warned about
        _, cache = _attention(batch, p, n_heads)
        d_x, grads = _attention_backward(d_out.reshape(batch.shape).astype(dtype, copy=False), p, cache)
    if not (np.isfinite(d_x).all() and all(np.isfinite(g).all() for g in grads.values())):
        largest = sorted(p, key=lambda name: _largest(p[name]), reverse=True)[:2]
        raise _overflow_error("the gradients", dtype, x=x, d_out=d_out, **{f"params[{n!r}]": p[n] for n in largest})
    return d_x.reshape(x.shape), {name: grads[name] for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")}


# --- What the heads do --------------------------------------------------------


@_overflow_checked
def attention_weights(tokens, params, n_heads: int):
    """Every head's attention weights on ``tokens``: ``(n_layers, ..., n_heads, T, T)``.

    Row t of a head's ``(T, T)`` matrix is where position t looks: its
    weights over positions 0 .. t, summing to 1.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> weights = attention_weights([1, 2, 3], params, n_heads=2)
    >>> weights.shape, weights[1, 0].sum(axis=-1).round(6).tolist()
    ((2, 2, 3, 3), [1.0, 1.0, 1.0])
    """
    batch, p, n_heads, shape = _model_arguments(tokens, params, n_heads, min_len=1)
    _, (_, _, caches) = _forward(batch, p, n_heads)
    weights = np.stack([attention[4] for _, attention, *_ in caches])
    T = shape[-1]
    return weights.reshape(len(caches), *shape[:-1], n_heads, T, T)


@_overflow_checked
def previous_token_scores(tokens, params, n_heads: int):
    """How much each head looks at the token just before: ``(n_layers, n_heads)``.

    The mean weight from position t to t - 1, over every t >= 1 and every
    row of ``tokens``. 1 for a head that always looks one back.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> previous_token_scores([[1, 2, 3, 4], [0, 0, 1, 1]], params, n_heads=2).shape
    (2, 2)
    """
    weights = attention_weights(tokens, params, n_heads)
    T = weights.shape[-1]
    if T < 2:
        raise ValueError(f"tokens must have at least 2 positions to have a previous token, got T = {T}")
    t = np.arange(1, T)
    one_back = weights[..., t, t - 1]                           # (L, ..., H, T - 1)
    return np.moveaxis(one_back, -2, 1).reshape(weights.shape[0], n_heads, -1).mean(axis=-1)


@_overflow_checked
def prefix_matching_scores(tokens, params, n_heads: int):
    """How much each head looks right after earlier copies of the current token: ``(n_layers, n_heads)``.

    The induction head's "where to look" (Olsson et al., 2022): at position
    t, the targets are the positions s <= t whose previous token
    ``tokens[s - 1]`` equals ``tokens[t]``. The score is the weight on the
    targets, averaged over the positions that have any. Measured on text
    that repeats, such as a random sequence written twice.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> prefix_matching_scores([1, 3, 0, 2, 1, 3, 0, 2], params, n_heads=2).shape
    (2, 2)
    """
    weights = attention_weights(tokens, params, n_heads)
    batch = np.asarray(tokens).reshape(-1, weights.shape[-1])
    T = batch.shape[-1]
    # targets[b, t, s]: the token before s equals the token at t, and s <= t.
    targets = np.zeros((len(batch), T, T), dtype=bool)
    targets[:, :, 1:] = batch[:, :, None] == batch[:, None, :-1]
    targets &= np.tril(np.ones((T, T), dtype=bool))
    has_target = targets.any(axis=-1)                            # (B, T)
    if not has_target.any():
        raise ValueError("tokens never repeat a token, so no position has a place to look: "
                         "prefix matching needs text with repeats, such as a random sequence written twice")
    w = weights.reshape(weights.shape[0], len(batch), n_heads, T, T)
    on_targets = (w * targets[:, None]).sum(axis=-1)             # (L, B, H, T)
    return on_targets.transpose(0, 2, 1, 3)[..., has_target].mean(axis=-1)


def _one_token_reads(p, n_heads):
    """For every layer: what its heads read, LN₁ without bias, for each one-token text [x]: (vocab_size, d_model)."""
    n_vocab = p["W_E"].shape[0]
    _, (_, _, caches) = _forward(np.arange(n_vocab)[:, None], p, n_heads)
    return [cache[0][0][:, 0] * block["ln_1_weight"] for block, cache in zip(p["blocks"], caches, strict=True)]


def _copy_circuit(p, reads, layer, head, n_heads):
    """(vocab_size, vocab_size): row x, the logits the head raises when it looks at the one-token text [x]."""
    block, d_head = p["blocks"][layer], p["W_E"].shape[1] // n_heads
    cols = slice(head * d_head, (head + 1) * d_head)
    written = reads[layer] @ block["W_V"][:, cols] @ block["W_O"][cols, :]
    written = written - written.mean(axis=-1, keepdims=True)   # the final layer norm centres it
    return (written * p["ln_f_weight"]) @ p["W_E"].T


@_overflow_checked
def copying_scores(params, n_heads: int):
    """How much each head's "what to copy" copies: ``(n_layers, n_heads)``, from -1 to 1.

    For every token x, take the residual stream of the one-token text
    ``[x]`` as it enters the head's layer (so the layers before it have
    had their say), normalise it as the layer norm does, and send it
    through the head's value and output projections to the logits. Row x
    of the resulting ``(vocab_size, vocab_size)`` matrix says which tokens'
    logits the head raises when it looks at x. The score is ``Σλ / Σ|λ|``
    over the matrix's eigenvalues λ (Elhage et al., 2021): 1 when looking
    at x raises x itself, as a copy does, -1 when it lowers it. The layer
    norms' biases are left out, and the final layer norm counts by its
    weights and its centring only.

    This is an adaptation: Elhage et al. read the head's "direct path",
    ``W_E W_V W_O W_Eᵀ``, which sends the embedding itself through the head.
    A head of a later layer never reads the bare embedding: it reads the
    stream after the layers before it have added to it, normalised. Here
    the rows of that matrix are the words as the head sees them, so the
    score says what the head does to what it really reads.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> copying_scores(params, n_heads=2).shape
    (2, 2)
    """
    p = _check_params(params)
    n_heads = _check_n_heads(n_heads, p["W_E"].shape[1])
    reads = _one_token_reads(p, n_heads)
    scores = np.zeros((len(p["blocks"]), n_heads))
    for layer in range(len(p["blocks"])):
        for head in range(n_heads):
            eigenvalues = np.linalg.eigvals(_copy_circuit(p, reads, layer, head, n_heads))
            size = np.abs(eigenvalues).sum()
            scores[layer, head] = eigenvalues.real.sum() / size if size > 0 else 0.0
    return scores


@_overflow_checked
def token_circuits(params, layer: int, head: int, n_heads: int):
    """One head's "where to look" and "what to copy", token by token: two ``(vocab_size, vocab_size)`` arrays.

    ``look[x, y]`` is the score (before the softmax) between a query whose
    token is x and a key whose *previous* token is y: both read at position
    1 of the two-token texts ``[w, x]`` and ``[y, z]``, averaged over w and
    z. An induction head scores high on the diagonal. ``copy[x, y]`` is how
    much the head raises the logit of y when it looks at x, as in
    :func:`copying_scores`; a copying head has a large diagonal.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> look, copy = token_circuits(params, 1, 0, n_heads=2)
    >>> look.shape, copy.shape
    ((5, 5), (5, 5))
    """
    p = _check_params(params)
    n_vocab, d = p["W_E"].shape
    n_heads = _check_n_heads(n_heads, d)
    for name, index, size in (("layer", layer, len(p["blocks"])), ("head", head, n_heads)):
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"{name} must be an integer, got {_describe(index)}")
        if not 0 <= index < size:
            raise ValueError(f"{name} must lie in 0 .. {size - 1}, got {index}")
    if p["W_pos"].shape[0] < 2:
        raise ValueError("the model must read at least 2 positions (W_pos has one row): keys are read at position 1")
    pairs = np.stack(np.meshgrid(np.arange(n_vocab), np.arange(n_vocab), indexing="ij"), axis=-1).reshape(-1, 2)
    block, d_head = p["blocks"][layer], d // n_heads
    # What the head reads: the stream entering its block (the blocks after it play no part), layer-normed.
    normed, _ = _layer_norm(_stream_into(pairs, p, n_heads, layer), block["ln_1_weight"], block["ln_1_bias"])
    normed = normed[:, 1].reshape(n_vocab, n_vocab, d)                          # [first token, second token]
    cols = slice(head * d_head, (head + 1) * d_head)
    queries = normed.mean(axis=0) @ block["W_Q"][:, cols] + block["b_Q"][cols]   # by the token itself
    keys = normed.mean(axis=1) @ block["W_K"][:, cols] + block["b_K"][cols]      # by the token before it
    look = queries @ keys.T / math.sqrt(d_head)
    return look, _copy_circuit(p, _one_token_reads(p, n_heads), layer, head, n_heads)


def ablate_heads(params, heads, n_heads: int):
    """A copy of ``params`` in which the heads ``[(layer, head), ...]`` write nothing.

    A head's output reaches the residual stream through its rows of ``W_O``;
    setting them to zero removes the head and leaves everything else as it was.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> ablated = ablate_heads(params, [(1, 0)], n_heads=2)
    >>> float(np.abs(ablated["blocks"][1]["W_O"][:4]).sum()), bool((ablated["blocks"][1]["W_O"][4:] != 0).all())
    (0.0, True)
    """
    p = _check_params(params)
    d = p["W_E"].shape[1]
    n_heads = _check_n_heads(n_heads, d)
    try:
        pairs = None if isinstance(heads, (str, bytes, Mapping)) else list(heads)
    except TypeError:
        pairs = None
    if pairs is None:
        raise TypeError(f"heads must be a list of (layer, head) pairs, got {_describe(heads)}")
    out = _map(np.copy, p)
    d_head = d // n_heads
    for pair in pairs:
        ok = isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
            isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) for i in pair)
        if not ok or not (0 <= pair[0] < len(p["blocks"]) and 0 <= pair[1] < n_heads):
            raise ValueError(
                f"heads must hold (layer, head) pairs with 0 <= layer < {len(p['blocks'])} "
                f"and 0 <= head < {n_heads}, got {pair!r}"
            )
        layer, head = pair
        out["blocks"][layer]["W_O"][head * d_head:(head + 1) * d_head] = 0.0
    return out


# --- Saving ------------------------------------------------------------------------


def params_to_arrays(params) -> dict:
    """The parameters as one flat dict of arrays, for ``np.savez``: ``blocks.0.W_Q`` and so on.

    >>> from snippets.transformer import init_gpt
    >>> arrays = params_to_arrays(init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0)))
    >>> len(arrays), [name for name in arrays if name.startswith("blocks.1.W_")][:2]
    (36, ['blocks.1.W_Q', 'blocks.1.W_K'])
    """
    p = _check_params(params)
    flat = {name: p[name] for name in TOP_NAMES}
    for i, block in enumerate(p["blocks"]):
        flat |= {f"blocks.{i}.{name}": value for name, value in block.items()}
    return flat


def params_from_arrays(arrays) -> dict:
    """The inverse of :func:`params_to_arrays`: the dict of ``init_gpt`` from flat arrays.

    ``arrays`` may be what ``np.load`` returns for an ``.npz`` file.

    >>> from snippets.transformer import init_gpt
    >>> params = init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0))
    >>> again = params_from_arrays(params_to_arrays(params))
    >>> len(again["blocks"]), bool((again["blocks"][1]["W_1"] == params["blocks"][1]["W_1"]).all())
    (2, True)
    """
    if not isinstance(arrays, Mapping) and not hasattr(arrays, "files"):
        raise TypeError(f"arrays must be a dict of arrays (or a loaded .npz), got {_describe(arrays)}")
    names = list(arrays.files if hasattr(arrays, "files") else arrays)
    layers = sorted({int(n.split(".")[1]) for n in names if re.fullmatch(r"blocks\.\d+\.\w+", str(n))})
    if not layers or layers != list(range(len(layers))):
        raise ValueError(f"arrays must name blocks 0, 1, ... without gaps as 'blocks.<i>.<name>', got layers {layers}")
    expected = [*TOP_NAMES, *(f"blocks.{i}.{name}" for i in layers for name in BLOCK_NAMES)]
    missing = [name for name in expected if name not in names]
    if missing:
        raise ValueError(f"arrays lacks {missing[:4]}{' ...' if len(missing) > 4 else ''}: expected the names "
                         "of params_to_arrays")
    params = {name: arrays[name] for name in TOP_NAMES}
    params["blocks"] = [{name: arrays[f"blocks.{i}.{name}"] for name in BLOCK_NAMES} for i in layers]

    def where(name, layer=None):
        return f"arrays[{name!r}]" if layer is None else f"arrays['blocks.{layer}.{name}']"

    return _check_params(params, where)
