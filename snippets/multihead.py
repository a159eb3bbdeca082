"""Multi-head attention: the soft lookup inside a network (chapter 4).

Shapes follow the site's notation. Queries come from ``x_q (..., T, d_model)``
(decoder states, say), keys and values from ``x_kv (..., S, d_kv)`` (encoder
states); self-attention is ``x_kv = x_q``. Projections multiply on the right,
``Q = x_q @ W_Q + b_Q``. With ``H`` heads every projected array is cut into
``H`` slices of ``d_head = d_model / H`` columns, and the heads live on their
own axis: ``(..., H, T, d_head)``. A boolean ``mask`` is True where a query
may look at a key and broadcasts to the weights' shape ``(..., H, T, S)``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np

from snippets._checks import (
    as_float_array,
    as_mask,
    check_bool,
    check_finite,
    check_fits,
    check_head_sizes,
    check_positive_int,
    check_rng,
    describe,
    overflow_error,
    work_dtype,
)
from snippets.attention import _attend

PARAMETER_NAMES = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")


# --8<-- [start:init_params]
def init_params(d_model, n_heads, rng, d_kv=None, bias=True):
    """Random projections of one attention layer, as a dict of arrays.

    ``W_Q (d_model, d_model)``, ``W_K (d_kv, d_model)``,
    ``W_V (d_kv, d_model)``, ``W_O (d_model, d_model)`` and biases
    ``b_Q, b_K, b_V, b_O`` of shape ``(d_model,)``. ``d_kv``, the width
    of the states that keys and values are made from, defaults to
    ``d_model``. With ``bias=False`` the biases are zeros.

    >>> params = init_params(8, 2, np.random.default_rng(0), d_kv=6)
    >>> {name: value.shape for name, value in params.items()}       # doctest: +NORMALIZE_WHITESPACE
    {'W_Q': (8, 8), 'W_K': (6, 8), 'W_V': (6, 8), 'W_O': (8, 8),
     'b_Q': (8,), 'b_K': (8,), 'b_V': (8,), 'b_O': (8,)}
    """
    check_head_sizes(d_model, n_heads)
    d_kv = d_model if d_kv is None else d_kv
    check_positive_int("d_kv", d_kv)
    check_fits("W_Q", (d_model, d_model), np.float64, d_model=d_model)
    check_fits("W_K", (d_kv, d_model), np.float64, d_kv=d_kv, d_model=d_model)
    check_rng(rng)
    check_bool("bias", bias)
    # Entries of size 1/sqrt(fan_in) keep the projected vectors about as
    # large as the inputs: scores that neither vanish nor saturate.
    fan_in = {"W_Q": d_model, "W_K": d_kv, "W_V": d_kv, "W_O": d_model}
    params = {
        name: rng.normal(0.0, n**-0.5, size=(n, d_model))
        for name, n in fan_in.items()
    }
    for name in ("b_Q", "b_K", "b_V", "b_O"):
        # Small but not zero, so that a forgotten bias changes the result.
        params[name] = (
            rng.normal(0.0, 0.1, size=d_model) if bias else np.zeros(d_model)
        )
    return params
# --8<-- [end:init_params]


def _check_params(params, n_heads, d_kv_of_inputs=None):
    """The parameters as float arrays, and ``d_model``, ``d_kv`` read off them.

    ``d_model`` is the size most of the parameters agree on, and ``d_kv`` the
    one W_K, W_V (and the inputs x_kv, when given) agree on, so that the
    message blames the one parameter that differs.
    """
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a dict with the keys {list(PARAMETER_NAMES)}, got {describe(params)}")
    missing = [name for name in PARAMETER_NAMES if name not in params]
    if missing:
        raise ValueError(
            f"params lacks {missing}: "
            f"expected the keys {list(PARAMETER_NAMES)}"
        )
    p = {name: as_float_array(params[name], name) for name in PARAMETER_NAMES}
    for name, value in p.items():
        if name.startswith("W") and value.ndim != 2:
            raise ValueError(f"{name} must be a matrix, got shape {value.shape}")
        if name.startswith("b") and value.ndim != 1:
            raise ValueError(f"{name} must be a vector (d_model,), got shape {value.shape}")
    W_Q, W_K, W_V, W_O = (p[name] for name in ("W_Q", "W_K", "W_V", "W_O"))
    if W_Q.shape[0] != W_Q.shape[1]:
        raise ValueError(
            f"W_Q must be square, (d_model, d_model); got {W_Q.shape}"
        )
    votes = [*W_Q.shape, W_K.shape[1], W_V.shape[1], *W_O.shape]
    votes += [p[name].shape[0] for name in ("b_Q", "b_K", "b_V", "b_O")]
    d_model = Counter(votes).most_common(1)[0][0]
    votes = [W_K.shape[0], W_V.shape[0]]
    votes += [] if d_kv_of_inputs is None else [d_kv_of_inputs]
    (d_kv, count), = Counter(votes).most_common(1)
    if count == 1:  # W_K and W_V disagree, and no input breaks the tie
        raise ValueError(
            f"W_K and W_V must have the same number of rows d_kv: got W_K {W_K.shape} and W_V {W_V.shape}"
        )
    expected = {"W_Q": (d_model, d_model), "W_K": (d_kv, d_model)}
    expected |= {"W_V": (d_kv, d_model), "W_O": (d_model, d_model)}
    expected |= dict.fromkeys(("b_Q", "b_K", "b_V", "b_O"), (d_model,))
    for name, shape in expected.items():
        if p[name].shape != shape:
            raise ValueError(
                f"{name} has shape {p[name].shape}, expected {shape} "
                f"(d_model = {d_model} and d_kv = {d_kv}, the sizes "
                "the other parameters and the inputs agree on)"
            )
    check_head_sizes(d_model, n_heads)
    for name, value in p.items():
        check_finite(value, name)
    return p, d_model, d_kv


def _check_inputs(x_q, x_kv, d_model, d_kv, n_heads, mask):
    if x_q.ndim < 2 or x_kv.ndim < 2:
        raise ValueError(
            "x_q and x_kv need at least 2 dimensions, (..., T, d_model) and "
            f"(..., S, d_kv); got x_q {x_q.shape} and x_kv {x_kv.shape}"
        )
    if x_q.shape[-1] != d_model:
        raise ValueError(
            f"x_q {x_q.shape} must end in d_model = {d_model}, the rows of W_Q"
        )
    if x_kv.shape[-1] != d_kv:
        raise ValueError(
            f"x_kv {x_kv.shape} must end in d_kv = {d_kv}, "
            "the rows of W_K and W_V"
        )
    try:
        batch = np.broadcast_shapes(x_q.shape[:-2], x_kv.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the batch dimensions of x_q {x_q.shape} and x_kv {x_kv.shape} "
            "do not broadcast"
        ) from None
    weights_shape = (*batch, n_heads, x_q.shape[-2], x_kv.shape[-2])
    if mask is not None:
        try:
            np.broadcast_shapes(mask.shape, weights_shape)
        except ValueError:
            raise ValueError(
                f"mask of shape {mask.shape} does not broadcast to the "
                f"weights' shape (..., n_heads, T, S) = {weights_shape}"
            ) from None
    check_finite(x_q, "x_q")
    check_finite(x_kv, "x_kv")


def _layer_arguments(x_q, x_kv, params, n_heads, mask):
    """The checked arguments of a layer, all in one float dtype, and the dtype of the output."""
    x_q, x_kv = as_float_array(x_q, "x_q"), as_float_array(x_kv, "x_kv")
    mask = as_mask(mask)
    p, d_model, d_kv = _check_params(params, n_heads, x_kv.shape[-1] if x_kv.ndim else None)
    _check_inputs(x_q, x_kv, d_model, d_kv, n_heads, mask)
    dtype = np.result_type(x_q, x_kv, *p.values())
    work = work_dtype(dtype)
    x_q, x_kv = x_q.astype(work, copy=False), x_kv.astype(work, copy=False)
    p = {name: value.astype(work, copy=False) for name, value in p.items()}
    return x_q, x_kv, p, mask, dtype


def _layer_overflow(x_q, x_kv, p) -> ValueError:
    return overflow_error("the layer's projections or scores", x_q.dtype, {"x_q": x_q, "x_kv": x_kv, **p})


def _heads_attention(Q, K, V, mask, x_q, x_kv, p):
    """Attention of every head, ``(..., H, T, d)``; each head scales by 1/√d_head."""
    d_head = Q.shape[-1]
    result = _attend(Q, K, V, mask, 1.0 / np.sqrt(d_head))
    if result is None:  # the inputs are finite: the projections or the scores overflowed
        raise _layer_overflow(x_q, x_kv, p)
    return result


def _finite_output(output, x_q, x_kv, p):
    if not np.isfinite(output).all():
        raise _layer_overflow(x_q, x_kv, p)
    return output


def _split_heads(x, n_heads):
    *batch, T, d_model = x.shape
    by_token = x.reshape(*batch, T, n_heads, d_model // n_heads)
    return np.swapaxes(by_token, -3, -2)


def _merge_heads(x):
    by_token = np.swapaxes(x, -3, -2)
    return by_token.reshape(*by_token.shape[:-2], by_token.shape[-2] * by_token.shape[-1])


def _as_numbers(x, caller: str) -> np.ndarray:
    """``x`` as an array of finite numbers of any real dtype (bool, int or float), unconverted."""
    try:
        x = np.asarray(x)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{caller}: x must be an array of numbers, got {describe(x)}: {error}") from None
    if x.dtype.kind not in "biuf":
        raise ValueError(f"{caller}: x must hold numbers (real: float, int or bool), got {describe(x)}")
    if x.dtype.kind == "f":
        check_finite(x, f"{caller}: x")
    return x


# --8<-- [start:split_heads]
def split_heads(x, n_heads: int) -> np.ndarray:
    """Cut the last axis into heads: (..., T, d_model) -> (..., H, T, d_head).

    The reshape to ``(..., T, H, d_head)`` keeps each token's row together
    and cuts it into H consecutive slices; the transpose then moves the
    head axis in front of the tokens, so that each head is one
    ``(T, d_head)`` matrix.

    >>> x = np.arange(12).reshape(2, 6)          # T = 2 tokens, d_model = 6
    >>> split_heads(x, 3).tolist()               # 3 heads of d_head = 2
    [[[0, 1], [6, 7]], [[2, 3], [8, 9]], [[4, 5], [10, 11]]]
    """
    x = _as_numbers(x, "split_heads")
    check_positive_int("n_heads", n_heads)
    if x.ndim < 2 or x.shape[-1] % n_heads:
        raise ValueError(
            f"split_heads: x must have shape (..., T, d_model) with d_model divisible by "
            f"n_heads = {n_heads}, got shape {x.shape}"
        )
    return _split_heads(x, n_heads)


def merge_heads(x) -> np.ndarray:
    """Concatenate the heads: (..., H, T, d_head) -> (..., T, H * d_head).

    >>> heads = np.arange(12).reshape(3, 2, 2)   # H = 3, T = 2, d_head = 2
    >>> merge_heads(heads).tolist()
    [[0, 1, 4, 5, 8, 9], [2, 3, 6, 7, 10, 11]]
    """
    x = _as_numbers(x, "merge_heads")
    if x.ndim < 3:
        raise ValueError(f"merge_heads: x must have shape (..., H, T, d_head), got shape {x.shape}")
    return _merge_heads(x)
# --8<-- [end:split_heads]


# --8<-- [start:multi_head_attention]
def multi_head_attention(x_q, x_kv, params, n_heads: int, mask=None):
    """H soft lookups side by side, each on its own slice of the projections.

    Returns ``(output, weights)``: ``output (..., T, d_model)`` and the
    attention weights of every head, ``(..., n_heads, T, S)``.

    >>> rng = np.random.default_rng(0)
    >>> params = init_params(8, 2, rng, d_kv=6)                   # d_model = 8, H = 2
    >>> x_q, x_kv = rng.normal(size=(3, 8)), rng.normal(size=(5, 6))   # T = 3, S = 5
    >>> output, weights = multi_head_attention(x_q, x_kv, params, 2)
    >>> output.shape, weights.shape
    ((3, 8), (2, 3, 5))
    >>> weights.sum(axis=-1).round(6).tolist()                   # every head's rows sum to 1
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """
    x_q, x_kv, p, mask, dtype = _layer_arguments(x_q, x_kv, params, n_heads, mask)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected, not warned about
        Q = x_q @ p["W_Q"] + p["b_Q"]       # (..., T, d_model)
        K = x_kv @ p["W_K"] + p["b_K"]      # (..., S, d_model)
        V = x_kv @ p["W_V"] + p["b_V"]      # (..., S, d_model)
        heads, weights = _heads_attention(
            _split_heads(Q, n_heads),       # (..., H, T, d_head)
            _split_heads(K, n_heads),       # (..., H, S, d_head)
            _split_heads(V, n_heads),       # (..., H, S, d_head)
            mask, x_q, x_kv, p,
        )                                   # (..., H, T, d_head), (..., H, T, S)
        output = _merge_heads(heads) @ p["W_O"] + p["b_O"]
    output = _finite_output(output, x_q, x_kv, p)
    return output.astype(dtype, copy=False), weights.astype(dtype, copy=False)
# --8<-- [end:multi_head_attention]


# --8<-- [start:loop]
def _head_slices(p, n_heads, d_model):
    d_head = d_model // n_heads
    heads = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        head = {name: p[name][:, cols] for name in ("W_Q", "W_K", "W_V")}
        head |= {name: p[name][cols] for name in ("b_Q", "b_K", "b_V")}
        head["W_O"] = p["W_O"][cols, :]
        heads.append(head)
    return heads


def head_params(params, n_heads: int) -> list[dict[str, np.ndarray]]:
    """The per-head matrices hidden in the big ones, as column slices.

    Head h owns columns ``h·d_head`` to ``(h+1)·d_head``: it gets
    ``W_Q (d_model, d_head)``, ``W_K, W_V (d_kv, d_head)``, the same
    slices of the biases, and ``W_O (d_head, d_model)``: the rows of W_O
    that multiply head h's part of the concatenation.

    >>> heads = head_params(init_params(8, 2, np.random.default_rng(0), d_kv=6), 2)
    >>> [(head["W_Q"].shape, head["W_K"].shape, head["W_O"].shape) for head in heads]
    [((8, 4), (6, 4), (4, 8)), ((8, 4), (6, 4), (4, 8))]
    """
    p, d_model, _ = _check_params(params, n_heads)
    return _head_slices(p, n_heads, d_model)


def multi_head_attention_loop(x_q, x_kv, params, n_heads: int, mask=None):
    """The same layer, head by head, with per-head matrices and no reshape.

    >>> rng = np.random.default_rng(0)
    >>> params = init_params(8, 2, rng, d_kv=6)
    >>> x_q, x_kv = rng.normal(size=(3, 8)), rng.normal(size=(5, 6))
    >>> loop_output, _ = multi_head_attention_loop(x_q, x_kv, params, 2)
    >>> output, _ = multi_head_attention(x_q, x_kv, params, 2)
    >>> bool(np.allclose(loop_output, output, rtol=0, atol=1e-12))
    True
    """
    x_q, x_kv, p, mask, dtype = _layer_arguments(x_q, x_kv, params, n_heads, mask)
    if mask is not None:  # give the mask a head axis, to take head h's slice
        heads_shape = (n_heads, x_q.shape[-2], x_kv.shape[-2])
        mask = np.broadcast_to(
            mask, np.broadcast_shapes(mask.shape, heads_shape)
        )
    outputs, weights = [], []
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected, not warned about
        for h, w in enumerate(_head_slices(p, n_heads, x_q.shape[-1])):
            out, weight = _heads_attention(
                x_q @ w["W_Q"] + w["b_Q"],      # (..., T, d_head)
                x_kv @ w["W_K"] + w["b_K"],     # (..., S, d_head)
                x_kv @ w["W_V"] + w["b_V"],     # (..., S, d_head)
                None if mask is None else mask[..., h, :, :], x_q, x_kv, p,
            )
            outputs.append(out)
            weights.append(weight)
        concatenated = np.concatenate(outputs, axis=-1)     # (..., T, d_model)
        output = _finite_output(concatenated @ p["W_O"] + p["b_O"], x_q, x_kv, p)
    return output.astype(dtype, copy=False), np.stack(weights, axis=-3).astype(dtype, copy=False)
# --8<-- [end:loop]


# --8<-- [start:summed_heads]
def summed_heads_attention(x_q, x_kv, params, n_heads, head_values,
                           mask=None):
    """The less common variant: full-width values, and the heads are added.

    Queries and keys are split into heads as usual. ``head_values`` of
    shape ``(n_heads, d_kv, d_model)`` gives each head its own full-size
    value projection, so each head returns ``(..., T, d_model)``; the sum
    of the heads goes through ``W_O``. ``params["W_V"]`` and
    ``params["b_V"]`` are not used.

    >>> rng = np.random.default_rng(0)
    >>> params = init_params(8, 2, rng, d_kv=6)
    >>> head_values = rng.normal(size=(2, 6, 8))                  # (n_heads, d_kv, d_model)
    >>> x_q, x_kv = rng.normal(size=(3, 8)), rng.normal(size=(5, 6))
    >>> output, weights = summed_heads_attention(x_q, x_kv, params, 2, head_values)
    >>> output.shape, weights.shape
    ((3, 8), (2, 3, 5))
    """
    x_q, x_kv, p, mask, dtype = _layer_arguments(x_q, x_kv, params, n_heads, mask)
    head_values = as_float_array(head_values, "head_values")
    d_model, d_kv = x_q.shape[-1], x_kv.shape[-1]
    if head_values.shape != (n_heads, d_kv, d_model):
        raise ValueError(
            f"head_values has shape {head_values.shape}, expected "
            f"(n_heads, d_kv, d_model) = {(n_heads, d_kv, d_model)}"
        )
    check_finite(head_values, "head_values")
    dtype = np.result_type(dtype, head_values)
    head_values = head_values.astype(work_dtype(dtype), copy=False)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is detected, not warned about
        Q = _split_heads(x_q @ p["W_Q"] + p["b_Q"], n_heads)   # (.., H, T, d_head)
        K = _split_heads(x_kv @ p["W_K"] + p["b_K"], n_heads)  # (.., H, S, d_head)
        V = np.expand_dims(x_kv, -3) @ head_values             # (.., H, S, d_model)
        heads, weights = _heads_attention(Q, K, V, mask, x_q, x_kv, {**p, "head_values": head_values})
        output = heads.sum(axis=-3) @ p["W_O"] + p["b_O"]
    output = _finite_output(output, x_q, x_kv, {**p, "head_values": head_values})
    return output.astype(dtype, copy=False), weights.astype(dtype, copy=False)
# --8<-- [end:summed_heads]


# --8<-- [start:masks]
def causal_mask(T: int) -> np.ndarray:
    """``(T, T)`` boolean: query t may see keys 0..t, never the future.

    >>> causal_mask(3).astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    """
    check_positive_int("T", T)
    check_fits("the mask", (T, T), bool, T=T)
    return np.tril(np.ones((T, T), dtype=bool))


def padding_mask(lengths, S: int) -> np.ndarray:
    """``(B, 1, 1, S)`` boolean: sequence b has ``lengths[b]`` real keys.

    Keys from ``lengths[b]`` on are padding. The two axes of size 1
    broadcast over the heads and the queries: a padded key is hidden
    from every head and every query of its sequence.

    >>> mask = padding_mask([3, 1], 4)
    >>> mask.shape
    (2, 1, 1, 4)
    >>> mask[:, 0, 0].astype(int).tolist()
    [[1, 1, 1, 0], [1, 0, 0, 0]]
    """
    check_positive_int("S", S, allow_zero=True)
    try:
        lengths = np.asarray(lengths)
    except (TypeError, ValueError) as error:
        raise ValueError(f"lengths must be a 1-d array of integers (B,), got {describe(lengths)}: {error}") from None
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(
            "lengths must be a 1-d array of integers (B,), "
            f"got {lengths.dtype} {lengths.shape}"
        )
    if ((lengths < 0) | (lengths > S)).any():
        raise ValueError(
            f"lengths must lie in 0..S = 0..{S}, got {lengths.tolist()}"
        )
    check_fits("the key positions", (S,), np.int64, S=S)
    check_fits("the mask", (len(lengths), S), bool, S=S)
    real = np.arange(S) < lengths[:, None]      # (B, S)
    return real[:, None, None, :]
# --8<-- [end:masks]


# --8<-- [start:count_parameters]
def count_parameters(d_model: int, n_layers: int = 1, bias: bool = True):
    """Weights in ``n_layers`` attention layers with ``d_kv = d_model``.

    W_Q, W_K, W_V and W_O are ``d_model × d_model`` each: ``4·d_model²``
    per layer, plus ``4·d_model`` when the projections have biases.
    A Python int, exact at any size.

    >>> count_parameters(512), count_parameters(512, n_layers=6, bias=False)
    (1050624, 6291456)
    """
    check_positive_int("d_model", d_model)
    check_positive_int("n_layers", n_layers)
    check_bool("bias", bias)
    d = int(d_model)
    per_layer = 4 * d * d + (4 * d if bias else 0)
    return int(n_layers) * per_layer
# --8<-- [end:count_parameters]
