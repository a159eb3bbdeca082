"""Training the tiny GPT of chapter 13 in NumPy: backpropagation, Adam and the training loop (chapter 14).

The model is ``snippets.transformer``'s: token and position embeddings, pre-norm
blocks (``x + attention(LN₁(x))``, then ``+ FFN(LN₂(x))``, causal, tanh GELU),
a final layer norm, and logits from the transposed embedding table. Its
parameters are the dict of ``init_gpt``: ``W_E``, ``W_pos``, ``blocks`` (a
list of dicts with the attention weights ``W_Q … b_O`` of ``snippets.multihead``
and ``W_1, b_1, W_2, b_2, ln_1_weight, ln_1_bias, ln_2_weight, ln_2_bias``),
``ln_f_weight`` and ``ln_f_bias``.

:func:`gpt_loss_and_grads` runs the model forward (``snippets.transformer``'s
forward, keeping what each layer needs), then backward, layer by layer in
reverse, and returns the loss and its gradient with the structure of
``params``. :func:`adam_step` moves the parameters downhill, :func:`train`
repeats it on windows of a token stream, and :func:`params_to_arrays` and
:func:`params_from_arrays` save and load the result. ``snippets.heads`` reads
what the trained heads do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import numpy as np

from snippets._checks import (
    all_finite,
    as_float_array,
    check_finite,
    check_positive_int,
    check_rng,
    describe,
    largest,
    overflow_error,
    real_number,
)
from snippets.multihead import _check_params as _check_attention_params
from snippets.multihead import _split_heads, causal_mask
from snippets.transformer import (
    BLOCK_NAMES,
    GPT_NAMES,
    SQRT_2_OVER_PI,
    _attention,
    _check_gpt,
    _check_tokens,
    _forward,
    _gpt_overflow,
    _merged_matmul,
)

TOP_NAMES = tuple(name for name in GPT_NAMES if name != "blocks")


# --- The backward pass, from what the forward pass kept ---------------------------


def _row_mean(x):
    """``x.mean(axis=-1, keepdims=True)``: for float32 and float64 the same sum and division, without ``mean``'s overhead."""
    if x.dtype not in (np.float32, np.float64):   # mean adds float16 up in float32
        return x.mean(axis=-1, keepdims=True)
    return x.sum(axis=-1, keepdims=True) / x.shape[-1]


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


def _gelu_backward(d_out, z, tanh):
    # d_out times GELU's slope, 0.5 * (1 + tanh) + 0.5 * z * (1 - tanh * tanh)
    # * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * z * z), in place as transformer.py's _gelu is.
    slope = 1.0 + tanh
    slope *= 0.5
    squared = tanh * tanh
    np.subtract(1.0, squared, out=squared)
    inner = 0.5 * z
    inner *= squared
    inner *= SQRT_2_OVER_PI
    np.multiply(3 * 0.044715, z, out=squared)
    squared *= z
    squared += 1.0
    inner *= squared
    slope += inner
    slope *= d_out
    return slope


def _attention_backward(d_out, p, cache):
    """Gradients of causal attention: with respect to its input x and its eight parameters."""
    x, Q, K, V, weights, heads, scale = cache
    n_heads = Q.shape[1]
    grads = {
        "W_O": _flat(heads).T @ _flat(d_out),
        "b_O": d_out.sum(axis=(0, 1)),
    }
    d_heads = _split_heads(d_out @ _transposed(p["W_O"]), n_heads)         # (B, H, T, d_head)
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
    p, dtype = _check_gpt(params, n_heads)
    tokens = _check_tokens(tokens, p["W_E"], p["W_pos"], min_len=2)
    loss, grads = _loss_and_grads(tokens.reshape(-1, tokens.shape[-1]), p, n_heads, dtype)
    return loss, _ordered_like(grads, params)
# --8<-- [end:gpt_loss_and_grads]


def _loss_and_grads(batch, p, n_heads, dtype):
    """:func:`gpt_loss_and_grads` of checked ids ``(B, T)`` and parameters ``p`` (:func:`_check_gpt`'s), grads like ``p``."""
    logits, kept = _forward(batch[:, :-1], p, n_heads, "gpt_loss_and_grads: the stream or the logits", keep=True)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):   # overflow is detected below
        losses, d_logits = _cross_entropy(logits, batch[:, 1:])
        grads = _backward(d_logits, batch[:, :-1], p, kept)
        if dtype != logits.dtype:   # float16 parameters: computed in float32
            grads = _tree_map(lambda g: g.astype(dtype), grads)
    loss = float(losses.mean())
    if not (math.isfinite(loss) and all_finite(grads)):
        raise _gpt_overflow("gpt_loss_and_grads: the loss or its gradient", p)
    return loss, _ordered_like(grads, p)


