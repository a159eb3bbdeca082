"""Time the library in snippets/ against PyTorch and the pages' teaching code, and its peak memory; print a table.

    python .ci/bench_snippets.py            # everything (about two minutes)
    python .ci/bench_snippets.py --repeat 3 # fewer runs per measurement
    python .ci/bench_snippets.py --root DIR # the snippets package found in DIR (to compare versions)
    python .ci/bench_snippets.py --only gelu generate   # the cases whose name holds one of these words
    python .ci/bench_snippets.py --training-steps 0     # without chapter 14's training steps (default 100)

Each row is a ``Case(name, ours, reference, shapes)`` of ``CASES``: the
library function ``ours`` (``"module.function"``, from ``--root``'s
snippets package) against ``reference`` on the arguments ``shapes`` makes,
in float32 and float64 unless the case says otherwise. A reference is
tests/support/torch_reference.py's PyTorch version, the one the equality
tests check the function against (target: within 3x), or NumPy: the pages'
teaching version, or the library's full form (within 1.25x); the table also
gives each case's largest difference from it. ``memory`` compares peak
memory (tracemalloc sees NumPy's allocations, not PyTorch's).
``--training-steps N`` times the first N steps of chapter 14's training run
against the same run in PyTorch, each side in a fresh process as a reader
runs it (.ci/bench_training.py): the first 20 steps, where PyTorch warms up,
and the rest (target 1.0x).

Timings are the median of ``--repeat`` runs, the two sides alternating,
BLAS and PyTorch on one thread each (the machine is shared; one thread is
the fair comparison), in CPU time (user + system) unless ``--clock wall``.
They are measured here, never asserted in tests. PyTorch is optional (not a
site requirement): without it the PyTorch rows are left out.
"""

from __future__ import annotations

import argparse
import importlib
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
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from functools import partial  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support import torch_reference as reference  # noqa: E402

if reference.torch is not None:
    reference.torch.set_num_threads(1)

B, H, T, S, D = 8, 8, 512, 512, 64
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
CLOCK = "cpu"   # --clock
LOAD_AT_START = os.getloadavg()[0]
TRAINING_WARM_UP = 20   # training steps timed apart (bench_training)
GPT = {"vocab_size": 108, "max_len": 64, "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 256}   # chapter 14's


def lib(name: str):
    """A function of the snippets package being measured: ``lib("attention.softmax")``."""
    module, function = name.split(".")
    return getattr(importlib.import_module(f"snippets.{module}"), function)


def teaching_attention(Q, K, V, mask=None):
    """The three-line version of the pages (plus the scale and the mask)."""
    s = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])   # a Python float: float32 stays float32
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return w @ V, w


def teaching_multi_head(x, _, params, n_heads):
    def split(a):
        return a.reshape(*a.shape[:-1], n_heads, -1).swapaxes(-3, -2)

    heads, w = teaching_attention(*(split(x @ params[f"W_{n}"] + params[f"b_{n}"]) for n in "QKV"))
    return heads.swapaxes(-3, -2).reshape(*x.shape[:-1], -1) @ params["W_O"] + params["b_O"], w


class Inputs:
    """Random arrays of one dtype, ``inputs(*shape)``, and the library's parameters cast to it."""

    def __init__(self, dtype):
        self.dtype, self.rng = np.dtype(dtype), np.random.default_rng(2)

    def __call__(self, *shape, scale=1.0):
        return (self.rng.normal(size=shape) * scale).astype(self.dtype)

    def cast(self, tree):
        if isinstance(tree, dict):
            return {key: self.cast(value) for key, value in tree.items()}
        return [self.cast(value) for value in tree] if isinstance(tree, list) else tree.astype(self.dtype)


@dataclass
class Case:
    name: str
    ours: str | Callable              # "module.function" of snippets/, or a function of the arguments that calls it
    reference: Callable               # torch_reference's, or NumPy (the teaching code, the library's full form)
    shapes: Callable                  # Inputs -> the arguments of both
    dtypes: tuple = ("float32", "float64")
    torch: bool = True                # the reference is PyTorch's: target 3x, else 1.25x
    theirs: Callable | None = None    # the reference's arguments from ours', where they are not tensors of them
    options: dict = field(default_factory=dict)   # ours' keyword arguments
    repeat: int = 1                   # times --repeat: short calls need more runs
    grad: bool = False                # the reference needs autograd


def _gpt(x):
    return x.cast(lib("transformer.init_gpt")(**GPT, rng=np.random.default_rng(8)))


def _tokens(_=None):
    return np.random.default_rng(9).integers(0, GPT["vocab_size"], size=(32, GPT["max_len"] + 1))


