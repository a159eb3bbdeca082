"""Measure the speed and memory of the library attention in snippets/ and print a table.

    python .ci/bench_snippets.py            # everything (about a minute)
    python .ci/bench_snippets.py --repeat 3 # fewer runs per measurement
    python .ci/bench_snippets.py --root DIR # the snippets package found in DIR (to compare versions)

Issue 10 §3. Compares, on (B=8, H=8, T=S=512, d=64):

- ``scaled_dot_product_attention`` with PyTorch's ``scaled_dot_product_attention``
  (float32, float64, and float32 with a boolean causal mask) and with the
  three-line teaching version (``w = np.exp(s - s.max(-1, keepdims=True));
  w /= w.sum(-1, keepdims=True); w @ V``);
- ``multi_head_attention`` with ``torch.nn.MultiheadAttention`` (batch_first,
  no dropout, per-head weights returned, as ours returns them) and with a
  teaching version (projections, split, the three lines, merge);
- ``chunked_attention`` with the full attention, in time and in peak memory
  (tracemalloc sees NumPy's allocations, not PyTorch's);
- one query over 4,096 keys, where fixed costs (input checks) dominate.

Targets: within 3x of PyTorch, within 1.25x of the teaching version. It also
checks that the outputs equal PyTorch's (max abs difference). Timings are the
median of ``--repeat`` runs, every library single-threaded (BLAS and PyTorch
both get one thread: the machine is shared, and one thread is the fair
comparison). Timings are measured here, never asserted in tests. PyTorch is
optional (``pip install torch``; not a site requirement): without it the
PyTorch columns are empty.
"""

from __future__ import annotations

import argparse
import math
import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # PyTorch is optional
    torch = None

B, H, T, S, D = 8, 8, 512, 512, 64


def compare(ours, reference, repeat: int) -> tuple[float, float]:
    """Median seconds of two functions, run alternately so that a change of load hits both."""
    ours(), reference()  # warm-up: first-touch page faults, lazy initialisation
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for function, bucket in ((ours, times[0]), (reference, times[1])):
            start = time.perf_counter()
            function()
            bucket.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def peak_bytes(function) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        function()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def teaching_attention(Q, K, V, mask=None):
    """The three-line version of the pages (plus the scale and the mask)."""
    s = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])   # a Python float: float32 stays float32
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return w @ V, w


def teaching_multi_head(x, params, n_heads):
    def split(a):
        return a.reshape(*a.shape[:-1], n_heads, -1).swapaxes(-3, -2)

    Q = split(x @ params["W_Q"] + params["b_Q"])
    K = split(x @ params["W_K"] + params["b_K"])
    V = split(x @ params["W_V"] + params["b_V"])
    heads, w = teaching_attention(Q, K, V)
    merged = heads.swapaxes(-3, -2).reshape(*x.shape[:-1], -1)
    return merged @ params["W_O"] + params["b_O"], w


