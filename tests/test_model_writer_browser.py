"""The model writer ("Write with the model"), driven in Debian's Chromium.

The widget (docs/javascripts/model-writer.js, then model-writer-app.js)
runs chapter 14's trained model in the browser, in float64, from the
float32 weights file the post-build step wrote. These tests start it as a
reader does and check it against the NumPy functions with the stored
weights: every logit on prompts chosen at random, with heads switched off
and on (within 1e-12 of the row's largest logit), the greedy words, every
key and value of the caches; each switch that removes a part
(snippets.switches: the scale, the positions, the causal mask in the
prefill, the cache writes), its words, logits and caches; each part's
share of the chosen word's logit (snippets.heads.logit_contributions) at
every step; NumPy's own generator, and the words sampled with temperature,
top-k and top-p against chapter 14's generate and snippets.sampling, with
the kept words the table shows; the weights a pointed-at word shows and the
probabilities. They also type words, press word buttons and cache rows,
switch heads, serve it a damaged weights file, start it again after
Material's instant navigation, and tap it on a phone, where the Step button
and what it did share the screen. One browser serves them all (the
``browser`` fixture).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from sitekit.pages import ROOT
from sitekit.widgets.model_writer import ELEMENT, WEIGHTS_FILE
from snippets.attention import softmax
from snippets.heads import ablate_heads, attention_weights, logit_contributions
from snippets.sampling import sampling_probabilities
from snippets.switches import SWITCHES, reading_mask, switched_generate, switched_logits, switched_params
from snippets.transformer import _check_gpt, _forward, generate, gpt_forward
from support.browser import navigate_to_fresh_copy, open_tab, set_slider
from tools import train

PAGE = "write-with-the-model/index.html"
READY = f'.{ELEMENT}[data-model-state="ready"]'
RELATIVE = 1e-12
SHARES = 1e-10   # a share of a logit of size 10 or so, summed in another order


@pytest.fixture(scope="module")
def model():
    params, log = train.load_run()
    return params, log["config"]["n_heads"], log["vocab"]


@pytest.fixture(scope="module")
def induction():
    """Chapter 14's induction head, (layer, head), as the stored run gives it."""
    figures = train.figures()
    return figures["induction_layer"], figures["induction_head"]


def start(tab, url):
    """Open the page, press the start button, wait for the model: the widget's element."""
    tab.goto(url)
    element = tab.locator(f'.{ELEMENT}[data-ready="true"]')
    element.wait_for()
    element.locator("button.gw-start").click()
    tab.locator(READY).wait_for(timeout=30_000)
    return tab.locator(READY)


@pytest.fixture(scope="module")
def writer(browser, server, model):
    tab, errors = open_tab(browser, width=1280, height=900)
    element = start(tab, server.url(PAGE))
    yield Writer(tab, element, errors, *model)
    tab.context.close()


class Writer:
    """The widget in a tab, and the NumPy model it must equal."""

    def __init__(self, tab, element, errors, params, n_heads, vocab):
        self.tab, self.element, self.errors = tab, element, errors
        self.params, self.n_heads, self.vocab = params, n_heads, vocab

    def api(self, script, arg=None):
        return self.element.evaluate(f"(e, arg) => {script}", arg)

    def ids(self) -> list[int]:
        return self.api("e.modelWriter.run().ids")

    def button(self, text):
        return self.element.get_by_role("button", name=text, exact=True)

    def switch(self, layer, head):
        return self.element.locator(f'input[data-head="{layer},{head}"]')

    def part(self, name):
        return self.element.locator(f'input[data-part="{name}"]')

    def choose_preset(self, index):
        self.element.locator("select[id$='-preset']").select_option(str(index))

    def off(self) -> list[tuple[int, int]]:
        flags = self.api("e.modelWriter.state.off")
        return [divmod(i, self.n_heads) for i, flag in enumerate(flags) if flag]

    def removed(self) -> list[str]:
        return self.api("e.modelWriter.state.removed")

    def ablated(self, off):
        return ablate_heads(self.params, off, self.n_heads) if off else self.params

    def words(self, ids) -> str:
        return " ".join(self.vocab[i] for i in ids)

    def flags(self, off):
        return [(layer, h) in off for layer in range(2) for h in range(self.n_heads)]

    def sample(self, temperature=0.7, k_top=None, p_top=None):
        """Sampled mode, with the sliders set as a reader sets them."""
        self.element.locator("input[value='sampled']").check()
        for name, value in (("temperature", temperature), ("top-k", k_top), ("top-p", p_top)):
            if value is not None:
                set_slider(self.element.locator(f"input[id$='-{name}']"), value)


