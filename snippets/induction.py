"""An induction head written by hand: two lookups, the first building the second's keys (chapter 12).

The model has two attention layers of one head each and nothing else. Every
position carries one wide vector, the residual stream, cut into four slots
of its ``d_model`` columns (any columns beyond them stay zero)::

    token      [0, V)             which token sits here (one-hot)
    position   [V, V + L)         where it sits (one-hot)
    previous   [V + L, 2V + L)    the token just before it   (written by head 1)
    next       [2V + L, 3V + L)   the predicted next token   (written by head 2)

with ``V = vocab_size`` and ``L = max_len``. Head 1, the previous-token head,
looks from position ``t`` at position ``t - 1`` and copies that token into the
"previous" slot. Head 2, the induction head, compares the current token with
every position's "previous" slot, so it finds the places that came right after
an earlier copy of the current token, and copies the token found there into
the "next" slot. Where two places match, a small bonus for later positions
lets the latest one win, as the latest ``db[k] = v`` wins in a dict. Each head
also has a null key (score ``null1``, ``null2``, value zero): when no real key
matches, the weight goes there and the head writes almost nothing.
"""

from __future__ import annotations

import numpy as np

from snippets._checks import check_finite, check_fits, check_positive_int, finite_result, real_number
from snippets.attention import softmax

PARAM_NAMES = (
    "W_E", "W_pos", "W_U",
    "W_Q1", "W_K1", "W_V1", "W_O1", "null1",
    "W_Q2", "W_K2", "W_V2", "W_O2", "null2",
)

# Score of a match in head 1; its null key scores half of it, other keys 0.
PREVIOUS_MATCH = 30.0
# Head 2 adds RECENCY * s to the score of the key at position s.
RECENCY = 2.0


def slots(vocab_size: int, max_len: int) -> dict[str, slice]:
    """The columns of the residual stream that each slot occupies.

    >>> slots(8, 16)["previous"]
    slice(24, 32, None)
    """
    V = check_positive_int("vocab_size", vocab_size)
    L = check_positive_int("max_len", max_len)
    return {
        "token": slice(0, V),
        "position": slice(V, V + L),
        "previous": slice(V + L, 2 * V + L),
        "next": slice(2 * V + L, 3 * V + L),
    }


# --8<-- [start:induction_model]
def induction_model(vocab_size: int, d_model: int, max_len: int) -> dict[str, np.ndarray]:
    """The hand-set weights of a two-layer, attention-only induction model.

    Returns a dict of arrays: ``W_E (V, d_model)`` and ``W_pos (L, d_model)``
    write a token and its position into their slots; head 1 (``W_Q1, W_K1,
    W_V1, W_O1``, null score ``null1``) copies the previous token, head 2
    (``W_Q2, W_K2, W_V2, W_O2``, ``null2``) copies what followed the latest
    earlier copy of the current token; ``W_U (d_model, V)`` reads the "next"
    slot. ``d_model`` must be at least ``3 * vocab_size + max_len``.

    >>> params = induction_model(vocab_size=4, d_model=20, max_len=8)
    >>> params["W_E"].shape, params["W_Q1"].shape, params["W_U"].shape
    ((4, 20), (20, 8), (20, 4))
    """
    V = check_positive_int("vocab_size", vocab_size)
    L = check_positive_int("max_len", max_len)
    d_model = check_positive_int("d_model", d_model)
    if d_model < 3 * V + L:
        raise ValueError(
            f"d_model must be at least 3 * vocab_size + max_len = {3 * V + L} "
            f"(slots for token, position, previous and next), got {d_model}"
        )
    check_fits("W_Q2", (d_model, V + 1), np.float64, vocab_size=V, d_model=d_model)
    check_fits("W_pos", (L, d_model), np.float64, max_len=L, d_model=d_model)
    slot = slots(V, L)
    token, position, previous, next_ = (slot[name] for name in ("token", "position", "previous", "next"))
    w = {name: np.zeros(shape) for name, shape in (
        ("W_E", (V, d_model)), ("W_pos", (L, d_model)), ("W_U", (d_model, V)),
        ("W_Q1", (d_model, L)), ("W_K1", (d_model, L)), ("W_V1", (d_model, V)), ("W_O1", (V, d_model)),
        ("W_Q2", (d_model, V + 1)), ("W_K2", (d_model, V + 1)), ("W_V2", (d_model, V)), ("W_O2", (V, d_model)),
    )}
    w["W_E"][:, token] = np.eye(V)
    w["W_pos"][:, position] = np.eye(L)

    # Head 1, where to look: the query of position t is e_t, the key of
    # position s is e_(s+1), so only s = t - 1 matches.
    w["W_Q1"][position] = PREVIOUS_MATCH * np.eye(L)
    w["W_K1"][position] = np.eye(L, k=1)
    # What to copy: the token there, written into the "previous" slot.
    w["W_V1"][token] = np.eye(V)
    w["W_O1"][:, previous] = np.eye(V)
    w["null1"] = np.array(PREVIOUS_MATCH / 2)

    # Head 2, where to look: the current token against each key's "previous"
    # slot (MATCH on equality), plus RECENCY * s for the key at position s.
    # The query's last column is 1 for every token, the key's is its position.
    match = 2 * (RECENCY * L + 10)
    w["W_Q2"][token, :V] = match * np.eye(V)
    w["W_Q2"][token, V] = 1.0
    w["W_K2"][previous, :V] = np.eye(V)
    w["W_K2"][position, V] = RECENCY * np.arange(L)
    # What to copy: the token at the matching position, into the "next" slot.
    w["W_V2"][token] = np.eye(V)
    w["W_O2"][:, next_] = np.eye(V)
    # Between any non-match (at most RECENCY * (L - 1)) and any match (at least `match`).
    w["null2"] = np.array(match / 2)

    w["W_U"][next_] = np.eye(V)
    return w
