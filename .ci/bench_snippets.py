"""Measure the speed and memory of the library attention in snippets/ and print a table.

    python .ci/bench_snippets.py            # everything (about two minutes)
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

Issue 35 added every other snippet that does real work (norms, GELU, RoPE,
grouped-query, sink, top-k, sparse, QK-norm, indexer, gate, delta rule, paged,
experts, MLA, cached decoding, the block, ``gpt_forward``, ``generate``,
``gpt_loss_and_grads``, ``adam_step``), float32 and float64, each against a
PyTorch version: the equality tests' references, imported from tests/, or,
where a test's is written for equality rather than speed, the natural
vectorised PyTorch (the row says so); ``--only WORD ...`` runs only those rows.
``--training-steps N`` (default 100) times the first N steps of chapter 14's
training run against the same run in PyTorch, each side in a fresh process
as a reader runs it (.ci/bench_training.py says how): the first 20 steps,
where PyTorch warms up, and the rest (target 1.0x).

Targets: within 3x of PyTorch, within 1.25x of the teaching version. It also
checks that the outputs equal PyTorch's (max abs difference). Timings are the
median of ``--repeat`` runs, the two sides alternating, every library
single-threaded (BLAS and PyTorch both get one thread: the machine is shared,
and one thread is the fair comparison). They are CPU time (user + system, so
the kernel's work for an allocation counts) unless ``--clock wall``: on a
shared machine the wall clock also counts the time spent waiting for a core,
which changes from run to run (on one thread the two agree when the machine
is idle). Timings are measured here, never asserted in tests. PyTorch is
optional (``pip install torch``; not a site requirement): without it the
PyTorch columns are empty.
"""

from __future__ import annotations

import argparse
import json
import math
import os

for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import statistics  # noqa: E402
import subprocess  # noqa: E402
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
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
CLOCK = "cpu"   # --clock
LOAD_AT_START = os.getloadavg()[0]
TRAINING_WARM_UP = 20   # training steps timed apart (bench_training)


def compare(ours, reference, repeat: int) -> tuple[float, float]:
    """Median seconds of two functions, run alternately so that a change of load hits both."""
    ours(), reference()  # warm-up: first-touch page faults, lazy initialisation
    times: tuple[list[float], list[float]] = ([], [])
    clock = CLOCKS[CLOCK]
    for _ in range(repeat):
        for function, bucket in ((ours, times[0]), (reference, times[1])):
            start = clock()
            function()
            bucket.append(clock() - start)
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


# --- Every other snippet against a PyTorch version (issue 35 §2) -------------------
#
# The PyTorch references come from the equality tests where they exist (one source,
# one definition: tests/test_*.py, imported); where a test's reference is written for
# equality rather than speed (every expert run on every token, the contiguous cache
# instead of pages, recomputation instead of a cache), the natural vectorised PyTorch
# a PyTorch user would write is here instead, and its row says so ("natural").