def relative_gap(shown, expected) -> float:
    shown, expected = np.asarray(shown), np.asarray(expected)
    return float((np.abs(shown - expected).max(axis=-1) / np.abs(expected).max(axis=-1)).max())


def test_the_logits_equal_numpys_on_random_prompts_with_heads_on_and_off(writer):
    rng = np.random.default_rng(30)
    for trial in range(6):
        T = int(rng.integers(1, 65)) if trial else 64
        ids = rng.integers(0, len(writer.vocab), size=T)
        off = [(lay, h) for lay in range(2) for h in range(writer.n_heads) if rng.random() < 0.3 * (trial % 3)]
        shown = writer.api("e.modelWriter.forward(arg[0], {off: arg[1]})", [ids.tolist(), writer.flags(off)])
        expected = gpt_forward(ids, writer.ablated(off), writer.n_heads)
        assert np.shape(shown) == expected.shape
        assert relative_gap(shown, expected) <= RELATIVE, (trial, T, off)
    assert writer.errors == []


def numpy_cache(writer, ids, n_prompt, removed=(), off=()):
    """NumPy's keys and values after reading ``ids``: [layer] (K, V), each (H, T, d_head), every position's."""
    p, _ = _check_gpt(switched_params(writer.params, writer.n_heads, list(removed), off), writer.n_heads)
    mask = reading_mask(len(ids), n_prompt, list(removed))
    _, (_, _, blocks) = _forward(np.asarray(ids)[None], p, writer.n_heads, "the test's stream", keep=True, mask=mask)
    return [(values[1][2][0], values[1][3][0]) for values in blocks]


def check_cache(writer, off, removed=()):
    """The widget's caches equal NumPy's keys and values, for the positions it cached."""
    ids, n_prompt = writer.ids(), len(writer.api("e.modelWriter.state.prompt"))
    shown, cached = writer.api("e.modelWriter.cache()"), writer.api("e.modelWriter.run().cached")
    assert cached == (n_prompt if "cache" in removed else len(ids))
    for layer, (K, V) in enumerate(numpy_cache(writer, ids, n_prompt, removed, off)):
        for head in range(writer.n_heads):
            for name, table, mine in (("K", K, shown[layer][head][0]), ("V", V, shown[layer][head][1])):
                expected = table[head, :cached]
                mine = np.reshape(mine, expected.shape)
                gap = np.abs(mine - expected).max() / np.abs(expected).max()
                assert gap <= RELATIVE, (layer, head, name, gap)


def test_greedy_words_and_every_cache_follow_the_heads_at_once(writer, model, induction):
    params, n_heads, vocab = model
    writer.choose_preset(0)
    assert writer.off() == []
    prompt = writer.ids()
    for _ in range(10):
        writer.button("Step").click()
    out = generate(prompt, params, n_heads, n_new=10)
    assert writer.ids() == out.tolist()
    assert writer.element.get_attribute("data-words") == str(len(out))
    check_cache(writer, [])
    # switch the induction head off: the ten words are written again at once
    writer.switch(*induction).uncheck()
    assert writer.off() == [induction]
    cut = generate(prompt, ablate_heads(params, [induction], n_heads), n_heads, n_new=10)
    assert writer.ids() == cut.tolist()
    assert cut.tolist() != out.tolist()
    check_cache(writer, [induction])
    writer.switch(*induction).check()
    assert writer.ids() == out.tolist()
    assert writer.errors == []


