"""Multi-head attention: the soft lookup inside a network (chapter 4).

Shapes follow the site's notation. Queries come from ``x_q (..., T, d_model)``
(decoder states, say), keys and values from ``x_kv (..., S, d_kv)`` (encoder
states); self-attention is ``x_kv = x_q``. Projections multiply on the right,
``Q = x_q @ W_q + b_q``. With ``H`` heads every projected array is cut into
``H`` slices of ``d_head = d_model / H`` columns, and the heads live on their
own axis: ``(..., H, T, d_head)``. A boolean ``mask`` is True where a query
may look at a key and broadcasts to the weights' shape ``(..., H, T, S)``.
"""

from __future__ import annotations

import numpy as np

from snippets.attention import scaled_dot_product_attention

PARAMETER_NAMES = ("W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o")


def _check_positive_int(name: str, size) -> None:
    integer = isinstance(size, (int, np.integer))
    integer = integer and not isinstance(size, bool)
    if not integer or size < 1:
        raise ValueError(f"{name} must be a positive integer, got {size!r}")


def _check_sizes(d_model, n_heads) -> None:
    _check_positive_int("d_model", d_model)
    _check_positive_int("n_heads", n_heads)
    if d_model % n_heads:
        raise ValueError(
            f"d_model = {d_model} is not divisible by n_heads = {n_heads}: "
            "every head needs the same width d_head = d_model / n_heads"
        )


# --8<-- [start:init_params]
def init_params(d_model, n_heads, rng, d_kv=None, bias=True):
    """Random projections of one attention layer, as a dict of arrays.

    ``W_q (d_model, d_model)``, ``W_k (d_kv, d_model)``,
    ``W_v (d_kv, d_model)``, ``W_o (d_model, d_model)`` and biases
    ``b_q, b_k, b_v, b_o`` of shape ``(d_model,)``. ``d_kv``, the width
    of the states that keys and values are made from, defaults to
    ``d_model``. With ``bias=False`` the biases are zeros.
    """
    _check_sizes(d_model, n_heads)
    d_kv = d_model if d_kv is None else d_kv
    _check_positive_int("d_kv", d_kv)
    # Entries of size 1/sqrt(fan_in) keep the projected vectors about as
    # large as the inputs: scores that neither vanish nor saturate.
    fan_in = {"W_q": d_model, "W_k": d_kv, "W_v": d_kv, "W_o": d_model}
    params = {
        name: rng.normal(0.0, n**-0.5, size=(n, d_model))
        for name, n in fan_in.items()
    }
    for name in ("b_q", "b_k", "b_v", "b_o"):
        # Small but not zero, so that a forgotten bias changes the result.
        params[name] = (
            rng.normal(0.0, 0.1, size=d_model) if bias else np.zeros(d_model)
        )
    return params
# --8<-- [end:init_params]


def _check_params(params, n_heads):
    """The parameters as arrays, and ``d_model``, ``d_kv`` read off them."""
    missing = [name for name in PARAMETER_NAMES if name not in params]
    if missing:
        raise ValueError(
            f"params lacks {missing}: "
            f"expected the keys {list(PARAMETER_NAMES)}"
        )
    p = {name: np.asarray(params[name]) for name in PARAMETER_NAMES}
    W_q, W_k = p["W_q"], p["W_k"]
    if W_q.ndim != 2 or W_q.shape[0] != W_q.shape[1]:
        raise ValueError(
            f"W_q must be square, (d_model, d_model); got {W_q.shape}"
        )
    if W_k.ndim != 2:
        raise ValueError(
            f"W_k must be a matrix (d_kv, d_model), got shape {W_k.shape}"
        )
    d_model, d_kv = W_q.shape[0], W_k.shape[0]
    _check_sizes(d_model, n_heads)
    expected = {"W_k": (d_kv, d_model), "W_v": (d_kv, d_model)}
    expected["W_o"] = (d_model, d_model)
    expected |= {name: (d_model,) for name in ("b_q", "b_k", "b_v", "b_o")}
    for name, shape in expected.items():
        if p[name].shape != shape:
            raise ValueError(
                f"{name} has shape {p[name].shape}, expected {shape} "
                f"(d_model = {d_model} from W_q {W_q.shape}, "
                f"d_kv = {d_kv} from W_k {W_k.shape})"
            )
    return p, d_model, d_kv