def _adam(x):
    gpt = _gpt(x)
    grads = lib("training.gpt_loss_and_grads")(_tokens(), gpt, GPT["n_heads"])[1]
    return [gpt, grads, lib("training.adam_step")(gpt, grads)[1]]


def _adam_reference(args):
    leaves = reference.tensors(args[0], grad=True)
    reference.gpt_loss_and_grads(reference.tensors(_tokens()), leaves, GPT["n_heads"])   # the gradients
    optimiser = reference.adam(leaves)
    optimiser.step()   # its state: one step taken, as ours is given
    return (optimiser,)


def _paged(x):
    cache = lib("paged_cache.PagedKVCache")(n_pages=8 * 32 + 8, page_size=16, d_k=D, d_v=D)
    seqs = [cache.new_sequence() for _ in range(8)]
    for seq in seqs * 2:
        cache.append(seq, x(256, D), x(256, D))
    return [x(H, 8, D), cache, seqs]


def _qkv(x, T=T, S=S, batch=(B, H)):
    return [x(*batch, T, D), x(*batch, S, D), x(*batch, S, D)]


def _mla(x, T):
    return [x(4, T, 512), x.cast(lib("mla.init_mla")(np.random.default_rng(5), 512, 8, 64, 128, 32)), 8]


SDPA = "attention.scaled_dot_product_attention"
CAUSAL = np.tril(np.ones((T, T), dtype=bool))
CASES = [
    Case("attention / teaching", SDPA, teaching_attention, _qkv, torch=False),
    Case("attention / torch", SDPA, reference.scaled_dot_product_attention, _qkv),
    Case("attention causal / teaching", SDPA, teaching_attention, lambda x: [*_qkv(x), CAUSAL],
         dtypes=("float32",), torch=False),
    Case("attention causal / torch", SDPA, reference.scaled_dot_product_attention, lambda x: [*_qkv(x), CAUSAL],
         dtypes=("float32",)),
    *(Case(f"attention T=1, S=4096 / {side}", SDPA, function, lambda x: _qkv(x, 1, 4096, ()), torch=torch,
           dtypes=("float64",), repeat=50)
      for side, function, torch in (("teaching", teaching_attention, False),
                                    ("torch", reference.scaled_dot_product_attention, True))),
    *(Case(f"multi-head (B, T, 512), 8 heads / {side}", "multihead.multi_head_attention", function,
           lambda x: [*[x(B, T, H * D)] * 2, x.cast(lib("multihead.init_params")(H * D, H, np.random.default_rng(1))),
                      H], torch=torch)
      for side, function, torch in (("teaching", teaching_multi_head, False),
                                    ("torch", reference.multi_head_attention, True))),
    *(Case(f"chunked, chunk {chunk} / full", "at_scale.chunked_attention",
           lambda Q, K, V, _: lib(SDPA)(Q, K, V)[0], lambda x, chunk=chunk: [*_qkv(x), chunk], torch=False)
      for chunk in (128, S)),
    Case("linear causal (B, H, T, d) / torch chunked", "linear_memory.linear_attention", reference.linear_attention,
         lambda x: _qkv(x, T, T)),
    Case("layer_norm (8, 512, 512)", "transformer.layer_norm", reference.layer_norm,
         lambda x: [x(8, 512, 512), x(512), x(512)]),
    Case("rms_norm (8, 512, 512)", "transformer.rms_norm", reference.rms_norm, lambda x: [x(8, 512, 512), x(512)]),
    Case("gelu (8, 512, 512)", "transformer.gelu", reference.gelu, lambda x: [x(8, 512, 512)]),
    Case("rope (8, 8, 512, 64)", "positions.rope", reference.rope, lambda x: [x(8, H, T, D), np.arange(T, dtype=np.float64)]),
    Case("grouped_query_attention (2, 8 on 2, 512, 64)", "kv_cache.grouped_query_attention",
         reference.grouped_query_attention, lambda x: [x(2, H, T, D), x(2, 2, S, D), x(2, 2, S, D)]),
    Case("attention_with_sink (2, 8, 512, 64)", "no_match.attention_with_sink", reference.attention_with_sink,
         lambda x: _qkv(x, batch=(2, H))),
    Case("topk_attention (2, 8, 512, 64), k_top 64", "at_scale.topk_attention", reference.topk_attention,
         lambda x: [*_qkv(x, batch=(2, H)), 64]),
    Case("sparse_attention (2, 8, 512, 64), k_top 64, causal", "sparse_gated.sparse_attention",
         reference.sparse_attention, lambda x: [*_qkv(x, batch=(2, H)), x(2, H, T, S), 64, CAUSAL]),
    Case("qk_norm_attention (2, 8, 512, 64)", "sparse_gated.qk_norm_attention", reference.qk_norm_attention,
         lambda x: [*_qkv(x, batch=(2, H)), x(D), x(D)]),
    Case("lightning_indexer (8, 512, 512), 4 heads of 32", "sparse_gated.lightning_indexer", reference.lightning_indexer,
         lambda x: [*[x(8, 512, 512)] * 2, x.cast(lib("sparse_gated.init_indexer")(np.random.default_rng(3), 512, 4, 32)),
                    4]),
    Case("gated_output (8, 512, 512)", "sparse_gated.gated_output", reference.gated_output,
         lambda x: [x(8, 512, 512), x(8, 512, 512), x(512, 512, scale=512 ** -0.5)]),
    Case("delta_rule (2, 8, 512, 64), unit keys", "linear_memory.delta_rule", reference.delta_rule,
         lambda x: [(K := x(2, H, S, D)) / np.linalg.norm(K, axis=-1, keepdims=True), x(2, H, S, D)]),
    Case("paged_attention, 8 x 512 entries in pages of 16", lambda Q, cache, seqs: [
            lib("paged_cache.paged_attention")(Q, cache, seq)[0] for seq in seqs],
         lambda Q, K_pages, V_pages, tables: [reference.paged_attention(Q, K_pages, V_pages, table, 512)
                                              for table in tables],
         _paged, dtypes=("float64",), theirs=lambda args: (*reference.tensors([args[0], args[1].K_pages, args[1].V_pages]),
                                                          [reference.torch.tensor(args[1].page_table(s)) for s in args[2]])),
    Case("moe_forward (4096, 256), top 2 of 8 experts of 512", "moe.moe_forward", reference.moe_forward,
         lambda x: [x(4096, 256), x.cast(lib("moe.init_moe")(np.random.default_rng(4), 256, 512, 8)), 2]),
    Case("mla_attention (4, 256, 512), 8 heads", "mla.mla_attention", reference.mla_attention, lambda x: _mla(x, 256)),
    Case("mla_attention absorbed", "mla.mla_attention", reference.mla_attention, lambda x: _mla(x, 256),
         options={"absorbed": True}),
    Case("mla_decode (4, 64, 512), latent 128", "mla.mla_decode", reference.mla_decode, lambda x: _mla(x, 64)),
    Case("decode_with_cache (8, 128, 256), 8 heads", "kv_cache.decode_with_cache", reference.decode_with_cache,
         lambda x: [x(8, 128, 256), x.cast(lib("multihead.init_params")(256, 8, np.random.default_rng(6))), 8]),
    Case("transformer_block (8, 256, 256), d_ff 1024, causal", "transformer.transformer_block",
         reference.transformer_block, lambda x: [x(8, 256, 256), x.cast(lib("transformer.init_block")(
             256, 8, 1024, np.random.default_rng(7))), 8, np.tril(np.ones((256, 256), dtype=bool))]),
    Case("gpt_forward (chapter 14's model, 32 x 64 tokens)", "transformer.gpt_forward", reference.gpt_forward,
         lambda x: [_tokens()[:, :-1], _gpt(x), GPT["n_heads"]]),
    Case("generate (greedy, KV cache, 8 prompts of 8 + 56 new)", "transformer.generate", reference.generate,
         lambda x: [_tokens()[:8, :8], _gpt(x), GPT["n_heads"], 56]),
    Case("gpt_loss_and_grads (chapter 14's step: 32 x 65 tokens)", "training.gpt_loss_and_grads",
         reference.gpt_loss_and_grads, lambda x: [_tokens(), _gpt(x), GPT["n_heads"]], grad=True,
         theirs=lambda args: (reference.tensors(args[0]), reference.tensors(args[1], grad=True), args[2])),
    Case("adam_step (chapter 14's parameters) / torch.optim.Adam", "training.adam_step", lambda o: o.step(), _adam,
         theirs=_adam_reference),
]


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