def test_the_preset_with_the_induction_head_off_fails_to_copy(writer, model, induction):
    params, n_heads, _ = model
    writer.choose_preset(1)
    assert writer.off() == [induction] and not writer.switch(*induction).is_checked()
    prompt = writer.ids()
    end = prompt.index(writer.vocab.index("."))
    verse = prompt[3:end]
    for _ in range(len(verse)):
        writer.button("Step").click()
    written = writer.ids()[len(prompt):]
    assert written != verse
    assert written == generate(prompt, ablate_heads(params, [induction], n_heads), n_heads, len(verse))[len(prompt):].tolist()
    writer.choose_preset(0)   # the first preset switches every head on again
    assert writer.off() == []


# --- The switches: each equal to snippets.switches with the same part removed -------------


@pytest.mark.parametrize("part", SWITCHES)
def test_each_switch_equals_numpy_with_the_same_part_removed(writer, part):
    params, n_heads = writer.params, writer.n_heads
    # the engine on prompts chosen at random, with a head off too
    rng = np.random.default_rng(len(part))
    for T, n_prompt, off in ((40, 15, []), (64, 64, [(1, 3)]), (20, 1, [(0, 2)])):
        ids = rng.integers(0, len(writer.vocab), size=T)
        shown = writer.api("e.modelWriter.forward(arg[0], {off: arg[1], removed: arg[2]}, arg[3])",
                           [ids.tolist(), writer.flags(off), [part], n_prompt])
        expected = switched_logits(ids, params, n_heads, n_prompt, [part], off)
        assert relative_gap(shown, expected) <= RELATIVE, (part, T, n_prompt, off)
    # the reader's switch: the words written again at once, their logits and the caches
    writer.choose_preset(0)
    prompt = writer.ids()
    for _ in range(10):
        writer.button("Step").click()
    writer.part(part).uncheck()
    assert writer.removed() == [part] and writer.off() == []
    out = switched_generate(prompt, params, n_heads, 10, [part])
    assert writer.ids() == out.tolist()
    assert out.tolist() != generate(prompt, params, n_heads, 10).tolist(), "the switch changes what the model writes"
    logits = writer.api("e.modelWriter.run().logits.map(row => Array.from(row))")
    assert relative_gap(logits, switched_logits(out, params, n_heads, len(prompt), [part])) <= RELATIVE
    check_cache(writer, [], [part])
    weights = writer.api("e.modelWriter.run().alpha[1][2].map(row => row.length)")
    assert weights == reading_mask(len(out), len(prompt), [part]).sum(axis=1).tolist()   # the keys each query read
    title = writer.element.locator(".gw-cache-title").inner_text()
    if part == "cache":
        assert f"{len(prompt)} keys and values" in title and "frozen: the 10 words" in title
    writer.part(part).check()
    assert writer.ids() == generate(prompt, params, n_heads, 10).tolist() and writer.removed() == []
    assert writer.errors == []


# --- Each part's share of the chosen word's logit -----------------------------------------


def shown_shares(writer):
    """The numbers of the shares table, as printed: ([layer][head], rest)."""
    numbers = [float(text.replace("\u2212", "-")) for text in
               writer.element.locator(".gw-share-number").all_inner_texts()]
    heads = np.reshape(numbers[:2 * writer.n_heads], (2, writer.n_heads))
    return heads, numbers[2 * writer.n_heads:]


