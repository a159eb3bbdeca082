"""The stored training run of chapter 14: current (fast tests) and reproducible (``pytest -m training``).

docs/training/ holds the corpus, the weights the run trained and its log;
docs/notebooks/training-run.ipynb is the run itself, with its outputs. The
log carries the fingerprint of what the run was made from and the BLAS kernel
it ran under (tools/train.py writes both). If the corpus, snippets/training.py
or a module of snippets/ it imports (the forward pass is transformer.py's),
the notebook's code or the parameters init_gpt starts from change, the weights
no longer belong to them: the fast test fails and names the command that
trains them again and replaces the stored run.

The marked test is a reader's run: it trains again from scratch, under the
BLAS kernel this machine picks (it forces none), the notebook the site offers
for download (``sitekit.training_run.self_contained``), in a temporary folder
outside the repository; then every figure of ``tools.train.FIGURES`` (those
the chapter states, and the held-out losses with and without the induction
head) must land within its tolerance of the stored run's. ``python
tools/train.py`` prints the same figures and tolerances in its table. It
takes minutes (CONTRIBUTING.md, "Chapter 14's training run", has the
measured time), so the plain ``pytest`` leaves it out and ``.ci/run`` runs
it on its own.
"""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sitekit import training_run  # noqa: E402
from tools import train  # noqa: E402 (after the path is set)


def stale_message(changed: list[str]) -> str:
    return (
        f"The stored training run is stale: {', '.join(changed)} changed since docs/training/weights.npz was "
        f"trained. Run `{train.REPLACE_COMMAND}` (it takes minutes) and commit docs/training/ and "
        "docs/notebooks/training-run.ipynb (CONTRIBUTING.md, \"Chapter 14's training run\")."
    )


def test_the_stored_weights_belong_to_the_current_corpus_code_and_notebook():
    log = json.loads((train.TRAINING / "log.json").read_text())
    stored = log.get("fingerprint")
    assert stored, stale_message(["everything (the log has no fingerprint)"])
    now = train.fingerprint(log["config"])
    now["weights"] = train._sha256((train.TRAINING / "weights.npz").read_bytes())
    now["log"] = training_run.log_digest(log)
    changed = [name for name, digest in now.items() if stored.get(name) != digest]
    assert not changed, stale_message(changed)


def test_the_stored_weights_fit_the_log_and_the_corpus():
    params, log = train.load_run()
    config = log["config"]
    assert params["W_E"].shape == (config["vocab_size"], config["d_model"])
    assert params["W_pos"].shape == (config["context"], config["d_model"])
    assert len(params["blocks"]) == config["n_layers"]
    from snippets.training import tokenize

    _, vocab = tokenize(train.CORPUS.read_text())
    assert log["vocab"] == vocab
    assert len(log["loss"]) == config["steps"]
    assert [m["step"] for m in log["measured"]] == list(range(0, config["steps"] + 1, config["every"]))
    assert train.CORPUS.stat().st_size < 1_000_000


def test_the_corpus_is_what_its_grammar_writes():
    """The notebook writes the corpus with tools/corpus.py (a reader's copy has no docs/training/): the same text."""
    from tools.corpus import corpus

    assert corpus() == train.CORPUS.read_text(), "docs/training/corpus.txt is stale: run `python tools/corpus.py`"


def test_the_corpus_writes_a_only_before_a_consonant():
    """Issue 46: the corpus said "a owl" 77 times; the grammar has no "an", so no word after "a" starts with a vowel."""
    import re

    from tools.corpus import corpus

    after_a = set(re.findall(r"\ba (\w+)", corpus()))
    assert {"red", "cat"} <= after_a
    assert not [word for word in after_a if word[0] in "aeiou"]


def test_the_stored_log_names_the_blas_kernel_it_was_trained_under():
    log = json.loads((train.TRAINING / "log.json").read_text())
    assert log.get("blas_kernel"), f"the stored run's log names no BLAS kernel: run `{train.REPLACE_COMMAND}`"


def test_the_comparison_table_shows_every_figure_and_whether_it_holds():
    stored = dict.fromkeys(train.FIGURES, 1.0)
    fresh = {**stored, "held_out_loss": 1.2, "formed_at": 1.0 + train.FIGURES["formed_at"].tolerance}
    rows = train.compare(stored, fresh)
    assert [row.name for row in rows] == list(train.FIGURES)
    assert [row.name for row in rows if not row.holds] == ["held_out_loss"]
    table = train.comparison_table(rows, kernels=("Haswell (OPENBLAS_CORETYPE=Haswell)", "SkylakeX (the CPU's choice)"))
    assert "BLAS kernel of the stored run: Haswell" in table and "SkylakeX (the CPU's choice)" in table
    assert sum(figure.label in table for figure in train.FIGURES.values()) == len(train.FIGURES)
    assert "1.00 → 1.20" in table and f"{len(rows) - 1} of {len(rows)} figures within" in table
    with pytest.raises(ValueError, match="held_out_loss"):
        train.compare({k: v for k, v in stored.items() if k != "held_out_loss"}, fresh)


@pytest.mark.training
def test_training_again_from_scratch_gives_the_chapters_figures(tmp_path):
    stored = train.measured_figures()
    log = train.run(tmp_path, self_contained=True)
    assert train.ROOT not in tmp_path.resolve().parents  # outside the repository, as a reader's download
    assert any(tmp_path.glob("*-code-*/snippets/training.py")), "the notebook did not write its own modules"
    rows = train.compare(stored, train.measured_figures(tmp_path))
    stored_kernel = json.loads((train.TRAINING / "log.json").read_text()).get("blas_kernel", "not recorded")
    table = train.comparison_table(rows, "this run", kernels=(stored_kernel, log["blas_kernel"]))
    assert all(row.holds for row in rows), f"figures outside their tolerances:\n{table}"

    # The same corpus, code, notebook and starting point as the stored run (what it made, weights and log, aside).
    def inputs(folder):
        fingerprint = json.loads((folder / "log.json").read_text())["fingerprint"]
        return {k: v for k, v in fingerprint.items() if k not in ("weights", "log")}

    assert inputs(tmp_path) == inputs(train.TRAINING)
