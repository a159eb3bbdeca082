"""Run chapter 14's training run again from scratch, and compare it with the stored run.

    python tools/train.py                        # into artifacts/training-run/, then the comparison table
    python tools/train.py --output DIR           # into DIR instead
    python tools/train.py --replace-stored-run   # then copies the run over the stored one (maintainers)

It executes docs/notebooks/training-run.ipynb top to bottom in a fresh
kernel, shows the notebook's progress bar in the terminal while it trains,
and writes into a folder of its own the trained weights (weights.npz), the
training log (log.json) and the notebook with its outputs
(training-run.ipynb). To the log it adds the fingerprint of what the run was
made from and the BLAS kernel it ran under. It ends with a table: every
figure of :data:`FIGURES`, the ones chapter 14 states about the run, in this
run and in the stored one, with the tolerance ``pytest -m training`` allows
(tests/test_training_run.py checks the same definition) and whether it holds.
Nothing the site reads changes: the chapter, its tests and the build read
the stored run, in docs/training/ and docs/notebooks/.

``--replace-stored-run`` then copies the three files over the stored run.
That is for a maintainer who changed what the run is made from (the corpus,
snippets/training.py and the modules of snippets/ it imports, whose forward
pass in transformer.py it trains, the notebook's code, the model's starting point: a
plain ``pytest`` and the strict build say so, naming this command). The
chapter states the run's figures in its prose and its hidden checks, so after
replacing, ``pytest docs/learned-lookups.md`` and ``mkdocs build --strict``
say which sentences a new run changed; commit docs/training/, the notebook
and the chapter together (CONTRIBUTING.md, "Chapter 14's training run").

The run is seeded: on one machine it gives the same numbers every time. Its
last bits depend on the CPU's BLAS kernel (OpenBLAS picks ``SkylakeX`` on an
AVX-512 CPU, ``Haswell`` on an AVX2 one), and over the run's 1,500 steps they
grow, so another kernel trains a slightly different model. The stored run
was trained under the kernel its log names; ``OPENBLAS_CORETYPE`` set to that
kernel (one the CPU can run) gives it back byte for byte.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from sitekit import training_run  # noqa: E402 (after the path is set)

NOTEBOOK = ROOT / "docs" / training_run.TRAINING_RUN
TRAINING = ROOT / "docs" / Path(training_run.TRAINING_LOG).parent
CORPUS = TRAINING / "corpus.txt"
OUTPUT = ROOT / "artifacts" / "training-run"  # a run's own folder (artifacts/ is not committed)
COMMAND = "python tools/train.py"
REPLACE_COMMAND = training_run.REPLACE_RUN
RUN_FILES = ("weights.npz", "log.json")  # and the notebook
MALLOC_TOP_PAD = 256 * 2**20   # bytes glibc keeps at the top of the training kernel's heap (training_env)
TIMEOUT = 1800          # seconds for one cell: the training cell takes minutes (CONTRIBUTING.md has the time)


class Figure(NamedTuple):
    label: str          # what the chapter says it is
    tolerance: float    # how far a run under another BLAS kernel may land from the stored run
    decimals: int       # how the chapter prints it


# The figures chapter 14 states about its run (and three it does not state, which
# check the others), each with how far a run on another machine (another BLAS
# kernel: other last bits, grown over 1,500 steps) may land from the stored run.
# The one definition: `pytest -m training` checks these tolerances
# (tests/test_training_run.py) and `python tools/train.py` prints them in its table.
FIGURES = {
    "held_out_loss": Figure("held-out loss at the end", 0.05, 2),
    "icl_score": Figure("in-context learning score", 0.1, 2),
    "first_verse_loss": Figure("first verse's loss", 0.1, 2),
    "second_verse_loss": Figure("second verse's loss", 0.1, 2),
    "induction_layer": Figure("induction head's layer", 0, 0),
    "induction_head": Figure("induction head's number in its layer", 0, 0),
    "formed_at": Figure("step at which it forms", 150, 0),
    "prefix_matching": Figure("its prefix-matching score", 0.15, 2),
    "copying": Figure("its copying score", 0.15, 2),
    "previous_token_best": Figure("best previous-token score", 0.1, 2),
    "ablated_first_verse_loss": Figure("first verse without the head", 0.2, 2),
    "ablated_second_verse_loss": Figure("second verse without the head", 1.0, 2),
    "ablated_held_out_loss": Figure("held-out loss without the head (not stated)", 0.1, 2),
    "held_out_loss_again": Figure("held-out loss, measured again (not stated)", 0.05, 2),
    "second_verse_loss_again": Figure("second verse, measured again (not stated)", 0.1, 2),
}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def initial_parameters_digest(config: dict) -> str:
    """A hash of the parameters the run starts from: init_gpt's, with the run's sizes and seed."""
    import numpy as np

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
    from snippets.heads import ablate_heads
    from snippets.training import tokenize
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

    from snippets.heads import token_losses
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
        "induction_head": head,
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
    from snippets.heads import token_losses

    params, ablated, log, windows, _ = _evaluation(folder)
    held, held_ablated = (float(token_losses(windows, p, log["config"]["n_heads"]).mean()) for p in (params, ablated))
    return {"ablated_held_out_loss": held_ablated, "held_out_loss_again": held}


def training_code() -> bytes:
    """snippets/training.py and the modules of snippets/ it imports, followed (the forward pass is transformer.py's)."""
    found, waiting = {}, ["training"]
    while waiting:
        name = waiting.pop()
        if name not in found:
            found[name] = (ROOT / "snippets" / f"{name}.py").read_bytes()
            waiting += [node.module.removeprefix("snippets.") for node in ast.parse(found[name]).body
                        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("snippets.")]
    return b"".join(found[name] for name in sorted(found))


def fingerprint(config: dict) -> dict[str, str]:
    """What the trained weights depend on, each as a SHA-256."""
    return {
        "corpus": _sha256(CORPUS.read_bytes()),
        "training code": _sha256(training_code()),
        "notebook code": training_run.code_digest(json.loads(NOTEBOOK.read_text())),
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


def _determinism_check():
    """.ci/check_determinism.py as a module: it knows how to ask OpenBLAS which kernel it runs."""
    spec = importlib.util.spec_from_file_location("check_determinism", ROOT / ".ci" / "check_determinism.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def blas_kernel() -> str:
    """The BLAS kernel NumPy's OpenBLAS runs in this environment, and who chose it: ``"SkylakeX (the CPU's choice)"``.

    OpenBLAS itself names it, asked by .ci/check_determinism.py's probe
    (``kernel_name``) in a process with this environment, as the notebook's
    kernel has.
    """
    return _determinism_check().kernel_name(os.environ.get("OPENBLAS_CORETYPE") or None)


def training_env() -> dict[str, str]:
    """The environment the training runs in: this one, with one BLAS thread and MALLOC_TOP_PAD_.

    .ci/bench_snippets.py --training-steps runs its NumPy side in it too.
    """
    env = dict(os.environ)
    # One BLAS thread: the run's matrices are small, and on a shared machine
    # extra threads mostly wait for each other (measured: 2-5 times slower).
    env["OPENBLAS_NUM_THREADS"] = "1"
    # glibc's malloc gives the memory of every large freed temporary back to the
    # kernel and asks for it again on the next step: a third of the run's CPU was
    # that kernel time (issue 35). Keeping 256 MiB at the top of the heap, which the
    # kernel process reads from its environment when it starts, removes it;
    # the arithmetic, and so every number of the run, is the same. Measured with
    # .ci/bench_snippets.py --training-steps. A value the caller set is kept.
    env.setdefault("MALLOC_TOP_PAD_", str(MALLOC_TOP_PAD))
    return env


def run(output: Path = OUTPUT, notebook_out: Path | None = None, *, self_contained: bool = False) -> dict:
    """Execute the notebook into ``output``, write it there with its outputs, and complete the log. Returns the log.

    The notebook runs in docs/notebooks/, where its set-up cell finds this
    repository's modules; with ``self_contained``, the copy a reader
    downloads (``sitekit.training_run.self_contained``) runs in ``output``
    instead, with the modules it brings.
    """
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

    output = output.resolve()
    output.mkdir(parents=True, exist_ok=True)
    notebook_out = notebook_out or output / NOTEBOOK.name
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code_digest = training_run.code_digest(notebook)
    if self_contained:
        notebook = training_run.self_contained(notebook)
    client = EchoingClient(
        notebook, timeout=TIMEOUT, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(output if self_contained else NOTEBOOK.parent)}},
    )
    start = time.perf_counter()
    client.execute(env=training_env() | {"TRAINING_OUTPUT": str(output)})
    seconds = time.perf_counter() - start
    for cell in notebook.cells:
        if "outputs" in cell:
            cell["outputs"] = tidy_streams(cell["outputs"])
    log_path = output / "log.json"
    log = json.loads(log_path.read_text())
    log["blas_kernel"] = blas_kernel()
    log["fingerprint"] = fingerprint(log["config"])
    log["fingerprint"]["weights"] = _sha256((output / "weights.npz").read_bytes())
    log["fingerprint"]["log"] = training_run.log_digest(log)
    if log["fingerprint"]["notebook code"] != code_digest:
        raise RuntimeError("the notebook's code changed while it ran; run again")
    log_path.write_text(json.dumps(log, separators=(",", ":")) + "\n")
    nbformat.write(notebook, notebook_out)
    print(f"\nran the notebook in {seconds:.0f} s under the BLAS kernel {log['blas_kernel']}; "
          f"wrote {output / 'weights.npz'}, {log_path} and {notebook_out}", file=sys.stderr)
    return log


# ------------------------------------------------- this run against the stored run


class Row(NamedTuple):
    name: str
    stored: float
    fresh: float
    holds: bool


def measured_figures(folder: Path = TRAINING) -> dict:
    """Every figure of :data:`FIGURES` of the run stored in ``folder``."""
    return {**figures(folder), **held_out_ablation(folder)}


def compare(stored: dict, fresh: dict) -> list[Row]:
    """Each figure of :data:`FIGURES` in both runs, and whether ``fresh`` lands within its tolerance of ``stored``."""
    for run_figures in (stored, fresh):
        if set(run_figures) != set(FIGURES):
            raise ValueError(f"a run's figures are not those of FIGURES: {sorted(set(run_figures) ^ set(FIGURES))}")
    return [Row(name, float(stored[name]), float(fresh[name]),
                bool(abs(float(fresh[name]) - float(stored[name])) <= figure.tolerance))
            for name, figure in FIGURES.items()]


def _printed(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


def comparison_table(rows: list[Row], fresh_run: str = "this run", kernels: tuple[str, str] | None = None) -> str:
    """The figures of two runs side by side: the stored run's, ``fresh_run``'s, the tolerance and whether it holds.

    The last column says whether the figure, rounded as the chapter prints
    it, is the same in both runs; ``kernels`` are the BLAS kernels the two
    runs (stored, fresh) ran under, as their logs name them.
    """
    lines = []
    if kernels is not None:
        lines += [f"BLAS kernel of the stored run: {kernels[0]}", f"BLAS kernel of {fresh_run}: {kernels[1]}", ""]
    header = ("figure", "stored run", fresh_run, "tolerance", "holds", "as the chapter prints it")
    body = []
    for row in rows:
        figure = FIGURES[row.name]
        decimals = figure.decimals + (1 if figure.decimals else 0)      # one digit more than the chapter prints
        shown = _printed(row.stored, figure.decimals), _printed(row.fresh, figure.decimals)
        body.append((figure.label, _printed(row.stored, decimals), _printed(row.fresh, decimals),
                     f"±{figure.tolerance:g}", "yes" if row.holds else "NO",
                     "same" if shown[0] == shown[1] else f"{shown[0]} → {shown[1]}"))
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def format_row(cells):
        first = cells[0].ljust(widths[0])
        middle = [cell.rjust(width) for cell, width in zip(cells[1:4], widths[1:4], strict=True)]
        return "  ".join([first, *middle, cells[4].ljust(widths[4]), cells[5]]).rstrip()

    lines += [format_row(header), format_row(["-" * width for width in widths]), *map(format_row, body)]
    holding = sum(row.holds for row in rows)
    lines += ["", f"{holding} of {len(rows)} figures within their tolerances (the ones `pytest -m training` checks)."]
    return "\n".join(lines)


def replace_stored_run(folder: Path) -> None:
    """Copy the run in ``folder`` over the stored run: docs/training/'s weights and log, and the notebook."""
    for name in RUN_FILES:
        shutil.copyfile(folder / name, TRAINING / name)
    shutil.copyfile(folder / NOTEBOOK.name, NOTEBOOK)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Replacing the stored run: CONTRIBUTING.md, \"Chapter 14's training run\".")
    parser.add_argument("--output", type=Path, default=OUTPUT,
                        help=f"the folder to write the weights, the log and the notebook into (default: "
                             f"{OUTPUT.relative_to(ROOT)}/)")
    parser.add_argument("--replace-stored-run", action="store_true",
                        help="then copy them over the stored run that chapter 14 reads (docs/training/ and "
                             f"{NOTEBOOK.relative_to(ROOT)}): for maintainers; see CONTRIBUTING.md")
    args = parser.parse_args(argv)
    folder = args.output.resolve()
    if folder in (TRAINING.resolve(), NOTEBOOK.parent.resolve()):
        parser.error(f"--output {args.output}: the stored run is replaced only by --replace-stored-run")
    stored_kernel = json.loads((TRAINING / "log.json").read_text()).get("blas_kernel", "not recorded")
    kernel = blas_kernel()
    print(f"training under the BLAS kernel {kernel}; the stored run's: {stored_kernel}", file=sys.stderr)
    log = run(folder)
    rows = compare(measured_figures(TRAINING), measured_figures(folder))
    same_weights = (folder / "weights.npz").read_bytes() == (TRAINING / "weights.npz").read_bytes()
    print(f"\nChapter 14's figures: this run ({folder}) against the stored run ({TRAINING.relative_to(ROOT)}/)\n")
    print(comparison_table(rows, kernels=(stored_kernel, log["blas_kernel"])))
    print("The weights are " + ("byte for byte the stored run's." if same_weights else "not the stored run's."))
    if args.replace_stored_run:
        replace_stored_run(folder)
        print(f"\nReplaced the stored run: {TRAINING.relative_to(ROOT)}/weights.npz, log.json and "
              f"{NOTEBOOK.relative_to(ROOT)}.")
        if not same_weights:
            print("Chapter 14 states the stored run's figures: run `pytest docs/learned-lookups.md` and "
                  "`mkdocs build --strict`, bring every sentence and hidden check they name in line with the new "
                  "run, and commit the chapter with docs/training/ and the notebook (CONTRIBUTING.md).")
        return 0
    return 0 if all(row.holds for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
