"""Where keys come from: token embeddings and position vectors (chapter 5).

A sentence reaches attention as integer ids, one per token. ``embed`` turns
them into rows of an embedding table, which is chapter 2's one-hot × matrix
product done as indexing. Attention itself ignores order, so the position of
each token is given to it as a vector too: ``sinusoidal_positions`` builds
the fixed ones of "Attention Is All You Need", one row per position.
``rope`` puts the position into the lookup itself instead (chapter 13's
rotary positions, which chapter 15's latent attention uses): it turns each
pair of columns of a query or a key by an angle that grows with its position.
"""

from __future__ import annotations

import numpy as np

from snippets._checks import as_float_array, check_finite, check_fits, check_positive_int, describe, work_dtype


def _as_array(x, name: str) -> np.ndarray:
    """``np.asarray(x)``, with a ValueError naming ``name`` for ragged nested lists."""
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be an array, got {type(x).__name__}: {error}") from None


def embed(ids, table) -> np.ndarray:
    """The rows of ``table`` named by ``ids``: ``table[ids]``, with checks.

    ``ids`` is an integer array of any shape ``(...)`` holding token ids in
    ``0 .. vocab - 1``; ``table`` is ``(vocab, d)``. Returns ``(..., d)``,
    the same as ``one_hot(ids) @ table`` without building the one-hot rows.
    A negative id is refused (plain indexing would silently read from the end).

    >>> table = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    >>> embed([2, 0, 2], table).tolist()
    [[3.0, 3.0], [1.0, 0.0], [3.0, 3.0]]
    """
    table = _as_array(table, "table")
    if table.ndim != 2:
        raise ValueError(f"table must be a matrix (vocab, d), got shape {table.shape}")
    if not (np.issubdtype(table.dtype, np.floating) or np.issubdtype(table.dtype, np.integer)):
        raise TypeError(f"table must hold numbers, got dtype {table.dtype}")
    check_finite(table, "table")
    ids = _as_array(ids, "ids")
    if ids.size == 0 and ids.dtype == np.float64:
        ids = ids.astype(np.int64)  # np.asarray([]) is float64: an empty list of ids is fine
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"ids must be integers (token ids), got dtype {ids.dtype}")
    vocab = table.shape[0]
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        raise ValueError(
            f"ids must lie in 0 .. vocab - 1 = 0 .. {vocab - 1} (the rows of table {table.shape}), "
            f"got ids from {ids.min()} to {ids.max()}"
        )
    return table[ids]


def sinusoidal_positions(T: int, d: int) -> np.ndarray:
    """The sinusoidal position vectors of the original Transformer, ``(T, d)``.

    Row ``pos`` holds ``sin(pos / 10000^(2i/d))`` in column ``2i`` and
    ``cos(pos / 10000^(2i/d))`` in column ``2i + 1``, for ``i = 0 .. d/2 - 1``:
    pairs of columns that turn at frequencies from 1 down to almost
    1/10000 per position. ``d`` must be even; float64.

    >>> sinusoidal_positions(3, 4).round(3).tolist()
    [[0.0, 1.0, 0.0, 1.0], [0.841, 0.54, 0.01, 1.0], [0.909, -0.416, 0.02, 1.0]]
    """
    T = check_positive_int("T", T)
    d = check_positive_int("d", d)
    if d % 2:
        raise ValueError(f"d must be even (sin and cos columns come in pairs), got d = {d}")
    check_fits("the position vectors", (T, d), np.float64, copies=2, T=T, d=d)   # and their angles, sines, cosines
    position = np.arange(T, dtype=np.float64)[:, None]        # (T, 1)
    frequency = 10000.0 ** (-np.arange(0, d, 2) / d)          # (d/2,), from 1 down
    angle = position * frequency                              # (T, d/2)
    positions = np.empty((T, d))
    positions[:, 0::2] = np.sin(angle)
    positions[:, 1::2] = np.cos(angle)
    return positions


def _rotate_pairs(x, positions):
    """Chapter 13's rotation on checked arrays: pair ``(2i, 2i+1)`` of row ``t`` turns by ``positions[t] · w_i``.

    A pair is the complex number ``even + i·odd``, and turning it is
    multiplying by ``cos + i·sin``, which is ``(even·cos − odd·sin,
    even·sin + odd·cos)``: one pass over x, without strided columns.
    """
    d = x.shape[-1]
    angle = np.asarray(positions, np.float64)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)   # (T, d/2)
    pair = np.result_type(x.dtype, np.complex64)   # complex64: two float32s
    turn = np.empty(angle.shape, pair)
    turn.real, turn.imag = np.cos(angle), np.sin(angle)
    pairs = np.ascontiguousarray(x).view(pair)     # (..., T, d/2), the same bytes
    return (pairs * turn).view(x.dtype)


def rope(x, positions) -> np.ndarray:
    """Rotary positions: turn column pair ``i`` of row ``t`` by the angle ``positions[t] · w_i``.

    ``x (..., T, d)``, queries or keys, ``d`` even; ``positions (T,)``, the
    position of each row (usually ``np.arange(T)``; any finite numbers);
    ``w_i = 10000^(-2i/d)``, the frequencies of :func:`sinusoidal_positions`.
    The pairs are adjacent columns ``(2i, 2i + 1)``, as chapter 13 writes it.
    A turned query and a turned key score by the difference of their
    positions only. Returns an array of the shape and float dtype of ``x``.

    >>> rope(np.array([[1.0, 0.0, 1.0, 0.0]]), np.array([1])).round(3).tolist()
    [[0.54, 0.841, 1.0, 0.01]]
    """
    x = as_float_array(x, "x")
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError(f"x must have shape (..., T, d) with d even (columns turn in pairs), got {describe(x)}")
    check_finite(x, "x")
    positions = as_float_array(positions, "positions")
    if positions.shape != x.shape[-2:-1]:
        raise ValueError(f"positions must have shape (T,) = ({x.shape[-2]},), one per row of x {x.shape}, "
                         f"got shape {positions.shape}")
    check_finite(positions, "positions")
    with np.errstate(over="ignore", invalid="ignore"):
        result = _rotate_pairs(x.astype(work_dtype(x.dtype), copy=False), positions).astype(x.dtype, copy=False)
    if not np.isfinite(result).all():
        raise ValueError(f"x: the turned rows overflow {x.dtype} (largest |entry| {float(np.abs(x).max()):.3g}): "
                         f"expected entries within ±{np.finfo(x.dtype).max / 2:.3g}")
    return result