# --8<-- [end:induction_model]


def _check_params(params) -> dict[str, np.ndarray]:
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of arrays (see induction_model), got {type(params).__name__}")
    missing = [name for name in PARAM_NAMES if name not in params]
    if missing:
        raise ValueError(f"params lacks {missing}: expected the keys {list(PARAM_NAMES)}")
    w = {}
    for name in PARAM_NAMES:
        array = np.asarray(params[name])
        numeric = np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
        if array.dtype == bool or not numeric:
            raise ValueError(f"params[{name!r}] must hold numbers, got dtype {array.dtype}")
        array = array.astype(np.float64)
        check_finite(array, f"params[{name!r}]")
        w[name] = array
    if w["W_E"].ndim != 2:
        raise ValueError(f"params['W_E'] must have shape (vocab_size, d_model), got {w['W_E'].shape}")
    V, d_model = w["W_E"].shape
    expected = {"W_pos": (None, d_model), "W_U": (d_model, V), "null1": (), "null2": ()}
    for layer in "12":
        # Each head may have its own width: W_Q and W_K must agree on it, and W_V and W_O on theirs.
        for first, second, axis, why in ((f"W_Q{layer}", f"W_K{layer}", 1, "a query meets keys of its width"),
                                         (f"W_V{layer}", f"W_O{layer}", 0, "W_O reads what W_V writes")):
            a, b = w[first], w[second]
            if a.ndim == b.ndim == 2 and a.shape[1] != b.shape[axis]:
                raise ValueError(f"params[{first!r}]'s columns and params[{second!r}]'s {('rows', 'columns')[axis]} "
                                 f"must be as many ({why}), got shapes {a.shape} and {b.shape}")
        width = w[f"W_Q{layer}"].shape[-1] if w[f"W_Q{layer}"].ndim == 2 else None
        depth = w[f"W_V{layer}"].shape[-1] if w[f"W_V{layer}"].ndim == 2 else None
        expected.update({
            f"W_Q{layer}": (d_model, width), f"W_K{layer}": (d_model, width),
            f"W_V{layer}": (d_model, depth), f"W_O{layer}": (depth, d_model),
        })
    for name, shape in expected.items():
        got = w[name].shape
        fits = len(got) == len(shape) and all(
            want is None or want == size for want, size in zip(shape, got, strict=True))
        if not fits:
            readable = tuple("any" if size is None else size for size in shape)
            raise ValueError(
                f"params[{name!r}] must have shape {readable} to fit W_E {w['W_E'].shape}, got {got}"
            )
    return w


