"""Time one side of chapter 14's training run in this process, as a reader runs it.

    python .ci/bench_training.py numpy 100    # the first 100 steps of snippets/training.py's train
    python .ci/bench_training.py torch 100    # the same steps in PyTorch
    python .ci/bench_training.py numpy 100 --root DIR   # the snippets package found in DIR

.ci/bench_snippets.py --training-steps N starts this script once per side
and run, alternating the sides, each in a fresh process: the NumPy side with
the environment tools/train.py gives the notebook's kernel (one BLAS thread,
glibc's MALLOC_TOP_PAD_, which takes effect only when a process starts), the
PyTorch side with one thread too. Both start from the same float32
parameters and read the same batches with the same learning-rate schedule
(docs/notebooks/training-run.ipynb's config); PyTorch's step is
tests/support/torch_reference.py's ``gpt_loss_and_grads`` (autograd) and
``adam`` (``torch.optim.Adam``). Only the steps are timed, not the imports
or the set-up. Prints one line of JSON: the losses,
the wall-clock and CPU seconds (this process's user + system) at the end of
each step, and the steps' user and system seconds and page faults.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The run's config: docs/notebooks/training-run.ipynb's (tools/train.py runs about 1,500 such steps).
CONFIG = {"seed": 0, "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 256, "context": 64, "batch_size": 32,
          "steps": 1500, "lr": 4e-3, "warmup": 100, "cooldown": 500}


def learning_rate(step):
    cfg = CONFIG
    return cfg["lr"] * min(1.0, step / cfg["warmup"], (cfg["steps"] - step + 1) / cfg["cooldown"])


def run(side: str, steps: int, threads: int = 1) -> dict:
    """The first ``steps`` steps on ``side`` ("numpy" or "torch", with ``threads`` threads).

    Returns the losses, the wall-clock and CPU seconds from the start to the
    end of each step, and the whole run's user and system seconds and page faults.
    """
    import numpy as np

    from snippets.training import params_from_arrays, params_to_arrays, random_windows, tokenize, train
    from snippets.transformer import init_gpt
    from tools.corpus import corpus

    cfg = CONFIG
    ids, vocab = tokenize(corpus())
    train_ids = ids[:int(0.9 * len(ids))]
    rng = np.random.default_rng(cfg["seed"])
    params = init_gpt(len(vocab), cfg["context"], cfg["d_model"], cfg["n_layers"], cfg["n_heads"], cfg["d_ff"], rng)
    params = params_from_arrays({name: value.astype(np.float32) for name, value in params_to_arrays(params).items()})

    if side == "numpy":
        losses = (loss for _, loss, _ in train(params, train_ids, cfg["n_heads"], steps, cfg["batch_size"],
                                               cfg["context"], learning_rate, rng))
    else:
        from support import torch_reference as reference

        reference.torch.set_num_threads(threads)
        P = reference.tensors(params, grad=True)

        def torch_steps():
            optimiser = reference.adam(P, lr=learning_rate(1))
            for step in range(1, steps + 1):
                batch = reference.tensors(random_windows(train_ids, cfg["batch_size"], cfg["context"] + 1, rng))
                for group in optimiser.param_groups:
                    group["lr"] = learning_rate(step)
                loss, _ = reference.gpt_loss_and_grads(batch, P, cfg["n_heads"])
                optimiser.step()
                yield loss.item()

        losses = torch_steps()

    record: dict = {"losses": [], "wall": [], "cpu": []}
    before, wall, cpu = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), time.process_time()
    for loss in losses:
        record["losses"].append(loss)
        record["wall"].append(time.perf_counter() - wall)
        record["cpu"].append(time.process_time() - cpu)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return record | {"user": after.ru_utime - before.ru_utime, "system": after.ru_stime - before.ru_stime,
                     "page_faults": after.ru_minflt - before.ru_minflt}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("side", choices=("numpy", "torch"))
    parser.add_argument("steps", type=int)
    parser.add_argument("--threads", type=int, default=1, help="PyTorch's threads (NumPy's BLAS: its environment)")
    parser.add_argument("--root", type=Path, default=ROOT, help="directory holding the snippets package")
    args = parser.parse_args()
    sys.path[:0] = [str(args.root), str(ROOT), str(ROOT / "tests")]
    print(json.dumps(run(args.side, args.steps, args.threads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