def difference(ours, theirs) -> float | None:
    """The largest |difference| of the two results' first outputs (None where the reference returns nothing)."""
    first = [value[0] if isinstance(value, tuple) else value for value in (ours, reference.numpy(theirs))]
    if first[1] is None:
        return None
    return float(np.abs(np.asarray(first[0], np.float64) - np.asarray(first[1], np.float64)).max())


def measure(case: Case, dtype, repeat: int, rows: list, diffs: list) -> None:
    x = Inputs(dtype)
    args = case.shapes(x)
    ours = partial(lib(case.ours) if isinstance(case.ours, str) else case.ours, *args, **case.options)
    their_args = case.theirs(args) if case.theirs else reference.tensors(args) if case.torch else args
    theirs = partial(case.reference, *their_args)
    if case.torch and not case.grad:
        theirs = reference.torch.no_grad()(theirs)
    name = f"{case.name} {dtype}"
    rows.append((name, *compare(ours, theirs, repeat * case.repeat), 3.0 if case.torch else 1.25))
    diff = difference(ours(), theirs())
    if diff is not None:
        diffs.append((name, diff))


def peak_bytes(function) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        function()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def memory(rows: list) -> None:
    """Peak memory: attention's against its weights, chunked against full attention, linear attention's against its output."""
    for dtype in (np.float32, np.float64):
        Q, K, V = _qkv(Inputs(dtype))
        weights = B * H * T * S * np.dtype(dtype).itemsize
        rows.append((f"attention {np.dtype(dtype)} peak memory / weights", peak_bytes(partial(lib(SDPA), Q, K, V))
                     / weights, None, 1.5))
        rows.append(("  (teaching version: peak memory / weights)",
                     peak_bytes(partial(teaching_attention, Q, K, V)) / weights, None, float("inf")))
    full = peak_bytes(partial(lib(SDPA), Q, K, V))
    for chunk in (128, S):   # one chunk of all S keys holds what full attention holds; smaller chunks, less
        rows.append((f"chunked float64 chunk {chunk} peak memory / full",
                     peak_bytes(partial(lib("at_scale.chunked_attention"), Q, K, V, chunk)) / full, None,
                     1.0 if chunk < S else 1.5))
    rows.append(("linear causal float64 peak memory / output",
                 peak_bytes(partial(lib("linear_memory.linear_attention"), Q, K, V)) / (B * H * T * D * 8), None, 2.0))


