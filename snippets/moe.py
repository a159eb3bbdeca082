"""A mixture of experts: the feed-forward
memory split in several, and a router that
picks (chapter 16).

Chapter 11 read a feed-forward layer as a
key-value memory. A mixture of experts keeps
``n_experts`` such layers, the *experts*, and
lets each token read only a few of them. The
*router* is a lookup over the experts: a
token scores every expert, ``x W_router``,
keeps the ``top_k`` best scores, and turns
those into weights with a softmax (Mixtral's
rule; gpt-oss and Qwen3 use the same). The
layer's answer is the weighted sum of the
chosen experts' answers, with ``weights =
router_weights(x, params, top_k)`` (zeros
outside the top k)::

    out = sum(weights[e] * expert_e(x)
              for the chosen experts e)

Each expert is chapter 13's feed-forward
layer, ``gelu(x W_1 + b_1) W_2 + b_2``.
``moe_forward`` runs each expert once, on the
tokens that chose it, as engines do.
tests/test_moe.py checks both functions
against a PyTorch reference that runs every
expert on every token and masks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from snippets._checks import (
    as_float_array,
    check_finite,
    check_fits,
    check_keys,
    check_positive_int,
    check_rng,
    describe,
    finite_result,
    work_dtype,
)
from snippets.transformer import _gelu

EXPERT_NAMES = ("W_1", "b_1", "W_2", "b_2")


def init_moe(rng, d_model, d_ff, n_experts):
    """Random parameters of a mixture of
    ``n_experts`` feed-forward experts, as a
    dict.

    ``W_router (d_model, n_experts)``: column
    ``e`` is expert ``e``'s key. ``experts``:
    a list of ``n_experts`` dicts, each a
    feed-forward layer
    ``W_1 (d_model, d_ff)``, ``b_1 (d_ff,)``,
    ``W_2 (d_ff, d_model)``,
    ``b_2 (d_model,)``, initialised as
    :func:`snippets.transformer.init_block`
    initialises its own.

    >>> params = init_moe(
    ...     np.random.default_rng(0),
    ...     d_model=8, d_ff=16, n_experts=4)
    >>> params["W_router"].shape
    (8, 4)
    >>> len(params["experts"])
    4
    >>> params["experts"][0]["W_1"].shape
    (8, 16)
    """
    sizes = {"d_model": d_model,
             "d_ff": d_ff,
             "n_experts": n_experts}
    for name, size in sizes.items():
        check_positive_int(name, size)
    check_rng(rng)
    check_fits("W_router",
               (d_model, n_experts),
               np.float64, **sizes)
    check_fits("the experts' W_1",
               (n_experts, d_model, d_ff),
               np.float64, **sizes)
    W_router = rng.normal(
        0.0, d_model**-0.5,
        size=(d_model, n_experts))
    experts = [
        _init_expert(rng, d_model, d_ff)
        for _ in range(n_experts)]
    return {"W_router": W_router,
            "experts": experts}


def _init_expert(rng, d_model, d_ff):
    """One feed-forward expert, its entries
    drawn as chapter 13's block draws its
    own."""
    W_1 = rng.normal(0.0, d_model**-0.5,
                     size=(d_model, d_ff))
    b_1 = rng.normal(0.0, 0.1, size=d_ff)
    W_2 = rng.normal(0.0, d_ff**-0.5,
                     size=(d_ff, d_model))
    b_2 = rng.normal(0.0, 0.1, size=d_model)
    return {"W_1": W_1, "b_1": b_1,
            "W_2": W_2, "b_2": b_2}


def _check_router(params):
    """W_router as a finite float matrix
    (d_model, n_experts)."""
    check_keys(params,
               ("W_router", "experts"),
               "init_moe")
    W_router = as_float_array(
        params["W_router"], "W_router")
    if (W_router.ndim != 2
            or 0 in W_router.shape):
        raise ValueError(
            "W_router must be a non-empty "
            "matrix (d_model, n_experts), "
            f"got shape {W_router.shape}")
    check_finite(W_router, "W_router")
    return W_router


def _check_experts(params, d_model,
                   n_experts):
    """The experts as lists of finite float
    arrays with consistent shapes."""
    experts = params["experts"]
    # a string is a sequence too, of letters
    text = isinstance(experts, (str, bytes))
    listed = isinstance(experts, Sequence)
    if text or not listed:
        raise TypeError(
            "experts must be a list of "
            "n_experts dicts (see init_moe)"
            f", got {describe(experts)}")
    if len(experts) != n_experts:
        raise ValueError(
            f"experts holds {len(experts)} "
            "experts, but W_router has "
            f"n_experts = {n_experts} "
            "columns: expected one expert "
            "per column")
    checked = []
    for e, expert in enumerate(experts):
        p = _check_expert(expert, e, d_model)
        checked.append(p)
    return checked


def _check_expert(expert, e, d_model):
    """Expert e's arrays, finite, in shapes
    that agree with each other and with
    d_model."""
    where = f"experts[{e}]"
    check_keys(expert, EXPERT_NAMES,
               "init_moe", where)
    p = {}
    for name in EXPERT_NAMES:
        label = f"{where}['{name}']"
        p[name] = as_float_array(
            expert[name], label)
    W_1 = p["W_1"]
    if (W_1.ndim != 2
            or W_1.shape[0] != d_model
            or W_1.shape[1] == 0):
        raise ValueError(
            f"{where}['W_1'] must have "
            "shape (d_model, d_ff) with "
            f"d_model = {d_model} (from "
            "W_router) and d_ff >= 1, got "
            f"{W_1.shape}")
    d_ff = W_1.shape[1]
    b_1_shape = p["b_1"].shape
    # a W_2 of no rows (a number) is W_2's
    # fault, reported below
    W_2_rows = p["W_2"].shape[:1]
    # b_1 and W_2 agree: W_1 is the odd one
    if b_1_shape == W_2_rows != (d_ff,):
        raise ValueError(
            f"{where}['W_1'] has shape "
            f"{W_1.shape}, expected "
            f"{(d_model, *W_2_rows)} "
            f"(d_model = {d_model} from "
            "W_router, d_ff = "
            f"{W_2_rows[0]} "
            "from its b_1 and W_2)")
    expected = {"b_1": (d_ff,),
                "W_2": (d_ff, d_model),
                "b_2": (d_model,)}
    for name, shape in expected.items():
        if p[name].shape != shape:
            raise ValueError(
                f"{where}['{name}'] has "
                f"shape {p[name].shape}, "
                f"expected {shape} "
                f"(d_model = {d_model}, "
                f"d_ff = {d_ff} from its "
                "W_1)")
    for name, value in p.items():
        label = f"{where}['{name}']"
        check_finite(value, label)
    return p


def _blame_router(X, W_router, experts):
    """Raise naming W_router when X and the
    first expert agree on d_model and
    W_router does not."""
    try:
        d_x = np.shape(X)[-1]
        W_1 = experts[0]["W_1"]
        d_expert = np.shape(W_1)[0]
    except (TypeError, ValueError,
            IndexError, KeyError):
        # X or the experts are malformed
        # themselves: their own checks say so
        return
    if d_x == d_expert != W_router.shape[0]:
        raise ValueError(
            "W_router has shape "
            f"{W_router.shape}, expected "
            f"{d_x} rows (d_model): the "
            f"last axis of X {np.shape(X)} "
            "and the rows of "
            "experts[0]['W_1'] "
            f"{np.shape(W_1)}")


def _checked_tokens(X, W_router, top_k):
    X = as_float_array(X, "X")
    d_model, n_experts = W_router.shape
    if X.ndim < 1 or X.shape[-1] != d_model:
        raise ValueError(
            "X must have shape (T, d_model) "
            "or (..., d_model) with "
            f"d_model = {d_model} (from "
            f"W_router {W_router.shape}), "
            f"got {describe(X)}")
    check_finite(X, "X")
    check_positive_int("top_k", top_k)
    if top_k > n_experts:
        raise ValueError(
            f"top_k = {top_k} must be at "
            f"most n_experts = {n_experts} "
            "(the columns of W_router)")
    return X


def _route(X, W_router, top_k):
    """The router's weights (N, n_experts),
    zero outside each row's top_k; ties go to
    the lower index."""
    scores = X @ W_router
    # each row's experts, best first
    order = np.argsort(-scores, axis=-1,
                       kind="stable")
    top = order[:, :top_k]
    kept = np.take_along_axis(scores, top,
                              axis=-1)
    # the first is the largest
    kept = np.exp(kept - kept[:, :1])
    total = kept.sum(axis=-1, keepdims=True)
    weights = np.zeros_like(scores)
    np.put_along_axis(weights, top,
                      kept / total, axis=-1)
    return weights, top


def router_weights(X, params, top_k):
    """The router's weights over the experts,
    ``(..., n_experts)``: a softmax over each
    token's top ``top_k`` scores.

    ``X (T, d_model)`` (or any
    ``(..., d_model)``). A token's scores are
    ``x W_router``; the ``top_k`` largest are
    turned into weights that sum to 1, and
    every other expert gets exactly 0 (of two
    equal scores, the lower expert index is
    kept).

    >>> rng = np.random.default_rng(0)
    >>> params = init_moe(
    ...     rng, d_model=8, d_ff=16,
    ...     n_experts=4)
    >>> weights = router_weights(
    ...     rng.normal(size=(3, 8)), params,
    ...     top_k=2)
    >>> for row in weights.round(2).tolist():
    ...     print(row)
    [0.69, 0.0, 0.31, 0.0]
    [0.0, 0.43, 0.0, 0.57]
    [0.0, 0.0, 0.63, 0.37]
    """
    W_router = _check_router(params)
    X = _checked_tokens(X, W_router, top_k)
    dtype = np.result_type(X, W_router)
    work = work_dtype(dtype)
    flat, router = _in_work(
        X, W_router, work)
    with np.errstate(over="ignore",
                     invalid="ignore"):
        weights, _ = _route(flat, router,
                            top_k)
    arrays = {"X": X, "W_router": W_router}
    weights = finite_result(
        weights, dtype,
        "the router's scores x W_router "
        "would", arrays)
    n_experts = W_router.shape[1]
    lead = X.shape[:-1]
    return weights.reshape(*lead, n_experts)


def moe_forward(X, params, top_k):
    """A mixture-of-experts layer: each
    token's ``top_k`` chosen experts,
    weighted by :func:`router_weights`.

    ``X (T, d_model)`` (or any
    ``(..., d_model)``) to the same shape.
    Each expert runs once, on the tokens that
    chose it (a gather, the expert, and a
    weighted scatter back), so the work grows
    with ``top_k``, not with ``n_experts``.

    >>> rng = np.random.default_rng(0)
    >>> params = init_moe(
    ...     rng, d_model=8, d_ff=16,
    ...     n_experts=4)
    >>> X = rng.normal(size=(5, 8))
    >>> moe_forward(X, params, top_k=2).shape
    (5, 8)
    """
    W_router = _check_router(params)
    try:
        X = _checked_tokens(X, W_router,
                            top_k)
    except ValueError:
        _blame_router(X, W_router,
                      params["experts"])
        raise
    d_model, n_experts = W_router.shape
    experts = _check_experts(
        params, d_model, n_experts)
    arrays = {"X": X, "W_router": W_router}
    for e, p in enumerate(experts):
        for name, value in p.items():
            label = f"experts[{e}]['{name}']"
            arrays[label] = value
    dtype = np.result_type(*arrays.values())
    work = work_dtype(dtype)
    flat, router = _in_work(
        X, W_router, work)
    with np.errstate(over="ignore",
                     invalid="ignore"):
        out = _mixture(flat, router, experts,
                       top_k, work)
    out = finite_result(
        out, dtype,
        "moe_forward's router or experts "
        "would", arrays)
    return out.reshape(X.shape)


def _in_work(X, W_router, work):
    """X's tokens as the rows of one matrix,
    and W_router, both in the work dtype."""
    flat = X.reshape(-1, X.shape[-1])
    flat = flat.astype(work, copy=False)
    router = W_router.astype(
        work, copy=False)
    return flat, router


def _mixture(flat, router, experts, top_k,
             work):
    """Each expert run once, on the tokens
    that chose it, its answers added to
    theirs with their weights."""
    weights, top = _route(flat, router,
                          top_k)
    out = np.zeros_like(flat)
    for e, p in enumerate(experts):
        # the tokens that chose expert e
        chose = (top == e).any(axis=-1)
        tokens = np.flatnonzero(chose)
        if tokens.size == 0:
            continue
        states = flat[tokens]
        answer = _expert(p, states, work)
        weight = weights[tokens, e, None]
        out[tokens] += weight * answer
    return out


def _expert(p, x, work):
    """One expert on the rows of x, computed
    in ``work``: chapter 13's feed-forward
    layer."""
    W_1, b_1, W_2, b_2 = (
        p[name].astype(work, copy=False)
        for name in EXPERT_NAMES)
    hidden, _ = _gelu(x @ W_1 + b_1)
    return hidden @ W_2 + b_2
