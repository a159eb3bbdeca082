"""Re-run chapter 14's training run from scratch: the notebook, its weights and its log.

    python tools/train.py                  # rewrites the three files below
    python tools/train.py --output DIR     # writes them into DIR instead

It executes docs/notebooks/training-run.ipynb top to bottom in a fresh
kernel, shows the notebook's progress bar in the terminal while it trains,
and writes the notebook back with its outputs, which the site shows as they
are (mkdocs-jupyter renders the stored outputs; the build starts no kernel).
The notebook writes the trained weights (docs/training/weights.npz) and the
training log (docs/training/log.json); this script adds to the log the
fingerprint of what the run was made from, so that a test can tell when the
corpus, the training code or the model's starting point changed and the
weights did not (tests/test_training_run.py).

The run is seeded: on one machine it gives the same numbers every time. Its
last bits depend on the CPU's BLAS kernel, and over two thousand steps they
grow, so another machine trains a slightly different model; the marked test
``pytest -m training`` checks that the figures the chapter states hold within
stated tolerances on the machine it runs on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "docs" / "notebooks" / "training-run.ipynb"
TRAINING = ROOT / "docs" / "training"
CORPUS = TRAINING / "corpus.txt"
COMMAND = "python tools/train.py"
TIMEOUT = 1800          # seconds for one cell: the training cell takes a few minutes


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def notebook_code(path: Path = NOTEBOOK) -> str:
    """The code cells of the notebook, joined: what the run does, without its outputs."""
    cells = json.loads(path.read_text())["cells"]
    return "\n\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def initial_parameters_digest(config: dict) -> str:
    """A hash of the parameters the run starts from: init_gpt's, with the run's sizes and seed."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from snippets.training import params_to_arrays
    from snippets.transformer import init_gpt

    params = init_gpt(
        config["vocab_size"], config["context"], config["d_model"], config["n_layers"],
        config["n_heads"], config["d_ff"], np.random.default_rng(config["seed"]),
    )
    digest = hashlib.sha256()
    for name, array in params_to_arrays(params).items():
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    return digest.hexdigest()