@pytest.mark.parametrize(("removed", "off"), [([], []), ([], [(1, 2)]), (["causal mask", "scale"], [(0, 1)])])
def test_each_parts_share_of_the_chosen_word_equals_logit_contributions_at_every_step(writer, removed, off):
    params, n_heads = writer.params, writer.n_heads
    writer.choose_preset(0)
    for name in removed:
        writer.part(name).uncheck()
    for layer, head in off:
        writer.switch(layer, head).uncheck()
    prompt = writer.ids()
    for _ in range(8):
        writer.button("Step").click()
    ids = writer.ids()
    shares = writer.api("e.modelWriter.shares(arg[0], {off: arg[1], removed: arg[2]}, arg[3])",
                        [ids, writer.flags(off), removed, len(prompt)])
    expected = logit_contributions(ids, switched_params(params, n_heads, removed, off), n_heads,
                                   mask=reading_mask(len(ids), len(prompt), removed))
    assert len(shares) == len(ids) - 1
    for t, share in enumerate(shares):
        assert np.abs(np.array(share["heads"]) - expected["heads"][t]).max() < SHARES, t
        assert np.abs(np.array(share["feedForward"]) - expected["feed_forward"][t]).max() < SHARES, t
        for name in ("embedding", "biases"):
            assert abs(share[name] - expected[name][t]) < SHARES, (t, name)
    # the table shows the pressed word's step, rounded; a head switched off has no share
    for t in (len(ids) - 1, len(prompt) + 2, 5):
        writer.element.locator(f'.gw-token[data-position="{t}"]').click()
        heads, rest = shown_shares(writer)
        assert np.abs(heads - expected["heads"][t - 1]).max() <= 0.005 + 1e-9
        assert np.abs(np.array(rest) - np.array([expected["embedding"][t - 1], *expected["feed_forward"][t - 1],
                                                 expected["biases"][t - 1]])).max() <= 0.005 + 1e-9
        assert all(heads[layer, head] == 0 for layer, head in off)
        title = writer.element.locator(".gw-shares-title").inner_text()
        assert f"\u201c{writer.vocab[ids[t]]}\u201d, the chosen word" in title
    for name in removed:
        writer.part(name).check()
    for layer, head in off:
        writer.switch(layer, head).check()
    assert writer.errors == []


# --- Sampling: NumPy's generator, temperature, top-k and top-p ---------------------------


def draw_margin(prompt, out, logits_of, temperature, k_top, p_top, seed):
    """The smallest distance of a draw from the edge of a word's share of [0, 1), over the written words."""
    uniform, margin = np.random.default_rng(seed), np.inf
    for t in range(len(prompt), len(out)):
        p = sampling_probabilities(logits_of(out[:t])[-1], temperature, k_top, p_top)
        cdf = np.cumsum(p) / np.cumsum(p)[-1]
        u = uniform.random()
        assert int(np.searchsorted(cdf, u, side="right")) == out[t]
        margin = min(margin, float(np.abs(cdf - u).min()))
    return margin


def test_sampled_words_are_chapter_14s_with_the_same_seed_and_repeat_with_it(writer, model):
    params, n_heads, _ = model
    assert writer.api("e.modelWriter.uniforms(14, 50)") == np.random.default_rng(14).random(50).tolist()
    for seed in (0, 9999, 4242):
        assert writer.api(f"e.modelWriter.uniforms({seed}, 5)") == np.random.default_rng(seed).random(5).tolist()
    writer.choose_preset(2)
    writer.sample()
    assert float(writer.element.locator("input[id$='-temperature']").input_value()) == 0.7
    prompt = writer.ids()
    for _ in range(12):
        writer.button("Step").click()
    first = writer.ids()
    assert first == generate(prompt, params, n_heads, 12, temperature=0.7, rng=np.random.default_rng(14)).tolist()
    assert draw_margin(prompt, first, lambda ids: gpt_forward(ids, params, n_heads), 0.7, None, 1.0, 14) > 1e-9
    seed = writer.element.locator("input[id$='-seed']")
    seed.fill("15")
    seed.dispatch_event("change")
    assert writer.ids()[:len(prompt)] == prompt and writer.ids() != first and len(writer.ids()) == len(first)
    seed.fill("14")
    seed.dispatch_event("change")
    assert writer.ids() == first
    seed.fill("-3")
    seed.dispatch_event("change")
    assert "whole number from 0 to 9999" in writer.element.locator(".gw-message").inner_text()
    assert writer.ids() == first and seed.input_value() == "14"
    writer.element.locator("input[value='greedy']").check()
    assert writer.ids() == generate(prompt, params, n_heads, n_new=12).tolist()
    assert writer.errors == []