def _check_inputs(x_q, x_kv, d_model, d_kv, n_heads, mask):
    if x_q.ndim < 2 or x_kv.ndim < 2:
        raise ValueError(
            "x_q and x_kv need at least 2 dimensions, (..., T, d_model) and "
            f"(..., S, d_kv); got x_q {x_q.shape} and x_kv {x_kv.shape}"
        )
    if x_q.shape[-1] != d_model:
        raise ValueError(
            f"x_q {x_q.shape} must end in d_model = {d_model}, the rows of W_q"
        )
    if x_kv.shape[-1] != d_kv:
        raise ValueError(
            f"x_kv {x_kv.shape} must end in d_kv = {d_kv}, "
            "the rows of W_k and W_v"
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
        if mask.dtype != bool:
            raise ValueError(
                "mask must be boolean (True = may attend), "
                f"got dtype {mask.dtype}"
            )
        try:
            np.broadcast_shapes(mask.shape, weights_shape)
        except ValueError:
            raise ValueError(
                f"mask of shape {mask.shape} does not broadcast to the "
                f"weights' shape (..., n_heads, T, S) = {weights_shape}"
            ) from None


# --8<-- [start:split_heads]
def split_heads(x, n_heads: int) -> np.ndarray:
    """Cut the last axis into heads: (..., T, d_model) -> (..., H, T, d_head).

    The reshape to ``(..., T, H, d_head)`` keeps each token's row together
    and cuts it into H consecutive slices; the transpose then moves the
    head axis in front of the tokens, so that each head is one
    ``(T, d_head)`` matrix.
    """
    x = np.asarray(x)
    _check_positive_int("n_heads", n_heads)
    if x.ndim < 2 or x.shape[-1] % n_heads:
        raise ValueError(
            f"split_heads: x must have shape (..., T, d_model) with d_model divisible by "
            f"n_heads = {n_heads}, got shape {x.shape}"
        )
    *batch, T, d_model = x.shape
    by_token = x.reshape(*batch, T, n_heads, d_model // n_heads)
    return np.swapaxes(by_token, -3, -2)


def merge_heads(x) -> np.ndarray:
    """Concatenate the heads: (..., H, T, d_head) -> (..., T, H * d_head)."""
    x = np.asarray(x)
    if x.ndim < 3:
        raise ValueError(f"merge_heads: x must have shape (..., H, T, d_head), got shape {x.shape}")
    by_token = np.swapaxes(x, -3, -2)
    return by_token.reshape(*by_token.shape[:-2], -1)
# --8<-- [end:split_heads]


# --8<-- [start:multi_head_attention]
def multi_head_attention(x_q, x_kv, params, n_heads: int, mask=None):
    """H soft lookups side by side, each on its own slice of the projections.

    Returns ``(output, weights)``: ``output (..., T, d_model)`` and the
    attention weights of every head, ``(..., n_heads, T, S)``.
    """
    x_q, x_kv = np.asarray(x_q), np.asarray(x_kv)
    mask = None if mask is None else np.asarray(mask)
    p, d_model, d_kv = _check_params(params, n_heads)
    _check_inputs(x_q, x_kv, d_model, d_kv, n_heads, mask)

    q = x_q @ p["W_q"] + p["b_q"]       # (..., T, d_model)
    k = x_kv @ p["W_k"] + p["b_k"]      # (..., S, d_model)
    v = x_kv @ p["W_v"] + p["b_v"]      # (..., S, d_model)
    heads, weights = scaled_dot_product_attention(
        split_heads(q, n_heads),        # (..., H, T, d_head)
        split_heads(k, n_heads),        # (..., H, S, d_head)
        split_heads(v, n_heads),        # (..., H, S, d_head)
        mask=mask,
    )                                   # (..., H, T, d_head), (..., H, T, S)
    return merge_heads(heads) @ p["W_o"] + p["b_o"], weights
# --8<-- [end:multi_head_attention]


# --8<-- [start:loop]
def head_params(params, n_heads: int) -> list[dict[str, np.ndarray]]:
    """The per-head matrices hidden in the big ones, as column slices.

    Head h owns columns ``h·d_head`` to ``(h+1)·d_head``: it gets
    ``W_q (d_model, d_head)``, ``W_k, W_v (d_kv, d_head)``, the same
    slices of the biases, and ``W_o (d_head, d_model)``: the rows of W_o
    that multiply head h's part of the concatenation.
    """
    p, d_model, _ = _check_params(params, n_heads)
    d_head = d_model // n_heads
    heads = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        head = {name: p[name][:, cols] for name in ("W_q", "W_k", "W_v")}
        head |= {name: p[name][cols] for name in ("b_q", "b_k", "b_v")}
        head["W_o"] = p["W_o"][cols, :]
        heads.append(head)
    return heads


def multi_head_attention_loop(x_q, x_kv, params, n_heads: int, mask=None):
    """The same layer, head by head, with per-head matrices and no reshape."""
    x_q, x_kv = np.asarray(x_q), np.asarray(x_kv)
    mask = None if mask is None else np.asarray(mask)
    p, d_model, d_kv = _check_params(params, n_heads)
    _check_inputs(x_q, x_kv, d_model, d_kv, n_heads, mask)
    if mask is not None:  # give the mask a head axis, to take head h's slice
        heads_shape = (n_heads, x_q.shape[-2], x_kv.shape[-2])
        mask = np.broadcast_to(
            mask, np.broadcast_shapes(mask.shape, heads_shape)
        )
    outputs, weights = [], []
    for h, w in enumerate(head_params(params, n_heads)):
        out, weight = scaled_dot_product_attention(
            x_q @ w["W_q"] + w["b_q"],      # (..., T, d_head)
            x_kv @ w["W_k"] + w["b_k"],     # (..., S, d_head)
            x_kv @ w["W_v"] + w["b_v"],     # (..., S, d_head)
            mask=None if mask is None else mask[..., h, :, :],
        )
        outputs.append(out)
        weights.append(weight)
    concatenated = np.concatenate(outputs, axis=-1)     # (..., T, d_model)
    return concatenated @ p["W_o"] + p["b_o"], np.stack(weights, axis=-3)
# --8<-- [end:loop]


# --8<-- [start:summed_heads]
def summed_heads_attention(x_q, x_kv, params, n_heads, head_values,
                           mask=None):
    """The less common variant: full-width values, and the heads are added.

    Queries and keys are split into heads as usual. ``head_values`` of
    shape ``(n_heads, d_kv, d_model)`` gives each head its own full-size
    value projection, so each head returns ``(..., T, d_model)``; the sum
    of the heads goes through ``W_o``. ``params["W_v"]`` and
    ``params["b_v"]`` are not used.
    """
    x_q, x_kv = np.asarray(x_q), np.asarray(x_kv)
    head_values = np.asarray(head_values)
    mask = None if mask is None else np.asarray(mask)
    p, d_model, d_kv = _check_params(params, n_heads)
    _check_inputs(x_q, x_kv, d_model, d_kv, n_heads, mask)
    if head_values.shape != (n_heads, d_kv, d_model):
        raise ValueError(
            f"head_values has shape {head_values.shape}, expected "
            f"(n_heads, d_kv, d_model) = {(n_heads, d_kv, d_model)}"
        )
    q = split_heads(x_q @ p["W_q"] + p["b_q"], n_heads)   # (.., H, T, d_head)
    k = split_heads(x_kv @ p["W_k"] + p["b_k"], n_heads)  # (.., H, S, d_head)
    v = np.expand_dims(x_kv, -3) @ head_values            # (.., H, S, d_model)
    heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    return heads.sum(axis=-3) @ p["W_o"] + p["b_o"], weights
# --8<-- [end:summed_heads]


# --8<-- [start:masks]
def causal_mask(T: int) -> np.ndarray:
    """``(T, T)`` boolean: query t may see keys 0..t, never the future."""
    _check_positive_int("T", T)
    return np.tril(np.ones((T, T), dtype=bool))


def padding_mask(lengths, S: int) -> np.ndarray:
    """``(B, 1, 1, S)`` boolean: sequence b has ``lengths[b]`` real keys.

    Keys from ``lengths[b]`` on are padding. The two axes of size 1
    broadcast over the heads and the queries: a padded key is hidden
    from every head and every query of its sequence.
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(
            "lengths must be a 1-d array of integers (B,), "
            f"got {lengths.dtype} {lengths.shape}"
        )
    if ((lengths < 0) | (lengths > S)).any():
        raise ValueError(
            f"lengths must lie in 0..S = 0..{S}, got {lengths.tolist()}"
        )
    real = np.arange(S) < lengths[:, None]      # (B, S)
    return real[:, None, None, :]
# --8<-- [end:masks]


# --8<-- [start:count_parameters]
def count_parameters(d_model: int, n_layers: int = 1, bias: bool = True):
    """Weights in ``n_layers`` attention layers with ``d_kv = d_model``.

    W_q, W_k, W_v and W_o are ``d_model × d_model`` each: ``4·d_model²``
    per layer, plus ``4·d_model`` when the projections have biases.
    A Python int, exact at any size.
    """
    _check_positive_int("d_model", d_model)
    _check_positive_int("n_layers", n_layers)
    d = int(d_model)
    per_layer = 4 * d * d + (4 * d if bias else 0)
    return int(n_layers) * per_layer
# --8<-- [end:count_parameters]