# --- Chapter 14's training run against the same run in PyTorch (issue 35 §3) --------


def bench_training(rows, steps, repeat, root):
    """The first ``steps`` steps of chapter 14's run in NumPy and in PyTorch, alternating, each in a fresh process.

    NumPy runs in tools/train.py's environment (MALLOC_TOP_PAD_ acts only
    when a process starts: here NumPy would run 1.5 times slower). PyTorch
    warms up for about a second, which the run's 1,500 steps hardly feel:
    the first TRAINING_WARM_UP steps are a row of their own, and the target
    is the rest's. Returns the largest difference of the two runs' losses.
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
                        help="only the cases whose name holds one of these words (and no memory rows)")
    parser.add_argument("--training-steps", type=int, default=100, metavar="N",
                        help="time the first N steps of chapter 14's training run against PyTorch (0: skip)")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default=CLOCK,
                        help="what a timing counts: this process's CPU time (default) or the wall clock")
    args = parser.parse_args()
    CLOCK = args.clock
    sys.path[:0] = [str(args.root), str(ROOT)]
    rows: list[tuple[str, float, float | None, float]] = []   # name, ours, reference, target ratio
    diffs: list[tuple[str, float]] = []
    if reference.torch is not None and args.training_steps:
        diffs.append((f"training: largest |loss difference| over {args.training_steps} steps",
                      bench_training(rows, args.training_steps, max(3, args.repeat // 2), args.root)))
    for case in CASES:
        if (args.only and not any(word in case.name for word in args.only)) or (case.torch and reference.torch is None):
            continue
        for dtype in case.dtypes:
            measure(case, dtype, args.repeat, rows, diffs)
    if not args.only:
        memory(rows)
    return report(rows, diffs, args.repeat)


def report(rows, diffs, repeat) -> int:
    torch = reference.torch
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else '(not installed)'}, "
          f"one thread each, median of {repeat} runs, {'CPU time' if CLOCK == 'cpu' else 'wall-clock time'}; "
          f"shapes B={B}, H={H}, T={T}, S={S}, d={D}\n")
    print(f"load average {LOAD_AT_START:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n")
    print(f"{'measurement':62} {'ours':>10} {'reference':>10} {'ratio':>7} {'target':>7}")
    for name, ours, theirs, target in rows:
        ratio, cells = (ours, ("", "")) if theirs is None else (ours / theirs, (f"{ours * 1e3:8.1f}ms", f"{theirs * 1e3:8.1f}ms"))
        print(f"{name:62} {cells[0]:>10} {cells[1]:>10} {ratio:7.2f} {'<= ' + str(target):>7}"
              f"{'' if ratio <= target else '  MISSED'}")
    if diffs:
        print(f"\n{'equality':62} {'max |difference|':>18}")
        for name, diff in diffs:
            print(f"{name:62} {diff:18.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