def _check_tokens(tokens, vocab_size: int, max_len: int) -> np.ndarray:
    try:
        array = np.asarray(tokens)
    except ValueError:
        raise ValueError("tokens must be a list or array of token ids of one length, got a ragged sequence") from None
    if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        if array.size == 0 and array.dtype == np.float64:
            array = array.astype(np.int64)  # np.asarray([]) is float: an empty list of ids is fine
        else:
            raise TypeError(f"tokens must be integer token ids, got dtype {array.dtype}")
    if array.ndim not in (1, 2):
        raise ValueError(f"tokens must have shape (T,) or (B, T), got {array.shape}")
    if array.shape[-1] > max_len:
        raise ValueError(
            f"tokens has length T = {array.shape[-1]}, more than max_len = {max_len} positions "
            "(the rows of params['W_pos'])"
        )
    if array.size and (array.min() < 0 or array.max() >= vocab_size):
        raise ValueError(
            f"tokens must be ids in [0, {vocab_size}), got values from {array.min()} to {array.max()}"
        )
    return array


def _finite(array: np.ndarray, what: str, w: dict[str, np.ndarray]) -> np.ndarray:
    """``array`` if it is finite, else the overflow error naming the three largest parameters."""
    return finite_result(array, array.dtype, what, {f"params[{name!r}]": value for name, value in w.items()})


def _head(X, w, layer, temperature):
    """Head ``layer`` (1 or 2), causal, with a null key: what it adds to the stream ``X (..., T, d_model)``."""
    W_Q, W_K, W_V, W_O, null_score = (w[f"{name}{layer}"] for name in ("W_Q", "W_K", "W_V", "W_O", "null"))
    T = X.shape[-2]
    scores = _finite((X @ W_Q) @ np.swapaxes(X @ W_K, -1, -2), f"the scores of head {layer}", w)
    scores = np.where(np.tril(np.ones((T, T), dtype=bool)), scores, -np.inf)
    null = np.broadcast_to(null_score, (*scores.shape[:-1], 1))
    weights = softmax(np.concatenate([scores, null], axis=-1), axis=-1, temperature=temperature)
    return _finite(weights[..., :T] @ (X @ W_V) @ W_O, f"the output of head {layer}", w)  # the null key's value is zero


# --8<-- [start:induction_predict]
def induction_predict(tokens, params, temperature: float = 1.0) -> np.ndarray:
    """For every position, the token the model predicts comes next.

    ``tokens`` are ids, shape ``(T,)`` or ``(B, T)``, with ``T <= max_len``;
    ``params`` as made by :func:`induction_model`. Returns an integer array
    of the same shape: the id copied from right after the latest earlier
    occurrence of the current token, or ``-1`` where the copy is weaker than
    1/2, which with the hand-set weights is exactly where the current token
    has not occurred before. ``temperature`` divides the scores of both heads:
    above 1 the lookups blur, and the copy fades.

    >>> params = induction_model(vocab_size=4, d_model=20, max_len=8)
    >>> induction_predict([2, 0, 1, 3, 0, 1], params).tolist()
    [-1, -1, -1, -1, 1, 3]
    """
    w = _check_params(params)
    tokens = _check_tokens(tokens, vocab_size=w["W_E"].shape[0], max_len=w["W_pos"].shape[0])
    temperature = real_number(temperature, "temperature")
    if not temperature > 0:
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")
    T = tokens.shape[-1]
    # Overflow is caught by _finite and reported as an error, not warned about.
    with np.errstate(over="ignore", invalid="ignore"):
        X = _finite(w["W_E"][tokens] + w["W_pos"][:T], "the embeddings", w)
        X = _finite(X + _head(X, w, 1, temperature), "the stream", w)
        X = _finite(X + _head(X, w, 2, temperature), "the stream", w)
        logits = _finite(X @ w["W_U"], "the logits", w)
    if logits.shape[-1] == 0 or T == 0:
        return np.full(tokens.shape, -1, dtype=np.int64)
    return np.where(logits.max(axis=-1) >= 0.5, logits.argmax(axis=-1), -1).astype(np.int64)
# --8<-- [end:induction_predict]