def load_run(folder: Path = TRAINING):
    """The trained parameters (float64) and the log of the run stored in ``folder``."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from snippets.training import params_from_arrays

    with np.load(folder / "weights.npz") as arrays:
        params = params_from_arrays({name: arrays[name].astype(np.float64) for name in arrays.files})
    return params, json.loads((folder / "log.json").read_text())


def _induction_head(measured: list) -> tuple[int, int]:
    """The head with the highest prefix-matching score at the end of the run: ``(layer, head)``."""
    import numpy as np

    matching = np.array(measured[-1]["prefix_matching"])
    layer, head = (int(i) for i in np.unravel_index(matching.argmax(), matching.shape))
    return layer, head


def _evaluation(folder: Path):
    """The stored run, its induction head, and the texts it is measured on, with the head removed."""
    sys.path.insert(0, str(ROOT))
    from snippets.training import ablate_heads, tokenize
    from tools.corpus import evaluation_texts

    params, log = load_run(folder)
    layer, head = _induction_head(log["measured"])
    ids, vocab = tokenize(CORPUS.read_text())
    windows, songs = evaluation_texts(ids[int(0.9 * len(ids)):], vocab)
    ablated = ablate_heads(params, [(layer, head)], log["config"]["n_heads"])
    return params, ablated, log, windows, songs


def figures(folder: Path = TRAINING) -> dict:
    """The figures chapter 14 states about the run stored in ``folder``.

    The induction head is the head with the highest prefix-matching score at
    the end; it "forms" at the first measured step at which its score
    reaches half of its final value. The ablation removes that head from the
    trained model and measures the songs again. (What it does to the
    held-out text, which the chapter does not state, is
    :func:`held_out_ablation`; the retraining test checks both.)
    """
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from snippets.training import token_losses
    from tools.corpus import FIRST_VERSE, SECOND_VERSE

    params, ablated, log, _, songs = _evaluation(folder)
    n_heads = log["config"]["n_heads"]
    measured = log["measured"]
    last = measured[-1]
    layer, head = _induction_head(measured)
    series = [x["prefix_matching"][layer][head] for x in measured]
    formed = next(x["step"] for x, score in zip(measured, series, strict=True) if score >= series[-1] / 2)
    sung, sung_ablated = (token_losses(songs, p, n_heads) for p in (params, ablated))
    return {
        "held_out_loss": last["held_out_loss"],
        "icl_score": last["icl_score"],
        "first_verse_loss": last["first_verse_loss"],
        "second_verse_loss": last["second_verse_loss"],
        "induction_layer": layer,
        "formed_at": formed,
        "prefix_matching": series[-1],
        "copying": last["copying"][layer][head],
        "previous_token_best": float(np.max(last["previous_token"][0])),
        "ablated_first_verse_loss": float(sung_ablated[:, FIRST_VERSE].mean()),
        "ablated_second_verse_loss": float(sung_ablated[:, SECOND_VERSE].mean()),
        "second_verse_loss_again": float(sung[:, SECOND_VERSE].mean()),
    }


def held_out_ablation(folder: Path = TRAINING) -> dict:
    """The loss on the held-out windows with and without the induction head (more than a second of compute)."""
    sys.path.insert(0, str(ROOT))
    from snippets.training import token_losses

    params, ablated, log, windows, _ = _evaluation(folder)
    held, held_ablated = (float(token_losses(windows, p, log["config"]["n_heads"]).mean()) for p in (params, ablated))
    return {"ablated_held_out_loss": held_ablated, "held_out_loss_again": held}


def fingerprint(config: dict) -> dict[str, str]:
    """What the trained weights depend on, each as a SHA-256."""
    return {
        "corpus": _sha256(CORPUS.read_bytes()),
        "training code": _sha256((ROOT / "snippets" / "training.py").read_bytes()),
        "notebook code": _sha256(notebook_code().encode()),
        "initial parameters": initial_parameters_digest(config),
    }


def _final_text(text: str) -> str:
    """What a terminal shows after ``text``: every line as it stands after its last carriage return."""
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def tidy_streams(outputs: list) -> list:
    """Outputs as a terminal would leave them: consecutive writes to one stream joined, progress bars at their last state."""
    merged = []
    for out in outputs:
        previous = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and previous is not None
                and previous.get("output_type") == "stream" and previous["name"] == out["name"]):
            previous["text"] += out["text"]
        else:
            merged.append(out)
    for out in merged:
        if out.get("output_type") == "stream":
            out["text"] = _final_text(out["text"])
    return merged


def _kernel_env(output: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TRAINING_OUTPUT"] = str(output)
    # One BLAS thread: the run's matrices are small, and on a shared machine
    # extra threads mostly wait for each other (measured: 2-5 times slower).
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def run(output: Path = TRAINING, notebook_out: Path | None = None) -> dict:
    """Execute the notebook, write it with its outputs, and fingerprint the log. Returns the log."""
    import nbformat
    from nbclient import NotebookClient

    class EchoingClient(NotebookClient):
        """Shows what cells print (the progress bar) in the terminal as it arrives."""

        def output(self, outs, msg, display_id, cell_index):
            if msg["msg_type"] == "stream":
                stream = sys.stderr if msg["content"]["name"] == "stderr" else sys.stdout
                stream.write(msg["content"]["text"])
                stream.flush()
            return super().output(outs, msg, display_id, cell_index)

    output.mkdir(parents=True, exist_ok=True)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code_digest = _sha256(notebook_code().encode())
    client = EchoingClient(
        notebook, timeout=TIMEOUT, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    start = time.perf_counter()
    client.execute(env=_kernel_env(output))
    seconds = time.perf_counter() - start
    for cell in notebook.cells:
        if "outputs" in cell:
            cell["outputs"] = tidy_streams(cell["outputs"])
    log_path = output / "log.json"
    log = json.loads(log_path.read_text())
    log["fingerprint"] = fingerprint(log["config"])
    log["fingerprint"]["weights"] = _sha256((output / "weights.npz").read_bytes())
    if log["fingerprint"]["notebook code"] != code_digest:
        raise RuntimeError("the notebook's code changed while it ran; run again")
    log_path.write_text(json.dumps(log, separators=(",", ":")) + "\n")
    nbformat.write(notebook, notebook_out or NOTEBOOK)
    print(f"\nran the notebook in {seconds:.0f} s; wrote {output / 'weights.npz'}, {log_path}"
          f" and {notebook_out or NOTEBOOK}", file=sys.stderr)
    return log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=None,
                        help="write weights, log and notebook into this folder instead of the repository")
    args = parser.parse_args()
    if args.output is None:
        run()
    else:
        folder = args.output.resolve()
        run(folder, folder / NOTEBOOK.name)


if __name__ == "__main__":
    main()
