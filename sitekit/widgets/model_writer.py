"""The model writer: chapter 14's trained GPT, run in the reader's browser (the "Write with the model" page).

A page embeds it from an executed block with ``html="true"`` that prints
``model_writer_html(params, vocab, n_heads, presets)``: a
``<div class="model-writer">`` whose ``data-`` attributes carry what the
model is (its sizes, its vocabulary, the layout of its weights file with the
file's size and SHA-256) and the preset prompts, around a text for readers
without JavaScript. The weights themselves are not in the page: the
post-build step writes them next to the page as ``WEIGHTS_FILE``
(:func:`built_files`, from the stored run in docs/training/) and checks that
the file is the one the page names (:func:`check_built`); a page whose file
differs fails the build.

``docs/javascripts/model-writer.js``, which widgets.js loads on the page, is small: it
shows what the widget does and a button that starts it. Only then does the
reader's browser fetch the rest (``APP_SCRIPT``, ``APP_STYLES``) and the
weights, verify the weights' size and SHA-256 (a stale or damaged file gets
a clear message, never a model that runs on other weights), and build the
widget: a prompt written with word buttons or typed with completion, the
model stepped or run (greedy, or sampled at a temperature, with top-k and
top-p, from NumPy's generator with the seed shown), the next-word
probabilities and the words the draw keeps, each head's and each other
part's share of the chosen word's logit, every head's KV cache with its
rows labelled by their words, a switch per head and one per part the
chapters built (snippets/switches.py).

The weights are stored as float32 (docs/training/weights.npz); the file
holds exactly those numbers, little-endian, in the order of
``snippets.training.params_to_arrays``, and the script computes in float64
from them, as ``snippets.transformer.gpt_forward`` does on the same weights
read as float64 (``tools.train.load_run``).
tests/test_model_writer_browser.py checks its logits, words and caches
against those functions.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from sitekit.widgets import data_attribute

# The widget's declaration (sitekit/widgets/__init__.py).
ELEMENT = "model-writer"
NAME = "model writer"
SCRIPT = "javascripts/model-writer.js"
# Fetched by SCRIPT when the reader starts the widget, never on a page's first visit.
APP_SCRIPT = "javascripts/model-writer-app.js"
APP_STYLES = "stylesheets/model-writer.css"
# Written by the post-build step next to every page that shows the widget.
WEIGHTS_FILE = "gpt-weights.bin"
TRAINING = Path(__file__).resolve().parents[2] / "docs" / "training"

MAX_PRESETS = 6


def _describe(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _arrays(params) -> dict[str, np.ndarray]:
    """The parameters as named float64 arrays, checked, in the order of the weights file."""
    from snippets.training import params_to_arrays

    arrays = params_to_arrays(params)   # checks the structure and the shapes
    checked = {}
    for name, array in arrays.items():
        if array.dtype.kind != "f":
            raise TypeError(f"params: {name} must hold floats, got {array.dtype}")
        if not np.isfinite(array).all():
            raise ValueError(f"params: {name} holds NaN or infinity; the widget needs finite weights")
        with np.errstate(over="ignore"):
            single = array.astype("<f4")
        inexact = np.flatnonzero(single.astype(np.float64) != array.astype(np.float64))
        if inexact.size:
            value = float(array.flat[inexact[0]])
            raise ValueError(
                f"params: {name} holds {value!r}, a number float32 cannot hold exactly (it would store "
                f"{float(single.flat[inexact[0]])!r}); expected the trained float32 weights as they are "
                "(load them with tools.train.load_run)"
            )
        checked[name] = single
    return checked


def weights_bytes(params) -> bytes:
    """The weights file: every parameter as little-endian float32, in the order of ``params_to_arrays``.

    ``params`` is the dict of ``snippets.transformer.init_gpt`` holding
    numbers float32 holds exactly (the stored run's weights, read as float64
    or float32); anything else is refused rather than rounded, so that the
    browser computes with the very numbers the NumPy model uses.

    >>> from tools.train import load_run
    >>> params, _ = load_run()                 # the stored run, float32 numbers read as float64
    >>> len(weights_bytes(params))             # 111,104 numbers of 4 bytes
    444416
    >>> try:
    ...     weights_bytes({**params, "ln_f_bias": np.full_like(params["ln_f_bias"], 0.1)})
    ... except ValueError as error:
    ...     print(str(error)[:102])
    params: ln_f_bias holds 0.1, a number float32 cannot hold exactly (it would store 0.10000000149011612)
    """
    return b"".join(array.tobytes() for array in _arrays(params).values())


def _check_vocab(vocab, n_vocab: int) -> list[str]:
    if isinstance(vocab, (str, bytes)) or not isinstance(vocab, (list, tuple)):
        raise TypeError(f"vocab must be a list of words (strings), got {_describe(vocab)}")
    if len(vocab) != n_vocab:
        raise ValueError(f"vocab must hold one word per row of W_E, {n_vocab}, got {len(vocab)}")
    if not all(isinstance(word, str) and word and not re.search(r"\s", word) for word in vocab):
        raise ValueError(f"vocab must hold non-empty words without spaces, got {list(vocab)[:8]!r} ...")
    if len(set(vocab)) != len(vocab):
        raise ValueError("vocab must not repeat a word")
    return [str(word) for word in vocab]


def _check_head(pair, n_layers: int, n_heads: int, name: str) -> list[int]:
    ok = (isinstance(pair, (tuple, list)) and len(pair) == 2
          and all(isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) for i in pair))
    if not ok or not (0 <= pair[0] < n_layers and 0 <= pair[1] < n_heads):
        raise ValueError(f"{name} must be a (layer, head) pair with 0 <= layer < {n_layers} and "
                         f"0 <= head < {n_heads}, got {pair!r}")
    return [int(pair[0]), int(pair[1])]


def _check_presets(presets, vocab: list[str], max_len: int, n_layers: int, n_heads: int) -> list[dict]:
    if isinstance(presets, (str, bytes, Mapping)) or not isinstance(presets, (list, tuple)):
        raise TypeError(f"presets must be a list of dicts (label, words, off), got {_describe(presets)}")
    if not 1 <= len(presets) <= MAX_PRESETS:
        raise ValueError(f"presets must hold 1 to {MAX_PRESETS} prompts, got {len(presets)}")
    known = set(vocab)
    checked = []
    for i, preset in enumerate(presets):
        if not isinstance(preset, Mapping) or not {"label", "words"} <= set(preset) or set(preset) - {"label", "words", "off"}:
            raise ValueError(f"presets[{i}] must be a dict with the keys 'label', 'words' and, if any "
                             f"heads start switched off, 'off'; got {_describe(preset)}")
        label, words = preset["label"], preset["words"]
        if not isinstance(label, str) or not label.strip():
            raise ValueError(f"presets[{i}]['label'] must be a non-empty string, got {_describe(label)}")
        if isinstance(words, (str, bytes)) or not isinstance(words, (list, tuple)):
            raise TypeError(f"presets[{i}]['words'] must be a list of words, got {_describe(words)}")
        if not 1 <= len(words) < max_len:
            raise ValueError(f"presets[{i}]['words'] must hold 1 to {max_len - 1} words (the model reads "
                             f"{max_len} positions and must have room to write), got {len(words)}")
        unknown = [word for word in words if not isinstance(word, str) or word not in known]
        if unknown:
            raise ValueError(f"presets[{i}]['words'] holds words outside the vocabulary: {unknown[:5]!r}")
        off = preset.get("off", [])
        if isinstance(off, (str, bytes, Mapping)) or not isinstance(off, (list, tuple)):
            raise TypeError(f"presets[{i}]['off'] must be a list of (layer, head) pairs, got {_describe(off)}")
        checked.append({"label": label, "words": list(words),
                        "off": [_check_head(pair, n_layers, n_heads, f"presets[{i}]['off']") for pair in off]})
    return checked


# --8<-- [start:model_writer_html]
def model_writer_html(params, vocab, n_heads: int, presets, head=(0, 0)) -> str:
    """HTML for the model writer; print it from a block with ``html="true"``.

    ``params`` are the trained weights (float32 numbers, see
    :func:`weights_bytes`), ``vocab`` the word of every row of ``W_E``,
    ``n_heads`` the heads per block. ``presets`` are the prompts the reader
    can start from, each ``{"label": ..., "words": [...], "off": [(layer,
    head), ...]}`` (``off``, the heads that start switched off, may be left
    out); the first is shown first. ``head`` is the head whose weights the
    widget shades first. The page carries the model's sizes and the weights
    file's SHA-256; the file itself is written by the post-build step.

    >>> from tools.train import load_run
    >>> params, log = load_run()
    >>> song = {"label": "A song", "words": "bex sang : hat mill . and again :".split()}
    >>> markup = model_writer_html(params, log["vocab"], 4, [song], head=(1, 2))
    >>> markup.startswith('<div class="model-writer"')
    True
    """
    arrays = _arrays(params)
    n_vocab, d_model = arrays["W_E"].shape
    max_len = arrays["W_pos"].shape[0]
    n_layers = len([name for name in arrays if name.endswith(".W_Q")])
    if isinstance(n_heads, (bool, np.bool_)) or not isinstance(n_heads, (int, np.integer)):
        raise TypeError(f"n_heads must be a positive integer, got {_describe(n_heads)}")
    if n_heads < 1 or d_model % n_heads:
        raise ValueError(f"n_heads must be a positive integer dividing d_model = {d_model}, got {n_heads}")
    words = _check_vocab(vocab, n_vocab)
    checked = _check_presets(presets, words, max_len, n_layers, int(n_heads))
    shown = _check_head(head, n_layers, int(n_heads), "head")
    data = b"".join(array.tobytes() for array in arrays.values())
    model = {
        "vocab": words,
        "d_model": int(d_model),
        "n_layers": n_layers,
        "n_heads": int(n_heads),
        "d_ff": int(arrays["blocks.0.W_1"].shape[1]),
        "max_len": int(max_len),
        "arrays": [[name, list(array.shape)] for name, array in arrays.items()],
        "file": WEIGHTS_FILE,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    attributes = " ".join([
        data_attribute("widget-script", SCRIPT),
        data_attribute("model", model),
        data_attribute("presets", checked),
        data_attribute("head", shown),
    ])
    n_params = sum(array.size for array in arrays.values())
    # Shown until the script replaces it, and to readers without JavaScript.
    return (
        f'<div class="{ELEMENT}" {attributes}>\n<p>The model writer needs JavaScript. It runs the trained '
        f"model ({n_params:,} weights, {n_layers} blocks of {n_heads} heads, {n_vocab} words) in your browser, "
        f"starting from the prompt: {html.escape(' '.join(checked[0]['words']))}</p>\n</div>"
    )
# --8<-- [end:model_writer_html]


def built_files(training=TRAINING) -> dict[str, bytes]:
    """The files the post-build step writes next to a page that shows the widget: the weights file.

    Read from the stored run in ``training`` (docs/training/): its
    weights.npz must be the file its training run wrote (the SHA-256 its
    log.json records), so that the browser never runs on weights no run
    made.

    >>> sorted(built_files())
    ['gpt-weights.bin']
    """
    if not isinstance(training, (str, Path)):
        raise TypeError(f"training must be a folder (a path), got {_describe(training)}")
    folder = Path(training)
    weights, log_path = folder / "weights.npz", folder / "log.json"
    missing = [path.name for path in (weights, log_path) if not path.is_file()]
    if missing:
        raise ValueError(f"training must be the stored run's folder, holding weights.npz and log.json; "
                         f"got {str(folder)!r}, which lacks {' and '.join(missing)}")
    stored = weights.read_bytes()
    recorded = json.loads(log_path.read_text(encoding="utf-8")).get("fingerprint", {}).get("weights")
    if hashlib.sha256(stored).hexdigest() != recorded:
        raise ValueError(f"{weights} is not the file its training run wrote (its log.json records another "
                         "SHA-256): the model writer would run on weights no run made. Restore it from git")
    from snippets.training import params_from_arrays

    with np.load(weights) as loaded:
        params = params_from_arrays({name: loaded[name] for name in loaded.files})
    return {WEIGHTS_FILE: weights_bytes(params)}


_ELEMENT_TAG = re.compile(r'<div class="' + ELEMENT + r'"[^>]*>')
_MODEL = re.compile(r'\sdata-model="([^"]*)"')


def check_built(page_html, files) -> list[str]:
    """Problems of a built page's model writers: each must name a file in ``files`` of its size and SHA-256.

    ``page_html`` is the built page; ``files`` maps the names of the files
    next to it to their bytes. A page built from other weights than the file
    beside it (stale), or a file damaged since, is a problem.

    >>> check_built('<div class="model-writer" data-model="{&quot;file&quot;: &quot;w.bin&quot;, '
    ...             '&quot;bytes&quot;: 1, &quot;sha256&quot;: &quot;0&quot;}">', {"w.bin": b"ab"})[0][:40]
    "the model writer's weights file w.bin ha"
    """
    if not isinstance(page_html, str):
        raise TypeError(f"page_html must be the built page's HTML (a string), got {_describe(page_html)}")
    if not isinstance(files, Mapping):
        raise TypeError(f"files must map file names to their bytes, got {_describe(files)}")
    problems = []
    for tag in _ELEMENT_TAG.findall(page_html):
        found = _MODEL.search(tag)
        try:
            model = json.loads(html.unescape(found.group(1))) if found else None
            name, size, digest = model["file"], model["bytes"], model["sha256"]
        except (ValueError, TypeError, KeyError):
            problems.append("a model writer without a readable data-model attribute (file, bytes, sha256)")
            continue
        data = files.get(name)
        if not isinstance(data, (bytes, bytearray)):
            problems.append(f"the model writer's weights file {name} is missing next to the page")
        elif len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            problems.append(
                f"the model writer's weights file {name} has {len(data):,} bytes and SHA-256 "
                f"{hashlib.sha256(data).hexdigest()[:12]}..., but the page was built for {size:,} bytes and "
                f"{str(digest)[:12]}...: the page or the file is stale or damaged. Build the site again"
            )
    return problems
