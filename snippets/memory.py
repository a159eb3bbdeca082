"""Dictionaries stored in the weights: associative (Hopfield) memory (chapter 11).

The stored patterns are both the keys and the values of a dictionary that
lives in a network's weights. A cue, a noisy or partial copy of one pattern,
is the query; one soft lookup ``ξ ← softmax(ξ Xᵀ / τ) X`` at a temperature
``τ`` moves it towards the stored pattern it resembles most. This is the
update of a modern Hopfield network (Ramsauer et al., 2020, who write the
inverse temperature ``1/τ`` as ``β``), and it is attention with ``Q = ξ``,
``K = V = X`` and scale ``1/τ``.
"""

from __future__ import annotations

import numbers

import numpy as np

from snippets._checks import as_float_array, check_finite, describe, largest, real_number, work_dtype
from snippets.attention import softmax


def _check_patterns_and_cue(patterns: np.ndarray, cue: np.ndarray) -> None:
    if patterns.ndim != 2 or patterns.shape[0] == 0 or patterns.shape[1] == 0:
        raise ValueError(
            f"patterns must have shape (N, d) with N >= 1 patterns of size d >= 1, got {patterns.shape}"
        )
    if cue.ndim not in (1, 2) or cue.shape[-1] != patterns.shape[1]:
        raise ValueError(
            f"cue must have shape (d,) or (T, d) with d = {patterns.shape[1]} like the patterns "
            f"{patterns.shape}, got {cue.shape}"
        )
    check_finite(patterns, "patterns")
    check_finite(cue, "cue")


# --8<-- [start:hopfield_retrieve]
def hopfield_retrieve(patterns, cue, temperature, steps: int = 1) -> np.ndarray:
    """Complete a cue from stored patterns: repeat ``ξ ← softmax(ξ Xᵀ / τ) X``.

    ``patterns X (N, d)`` holds one stored pattern per row: the keys and the
    values. ``cue`` is one query ``(d,)`` or a batch ``(T, d)``; the result
    has the cue's shape. ``temperature`` is ``τ``: large, every pattern gets
    the same weight and the result is their average; near 0, the pattern most
    like the cue takes all the weight and is returned. Each of the ``steps``
    updates is one soft lookup of the current ``ξ``; at a fixed point (an
    update that changes nothing) the loop stops, since every further update
    would return the same ``ξ``.

    >>> X = [[1.0, 1.0, -1.0, -1.0], [1.0, -1.0, 1.0, -1.0]]
    >>> hopfield_retrieve(X, [1.0, 1.0, -1.0, 0.0], temperature=0.125).round(3).tolist()
    [1.0, 1.0, -1.0, -1.0]
    >>> average = hopfield_retrieve(X, [1.0, 1.0, -1.0, 0.0], temperature=1e6)
    >>> bool(np.allclose(average, [1.0, 0.0, 0.0, -1.0], atol=1e-3))  # the mean of the two
    True
    """
    X = as_float_array(patterns, "patterns")
    xi = as_float_array(cue, "cue")
    _check_patterns_and_cue(X, xi)
    temperature = real_number(temperature, "temperature")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    if isinstance(steps, (bool, np.bool_)) or not isinstance(steps, numbers.Integral) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {describe(steps)}")
    dtype = np.result_type(X, xi)
    X, xi = X.astype(work_dtype(dtype), copy=False), xi.astype(work_dtype(dtype), copy=False)
    for _ in range(steps):  # the loop is the algorithm: each step looks up the last result
        # the teaching version's order, (ξ Xᵀ) / τ: the page compares the two exactly
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # reported just below
            scores = (xi @ X.T) / np.asarray(temperature, dtype=xi.dtype)
        if not np.isfinite(scores).all():
            raise ValueError(
                f"the scores ξ Xᵀ / τ overflow {xi.dtype.name} at temperature {temperature!r}: "
                f"patterns (largest |entry| {largest(X):.3g}) and cue (largest |entry| {largest(xi):.3g}) "
                f"are too large for it; expected scores within ±{np.finfo(xi.dtype).max:.3g}"
            )
        previous, xi = xi, softmax(scores, axis=-1) @ X
        if np.array_equal(xi, previous):  # a fixed point: every further step returns it again
            break
    return xi.astype(dtype, copy=False)
# --8<-- [end:hopfield_retrieve]