def test_top_k_and_top_p_keep_the_words_numpy_keeps_and_the_table_shows_them(writer, model):
    params, n_heads, vocab = model
    logits = np.random.default_rng(5).normal(0, 3, size=(20, len(vocab)))
    for temperature, k_top, p_top in ((0.7, 5, 1.0), (1.0, len(vocab), 0.8), (1.3, 12, 0.6), (0.4, 1, 1.0)):
        shown = [writer.api("e.modelWriter.samplingProbabilities(arg[0], arg[1], arg[2], arg[3])",
                            [row.tolist(), temperature, k_top, p_top]) for row in logits]
        expected = sampling_probabilities(logits, temperature, None if k_top == len(vocab) else k_top, p_top)
        assert np.array_equal(np.array(shown) == 0, expected == 0)
        assert np.abs(np.array(shown) - expected).max() < 1e-12
    writer.choose_preset(2)
    writer.sample(temperature=1.2, k_top=8, p_top=0.75)
    prompt = writer.ids()
    for _ in range(12):
        writer.button("Step").click()
    out = writer.ids()
    expected = switched_generate(prompt, params, n_heads, 12, temperature=1.2, k_top=8, p_top=0.75,
                                 rng=np.random.default_rng(14))
    assert out == expected.tolist()
    assert draw_margin(prompt, out, lambda ids: gpt_forward(ids, params, n_heads), 1.2, 8, 0.75, 14) > 1e-9
    # the table: the six likeliest words at the temperature, the ones the draw drops marked
    for t in (len(out) - 1, len(prompt) + 3):
        writer.element.locator(f'.gw-token[data-position="{t}"]').click()
        row_logits = gpt_forward(out[:t], params, n_heads)[-1]
        p = softmax(row_logits, temperature=1.2)
        kept = sampling_probabilities(row_logits, 1.2, 8, 0.75)
        top = np.argsort(-p, kind="stable")[:6]
        rows = writer.element.locator(".gw-probabilities tbody tr")
        assert [r.split("\t")[0].split(" \u2190")[0] for r in rows.all_inner_texts()] == [vocab[i] for i in top]
        drawn = [row.locator("td.gw-drawn").inner_text() for row in rows.all()]
        assert drawn == [f"{kept[i]:.3f}" if kept[i] > 0 else "dropped" for i in top]
        assert [("gw-dropped" in (row.get_attribute("class") or "")) for row in rows.all()] == [kept[i] == 0 for i in top]
        note = writer.element.locator(".gw-kept").inner_text()
        assert f"keeps {int((kept > 0).sum())} of the {len(vocab)} words" in note
        assert f"holding {p[kept > 0].sum():.3f} of the probability" in note
    writer.sample(temperature=0.7, k_top=len(vocab), p_top=1)
    writer.element.locator("input[value='greedy']").check()
    assert writer.errors == []


def test_pointing_at_a_written_word_shows_the_heads_weights_and_the_probabilities(writer, model, induction):
    params, n_heads, vocab = model
    writer.choose_preset(0)
    for _ in range(4):
        writer.button("Step").click()
    ids = writer.ids()
    weights = attention_weights(ids, params, n_heads)
    logits = gpt_forward(ids, params, n_heads)
    for layer, head in ((1, 2), (0, 1)):
        writer.element.locator("select[id$='-show']").select_option(str(layer * n_heads + head))
        for t in (len(ids) - 1, len(ids) - 3, len(ids)):   # written words, and the word to come
            writer.element.locator(f'.gw-token[data-position="{t}"]').hover()
            pressed = writer.element.locator('.gw-token[aria-pressed="true"]')
            assert pressed.get_attribute("data-position") == str(t)
            shown = writer.element.locator(".gw-token .av-weight").all_inner_texts()
            expected = weights[layer, head, t - 1, :t]
            assert [float(x) for x in shown[:t]] == pytest.approx(expected, abs=0.005 + 1e-9)
            assert set(shown[t:]) == {"\u2013"}
            best = int(np.argmax(expected))
            summary = writer.element.locator(".gw-summary").inner_text()
            assert f"layer {layer}, head {head}" in summary and f"word {best + 1}, weight {expected[best]:.2f}" in summary
            rows = writer.element.locator(".gw-probabilities tbody tr")
            p = softmax(logits[t - 1])
            top = np.argsort(-p, kind="stable")[:6]
            assert [row.split("\t")[0].split(" \u2190")[0] for row in rows.all_inner_texts()] == [vocab[i] for i in top]
            numbers = writer.element.locator(".gw-probability .gw-number").all_inner_texts()
            assert [float(x) for x in numbers] == pytest.approx(p[top], abs=0.0005 + 1e-9)
            if t < len(ids):
                assert "chosen" in rows.first.inner_text() and vocab[ids[t]] == vocab[top[0]]
    # on the song, the induction head looks at the word it then writes, in the first verse
    layer, head = induction
    writer.element.locator("select[id$='-show']").select_option(str(layer * n_heads + head))
    t = len(ids) - 1
    writer.element.locator(f'.gw-token[data-position="{t}"]').hover()
    looked = int(np.argmax(weights[layer, head, t - 1, :t]))
    assert ids[looked] == ids[t] and looked < ids.index(vocab.index("."))
    label = writer.element.locator("canvas.gw-panel-shown").get_attribute("aria-label")
    assert label.startswith(f"Layer {layer}, head {head}: {len(ids)} keys and {len(ids)} values of 16 numbers")
    assert f"on entry {looked + 1}, \u201c{vocab[ids[looked]]}\u201d" in label
    assert writer.errors == []


