"""Exact dictionary lookup written as linear algebra (chapters 1 and 2).

A vocabulary of tokens becomes the rows of an identity matrix (one-hot
vectors); a dictionary becomes a key matrix ``K`` and a value matrix ``V``;
looking up a query ``q`` is ``(q @ K.T) @ V``. Shapes follow the site's
notation: ``q`` is ``(d_k,)``, ``Q`` is ``(T, d_k)``, ``K`` is ``(S, d_k)``,
``V`` is ``(S, d_v)``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

import numpy as np

from snippets._checks import as_float_array, check_finite, describe, overflow_error


def _check_hashable(token, name: str = "token") -> None:
    if not isinstance(token, Hashable):
        raise TypeError(f"{name} must be hashable (usable as a dict key), got {describe(token)}")
    try:
        hash(token)
    except TypeError:  # a tuple holding a list, say
        raise TypeError(f"{name} must be hashable (usable as a dict key), got {describe(token)}") from None
    # NaN is never equal to itself, so a NaN key could not be found again;
    # and no lookup here has a use for an infinite one.
    if isinstance(token, (float, np.floating)) and not np.isfinite(token):
        raise ValueError(f"{name} must be a finite number if it is a number (a NaN key is never found), got {token!r}")


def _as_list(items, name: str) -> list:
    """``items`` as a list of tokens, in order; a string or a set is refused, naming ``name``."""
    if isinstance(items, (str, bytes)):
        raise TypeError(
            f"{name} must be a list of tokens, got the {type(items).__name__} {items!r:.60}: a string is "
            f"not read as a list of its characters (pass list({name}) for that, or [{name}] for one token)"
        )
    if isinstance(items, (set, frozenset)):
        raise TypeError(
            f"{name} must be a list of tokens, in order, got a {type(items).__name__}: a set has no order, "
            f"so the one-hot rows could change from run to run (pass sorted({name}) for a fixed order)"
        )
    try:
        return list(items)
    except TypeError:  # not iterable, or a 0-d array
        raise TypeError(f"{name} must be an iterable of tokens (a list, say), got {describe(items)}") from None


# --8<-- [start:vocabulary]
class OneHotVocabulary:
    """Map tokens to one-hot vectors and back.

    Token ``i`` of the vocabulary is row ``i`` of the identity matrix.
    Tokens can be any hashable value, as dictionary keys can.

    >>> vocabulary = OneHotVocabulary(["dog", "cat", "tiger"])
    >>> vocabulary.size
    3
    >>> vocabulary.encode("cat").tolist()
    [0.0, 1.0, 0.0]
    """

    def __init__(self, tokens: Iterable[Hashable]):
        self.tokens = _as_list(tokens, "tokens")
        for i, token in enumerate(self.tokens):
            _check_hashable(token, f"tokens[{i}]")
        self.index = {token: i for i, token in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            # self.index keeps a token's last position: an earlier one is a repeat
            repeated = list(dict.fromkeys(t for i, t in enumerate(self.tokens) if self.index[t] != i))
            raise ValueError(f"tokens must be distinct, one row each, got repeated tokens {repeated!r:.60} "
                             f"in the {len(self.tokens)} tokens")

    @property
    def size(self) -> int:
        return len(self.tokens)

    def encode(self, token: Hashable) -> np.ndarray:
        """One token -> its one-hot vector, shape ``(size,)``.

        >>> OneHotVocabulary(["dog", "cat", "tiger"]).encode("tiger").tolist()
        [0.0, 0.0, 1.0]
        """
        return self._encode(token, "token")

    def _encode(self, token, name: str) -> np.ndarray:
        _check_hashable(token, name)
        if token not in self.index:
            where = "" if name == "token" else f" at {name}"
            raise ValueError(f"unknown token {token!r}{where}: expected one of {self.tokens!r}")
        vector = np.zeros(self.size)
        vector[self.index[token]] = 1.0
        return vector

    def encode_all(self, tokens: Iterable[Hashable]) -> np.ndarray:
        """Several tokens -> one one-hot row each, shape ``(len(tokens), size)``.

        >>> OneHotVocabulary(["dog", "cat", "tiger"]).encode_all(["cat", "dog"]).tolist()
        [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
        """
        rows = [self._encode(token, f"tokens[{i}]") for i, token in enumerate(_as_list(tokens, "tokens"))]
        return np.stack(rows) if rows else np.zeros((0, self.size))

    def decode(self, vector) -> Hashable:
        """A one-hot vector of shape ``(size,)`` -> its token.

        >>> OneHotVocabulary(["dog", "cat", "tiger"]).decode([0, 1, 0])
        'cat'
        """
        return self._decode(as_float_array(vector, "vector"), "vector")

    def _decode(self, vector: np.ndarray, name: str) -> Hashable:
        if vector.shape != (self.size,):
            raise ValueError(
                f"{name}: expected a one-hot vector of shape ({self.size},), got shape {vector.shape}"
            )
        hot = np.flatnonzero(vector)
        if len(hot) != 1 or vector[hot[0]] != 1 or not np.isin(vector, (0, 1)).all():
            raise ValueError(f"{name}: expected a one-hot vector (a single 1, all else 0), got {vector.tolist()}")
        return self.tokens[hot[0]]

    def decode_all(self, matrix) -> list:
        """One-hot rows of shape ``(n, size)`` -> a list of ``n`` tokens.

        >>> OneHotVocabulary(["dog", "cat", "tiger"]).decode_all([[0, 0, 1], [1, 0, 0]])
        ['tiger', 'dog']
        """
        matrix = as_float_array(matrix, "matrix")
        if matrix.ndim != 2 or matrix.shape[1] != self.size:
            raise ValueError(
                f"matrix: expected one-hot rows of shape (n, {self.size}), got shape {matrix.shape}"
            )
        return [self._decode(row, f"matrix[{i}]") for i, row in enumerate(matrix)]
# --8<-- [end:vocabulary]


# --8<-- [start:dict_as_matrices]
def dict_as_matrices(d: Mapping) -> tuple[OneHotVocabulary, np.ndarray, np.ndarray]:
    """Write a dictionary with numeric values as a key matrix and a value matrix.

    Returns ``(keys, K, V)``: the vocabulary of the keys, ``K`` the identity
    matrix ``(S, S)`` whose row ``i`` is key ``i``, and ``V`` the values as a
    column ``(S, 1)`` (or ``(S, d_v)`` when every value is a vector of length d_v).

    >>> keys, K, V = dict_as_matrices({"dog": 10, "cat": 2, "tiger": 5})
    >>> keys.tokens, K.shape, V.ravel().tolist()
    (['dog', 'cat', 'tiger'], (3, 3), [10.0, 2.0, 5.0])
    """
    if not isinstance(d, Mapping):
        raise TypeError(f"d must be a dict (a Mapping from keys to numbers), got {describe(d)}")
    if not d:
        raise ValueError("cannot write an empty dictionary as matrices: d is empty")
    keys = OneHotVocabulary(d.keys())
    K = np.eye(keys.size)
    rows = []
    for key, value in d.items():
        row = np.atleast_1d(as_float_array(value, f"d[{key!r}]")).astype(float)
        check_finite(row, f"d[{key!r}]")
        rows.append(row)
    if any(row.shape != rows[0].shape or row.ndim != 1 for row in rows):
        raise ValueError(
            f"every value of d must be a number, or a vector of one length; got {list(d.values())!r}"
        )
    V = np.stack(rows)
    return keys, K, V
# --8<-- [end:dict_as_matrices]


def _checked(q, K, V, caller: str, batched: bool = False):
    """Return q (or Q), K, V as float arrays; raise ValueError naming any shape that does not fit."""
    q = as_float_array(q, "Q" if batched else "q")
    K, V = as_float_array(K, "K"), as_float_array(V, "V")
    if K.ndim != 2:
        raise ValueError(f"{caller}: K must have shape (S, d_k), got shape {K.shape}")
    if V.ndim != 2 or V.shape[0] != K.shape[0]:
        raise ValueError(
            f"{caller}: V must have shape (S, d_v) with S = {K.shape[0]} rows like K {K.shape}, "
            f"got shape {V.shape}"
        )
    d_k = K.shape[1]
    if batched and (q.ndim != 2 or q.shape[1] != d_k):
        raise ValueError(f"{caller}: Q must have shape (T, {d_k}) to match K {K.shape}, got shape {q.shape}")
    if not batched and q.shape != (d_k,):
        raise ValueError(f"{caller}: q must have shape ({d_k},) to match K {K.shape}, got shape {q.shape}")
    for name, x in (("Q" if batched else "q", q), ("K", K), ("V", V)):
        check_finite(x, f"{caller}: {name}")
    return q, K, V


def _finite(result, caller: str, **arrays):
    """``result`` if finite; finite inputs whose products overflow get a clear error instead."""
    if not np.isfinite(result).all():
        raise overflow_error(f"{caller}: the lookup's products", result.dtype, arrays)
    return result


# --8<-- [start:matrix_lookup]
def matrix_lookup(q, K, V) -> np.ndarray:
    """Look up one query: ``q (d_k,)``, ``K (S, d_k)``, ``V (S, d_v)`` -> ``(d_v,)``.

    ``q @ K.T`` scores the query against every key (a one-hot query against
    one-hot keys gives a one-hot row that selects its key); ``@ V`` returns the
    value of the selected key.

    >>> K, V = np.eye(3), np.array([[10.0], [2.0], [5.0]])
    >>> matrix_lookup([0.0, 0.0, 1.0], K, V).round(3).tolist()
    [5.0]
    """
    q, K, V = _checked(q, K, V, "matrix_lookup")
    with np.errstate(over="ignore", invalid="ignore"):
        return _finite((q @ K.T) @ V, "matrix_lookup", q=q, K=K, V=V)


def batch_matrix_lookup(Q, K, V) -> np.ndarray:
    """Look up T queries at once: ``Q (T, d_k)`` -> ``(T, d_v)``, row t answering query t.

    >>> K, V = np.eye(3), np.array([[10.0], [2.0], [5.0]])
    >>> batch_matrix_lookup([[0, 0, 1], [1, 0, 0]], K, V).round(3).tolist()
    [[5.0], [10.0]]
    """
    Q, K, V = _checked(Q, K, V, "batch_matrix_lookup", batched=True)
    with np.errstate(over="ignore", invalid="ignore"):
        return _finite((Q @ K.T) @ V, "batch_matrix_lookup", Q=Q, K=K, V=V)
# --8<-- [end:matrix_lookup]


# --8<-- [start:argmax_lookup]
def argmax_lookup(q, K, V) -> np.ndarray:
    """Return the value of the key with the largest dot product with ``q``.

    Same shapes as :func:`matrix_lookup`. For one-hot keys and a one-hot query
    this is exact lookup; for any other query it still returns one stored value.

    >>> K, V = np.eye(3), np.array([[10.0], [2.0], [5.0]])
    >>> argmax_lookup([0.1, 0.7, 0.2], K, V).tolist()       # the closest key is the second
    [2.0]
    """
    q, K, V = _checked(q, K, V, "argmax_lookup")
    if K.shape[0] == 0:
        raise ValueError(f"argmax_lookup: K must hold at least one key to return its value, got shape {K.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        scores = _finite(K @ q, "argmax_lookup", q=q, K=K)
    return V[np.argmax(scores)]
# --8<-- [end:argmax_lookup]
