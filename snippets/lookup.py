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


# --8<-- [start:vocabulary]
class OneHotVocabulary:
    """Map tokens to one-hot vectors and back.

    Token ``i`` of the vocabulary is row ``i`` of the identity matrix.
    Tokens can be any hashable value, as dictionary keys can.
    """

    def __init__(self, tokens: Iterable[Hashable]):
        self.tokens = list(tokens)
        self.index = {token: i for i, token in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise ValueError(f"the vocabulary has repeated tokens: {self.tokens!r}")

    @property
    def size(self) -> int:
        return len(self.tokens)

    def encode(self, token: Hashable) -> np.ndarray:
        """One token -> its one-hot vector, shape ``(size,)``."""
        if token not in self.index:
            raise ValueError(f"unknown token {token!r}: expected one of {self.tokens!r}")
        vector = np.zeros(self.size)
        vector[self.index[token]] = 1.0
        return vector

    def encode_all(self, tokens: Iterable[Hashable]) -> np.ndarray:
        """Several tokens -> one one-hot row each, shape ``(len(tokens), size)``."""
        rows = [self.encode(token) for token in tokens]
        return np.stack(rows) if rows else np.zeros((0, self.size))

    def decode(self, vector) -> Hashable:
        """A one-hot vector of shape ``(size,)`` -> its token."""
        vector = np.asarray(vector)
        if vector.shape != (self.size,):
            raise ValueError(
                f"expected a one-hot vector of shape ({self.size},), got shape {vector.shape}"
            )
        hot = np.flatnonzero(vector)
        if len(hot) != 1 or vector[hot[0]] != 1 or not np.isin(vector, (0, 1)).all():
            raise ValueError(f"expected a one-hot vector (a single 1, all else 0), got {vector.tolist()}")
        return self.tokens[hot[0]]

    def decode_all(self, matrix) -> list:
        """One-hot rows of shape ``(n, size)`` -> a list of ``n`` tokens."""
        matrix = np.asarray(matrix)
        if matrix.ndim != 2 or matrix.shape[1] != self.size:
            raise ValueError(
                f"expected one-hot rows of shape (n, {self.size}), got shape {matrix.shape}"
            )
        return [self.decode(row) for row in matrix]
# --8<-- [end:vocabulary]


# --8<-- [start:dict_as_matrices]
def dict_as_matrices(d: Mapping) -> tuple[OneHotVocabulary, np.ndarray, np.ndarray]:
    """Write a dictionary with numeric values as a key matrix and a value matrix.

    Returns ``(keys, K, V)``: the vocabulary of the keys, ``K`` the identity
    matrix ``(S, S)`` whose row ``i`` is key ``i``, and ``V`` the values as a
    column ``(S, 1)`` (or ``(S, d_v)`` when every value is a vector of length d_v).
    """
    if not d:
        raise ValueError("cannot write an empty dictionary as matrices")
    keys = OneHotVocabulary(d.keys())
    K = np.eye(keys.size)
    rows = [np.atleast_1d(np.asarray(value, dtype=float)) for value in d.values()]
    if any(row.shape != rows[0].shape or row.ndim != 1 for row in rows):
        raise ValueError(
            f"every value must be a number, or a vector of one length; got {list(d.values())!r}"
        )
    V = np.stack(rows)
    return keys, K, V
# --8<-- [end:dict_as_matrices]


def _checked(q, K, V, caller: str, batched: bool = False):
    """Return q (or Q), K, V as float arrays; raise ValueError naming any shape that does not fit."""
    q, K, V = (np.asarray(a, dtype=float) for a in (q, K, V))
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
    return q, K, V


# --8<-- [start:matrix_lookup]
def matrix_lookup(q, K, V) -> np.ndarray:
    """Look up one query: ``q (d_k,)``, ``K (S, d_k)``, ``V (S, d_v)`` -> ``(d_v,)``.

    ``q @ K.T`` scores the query against every key (a one-hot query against
    one-hot keys gives a one-hot row that selects its key); ``@ V`` returns the
    value of the selected key.
    """
    q, K, V = _checked(q, K, V, "matrix_lookup")
    return (q @ K.T) @ V


def batch_matrix_lookup(Q, K, V) -> np.ndarray:
    """Look up T queries at once: ``Q (T, d_k)`` -> ``(T, d_v)``, row t answering query t."""
    Q, K, V = _checked(Q, K, V, "batch_matrix_lookup", batched=True)
    return (Q @ K.T) @ V
# --8<-- [end:matrix_lookup]


# --8<-- [start:argmax_lookup]
def argmax_lookup(q, K, V) -> np.ndarray:
    """Return the value of the key with the largest dot product with ``q``.

    Same shapes as :func:`matrix_lookup`. For one-hot keys and a one-hot query
    this is exact lookup; for any other query it still returns one stored value.
    """
    q, K, V = _checked(q, K, V, "argmax_lookup")
    return V[np.argmax(K @ q)]
# --8<-- [end:argmax_lookup]
