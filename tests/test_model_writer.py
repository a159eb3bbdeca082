"""Unit tests of sitekit/widgets/model_writer.py: the model writer's HTML, its weights file and its post-build check.

The widget's behaviour in a browser is tested by tests/test_model_writer_browser.py.
"""

import hashlib
import html
import json
import re
import shutil

import numpy as np
import pytest

from sitekit import postbuild
from sitekit.widgets import model_writer
from sitekit.widgets.model_writer import (
    WEIGHTS_FILE,
    built_files,
    check_built,
    model_writer_html,
    weights_bytes,
)
from snippets.training import params_to_arrays
from tools import train


@pytest.fixture(scope="module")
def run():
    params, log = train.load_run()
    return params, log


def data(markup, name):
    raw = re.search(rf'data-{name}="([^"]*)"', markup).group(1)
    return json.loads(html.unescape(raw))


SONG = {"label": "A song", "words": ["bex", "sang", ":", "hat", "mill", ".", "and", "again", ":"]}


def test_the_file_holds_the_stored_float32_weights_in_order(run):
    params, _ = run
    data_ = weights_bytes(params)
    arrays = params_to_arrays(params)
    assert len(data_) == 4 * sum(a.size for a in arrays.values()) == 444_416
    numbers = np.frombuffer(data_, "<f4").astype(np.float64)
    offset = 0
    for array in arrays.values():
        assert np.array_equal(numbers[offset:offset + array.size], array.ravel())  # exact: no rounding
        offset += array.size
    assert built_files() == {WEIGHTS_FILE: data_}


def test_the_page_names_the_files_size_digest_and_layout(run):
    params, log = run
    markup = model_writer_html(params, log["vocab"], 4, [SONG, {**SONG, "off": [(1, 2)]}], head=(1, 2))
    model = data(markup, "model")
    file = weights_bytes(params)
    assert model["file"] == WEIGHTS_FILE and model["bytes"] == len(file)
    assert model["sha256"] == hashlib.sha256(file).hexdigest()
    assert (model["d_model"], model["n_layers"], model["n_heads"], model["d_ff"], model["max_len"]) == (64, 2, 4, 256, 64)
    assert model["vocab"] == log["vocab"]
    assert [name for name, _ in model["arrays"]] == list(params_to_arrays(params))
    assert data(markup, "presets")[1] == {"label": "A song", "words": SONG["words"], "off": [[1, 2]]}
    assert data(markup, "head") == [1, 2]
    assert data(markup, "widget-script") == model_writer.SCRIPT
    assert "bex sang : hat mill" in markup and str(file[:20]) not in markup


@pytest.mark.parametrize(("change", "words"), [
    (lambda p, v: {"vocab": v[:-1]}, "one word per row"),
    (lambda p, v: {"vocab": ["the cat", *v[1:]]}, "without spaces"),
    (lambda p, v: {"vocab": [v[1], *v[1:]]}, "repeat"),
    (lambda p, v: {"n_heads": 3}, "dividing d_model"),
    (lambda p, v: {"presets": []}, "1 to 6"),
    (lambda p, v: {"presets": [{"label": "x", "words": ["zebra"]}]}, "outside the vocabulary"),
    (lambda p, v: {"presets": [{"label": "x", "words": ["a"] * 64}]}, "1 to 63 words"),
    (lambda p, v: {"presets": [{"label": "x", "words": ["a"], "off": [(2, 0)]}]}, "layer"),
    (lambda p, v: {"presets": [{"label": "x", "words": ["a"], "heads": []}]}, "keys"),
    (lambda p, v: {"head": (0, 4)}, "head"),
    (lambda p, v: {"params": {**p, "W_E": p["W_E"] + 1e-9}}, "float32 cannot hold"),
    (lambda p, v: {"params": {**p, "W_E": p["W_E"] * np.nan}}, "NaN"),
])
def test_bad_input_gets_a_clear_error(run, change, words):
    params, log = run
    kwargs = {"params": params, "vocab": log["vocab"], "n_heads": 4, "presets": [SONG]}
    kwargs |= change(params, log["vocab"])
    with pytest.raises((ValueError, TypeError), match=words):
        model_writer_html(**kwargs)


# --- The post-build check: a stale or damaged file fails the build ------------------


@pytest.fixture(scope="module")
def page(run):
    params, log = run
    return model_writer_html(params, log["vocab"], 4, [SONG]), weights_bytes(params)


def test_the_built_file_passes(page):
    markup, file = page
    assert check_built(markup, {WEIGHTS_FILE: file}) == []


@pytest.mark.parametrize(("files", "words"), [
    ({}, "missing next to the page"),
    ({WEIGHTS_FILE: b"\0" * 16}, "16 bytes"),
    ("damaged", "stale or damaged"),
])
def test_a_missing_stale_or_damaged_file_is_a_problem(page, files, words):
    markup, file = page
    if files == "damaged":
        flipped = bytearray(file)
        flipped[1000] ^= 1
        files = {WEIGHTS_FILE: bytes(flipped)}
    problems = check_built(markup, files)
    assert len(problems) == 1 and words in problems[0] and WEIGHTS_FILE in problems[0], problems


def test_a_page_built_for_other_weights_is_a_problem(run, page):
    params, log = run
    other = {**params, "ln_f_bias": (params["ln_f_bias"] + 0.5).astype(np.float32).astype(np.float64)}
    stale_page = model_writer_html(other, log["vocab"], 4, [SONG])
    _, file = page
    [problem] = check_built(stale_page, {WEIGHTS_FILE: file})
    assert "stale or damaged" in problem


def test_weights_changed_since_the_run_fail_the_post_build_step(tmp_path):
    """docs/training/weights.npz must be the file its log's fingerprint names: else the build fails, saying so."""
    for name in ("weights.npz", "log.json"):
        shutil.copy(model_writer.TRAINING / name, tmp_path / name)
    assert WEIGHTS_FILE in built_files(tmp_path)
    with np.load(tmp_path / "weights.npz") as arrays:
        changed = {name: arrays[name] for name in arrays.files}
    changed["W_E"] = changed["W_E"] * np.float32(1.5)
    np.savez(tmp_path / "weights.npz", **changed)
    with pytest.raises(ValueError, match="not the file its training run wrote"):
        built_files(tmp_path)


def test_the_post_build_step_writes_the_file_and_fails_on_a_stale_page(tmp_path, run, monkeypatch):
    params, log = run
    nav = [{"Write": "write-with-the-model.md"}]
    folder = tmp_path / "write-with-the-model"
    folder.mkdir()
    good = model_writer_html(params, log["vocab"], 4, [SONG])
    (folder / "index.html").write_text(f"<html><body>{good}</body></html>", encoding="utf-8")
    shown = {"write-with-the-model.md": [w for w in model_writer_widgets() if w.module == model_writer.__name__]}
    monkeypatch.setattr(postbuild, "widget_pages", lambda nav_: shown)
    assert postbuild.widget_files(tmp_path, nav) == []
    assert (folder / WEIGHTS_FILE).read_bytes() == weights_bytes(params)
    other = {**params, "ln_f_bias": (params["ln_f_bias"] + 0.5).astype(np.float32).astype(np.float64)}
    stale = model_writer_html(other, log["vocab"], 4, [SONG])
    (folder / "index.html").write_text(f"<html><body>{stale}</body></html>", encoding="utf-8")
    [problem] = postbuild.widget_files(tmp_path, nav)
    assert problem.startswith("write-with-the-model/index.html: ") and "stale or damaged" in problem


def model_writer_widgets():
    from sitekit.widgets import widgets

    return widgets()