def test_words_typed_with_completion_and_from_buttons_and_words_it_does_not_know(writer):
    vocab = writer.vocab
    writer.element.locator("select[id$='-preset']").select_option("empty")
    assert writer.ids() == [] and writer.button("Step").is_disabled()
    typed = writer.element.locator("input[id$='-type']")
    typed.fill("Mira SANG:")
    typed.press("Enter")
    assert writer.words(writer.ids()) == "mira sang :"
    typed.fill("zebra hat")
    typed.press("Enter")
    message = writer.element.locator(".gw-message").inner_text()
    assert "\u201czebra\u201d is not among the model's 108 words" in message and "nothing was added" in message
    assert writer.words(writer.ids()) == "mira sang :" and typed.input_value() == "zebra hat"
    typed.fill("bel")
    typed.dispatch_event("input")
    suggestion = writer.element.locator(".gw-suggestions button", has_text="bell")
    suggestion.click()
    assert writer.words(writer.ids()) == "mira sang : bell"
    writer.element.locator("summary", has_text="All 108 words").click()
    writer.element.get_by_role("button", name="add full stop").click()
    writer.element.get_by_role("button", name="add hat").click()
    assert writer.words(writer.ids()) == "mira sang : bell . hat"
    writer.button("Remove last word").click()
    assert writer.words(writer.ids()) == "mira sang : bell ."
    assert len(vocab) == writer.element.locator(".gw-vocab-words button").count()
    writer.element.locator("summary", has_text="All 108 words").click()
    assert writer.errors == []


def test_the_keyboard_moves_along_the_words(writer):
    writer.tab.mouse.move(0, 0)
    writer.choose_preset(0)
    writer.button("Step").click()
    n = len(writer.ids())
    writer.element.locator(f'.gw-token[data-position="{n - 1}"]').focus()
    writer.tab.keyboard.press("ArrowLeft")
    assert writer.element.locator('.gw-token[aria-pressed="true"]').get_attribute("data-position") == str(n - 2)
    writer.tab.keyboard.press("End")
    assert writer.element.locator('.gw-token[aria-pressed="true"]').get_attribute("data-position") == str(n)
    assert writer.element.locator(".gw-token[tabindex='0']").count() == 1
    for control in ("select[id$='-preset']", "input[id$='-type']", "input[id$='-seed']", "select[id$='-show']",
                    "input[id$='-temperature']", "input[id$='-top-k']", "input[id$='-top-p']"):
        control_id = writer.element.locator(control).get_attribute("id")
        assert writer.element.locator(f"label[for='{control_id}']").count() == 1, control
    assert writer.element.locator(".gw-summary").get_attribute("aria-live") == "polite"
    named = "b => (b.getAttribute('aria-label') || b.labels[0].textContent).trim().length > 0"
    assert all(box.evaluate(named) for box in writer.element.locator("input[type='checkbox']").all())