GPT = {"vocab_size": 108, "max_len": 64, "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 256}   # chapter 14's model
GPT_BATCH = 32


def _tests():
    """The tests folder on sys.path, so that the equality tests' references import."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)


def _torch_dtype(dtype):
    return torch.float32 if dtype == np.float32 else torch.float64


def _tensors(tree, dtype=None, grad=False):
    if isinstance(tree, dict):
        return {key: _tensors(value, dtype, grad) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_tensors(value, dtype, grad) for value in tree]
    t = torch.from_numpy(np.ascontiguousarray(tree))
    if dtype is not None:
        t = t.to(dtype)
    return t.requires_grad_(grad)


def _cast(tree, dtype):
    if isinstance(tree, dict):
        return {key: _cast(value, dtype) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_cast(value, dtype) for value in tree]
    return np.asarray(tree).astype(dtype)


def _max_diff(a, b):
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


def torch_gpt_logits_cached(P, tokens, n_heads, caches, start):
    """GPT logits of ``tokens (B, t)`` at positions start.. with a KV cache per block (natural PyTorch)."""
    F = torch.nn.functional
    T, d = tokens.shape[-1], P["W_E"].shape[1]
    x = P["W_E"][tokens] + P["W_pos"][start:start + T]
    end = start + T
    sees = torch.ones(T, end, dtype=torch.bool).tril(diagonal=start)
    for b, (K_cache, V_cache) in zip(P["blocks"], caches, strict=True):
        h = F.layer_norm(x, (d,), b["ln_1_weight"], b["ln_1_bias"], eps=1e-5)
        Q, K, V = ((h @ b[f"W_{n}"] + b[f"b_{n}"]).unflatten(-1, (n_heads, -1)).transpose(1, 2) for n in "QKV")
        K_cache[:, :, start:end], V_cache[:, :, start:end] = K, V
        attended = F.scaled_dot_product_attention(Q, K_cache[:, :, :end], V_cache[:, :, :end], attn_mask=sees)
        x = x + attended.transpose(1, 2).flatten(-2) @ b["W_O"] + b["b_O"]
        h = F.layer_norm(x, (d,), b["ln_2_weight"], b["ln_2_bias"], eps=1e-5)
        x = x + F.gelu(h @ b["W_1"] + b["b_1"], approximate="tanh") @ b["W_2"] + b["b_2"]
    return F.layer_norm(x[:, -1], (d,), P["ln_f_weight"], P["ln_f_bias"], eps=1e-5) @ P["W_E"].T


@torch.no_grad() if torch is not None else (lambda f: f)
def torch_generate(P, prompt, n_heads, n_new):
    """Greedy generation with a KV cache, as a PyTorch user writes it."""
    B, T = prompt.shape
    d = P["W_E"].shape[1]
    shape = (B, n_heads, T + n_new, d // n_heads)
    caches = [(torch.zeros(shape, dtype=P["W_E"].dtype), torch.zeros(shape, dtype=P["W_E"].dtype))
              for _ in P["blocks"]]
    out = torch.empty(B, T + n_new, dtype=torch.int64)
    out[:, :T] = prompt
    start = 0
    for t in range(T, T + n_new):
        out[:, t] = torch_gpt_logits_cached(P, out[:, start:t], n_heads, caches, start).argmax(-1)
        start = t
    return out


def torch_mla_decode(t, X, n_heads, d_head, d_rope):
    """MLA decoding one token at a time from a latent cache, absorbed (natural PyTorch, DeepSeek's form)."""
    from test_mla import torch_rope
    *batch, T, _ = X.shape
    W_UK = t["W_UK"].unflatten(-1, (n_heads, d_head)).transpose(0, 1)      # (H, d_latent, d_head)
    W_UV = t["W_UV"].unflatten(-1, (n_heads, d_head)).transpose(0, 1)
    C = torch.empty(*batch, T, t["W_DKV"].shape[1], dtype=X.dtype)
    K_R = torch.empty(*batch, T, d_rope, dtype=X.dtype)
    scale = 1 / (d_head + d_rope) ** 0.5
    outs = []
    for s in range(T):
        x = X[..., s:s + 1, :]
        position = torch.tensor([float(s)], dtype=X.dtype)
        C[..., s:s + 1, :] = x @ t["W_DKV"]
        K_R[..., s:s + 1, :] = torch_rope(torch, x @ t["W_KR"], position)
        q_c = (x @ t["W_Q"]).unflatten(-1, (n_heads, d_head)).transpose(-3, -2)       # (..., H, 1, d_head)
        q_r = torch_rope(torch, (x @ t["W_QR"]).unflatten(-1, (n_heads, d_rope)).transpose(-3, -2), position)
        scores = ((q_c @ W_UK.mT) @ C[..., None, :s + 1, :].mT + q_r @ K_R[..., None, :s + 1, :].mT) * scale
        read = (scores.softmax(-1) @ C[..., None, :s + 1, :]) @ W_UV                  # (..., H, 1, d_head)
        outs.append(read.transpose(-3, -2).flatten(-2) @ t["W_O"])
    return torch.cat(outs, dim=-2)


def torch_moe_routed(X, t, top_k):
    """A mixture of experts as a PyTorch user writes it: each expert runs on the tokens that chose it."""
    F = torch.nn.functional
    scores = X @ t["W_router"]
    kept, chosen = scores.topk(top_k, dim=-1)
    gates = kept.softmax(-1)
    out = torch.zeros_like(X)
    for e, p in enumerate(t["experts"]):
        rows, slot = (chosen == e).nonzero(as_tuple=True)
        if len(rows):
            answer = F.gelu(X[rows] @ p["W_1"] + p["b_1"], approximate="tanh") @ p["W_2"] + p["b_2"]
            out.index_add_(0, rows, answer * gates[rows, slot, None])
    return out


def torch_paged(Q, K_pages, V_pages, table, length):
    """Attention through a page table (natural PyTorch: gather the pages, mask the last page's unused slots)."""
    K = K_pages[table].flatten(0, 1)[:length]
    V = V_pages[table].flatten(0, 1)[:length]
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V)


def bench_library(rows, diffs, repeat, only):
    """Every public snippet that does real work against PyTorch, float32 and float64."""
    _tests()
    import test_mla
    import test_moe
    import test_sparse_gated
    import test_training
    import test_transformer

    from snippets.at_scale import topk_attention
    from snippets.kv_cache import decode_with_cache, grouped_query_attention
    from snippets.linear_memory import delta_rule
    from snippets.mla import init_mla, mla_attention, mla_decode
    from snippets.moe import init_moe, moe_forward
    from snippets.multihead import causal_mask, init_params
    from snippets.no_match import attention_with_sink
    from snippets.paged_cache import PagedKVCache, paged_attention
    from snippets.positions import rope
    from snippets.sparse_gated import gated_output, init_indexer, lightning_indexer, qk_norm_attention, sparse_attention
    from snippets.training import adam_step, gpt_loss_and_grads
    from snippets.transformer import gelu, generate, gpt_forward, init_block, init_gpt, layer_norm, rms_norm, transformer_block

    F = torch.nn.functional
    no_grad = torch.no_grad()

    def row(name, ours, theirs, label, diff=None, tolerance=None):
        if only and not any(word in name for word in only):
            return
        rows.append((f"{name} {label} / torch", *compare(ours, no_grad(theirs), repeat), 3.0))
        if diff is not None:
            with torch.no_grad():
                diffs.append((f"{name} {label}", diff()))

    def one_dtype(label, dtype):
        tdt = _torch_dtype(dtype)
        rng = np.random.default_rng(2)

        def r(*shape, scale=1.0):
            return (rng.normal(size=shape) * scale).astype(dtype)

        # Norms and GELU on a (B, T, d) = (8, 512, 512) stream.
        x, w, b = r(8, 512, 512), r(512), r(512)
        tx, tw, tb = _tensors([x, w, b])
        row("layer_norm", partial(layer_norm, x, w, b), partial(F.layer_norm, tx, (512,), tw, tb, 1e-5), label,
            lambda: _max_diff(layer_norm(x, w, b), F.layer_norm(tx, (512,), tw, tb, 1e-5)))
        row("rms_norm", partial(rms_norm, x, w), partial(F.rms_norm, tx, (512,), tw, 1e-6), label,
            lambda: _max_diff(rms_norm(x, w), F.rms_norm(tx, (512,), tw, 1e-6)))
        row("gelu", partial(gelu, x), partial(F.gelu, tx, approximate="tanh"), label,
            lambda: _max_diff(gelu(x), F.gelu(tx, approximate="tanh")))

        # RoPE on (B, H, T, d) = (8, 8, 512, 64): test_mla's complex rotation.
        q, positions = r(8, 8, 512, 64), np.arange(512, dtype=np.float64)
        tq, tpos = torch.from_numpy(q), torch.arange(512, dtype=tdt)
        row("rope", partial(rope, q, positions), partial(test_mla.torch_rope, torch, tq, tpos), label,
            lambda: _max_diff(rope(q, positions), test_mla.torch_rope(torch, tq, tpos)))

        # Attention variants at the attention shapes but a batch of 2 (the bench stays short):
        # (B, H, T, S, d) = (2, 8, 512, 512, 64).
        Q, K, V = r(2, H, T, D), r(2, H, S, D), r(2, H, S, D)
        tQ, tK, tV = _tensors([Q, K, V])
        G = 2
        Kg, Vg = np.ascontiguousarray(K[:, :G]), np.ascontiguousarray(V[:, :G])
        tKg, tVg = _tensors([Kg, Vg])
        row("grouped_query_attention", partial(grouped_query_attention, Q, Kg, Vg),
            partial(F.scaled_dot_product_attention, tQ, tKg, tVg, enable_gqa=True), label,
            lambda: _max_diff(grouped_query_attention(Q, Kg, Vg)[0],
                              F.scaled_dot_product_attention(tQ, tKg, tVg, enable_gqa=True)))

        def torch_sink(q, k, v):   # a zero-score key with a zero value: a column of zeros before the softmax
            scores = q @ k.mT / q.shape[-1] ** 0.5
            scores = torch.cat([torch.zeros(*scores.shape[:-1], 1, dtype=scores.dtype), scores], dim=-1)
            return scores.softmax(-1)[..., 1:] @ v

        row("attention_with_sink", partial(attention_with_sink, Q, K, V), partial(torch_sink, tQ, tK, tV), label,
            lambda: _max_diff(attention_with_sink(Q, K, V)[0], torch_sink(tQ, tK, tV)))
        k_top = 64
        row("topk_attention (test_sparse_gated's torch_sparse, index = scores)", partial(topk_attention, Q, K, V, k_top),
            lambda: test_sparse_gated.torch_sparse(torch, Q, K, V, (tQ @ tK.mT).numpy(), k_top, False), label,
            lambda: _max_diff(topk_attention(Q, K, V, k_top),
                              test_sparse_gated.torch_sparse(torch, Q, K, V, Q @ np.swapaxes(K, -1, -2), k_top, False)[0]))
        index = r(2, H, T, S)
        row("sparse_attention (test's torch_sparse, causal)",
            partial(sparse_attention, Q, K, V, index, k_top, mask=causal_mask(T)),
            partial(test_sparse_gated.torch_sparse, torch, Q, K, V, index, k_top, True), label,
            lambda: _max_diff(sparse_attention(Q, K, V, index, k_top, mask=causal_mask(T))[0],
                              test_sparse_gated.torch_sparse(torch, Q, K, V, index, k_top, True)[0]))
        q_weight, k_weight = r(D), r(D)
        tqw, tkw = _tensors([q_weight, k_weight])

        def torch_qk_norm(q, k, v):
            return F.scaled_dot_product_attention(F.rms_norm(q, (D,), tqw, 1e-6), F.rms_norm(k, (D,), tkw, 1e-6), v)

        row("qk_norm_attention", partial(qk_norm_attention, Q, K, V, q_weight, k_weight),
            partial(torch_qk_norm, tQ, tK, tV), label,
            lambda: _max_diff(qk_norm_attention(Q, K, V, q_weight, k_weight)[0], torch_qk_norm(tQ, tK, tV)))

        # The lightning indexer and the gate: (B, T, d_model) = (8, 512, 512), 4 index heads of 32.
        X = r(8, 512, 512)
        indexer = _cast(init_indexer(np.random.default_rng(3), 512, 4, 32), dtype)
        row("lightning_indexer (test's torch_indexer)", partial(lightning_indexer, X, X, indexer, 4),
            partial(test_sparse_gated.torch_indexer, torch, X, X, indexer, 4), label,
            lambda: _max_diff(lightning_indexer(X, X, indexer, 4),
                              test_sparse_gated.torch_indexer(torch, X, X, indexer, 4)))
        W_G = r(512, 512, scale=512 ** -0.5)
        tX, tW_G = _tensors([X, W_G])

        def torch_gate(heads, x):
            return heads * torch.sigmoid(x @ tW_G)

        row("gated_output", partial(gated_output, X, X, W_G), partial(torch_gate, tX, tX), label,
            lambda: _max_diff(gated_output(X, X, W_G), torch_gate(tX, tX)))

        # Linear attention's delta rule, (B, H, S, d) = (8, 8, 512, 64) (natural PyTorch: the same loop over keys).
        Kn = K / np.linalg.norm(K, axis=-1, keepdims=True)

        def torch_delta(k, v, beta=1.0):
            M = torch.zeros(*k.shape[:-2], k.shape[-1], v.shape[-1], dtype=k.dtype)
            for s in range(k.shape[-2]):
                ks, vs = k[..., s, :], v[..., s, :]
                M += beta * ks[..., :, None] * (vs - (ks[..., None, :] @ M)[..., 0, :])[..., None, :]
            return M

        tKn = torch.from_numpy(Kn)
        row("delta_rule (natural: the same loop over keys)", partial(delta_rule, Kn, V), partial(torch_delta, tKn, tV),
            label, lambda: _max_diff(delta_rule(Kn, V), torch_delta(tKn, tV)))

        # Paged attention: 8 sequences of 512 entries in pages of 16; 8 queries each (float64 pool only).
        if dtype == np.float64:
            cache = PagedKVCache(n_pages=8 * 32 + 8, page_size=16, d_k=D, d_v=D)
            seqs = [cache.new_sequence() for _ in range(8)]
            for _ in range(2):
                for seq in seqs:
                    cache.append(seq, rng.normal(size=(256, D)), rng.normal(size=(256, D)))
            Qp = r(H, 8, D)
            tKp, tVp, tQp = _tensors([cache.K_pages, cache.V_pages, Qp])
            tables = [torch.tensor(cache.page_table(seq)) for seq in seqs]

            def ours_paged():
                return [paged_attention(Qp, cache, seq) for seq in seqs]

            def torch_paged_all():
                return [torch_paged(tQp, tKp, tVp, table, 512) for table in tables]

            row("paged_attention (natural: gather the pages)", ours_paged, torch_paged_all, label,
                lambda: max(_max_diff(a[0], b) for a, b in zip(ours_paged(), torch_paged_all(), strict=True)))

        # Mixture of experts: 4,096 tokens of d_model 256, 8 experts of d_ff 512, top 2.
        moe = _cast(init_moe(np.random.default_rng(4), 256, 512, 8), dtype)
        Xm = r(4096, 256)
        tXm, tmoe = _tensors([Xm, moe])
        row("moe_forward (natural: routed experts)", partial(moe_forward, Xm, moe, 2),
            partial(torch_moe_routed, tXm, tmoe, 2), label,
            lambda: _max_diff(moe_forward(Xm, moe, 2), torch_moe_routed(tXm, tmoe, 2)))
        row("moe_forward / test's torch_moe (every expert)", partial(moe_forward, Xm, moe, 2),
            lambda: test_moe.torch_moe(torch, Xm, moe, 2), label)

        # Multi-head latent attention: (B, T, d_model) = (4, 256, 512), 8 heads of 64, latent 128, RoPE 32.
        mla = _cast(init_mla(np.random.default_rng(5), 512, 8, 64, 128, 32), dtype)
        Xl = r(4, 256, 512)
        row("mla_attention expanded (test's torch_mla)", partial(mla_attention, Xl, mla, 8),
            partial(test_mla.torch_mla, torch, Xl, mla, 8), label,
            lambda: _max_diff(mla_attention(Xl, mla, 8), test_mla.torch_mla(torch, Xl, mla, 8)))
        row("mla_attention absorbed (test's torch_mla)", partial(mla_attention, Xl, mla, 8, absorbed=True),
            partial(test_mla.torch_mla, torch, Xl, mla, 8), label,
            lambda: _max_diff(mla_attention(Xl, mla, 8, absorbed=True), test_mla.torch_mla(torch, Xl, mla, 8)))
        Xd = r(4, 64, 512)
        tmla, tXd = _tensors(mla), torch.from_numpy(Xd)
        row("mla_decode (natural: latent cache, T = 64)", partial(mla_decode, Xd, mla, 8),
            partial(torch_mla_decode, tmla, tXd, 8, 64, 32), label,
            lambda: _max_diff(mla_decode(Xd, mla, 8), torch_mla_decode(tmla, tXd, 8, 64, 32)))

        # KV-cache decoding of one attention layer, (B, T, d_model) = (8, 128, 256), 8 heads.
        mh = _cast(init_params(256, 8, np.random.default_rng(6)), dtype)
        xd = r(8, 128, 256)
        layer = torch.nn.MultiheadAttention(256, 8, batch_first=True, dtype=tdt)
        with torch.no_grad():
            layer.in_proj_weight.copy_(torch.from_numpy(np.concatenate([mh["W_Q"], mh["W_K"], mh["W_V"]], 1).T.copy()))
            layer.in_proj_bias.copy_(torch.from_numpy(np.concatenate([mh["b_Q"], mh["b_K"], mh["b_V"]])))
            layer.out_proj.weight.copy_(torch.from_numpy(mh["W_O"].T.copy()))
            layer.out_proj.bias.copy_(torch.from_numpy(mh["b_O"]))

        def torch_decode(x):   # natural PyTorch: one position at a time, keys and values appended to the cache
            p = {n: torch.from_numpy(v) for n, v in mh.items()}
            Ks = torch.empty(x.shape[0], 8, x.shape[1], 32, dtype=x.dtype)
            Vs = torch.empty_like(Ks)
            outs = []
            for t in range(x.shape[1]):
                xt = x[:, t:t + 1]
                Ks[:, :, t:t + 1] = (xt @ p["W_K"] + p["b_K"]).unflatten(-1, (8, 32)).transpose(1, 2)
                Vs[:, :, t:t + 1] = (xt @ p["W_V"] + p["b_V"]).unflatten(-1, (8, 32)).transpose(1, 2)
                qt = (xt @ p["W_Q"] + p["b_Q"]).unflatten(-1, (8, 32)).transpose(1, 2)
                read = F.scaled_dot_product_attention(qt, Ks[:, :, :t + 1], Vs[:, :, :t + 1])
                outs.append(read.transpose(1, 2).flatten(-2) @ p["W_O"] + p["b_O"])
            return torch.cat(outs, dim=1)

        txd = torch.from_numpy(xd)
        row("decode_with_cache (natural: the same cache)", partial(decode_with_cache, xd, mh, 8),
            partial(torch_decode, txd), label,
            lambda: _max_diff(decode_with_cache(xd, mh, 8), torch_decode(txd)))

        # A transformer block, (B, T, d_model) = (8, 256, 256), 8 heads, d_ff 1024, causal: test's encoder layer.
        block = _cast(init_block(256, 8, 1024, np.random.default_rng(7)), dtype)
        xb = r(8, 256, 256)
        encoder = test_transformer.torch_encoder_layer(torch, block, 8, dtype=tdt)
        future = torch.from_numpy(~causal_mask(256))
        txb = torch.from_numpy(xb)
        row("transformer_block (test's pre-norm encoder layer)", partial(transformer_block, xb, block, 8, causal_mask(256)),
            partial(encoder, txb, src_mask=future), label,
            lambda: _max_diff(transformer_block(xb, block, 8, causal_mask(256)), encoder(txb, src_mask=future)))

        # Chapter 14's GPT (d_model 64, 2 layers, 4 heads, d_ff 256, vocab 108), a batch of 32 windows of 64.
        gpt = _cast(init_gpt(**GPT, rng=np.random.default_rng(8)), dtype)
        tokens = np.random.default_rng(9).integers(0, GPT["vocab_size"], size=(GPT_BATCH, GPT["max_len"] + 1))
        P = _tensors(gpt, tdt)
        ttokens = torch.from_numpy(tokens)
        n_heads = GPT["n_heads"]

        def torch_logits(P, ids):   # test_training's model, without the loss: its layers up to the logits
            T_, d = ids.shape[-1], P["W_E"].shape[1]
            x = P["W_E"][ids] + P["W_pos"][:T_]
            causal = torch.ones(T_, T_, dtype=torch.bool).tril()
            for b in P["blocks"]:
                h = F.layer_norm(x, (d,), b["ln_1_weight"], b["ln_1_bias"], eps=1e-5)
                Qh, Kh, Vh = ((h @ b[f"W_{n}"] + b[f"b_{n}"]).unflatten(-1, (n_heads, -1)).transpose(1, 2)
                              for n in "QKV")
                x = x + F.scaled_dot_product_attention(Qh, Kh, Vh, attn_mask=causal).transpose(1, 2).flatten(-2) \
                    @ b["W_O"] + b["b_O"]
                h = F.layer_norm(x, (d,), b["ln_2_weight"], b["ln_2_bias"], eps=1e-5)
                x = x + F.gelu(h @ b["W_1"] + b["b_1"], approximate="tanh") @ b["W_2"] + b["b_2"]
            return F.layer_norm(x, (d,), P["ln_f_weight"], P["ln_f_bias"], eps=1e-5) @ P["W_E"].T

        row("gpt_forward (chapter 14's model, 32 x 64 tokens)", partial(gpt_forward, tokens[:, :-1], gpt, n_heads),
            partial(torch_logits, P, ttokens[:, :-1]), label,
            lambda: _max_diff(gpt_forward(tokens[:, :-1], gpt, n_heads), torch_logits(P, ttokens[:, :-1])))
        prompt = tokens[:8, :8]
        tprompt = torch.from_numpy(prompt)
        row("generate (greedy, KV cache, 8 prompts of 8 + 56 new)", partial(generate, prompt, gpt, n_heads, 56),
            partial(torch_generate, P, tprompt, n_heads, 56), label,
            lambda: float((generate(prompt, gpt, n_heads, 56) != torch_generate(P, tprompt, n_heads, 56).numpy()).mean()))

        leaves = test_training.torch_leaves(torch, gpt, tdt)

        def torch_loss_and_grads():   # test_training's torch_gpt_loss, then autograd
            for _, leaf in test_training.leaves(leaves):
                leaf.grad = None
            loss = test_training.torch_gpt_loss(torch, leaves, ttokens, n_heads)
            loss.backward()
            return loss

        if not only or any(word in "gpt_loss_and_grads" for word in only):
            rows.append((f"gpt_loss_and_grads (test's torch_gpt_loss + backward) {label} / torch",
                         *compare(partial(gpt_loss_and_grads, tokens, gpt, n_heads), torch_loss_and_grads, repeat), 3.0))
            diffs.append((f"gpt_loss_and_grads loss {label}",
                          abs(gpt_loss_and_grads(tokens, gpt, n_heads)[0] - torch_loss_and_grads().item())))

        # Adam over chapter 14's parameters (torch.optim.Adam, its default foreach implementation).
        grads = gpt_loss_and_grads(tokens, gpt, n_heads)[1]
        state = adam_step(gpt, grads)[1]
        torch_loss_and_grads()
        optimiser = torch.optim.Adam([leaf for _, leaf in test_training.leaves(leaves)], lr=1e-3)
        optimiser.step()
        row("adam_step (torch.optim.Adam)", partial(adam_step, gpt, grads, state), optimiser.step, label)

    for label, dtype in (("float32", np.float32), ("float64", np.float64)):
        one_dtype(label, dtype)


# --- Chapter 14's training run against the same run in PyTorch (issue 35 §3) --------


def bench_training(rows, steps, repeat, root):
    """The first ``steps`` steps of chapter 14's run in NumPy and in PyTorch, each side in a fresh process.

    .ci/bench_training.py runs one side, as a reader runs it: NumPy in
    tools/train.py's environment (one BLAS thread and MALLOC_TOP_PAD_, which
    glibc reads only when a process starts: in this process NumPy would run
    without it, 1.5 times slower), PyTorch with one thread. The sides
    alternate; each time is the median of ``repeat`` runs. PyTorch spends
    about a second warming up in its first steps, which the run's 1,500
    steps hardly feel: the first TRAINING_WARM_UP steps and the rest are
    two rows, and the target is the rest's. Returns the largest difference
    between the two runs' losses.
    """
    from tools.train import training_env

    script = Path(__file__).with_name("bench_training.py")
    envs = {"numpy": training_env(), "torch": dict(os.environ)}
    runs: dict[str, list[dict]] = {"numpy": [], "torch": []}
    for _ in range(repeat):
        for side, env in envs.items():
            command = [sys.executable, str(script), side, str(steps), "--root", str(root)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode:
                raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr}")
            runs[side].append(json.loads(done.stdout))

    def seconds(side, first, last):   # median time of steps first..last (1-based)
        return statistics.median(run[CLOCK][last - 1] - (run[CLOCK][first - 2] if first > 1 else 0)
                                 for run in runs[side])

    warm_up = min(TRAINING_WARM_UP, steps)
    parts = [(1, warm_up, float("inf")), (warm_up + 1, steps, 1.0)] if steps > warm_up else [(1, steps, 1.0)]
    for first, last, target in parts:
        rows.append((f"training, steps {first}-{last}, own processes, 1 thread / torch",
                     seconds("numpy", first, last), seconds("torch", first, last), target))
    return max(abs(a - b) for a, b in zip(runs["numpy"][0]["losses"], runs["torch"][0]["losses"], strict=True))


def main() -> int:
    global CLOCK
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (the median is shown)")
    parser.add_argument("--root", type=Path, default=ROOT, help="directory holding the snippets package")
    parser.add_argument("--only", nargs="+", default=[], metavar="WORD",
                        help="only the rows of the other snippets whose name holds one of these words")
    parser.add_argument("--training-steps", type=int, default=100, metavar="N",
                        help="time the first N steps of chapter 14's training run against PyTorch (0: skip)")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default=CLOCK,
                        help="what a timing counts: this process's CPU time (default) or the wall clock")
    args = parser.parse_args()
    CLOCK = args.clock
    sys.path[:0] = [str(args.root), str(ROOT)]
    from snippets.at_scale import chunked_attention
    from snippets.attention import scaled_dot_product_attention
    from snippets.multihead import causal_mask, init_params, multi_head_attention

    rng = np.random.default_rng(0)
    rows: list[tuple[str, float, float | None, float]] = []   # name, ours, reference, target ratio
    diffs: list[tuple[str, float]] = []
    repeat = args.repeat
    if torch is not None and args.training_steps:
        diffs.append((f"training: largest |loss difference| over {args.training_steps} steps",
                      bench_training(rows, args.training_steps, max(3, repeat // 2), args.root)))
    if torch is not None:
        bench_library(rows, diffs, repeat, args.only)
    if args.only:
        return report(rows, diffs, repeat)

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

    return report(rows, diffs, repeat)


def report(rows, diffs, repeat) -> int:
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else '(not installed)'}, "
          f"one thread each, median of {repeat} runs, {'CPU time' if CLOCK == 'cpu' else 'wall-clock time'}; "
          f"shapes B={B}, H={H}, T={T}, S={S}, d={D}\n")
    print(f"load average {LOAD_AT_START:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n")
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
