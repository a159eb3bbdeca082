"""The checks the modules of snippets/ share: one definition each, and one wording of each error.

Every public function of the library refuses what it cannot compute with a
ValueError or TypeError that names the argument, what it was given and what
was expected, and returns only finite numbers (tests/test_bad_input.py holds
it to that); these helpers write those errors, the same in every module.
This module belongs to no chapter: its names are the library's, not a reader's.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping

import numpy as np

__all__ = [
    "all_finite", "as_float_array", "as_mask", "attention_arguments", "check_attention_shapes", "check_axis",
    "check_bool", "check_eps", "check_finite", "check_fits", "check_head_sizes", "check_keys", "check_matrices",
    "check_positive_int", "check_queries_and_keys", "check_rng", "describe", "explain_attention",
    "finite_result", "keys_finite", "largest", "overflow_error", "real_number", "work_dtype",
]


def describe(x) -> str:
    """A short description of a value for an error message: its dtype and shape, or its repr."""
    if isinstance(x, np.ndarray):
        return f"an array of dtype {x.dtype} and shape {x.shape}"
    text = repr(x)
    return f"{type(x).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def as_float_array(x, name: str) -> np.ndarray:
    """``x`` as a floating-point array: integers and booleans become float64.

    Strings, None, complex numbers and other objects are refused, naming ``name``.
    The values are not scanned: the functions check what they compute instead.
    """
    try:
        array = np.asarray(x)
    except (TypeError, ValueError) as error:  # ragged nested lists, say
        raise ValueError(f"{name} must hold numbers (an array of real numbers), got {describe(x)}: {error}") from None
    if array.dtype.kind == "f":
        return array
    if array.dtype.kind in "biu":
        return array.astype(np.float64)
    raise ValueError(f"{name} must hold numbers (real: float, int or bool), got {describe(array)}")


def as_mask(mask, name: str = "mask"):
    """``mask`` as a boolean array with at least 2 dimensions (True = may attend), or None."""
    if mask is None:
        return None
    try:
        mask = np.asarray(mask)
    except (TypeError, ValueError) as error:  # ragged nested lists, say
        raise ValueError(f"{name} must be a boolean array (True = may attend), got {describe(mask)}: {error}") from None
    if mask.dtype != bool:
        raise ValueError(f"{name} must be boolean (True = may attend), got dtype {mask.dtype}")
    # A mask of shape (S,) or () broadcasts like one of shape (1, S) or (1, 1).
    return mask.reshape((1,) * (2 - mask.ndim) + mask.shape) if mask.ndim < 2 else mask


def all_finite(x) -> bool:
    """True if ``x`` (an array, a number, or dicts and lists of them) holds no NaN and no infinity.

    A large array is summed first: one pass, and a NaN or an infinity makes the sum NaN or infinite.
    """
    if isinstance(x, np.ndarray):   # first: isinstance(array, Mapping) is slow
        if x.size > 65536:
            with np.errstate(over="ignore", invalid="ignore"):
                if math.isfinite(x.sum()):
                    return True
        return bool(np.isfinite(x).all())  # (small arrays, or finite numbers whose sum overflowed)
    if isinstance(x, Mapping):
        return all(all_finite(value) for value in x.values())
    if isinstance(x, (list, tuple)):
        return all(all_finite(value) for value in x)
    return bool(np.isfinite(x).all())


def keys_finite(K: np.ndarray, scores: np.ndarray) -> bool:
    """False if the keys ``K`` hold NaN or an infinity; ``scores`` are ``Q Kᵀ`` (before any mask).

    An infinite key can score -inf and pass for a masked key of weight 0. It
    makes its column of scores infinite or NaN, so the smaller of the keys
    and the scores is scanned: one query over S keys scans S scores.
    """
    if 0 < scores.size < K.size and all_finite(scores):
        return True
    return all_finite(K)


def check_finite(x: np.ndarray, name: str, allow_minus_inf: bool = False) -> None:
    """Raise ValueError naming ``name`` if ``x`` holds NaN or an infinity."""
    if all_finite(x):
        return
    if np.isnan(x).any():
        raise ValueError(f"{name} contains NaN: expected finite numbers")
    if np.isposinf(x).any():
        raise ValueError(f"{name} contains +inf: expected finite numbers")
    if not allow_minus_inf:
        raise ValueError(f"{name} contains -inf: expected finite numbers")


def real_number(value, name: str) -> float:
    """``value`` as a float if it is one finite real number (bool and strings are refused)."""
    if type(value) is not float:  # the common case, quickly
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {describe(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int beyond float64, such as 10**400
        finite = False
    if not finite:
        raise ValueError(f"{name} must be a finite number, got {value!r:.60}")
    return float(value)


def check_positive_int(name: str, size, allow_zero: bool = False, meaning: str = "") -> int:
    """``size`` as a Python int if it is a positive (or, with ``allow_zero``, non-negative) integer; bool refused."""
    integer = isinstance(size, numbers.Integral) and not isinstance(size, (bool, np.bool_))
    if not integer or size < (0 if allow_zero else 1):
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be a {kind} integer{f' ({meaning})' if meaning else ''}, got {size!r}")
    return int(size)


def check_head_sizes(d_model, n_heads) -> None:
    check_positive_int("d_model", d_model)
    check_positive_int("n_heads", n_heads)
    if d_model % n_heads:
        raise ValueError(f"d_model = {d_model} is not divisible by n_heads = {n_heads}: "
                         "every head needs the same width d_head = d_model / n_heads")


def check_bool(name: str, value) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {describe(value)}")


def check_axis(axis, x: np.ndarray, name: str = "x") -> int:
    if x.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension, got a scalar {x!r}")
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis must be an integer, got {describe(axis)}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis must lie in [-{x.ndim}, {x.ndim}) for {name} of shape {x.shape}, got {axis}")
    return int(axis)


def check_eps(eps) -> float:
    eps = real_number(eps, "eps")
    if not eps > 0:
        raise ValueError(f"eps must be > 0 (it keeps a constant row from dividing 0 by 0), got {eps!r}")
    return eps


def check_rng(rng) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a NumPy random Generator, np.random.default_rng(seed), got {describe(rng)}")


def check_keys(params, names, made_by: str, where: str = "params") -> None:
    """Raise unless ``params`` is a mapping holding every key of ``names`` (as ``made_by`` makes it)."""
    if not isinstance(params, Mapping):
        raise TypeError(f"{where} must be a dict with the keys {list(names)} (see {made_by}), got {describe(params)}")
    missing = [name for name in names if name not in params]
    if missing:
        raise ValueError(f"{where} lacks {missing}: expected the keys {list(names)} (see {made_by})")


def check_matrices(params, names, made_by: str) -> dict[str, np.ndarray]:
    """``params[name]`` for every name, as float arrays; each must be a non-empty matrix (as ``made_by`` makes it)."""
    check_keys(params, names, made_by)
    p = {name: as_float_array(params[name], name) for name in names}
    for name, W in p.items():
        if W.ndim != 2 or 0 in W.shape:
            raise ValueError(f"{name} must be a non-empty matrix, got shape {W.shape}")
    return p


try:   # this machine's memory, where the system says (Linux, macOS)
    MEMORY_BYTES = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
except (AttributeError, ValueError, OSError):
    MEMORY_BYTES = None


def check_fits(what: str, shape: tuple[int, ...], dtype, copies: int = 1, **sizes: int) -> None:
    """Raise ValueError naming ``sizes`` if an array ``shape`` of ``dtype`` is more than the machine can hold.

    NumPy indexes memory with ``np.intp``: no array holds more than 2**63 - 1
    bytes on a 64-bit machine. Below that, ``copies`` arrays of that size at
    once (a result and its temporaries) larger than the machine's memory are
    refused too: the system may hand out the memory and then swap for hours,
    or end the process, instead of a MemoryError.
    """
    shape = tuple(int(n) for n in shape)  # Python ints: NumPy's would wrap around
    count = math.prod(shape) * np.dtype(dtype).itemsize
    given = " and ".join(f"{name} = {size!r}" for name, size in sizes.items())
    if count > np.iinfo(np.intp).max:
        raise ValueError(f"{given}: too large, {what} of shape {shape} would take {count:.3g} bytes, "
                         f"more than NumPy can hold in one array ({np.iinfo(np.intp).max:.3g} bytes)")
    if MEMORY_BYTES is not None and copies * count > MEMORY_BYTES:
        held = f"{copies} arrays of that size at once, " if copies > 1 else ""
        raise ValueError(f"{given}: too large, {what} of shape {shape} would take {held}{copies * count:.3g} "
                         f"bytes, more than this machine's memory ({MEMORY_BYTES:.3g} bytes)")


def work_dtype(*dtypes) -> np.dtype:
    """The dtype to compute in: float16 becomes float32 (its sums overflow at 65504)."""
    dtype = np.result_type(*dtypes)
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def largest(x) -> float:
    x = np.asarray(x)
    return float(np.abs(x).max()) if x.size else 0.0


def overflow_error(what: str, dtype, arrays: Mapping, most: int | None = None) -> ValueError:
    """The error for finite inputs whose result does not fit in ``dtype``: it names ``arrays`` (the ``most`` largest)."""
    sizes = [(largest(a), name) for name, a in arrays.items()]
    if most is not None:
        sizes = sorted(sizes, reverse=True)[:most]
    named = ", ".join(f"{name} (largest |entry| {size:.3g})" for size, name in sizes)
    return ValueError(f"{what} overflow {np.dtype(dtype).name}: {named} are too large; "
                      f"expected results within ±{np.finfo(dtype).max:.3g}")


def finite_result(result, dtype, what: str, arrays: Mapping):
    """``result`` as ``dtype``, or the overflow error naming the three largest ``arrays`` if it is not finite."""
    with np.errstate(over="ignore", invalid="ignore"):
        cast = None if result is None else result.astype(dtype, copy=False)
    if cast is None or not np.isfinite(cast).all():
        raise overflow_error(what, dtype, arrays, most=3)
    return cast


# --- The arguments of attention: Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v), a mask ---------------


def check_queries_and_keys(Q, K, caller: str | None = None) -> None:
    """Raise ValueError unless Q (..., T, d_k) and K (..., S, d_k) fit, batch dimensions too."""
    prefix = f"{caller}: " if caller else ""
    if Q.ndim < 2 or K.ndim < 2:
        raise ValueError(f"{prefix}Q and K need at least 2 dimensions, (..., T, d_k) and (..., S, d_k); "
                         f"got Q {Q.shape} and K {K.shape}")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"{prefix}Q and K must end in the same d_k: got Q {Q.shape} (d_k = {Q.shape[-1]}) "
                         f"and K {K.shape} (d_k = {K.shape[-1]})")
    if Q.shape[:-2] != K.shape[:-2]:
        try:
            np.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
        except ValueError:
            raise ValueError(f"{prefix}the batch dimensions of Q {Q.shape} and K {K.shape} do not broadcast") from None


def check_attention_shapes(Q, K, V, mask) -> None:
    if Q.ndim < 2 or K.ndim < 2 or V.ndim < 2:
        raise ValueError("Q, K and V need at least 2 dimensions, (..., T, d_k), (..., S, d_k) and (..., S, d_v); "
                         f"got Q {Q.shape}, K {K.shape}, V {V.shape}")
    check_queries_and_keys(Q, K)
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(f"K and V must have the same number of keys S: got K {K.shape} (S = {K.shape[-2]}) "
                         f"and V {V.shape} (S = {V.shape[-2]})")
    try:
        batch = Q.shape[:-2] if Q.shape[:-2] == K.shape[:-2] == V.shape[:-2] else \
            np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(f"the batch dimensions of Q {Q.shape}, K {K.shape} and V {V.shape} do not broadcast") from None
    scores_shape = (*batch, Q.shape[-2], K.shape[-2])
    if mask is not None and mask.shape != scores_shape:
        try:
            np.broadcast_shapes(mask.shape, scores_shape)
        except ValueError:
            raise ValueError(f"mask of shape {mask.shape} does not broadcast to the scores' shape "
                             f"(..., T, S) = {scores_shape}") from None


def attention_arguments(Q, K, V, mask, scale):
    """The checked arguments of the attention functions, in one float dtype, and the output dtype."""
    Q, K, V = as_float_array(Q, "Q"), as_float_array(K, "K"), as_float_array(V, "V")
    mask = as_mask(mask)
    check_attention_shapes(Q, K, V, mask)
    check_finite(Q, "Q")  # Q is as small as the output: scanning it is cheap
    scale = 1.0 / math.sqrt(Q.shape[-1]) if scale is None and Q.shape[-1] else 1.0 if scale is None else scale
    scale = real_number(scale, "scale")
    dtype = np.result_type(Q, K, V)
    work = work_dtype(dtype)
    Q, K, V = (a.astype(work, copy=False) for a in (Q, K, V))
    return Q, K, V, mask, scale, dtype


def explain_attention(Q, K, V, scale):
    """Raise the error that says why attention met a NaN or an infinity (Q is finite)."""
    check_finite(K, "K")
    check_finite(V, "V")
    raise overflow_error("the scores Q Kᵀ · scale", Q.dtype, {"Q": Q, "K": K, "scale": scale})