def test_cache_rows_are_labelled_by_their_word_and_a_pressed_word_is_marked_in_every_panel(writer):
    writer.choose_preset(0)
    for _ in range(3):
        writer.button("Step").click()
    ids = writer.ids()
    lists = writer.element.locator(".gw-cache-words")
    assert lists.count() == 2
    for i in range(2):
        assert lists.nth(i).locator("li").all_inner_texts() == [writer.vocab[w] for w in ids]
    writer.element.locator('.gw-token[data-position="5"]').click()
    for i in range(2):
        marked = lists.nth(i).locator("li.gw-row-pressed")
        assert marked.count() == 1 and marked.get_attribute("data-position") == "5"
    labels = [canvas.get_attribute("aria-label") for canvas in writer.element.locator("canvas.gw-canvas").all()]
    assert len(labels) == 8 and all(f"the pressed word, \u201c{writer.vocab[ids[5]]}\u201d, is entry 6" in label
                                    for label in labels)
    lists.nth(1).locator('li[data-position="8"]').click()     # a cache row's word presses the word
    assert writer.element.locator('.gw-token[aria-pressed="true"]').get_attribute("data-position") == "8"
    # a frozen cache holds the prompt's rows only: a written word has none to mark
    writer.part("cache").uncheck()
    prompt = len(writer.api("e.modelWriter.state.prompt"))
    assert lists.nth(0).locator("li").count() == prompt
    writer.element.locator(f'.gw-token[data-position="{prompt + 1}"]').click()
    assert writer.element.locator("li.gw-row-pressed").count() == 0
    writer.part("cache").check()
    assert lists.nth(0).locator("li").count() == len(ids)
    assert writer.errors == []


def test_a_damaged_weights_file_gives_a_clear_message(browser, server):
    tab, errors = open_tab(browser, width=1280, height=900)

    def damaged(route):
        body = bytearray(route.fetch().body())
        body[5000] ^= 0x40
        route.fulfill(status=200, body=bytes(body), headers={"Content-Type": "application/octet-stream"})

    tab.route(f"**/{WEIGHTS_FILE}", damaged)
    tab.goto(server.url(PAGE))
    tab.locator(f'.{ELEMENT}[data-ready="true"] button.gw-start').click()
    tab.locator(f'.{ELEMENT}[data-model-state="error"]').wait_for(timeout=30_000)
    text = tab.locator(f".{ELEMENT} .widget-failure").inner_text()
    assert "not the one this page was built with" in text and "stale or damaged" in text and "444,416 bytes" in text
    assert tab.locator(f".{ELEMENT} button.gw-start").inner_text() == "Try again"
    assert any("model writer" in error for error in errors)
    tab.context.close()


def test_instant_navigation_starts_it_again_on_the_same_numbers(browser, server, model):
    params, n_heads, vocab = model
    tab, errors = open_tab(browser, width=1280, height=900)
    start(tab, server.url(PAGE))
    if not tab.evaluate("() => !!(window.document$ && window.document$.next)"):
        pytest.skip("the theme exposes no document$ here; navigation.instant is not on")
    navigate_to_fresh_copy(tab, f".{ELEMENT}")
    fresh = tab.locator(f'.{ELEMENT}[data-ready="true"]')
    fresh.wait_for()
    assert tab.locator(f".{ELEMENT} .gw-start").count() == 1, "the start box is built once"
    fresh.locator("button.gw-start").click()
    element = tab.locator(READY)
    element.wait_for(timeout=30_000)
    writer = Writer(tab, element, errors, params, n_heads, vocab)
    prompt = writer.ids()
    for _ in range(3):
        writer.button("Step").click()
    assert writer.ids() == generate(prompt, params, n_heads, n_new=3).tolist()
    check_cache(writer, [])
    assert errors == []
    tab.context.close()