def parameter(params, name):
    """A parameter under the new name (W_Q) or the old one (W_q), for --root of an older version."""
    return params[name] if name in params else params[name[0] + "_" + name[2].lower()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (the median is shown)")
    parser.add_argument("--root", type=Path, default=ROOT, help="directory holding the snippets package")
    args = parser.parse_args()
    sys.path.insert(0, str(args.root))
    from snippets.at_scale import chunked_attention
    from snippets.attention import scaled_dot_product_attention
    from snippets.multihead import causal_mask, init_params, multi_head_attention

    rng = np.random.default_rng(0)
    rows: list[tuple[str, float, float | None, float]] = []   # name, ours, reference, target ratio
    diffs: list[tuple[str, float]] = []
    repeat = args.repeat

    def torch_sdpa(Q, K, V, mask=None):
        tq, tk, tv = (torch.from_numpy(a) for a in (Q, K, V))
        tmask = None if mask is None else torch.from_numpy(np.ascontiguousarray(mask))
        return partial(torch.nn.functional.scaled_dot_product_attention, tq, tk, tv, attn_mask=tmask)

    for label, dtype, masked in (("float32", np.float32, False), ("float64", np.float64, False),
                                 ("float32 causal", np.float32, True)):
        Q, K, V = (rng.normal(size=(B, H, n, D)).astype(dtype) for n in (T, S, S))
        mask = causal_mask(T) if masked else None
        ours = partial(scaled_dot_product_attention, Q, K, V, mask=mask)
        rows.append((f"attention {label} / teaching", *compare(ours, partial(teaching_attention, Q, K, V, mask),
                                                               repeat), 1.25))
        out, _ = ours()
        if torch is not None:
            call = torch_sdpa(Q, K, V, mask)
            rows.append((f"attention {label} / torch", *compare(ours, call, repeat), 3.0))
            diffs.append((f"attention {label}", float(np.abs(out - call().numpy()).max())))
        weights_bytes = B * H * T * S * np.dtype(dtype).itemsize
        rows.append((f"attention {label} peak memory / weights", peak_bytes(ours) / weights_bytes, None, 1.5))
        rows.append(("  (teaching version: peak memory / weights)",
                     peak_bytes(partial(teaching_attention, Q, K, V, mask)) / weights_bytes, None, float("inf")))

    # One query over 4,096 keys: the fixed costs.
    q1, k1, v1 = rng.normal(size=(1, D)), rng.normal(size=(4096, D)), rng.normal(size=(4096, D))
    ours = partial(scaled_dot_product_attention, q1, k1, v1)
    rows.append(("attention T=1, S=4096 / teaching",
                 *compare(ours, partial(teaching_attention, q1, k1, v1), 50 * repeat), 1.25))
    if torch is not None:
        rows.append(("attention T=1, S=4096 / torch", *compare(ours, torch_sdpa(q1, k1, v1), 50 * repeat), 3.0))

    # Multi-head attention, self-attention on (B, T, d_model).
    d_model = H * D
    for label, dtype in (("float32", np.float32), ("float64", np.float64)):
        params = init_params(d_model, H, np.random.default_rng(1))
        params = {name: value.astype(dtype) for name, value in params.items()}
        x = rng.normal(size=(B, T, d_model)).astype(dtype)
        new = {name: parameter(params, name) for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")}
        ours = partial(multi_head_attention, x, x, params, H)
        rows.append((f"multi-head {label} / teaching", *compare(ours, partial(teaching_multi_head, x, new, H),
                                                                repeat), 1.25))
        if torch is not None:
            layer = torch.nn.MultiheadAttention(d_model, H, dropout=0.0, bias=True, batch_first=True,
                                                dtype=torch.float32 if dtype == np.float32 else torch.float64)
            with torch.no_grad():   # ours multiplies on the right: torch's weights are the transposes
                layer.in_proj_weight.copy_(torch.from_numpy(
                    np.concatenate([new["W_Q"], new["W_K"], new["W_V"]], axis=1).T.copy()))
                layer.in_proj_bias.copy_(torch.from_numpy(np.concatenate([new["b_Q"], new["b_K"], new["b_V"]])))
                layer.out_proj.weight.copy_(torch.from_numpy(new["W_O"].T.copy()))
                layer.out_proj.bias.copy_(torch.from_numpy(new["b_O"]))
            tx = torch.from_numpy(x)
            call = torch.no_grad()(partial(layer, tx, tx, tx, need_weights=True, average_attn_weights=False))
            rows.append((f"multi-head {label} / torch", *compare(ours, call, repeat), 3.0))
            out, weights = ours()
            t_out, t_weights = call()
            diffs.append((f"multi-head {label} output", float(np.abs(out - t_out.numpy()).max())))
            diffs.append((f"multi-head {label} weights", float(np.abs(weights - t_weights.numpy()).max())))

    # Chunked against full attention.
    for label, dtype in (("float32", np.float32), ("float64", np.float64)):
        Q, K, V = (rng.normal(size=(B, H, n, D)).astype(dtype) for n in (T, S, S))
        full = partial(scaled_dot_product_attention, Q, K, V)
        for chunk_size in (128, S):
            chunked = partial(chunked_attention, Q, K, V, chunk_size)
            rows.append((f"chunked {label} chunk {chunk_size} / full", *compare(chunked, full, repeat), 1.25))
            # One chunk of all S keys holds what full attention holds; smaller chunks, less.
            rows.append((f"chunked {label} chunk {chunk_size} peak memory / full",
                         peak_bytes(chunked) / peak_bytes(full), None, 1.0 if chunk_size < S else 1.5))
        diff = np.abs(chunked_attention(Q, K, V, 128) - full()[0]).max()
        diffs.append((f"chunked {label} vs full", float(diff)))

    # Causal linear attention (chapter 9) against the same chunked form in PyTorch.
    from snippets.linear_memory import linear_attention

    def torch_linear_causal(q, k, v, chunk=64):
        out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
        M = torch.zeros(*q.shape[:-2], k.shape[-1], v.shape[-1], dtype=q.dtype)
        future = ~torch.ones(chunk, chunk, dtype=torch.bool).tril()
        for a in range(0, q.shape[-2], chunk):
            qc, kc, vc = q[..., a:a + chunk, :], k[..., a:a + chunk, :], v[..., a:a + chunk, :]
            n = qc.shape[-2]
            out[..., a:a + chunk, :] = qc @ M + (qc @ kc.mT).masked_fill(future[:n, :n], 0) @ vc
            M = M + kc.mT @ vc
        return out

    for label, dtype in (("float32", np.float32), ("float64", np.float64)):
        Q, K, V = (rng.normal(size=(B, H, T, D)).astype(dtype) for _ in range(3))
        ours = partial(linear_attention, Q, K, V)
        output_bytes = B * H * T * D * np.dtype(dtype).itemsize
        rows.append((f"linear causal {label} peak memory / output", peak_bytes(ours) / output_bytes, None, 2.0))
        if torch is not None:
            call = partial(torch_linear_causal, *(torch.from_numpy(a) for a in (Q, K, V)))
            rows.append((f"linear causal {label} / torch chunked", *compare(ours, call, repeat), 3.0))
            diffs.append((f"linear causal {label}", float(np.abs(ours() - call().numpy()).max())))

    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else '(not installed)'}, "
          f"one thread each, median of {repeat} runs; shapes B={B}, H={H}, T={T}, S={S}, d={D}\n")
    print(f"{'measurement':50} {'ours':>10} {'reference':>10} {'ratio':>7} {'target':>7}")
    failed = 0
    for name, ours, reference, target in rows:
        if reference is None:           # a ratio already (memory)
            ratio, cells = ours, ("", "")
        else:
            ratio, cells = ours / reference, (f"{ours * 1e3:8.1f}ms", f"{reference * 1e3:8.1f}ms")
        ok = ratio <= target
        failed += not ok
        print(f"{name:50} {cells[0]:>10} {cells[1]:>10} {ratio:7.2f} {'<= ' + str(target):>7}"
              f"{'' if ok else '  MISSED'}")
    if diffs:
        print(f"\n{'equality':50} {'max |difference|':>18}")
        for name, diff in diffs:
            print(f"{name:50} {diff:18.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