def _cross_entropy(logits, targets):
    """``-log softmax(logits)[target]`` at every position, and the gradient of their mean with respect to the logits."""
    # The arithmetic in place where it can be, the same operations in the same order.
    log_probs = logits - logits.max(axis=-1, keepdims=True, initial=-np.inf)
    d_logits = np.exp(log_probs)
    log_probs -= np.log(d_logits.sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    np.exp(log_probs, out=d_logits)
    np.put_along_axis(d_logits, targets[..., None], np.take_along_axis(d_logits, targets[..., None], axis=-1) - 1, axis=-1)
    d_logits /= targets.size
    return -picked, d_logits


def _ordered_like(grads: dict, params) -> dict:
    """``grads`` with its keys in the order of ``params``' keys (those of the model)."""
    out = {name: grads[name] for name in params if name in grads}
    out["blocks"] = [
        {name: g[name] for name in block if name in g} for g, block in zip(grads["blocks"], params["blocks"], strict=True)
    ]
    return {name: out[name] for name in params if name in out}


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
    p, d_model, d_kv = _check_attention_params(params, n_heads)
    if d_kv != d_model:
        raise ValueError(f"params must be a self-attention layer, W_K and W_V (d_model, d_model); got d_kv = {d_kv}")
    x, d_out = _float_array(x, "x"), _float_array(d_out, "d_out")
    if x.ndim < 2 or x.shape[-1] != d_model or x.shape[-2] < 1:
        raise ValueError(f"x must have shape (..., T, d_model) with d_model = {d_model}, got shape {x.shape}")
    if d_out.shape != x.shape:
        raise ValueError(f"d_out must have the shape of x {x.shape}, the layer's output, got {d_out.shape}")
    dtype = np.result_type(x, d_out, *p.values())
    batch = x.reshape(-1, *x.shape[-2:]).astype(dtype, copy=False)
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below, not warned about
            _, cache = _attention(batch, p, n_heads, causal_mask(batch.shape[-2]))
            d_x, grads = _attention_backward(d_out.reshape(batch.shape).astype(dtype, copy=False), p, cache)
    except ValueError:   # the arguments are checked: a row of scores overflowed
        d_x, grads = np.full(1, np.inf), {}
    if not (np.isfinite(d_x).all() and all(np.isfinite(g).all() for g in grads.values())):
        arrays = {f"params[{name!r}]": value for name, value in p.items()}
        raise overflow_error("the gradients", dtype, {"x": x, "d_out": d_out, **arrays}, most=4)
    return d_x.reshape(x.shape), {name: grads[name] for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")}


def _float_array(value, name: str) -> np.ndarray:
    """``value`` as an array of finite floats (integers and booleans become float64)."""
    array = as_float_array(value, name)
    check_finite(array, name)
    return array


# --- Adam, on dicts and lists of arrays -------------------------------------------


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
            raise TypeError(f"{where} must be a dict like params, got {describe(tree)}")
        missing = [key for key in like if key not in tree]
        if missing:
            raise ValueError(f"{where} lacks {missing}: it must have the keys of params")
        return {key: _check_tree(tree[key], like[key], name, f"{path}[{key!r}]") for key in like}
    if isinstance(like, (list, tuple)):
        if isinstance(tree, (str, bytes, Mapping)) or not hasattr(tree, "__len__") or len(tree) != len(like):
            raise ValueError(f"{where} must be a list of {len(like)} items like params, got {describe(tree)}")
        return [_check_tree(item, like[i], name, f"{path}[{i}]") for i, item in enumerate(tree)]
    if isinstance(tree, (Mapping, list, tuple)):
        raise TypeError(f"{where} must be an array like params{path} {np.shape(like)}, got {describe(tree)}")
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
    value = real_number(value, name)
    if not (value > 0 and (value < 1 or not below_one)):
        expected = "a number strictly between 0 and 1" if below_one else "a finite number > 0"
        raise ValueError(f"{name} must be {expected}, got {value!r}")
    return value


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
    if state is not None and (not isinstance(state, Mapping) or not {"step", "exp_avg", "exp_avg_sq"} <= set(state)):
        raise TypeError(f"state must be None or the state adam_step returned, got {describe(state)}")
    if state is not None:
        state = {"step": state["step"], "exp_avg": _check_tree(state["exp_avg"], p, "state['exp_avg']"),
                 "exp_avg_sq": _check_tree(state["exp_avg_sq"], p, "state['exp_avg_sq']")}
    return _adam(p, g, state, lr, beta1, beta2, eps)
# --8<-- [end:adam_step]


def _adam(p, g, state, lr, beta1=0.9, beta2=0.999, eps=1e-8):
    """:func:`adam_step` on checked trees of one structure (the training loop's, which made them)."""
    if state is None:
        state = {"step": 0, "exp_avg": _tree_map(np.zeros_like, p), "exp_avg_sq": _tree_map(np.zeros_like, p)}
    t = state["step"] + 1
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected below, not warned about
        new_params, avg, avg_sq, finite = _adam_update(p, g, state, t, lr, beta1, beta2, eps)
    if not finite:
        params_, grads_ = (max(_tree_leaves(tree), key=largest) for tree in (p, g))
        raise overflow_error("the Adam step's new parameters", _dtype_of(p),
                             {"params": params_, "grads": grads_, "lr": lr})
    return new_params, {"step": t, "exp_avg": avg, "exp_avg_sq": avg_sq}


def _adam_update(p, g, state, t, lr, beta1, beta2, eps):
    """The new parameters and averages as trees like ``p``, and whether all their entries are finite."""
    trees = (p, g, state["exp_avg"], state["exp_avg_sq"])
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


# --- Text, windows and the loop -----------------------------------------------------


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
        raise TypeError(f"text must be a string, got {describe(text)}")
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
    ids = _check_stream(ids)
    batch_size, length = check_positive_int("batch_size", batch_size), check_positive_int("length", length)
    if length > len(ids):
        raise ValueError(f"length = {length} is longer than ids ({len(ids)} tokens)")
    if int(batch_size) * int(length) > 10**8:
        raise ValueError(f"batch_size × length = {batch_size} × {length} tokens is more than a batch of 10**8 can hold")
    check_rng(rng)
    return _windows(ids, batch_size, length, rng)


def _windows(ids, batch_size, length, rng):
    starts = rng.integers(0, len(ids) - length + 1, size=batch_size)
    return ids[starts[:, None] + np.arange(length)]


def _check_stream(ids, vocab_size=None, min_len=1) -> np.ndarray:
    """One stream of token ids ``(N,)``, N >= ``min_len``, each below ``vocab_size`` (the rows of W_E) if given."""
    try:
        ids = np.asarray(ids)
    except (TypeError, ValueError) as error:
        raise ValueError(f"ids must be one stream of token ids, got {describe(ids)}: {error}") from None
    if ids.dtype.kind not in "iu":
        raise TypeError(f"ids must be integer token ids, got {describe(ids)}")
    if ids.ndim != 1 or len(ids) < min_len:
        raise ValueError(f"ids must be one stream of at least {min_len} token ids, shape (N,), got shape {ids.shape}")
    if ids.min() < 0 or (vocab_size is not None and ids.max() >= vocab_size):
        limit = "" if vocab_size is None else f" .. {vocab_size - 1} (the rows of W_E)"
        raise ValueError(f"ids must be token ids 0{limit}, got ids from {ids.min()} to {ids.max()}")
    return ids


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
    p, _ = _check_gpt(params, n_heads)
    steps, batch_size, context = (check_positive_int(name, size) for name, size in
                                  (("steps", steps), ("batch_size", batch_size), ("context", context)))
    if context > p["W_pos"].shape[0]:
        raise ValueError(f"context = {context} is longer than the model reads, max_len = {p['W_pos'].shape[0]}")
    ids = _check_stream(ids, p["W_E"].shape[0], min_len=context + 1)
    if not callable(lr):
        _positive(lr, "lr")
    check_rng(rng)

    def steps_():
        # Every argument is checked above, and each step's parameters are Adam's, checked finite
        # by it: the steps need no checks of their own (the private functions skip them).
        params, state, rate = p, None, None
        for step in range(1, steps + 1):
            batch = _windows(ids, batch_size, context + 1, rng)
            try:
                loss, grads = _loss_and_grads(batch, params, n_heads, p["W_E"].dtype)
            except ValueError as error:   # a sum too large: at step 1 the parameters' fault, later lr's
                if step == 1:
                    raise
                raise ValueError(f"lr = {rate!r} is too large: after {step - 1} Adam steps of about lr each, "
                                 f"{error}; expected a learning rate that keeps the model's sums finite") from None
            rate = _positive(lr(step), "lr") if callable(lr) else lr
            params, state = _adam(params, grads, state, rate)
            yield step, loss, params

    return steps_()
# --8<-- [end:train]


# --- Saving ------------------------------------------------------------------------


def params_to_arrays(params) -> dict:
    """The parameters as one flat dict of arrays, for ``np.savez``: ``blocks.0.W_Q`` and so on.

    >>> from snippets.transformer import init_gpt
    >>> arrays = params_to_arrays(init_gpt(5, 8, 8, 2, 2, 16, np.random.default_rng(0)))
    >>> len(arrays), [name for name in arrays if name.startswith("blocks.1.W_")][:2]
    (36, ['blocks.1.W_Q', 'blocks.1.W_K'])
    """
    p, _ = _check_gpt(params, 1)
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
        raise TypeError(f"arrays must be a dict of arrays (or a loaded .npz), got {describe(arrays)}")
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
    try:
        return _check_gpt(params, 1)[0]
    except (TypeError, ValueError) as error:
        raise type(error)(f"arrays: {error}") from None
