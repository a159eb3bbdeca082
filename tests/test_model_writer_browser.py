"""The model writer ("Write with the model"), driven in Debian's Chromium.

The widget (docs/javascripts/model-writer.js, then model-writer-app.js)
runs chapter 14's trained model in the browser, in float64, from the
float32 weights file the post-build step wrote. These tests start it as a
reader does and check it against the NumPy model with the stored weights:
every logit on prompts chosen at random, with heads switched off and on
(within 1e-12 of the row's largest logit), the greedy words, every key and
value of the caches, the sampled words (against a Python copy of its seeded
generator), the weights a pointed-at word shows and the probabilities. They
also type words, press word buttons, switch heads, serve it a damaged
weights file, start it again after Material's instant navigation, and
tap it on a phone. One browser serves them all (the ``browser`` fixture).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from sitekit.pages import ROOT
from sitekit.widgets.model_writer import ELEMENT, WEIGHTS_FILE
from snippets.attention import softmax
from snippets.heads import ablate_heads, attention_weights
from snippets.transformer import generate, generate_steps, gpt_forward
from support.browser import navigate_to_fresh_copy, open_tab
from tools import train

PAGE = "write-with-the-model/index.html"
READY = f'.{ELEMENT}[data-model-state="ready"]'
RELATIVE = 1e-12
M32 = 0xFFFFFFFF


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

    def choose_preset(self, index):
        self.element.locator("select[id$='-preset']").select_option(str(index))

    def off(self) -> list[tuple[int, int]]:
        flags = self.api("e.modelWriter.state.off")
        return [divmod(i, self.n_heads) for i, flag in enumerate(flags) if flag]

    def ablated(self, off):
        return ablate_heads(self.params, off, self.n_heads) if off else self.params

    def words(self, ids) -> str:
        return " ".join(self.vocab[i] for i in ids)


def relative_gap(shown, expected) -> float:
    shown, expected = np.asarray(shown), np.asarray(expected)
    return float((np.abs(shown - expected).max(axis=-1) / np.abs(expected).max(axis=-1)).max())


def test_the_logits_equal_numpys_on_random_prompts_with_heads_on_and_off(writer):
    rng = np.random.default_rng(30)
    for trial in range(6):
        T = int(rng.integers(1, 65)) if trial else 64
        ids = rng.integers(0, len(writer.vocab), size=T)
        off = [(lay, h) for lay in range(2) for h in range(writer.n_heads) if rng.random() < 0.3 * (trial % 3)]
        flags = [(lay, h) in off for lay in range(2) for h in range(writer.n_heads)]
        shown = writer.api("e.modelWriter.forward(arg[0], arg[1])", [ids.tolist(), flags])
        expected = gpt_forward(ids, writer.ablated(off), writer.n_heads)
        assert np.shape(shown) == expected.shape
        assert relative_gap(shown, expected) <= RELATIVE, (trial, T, off)
    assert writer.errors == []


def cache_of(writer, ids, off):
    """NumPy's caches after reading every word of ``ids``: [layer] (K, V), each (H, S, d_head)."""
    _, cache = next(generate_steps(ids, writer.ablated(off), writer.n_heads, n_new=1))
    return cache


def check_cache(writer, off):
    ids = writer.ids()
    shown = writer.api("e.modelWriter.cache()")
    for layer, (K, V) in enumerate(cache_of(writer, ids, off)):
        for head in range(writer.n_heads):
            for name, table, mine in (("K", K, shown[layer][head][0]), ("V", V, shown[layer][head][1])):
                mine = np.reshape(mine, table[head].shape)
                gap = np.abs(mine - table[head]).max() / np.abs(table[head]).max()
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


def uniforms(seed):
    """A Python copy of the widget's generator (mulberry32 in model-writer-app.js)."""
    state = seed & M32

    def imul(a, b):
        return (a * b) & M32

    while True:
        state = (state + 0x6D2B79F5) & M32
        t = imul(state ^ (state >> 15), state | 1)
        t ^= (t + imul(t ^ (t >> 7), t | 61)) & M32
        yield ((t ^ (t >> 14)) & M32) / 2**32


def test_sampled_words_repeat_with_their_seed_and_follow_its_draws(writer, model):
    params, n_heads, _ = model
    writer.choose_preset(2)
    writer.element.locator("input[value='sampled']").check()
    temperature = float(writer.element.locator("input[type='range']").input_value())
    assert temperature == 0.7
    prompt = writer.ids()
    for _ in range(12):
        writer.button("Step").click()
    first = writer.ids()
    # the draws again, in Python: the first word whose running sum of exp((l - max) / τ) passes u · total
    logits = gpt_forward(first[:-1], params, n_heads)
    draws = uniforms(14)
    for t in range(len(prompt) - 1, len(first) - 1):
        cumulative = np.cumsum(np.exp((logits[t] - logits[t].max()) / temperature))
        target = next(draws) * cumulative[-1]
        assert np.abs(cumulative - target).min() > 1e-9 * cumulative[-1]   # no draw near a tie
        assert int(np.searchsorted(cumulative, target, side="right")) == first[t + 1], t
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
            top = np.argsort(-p, kind="stable")[:5]
            assert [row.split("\t")[0].split(" \u2190")[0] for row in rows.all_inner_texts()] == [vocab[i] for i in top]
            assert [float(x) for x in writer.element.locator(".gw-number").all_inner_texts()] == pytest.approx(
                p[top], abs=0.0005 + 1e-9)
            if t < len(ids):
                assert "chosen" in rows.first.inner_text() and vocab[ids[t]] == vocab[top[0]]
    # on the song, the induction head looks at the word it then writes, in the first verse
    layer, head = induction
    writer.element.locator("select[id$='-show']").select_option(str(layer * n_heads + head))
    t = len(ids) - 1
    writer.element.locator(f'.gw-token[data-position="{t}"]').hover()
    looked = int(np.argmax(weights[layer, head, t - 1, :t]))
    assert ids[looked] == ids[t] and looked < ids.index(vocab.index("."))
    label = writer.element.locator(".gw-panel-shown canvas").get_attribute("aria-label")
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
    for control in ("select[id$='-preset']", "input[id$='-type']", "input[id$='-seed']", "select[id$='-show']"):
        control_id = writer.element.locator(control).get_attribute("id")
        assert writer.element.locator(f"label[for='{control_id}']").count() == 1, control
    assert writer.element.locator(".gw-summary").get_attribute("aria-live") == "polite"
    assert all(box.get_attribute("aria-label") for box in writer.element.locator("input[type='checkbox']").all())


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
    assert errors == []
    tab.context.close()


@pytest.mark.skipif(os.environ.get("SCREENSHOTS") != "1", reason="screenshots only with SCREENSHOTS=1")
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_screenshots_of_a_run_with_the_induction_head_on_and_off(browser, server, width, scheme):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    tab = context.new_page()
    element = start(tab, server.url(PAGE))
    for preset, name in ((0, "on"), (1, "off")):
        element.locator("select[id$='-preset']").select_option(str(preset))
        for _ in range(10):
            element.get_by_role("button", name="Step", exact=True).click()
        path = ROOT / "artifacts" / "screenshots" / f"model-writer-{width}-{scheme}-induction-{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        element.screenshot(path=str(path))
    context.close()