def test_it_fits_a_phone_and_answers_taps(browser, server, model):
    params, n_heads, vocab = model
    tab, errors = open_tab(browser, has_touch=True)
    element = start(tab, server.url(PAGE))
    writer = Writer(tab, element, errors, params, n_heads, vocab)
    for _ in range(5):
        writer.button("Step").tap()
    assert len(writer.ids()) == 22
    writer.element.locator('.gw-token[data-position="19"]').tap()
    assert writer.element.locator('.gw-token[aria-pressed="true"]').get_attribute("data-position") == "19"
    assert tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    box = element.bounding_box()
    assert box["width"] <= 390
    for control in element.locator("button:visible, input:visible, select:visible").all():
        size = control.bounding_box()
        assert size["x"] >= box["x"] - 0.5 and size["x"] + size["width"] <= box["x"] + box["width"] + 0.5
        if control.get_attribute("type") in ("checkbox", "radio"):   # the label around it is the target
            size = control.locator("xpath=..").bounding_box()
        assert size["height"] >= 24, control.evaluate("c => c.outerHTML.slice(0, 80)")
    # the loop: with what a step did in view, the Step button is on the screen too, and after a tap,
    # the word it wrote, the sentence about it and the probabilities of its step
    element.locator(".gw-probabilities").evaluate("table => table.scrollIntoView({block: 'end'})")
    step, bar = writer.button("Step"), element.locator(".gw-bar")

    def on_screen(locator, below=0):
        found = locator.bounding_box()
        return found is not None and found["y"] >= below - 0.5 and found["y"] + found["height"] <= 844 + 0.5

    assert on_screen(step)
    step.tap()
    n = len(writer.ids())
    assert n == 23
    bar_bottom = bar.bounding_box()["y"] + bar.bounding_box()["height"]
    assert on_screen(step) and bar_bottom < 844 / 4
    for shown in (element.locator(f'.gw-token[data-position="{n - 1}"]'), element.locator(".gw-summary"),
                  element.locator(".gw-probabilities tbody tr").last):
        assert on_screen(shown, below=bar_bottom), shown
    assert "chosen" in element.locator(".gw-probabilities tbody tr").first.inner_text()
    assert errors == []
    tab.context.close()


def shoot(tab, element, path):
    """The element, whole, as the page lays it out: from the top of the page, where no bar is stuck."""
    tab.evaluate("window.scrollTo(0, 0)")
    box = element.bounding_box()
    tab.screenshot(path=str(path), full_page=True, clip=box)


@pytest.mark.skipif(os.environ.get("SCREENSHOTS") != "1", reason="screenshots only with SCREENSHOTS=1")
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_screenshots_of_the_lab(browser, server, width, scheme):
    """The widget as a reader uses it: the shares of the "goat" step, a part switched off, top-p sampling."""
    context = browser.new_context(viewport={"width": width, "height": 844 if width == 390 else 900},
                                  color_scheme=scheme)
    tab = context.new_page()
    element = start(tab, server.url(PAGE))
    folder = ROOT / "artifacts" / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"model-writer-{width}-{scheme}"
    step = element.get_by_role("button", name="Step", exact=True)
    for _ in range(10):
        step.click()
    prompt = element.evaluate("e => e.modelWriter.state.prompt.length")
    element.locator(f'.gw-token[data-position="{prompt + 6}"]').click()   # "goat" on the run stored now
    shoot(tab, element, folder / f"{name}-shares.png")
    # the phone's loop: Step, and what it did, on one screen
    element.locator(".gw-probabilities").evaluate("table => table.scrollIntoView({block: 'end'})")
    step.click()
    tab.screenshot(path=str(folder / f"{name}-step-in-view.png"))
    element.locator('input[data-part="positions"]').uncheck()
    element.locator(".gw-token").last.click()
    shoot(tab, element, folder / f"{name}-no-positions.png")
    element.locator('input[data-part="positions"]').check()
    element.locator("select[id$='-preset']").select_option("2")
    element.locator("input[value='sampled']").check()
    set_slider(element.locator("input[id$='-top-p']"), 0.8)
    for _ in range(6):
        step.click()
    shoot(tab, element, folder / f"{name}-top-p.png")
    context.close()
