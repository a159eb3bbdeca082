"""The attention viewer of chapter 14, driven in Debian's Chromium.

The viewer (docs/javascripts/attention-viewer.js) shows where each head of the
trained model looks. These tests pick sentences, layers and heads, click
words, tap them, and move along them with the keyboard, and
check every weight the viewer shows against ``snippets.heads.
attention_weights`` computed here from the stored weights for the same
sentence. They also swap the page in the way Material's instant navigation
does and check that the viewer starts exactly once (test_browser.py follows a
real instant-navigation link to it), and that it fits a phone. Skipped, with
the reason, where Chromium or playwright is missing (see tests/support/browser.py).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from sitekit.pages import ROOT
from sitekit.widgets.attention_viewer import DECIMALS, ELEMENT
from snippets.heads import attention_weights
from support.browser import navigate_to_fresh_copy, open_tab, open_widget
from tools import train

VIEWER_PAGE = "learned-lookups/index.html"
HALF_UNIT = 0.5 * 10**-DECIMALS + 1e-9
READY = f'.{ELEMENT}[data-ready="true"]'


@pytest.fixture(scope="module")
def model():
    params, log = train.load_run()
    return params, log["config"]["n_heads"], log["vocab"]


@pytest.fixture(scope="module")
def viewer(browser, server, model):
    # (that the page loads its script, tests/test_widgets.py checks)
    tab, element, errors = open_widget(browser, server.url(VIEWER_PAGE), ELEMENT)
    yield Viewer(tab, element, errors, *model)
    tab.context.close()


class Viewer:
    """What the viewer shows, and the same lookups computed by the snippets."""

    def __init__(self, tab, element, errors, params, n_heads, vocab):
        self.tab, self.element, self.errors = tab, element, errors
        self.params, self.n_heads, self.vocab = params, n_heads, vocab
        self.sentences = json.loads(element.get_attribute("data-sentences"))
        self.sentence = element.locator("select[id$='-sentence']")
        self.layer = element.locator("select[id$='-layer']")
        self.head = element.locator("select[id$='-head']")
        self.words = element.locator(".av-token")

    def choose(self, sentence, layer, head):
        self.sentence.select_option(str(sentence))
        self.layer.select_option(str(layer))
        self.head.select_option(str(head))

    def query(self) -> int:
        pressed = self.element.locator(".av-token[aria-pressed='true']")
        assert pressed.count() == 1
        return int(pressed.get_attribute("data-position"))

    def shown(self) -> list[str]:
        return self.element.locator(".av-token .av-weight").all_inner_texts()

    def expected(self, sentence, layer, head, t) -> np.ndarray:
        ids = [self.vocab.index(word) for word in self.sentences[sentence]]
        return attention_weights(ids, self.params, self.n_heads)[layer, head, t]

    def check(self, sentence, layer, head, t) -> np.ndarray:
        """Every weight shown equals the snippet's, and the later words show none."""
        # The viewer may redraw after the event that moved it: wait until word t is the one pressed.
        self.tab.wait_for_function(
            """(t) => {
              const pressed = document.querySelectorAll('.attention-viewer .av-token[aria-pressed="true"]');
              return pressed.length === 1 && pressed[0].dataset.position === String(t);
            }""",
            arg=t, timeout=15000,  # a loaded 2-core machine can keep Chromium waiting for seconds
        )
        assert self.query() == t
        expected = self.expected(sentence, layer, head, t)
        shown = self.shown()
        assert self.element.locator(".av-token .av-word").all_inner_texts() == self.sentences[sentence]
        for s, text in enumerate(shown):
            if s <= t:
                assert abs(float(text) - expected[s]) <= HALF_UNIT, (sentence, layer, head, t, s, text, expected[s])
            else:
                assert text == "\u2013"
        best = int(np.argmax(np.round(expected[: t + 1], DECIMALS)))
        summary = self.element.locator(".av-summary").inner_text()
        assert f"(word {t + 1} of {len(shown)})" in summary and f"(word {best + 1})" in summary, summary
        return expected


def test_the_viewer_starts_on_the_induction_head_in_the_second_verse(viewer):
    assert viewer.sentence.input_value() == "0" and " sang : " in " ".join(viewer.sentences[0])
    layer, head = int(viewer.layer.input_value()), int(viewer.head.input_value())
    figures = train.figures()
    assert (layer, head) == (figures["induction_layer"], figures["induction_head"])
    t = viewer.query()
    words = viewer.sentences[0]
    verse_end = words.index(".")
    expected = viewer.check(0, layer, head, t)
    # The third word of the second verse looks at the word after its earlier copy.
    assert t == verse_end + 6 and int(np.argmax(expected)) == t - verse_end
    assert viewer.errors == []


@pytest.mark.parametrize(("sentence", "layer", "head"), [(0, 0, 1), (1, 1, 2), (2, 0, 0), (3, 1, 3)])
def test_pressing_words_shows_the_snippets_weights(viewer, sentence, layer, head):
    viewer.choose(sentence, layer, head)
    n = len(viewer.sentences[sentence])
    for t in sorted({0, 1, n // 2, n - 1}):
        viewer.words.nth(t).click()
        viewer.check(sentence, layer, head, t)
    assert viewer.errors == []


def test_pointing_at_a_word_moves_nothing(viewer):
    """Issue 46: the query followed the mouse (mouseenter), so reading the weights under one word lost them."""
    viewer.choose(0, 1, 2)
    viewer.words.nth(4).click()
    viewer.check(0, 1, 2, 4)
    for t in (2, 7, 9):
        viewer.words.nth(t).hover()
    viewer.tab.wait_for_timeout(200)
    viewer.check(0, 1, 2, 4)


def test_every_word_is_named_by_its_word_place_and_weight(viewer):
    """Issue 46: a full stop's button was named ". 0.00"; a screen reader says "full stop" and what it means.

    The name begins with what the button shows, its word and its weight (axe's
    label-content-name-mismatch: a voice command names a button by its text).
    """
    viewer.choose(0, 1, 2)
    words = viewer.sentences[0]
    t = words.index(".") + 2   # "again"
    viewer.words.nth(t).click()
    expected = viewer.check(0, 1, 2, t)
    stop = words.index(".")
    assert viewer.words.nth(stop).get_attribute("aria-label") == (
        f"full stop {expected[stop]:.2f}, word {stop + 1}")
    assert viewer.words.nth(2).get_attribute("aria-label") == f"colon {expected[2]:.2f}, word 3"
    assert viewer.words.nth(0).get_attribute("aria-label") == f"{words[0]} {expected[0]:.2f}, word 1"
    later = viewer.words.nth(t + 2).get_attribute("aria-label")   # the second verse's first word
    assert later == f"{words[t + 2]}, word {t + 3}, after the pressed word, no weight"


def test_changing_the_head_keeps_the_word_and_updates_the_weights(viewer):
    viewer.choose(0, 1, 2)
    viewer.words.nth(5).click()
    for head in range(viewer.n_heads):
        viewer.head.select_option(str(head))
        viewer.check(0, 1, head, 5)


def test_keyboard_moves_along_the_words(viewer):
    viewer.choose(1, 1, 0)
    n = len(viewer.sentences[1])
    viewer.words.nth(2).focus()
    viewer.check(1, 1, 0, 2)
    viewer.tab.keyboard.press("ArrowRight")
    viewer.check(1, 1, 0, 3)
    viewer.tab.keyboard.press("End")
    viewer.check(1, 1, 0, n - 1)
    viewer.tab.keyboard.press("Home")
    viewer.check(1, 1, 0, 0)
    # One tab stop for the words: the pressed one.
    assert viewer.element.locator(".av-token[tabindex='0']").count() == 1
    assert viewer.errors == []


def test_tapping_a_word_on_a_touch_screen(browser, server, model):
    tab, errors = open_tab(browser, has_touch=True)
    tab.goto(server.url(VIEWER_PAGE))
    element = tab.locator(READY)
    element.wait_for()
    element.scroll_into_view_if_needed()
    viewer = Viewer(tab, element, errors, *model)
    viewer.choose(2, 0, 3)
    viewer.words.nth(4).tap()
    viewer.check(2, 0, 3, 4)
    assert errors == []
    tab.context.close()


def test_selects_are_labelled_and_the_summary_is_announced(viewer):
    for select, label in ((viewer.sentence, "Sentence"), (viewer.layer, "Layer"), (viewer.head, "Head")):
        select_id = select.get_attribute("id")
        assert viewer.element.locator(f"label[for='{select_id}']").inner_text() == label
    assert viewer.element.locator(".av-summary").get_attribute("aria-live") == "polite"
    assert viewer.element.get_attribute("data-ready") == "true"


def test_the_viewer_fits_a_phone_and_is_screenshotted(viewer):
    viewer.choose(0, 1, 2)
    viewer.words.nth(14).click()
    overflow = viewer.tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0
    box = viewer.element.bounding_box()
    assert box["width"] <= 390
    for i in range(viewer.words.count()):
        word = viewer.words.nth(i).bounding_box()
        assert word["x"] >= box["x"] and word["x"] + word["width"] <= box["x"] + box["width"] + 0.5
        assert word["height"] >= 24, "a touch target of at least 24 px"
    path = ROOT / "artifacts" / "screenshots" / "attention-viewer-390.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    viewer.element.screenshot(path=str(path))
    assert path.stat().st_size > 10_000


def test_instant_navigation_starts_the_viewer_once(browser, server, model):
    """With navigation.instant on, Material swaps in the page and emits on document$.

    Here the same is done by hand: the viewer's element is replaced by a fresh
    copy of its markup and document$ fires twice; the new viewer must start
    once and show the snippets' numbers.
    """
    tab, errors = open_tab(browser, width=1280, height=800)
    tab.goto(server.url(VIEWER_PAGE))
    tab.locator(READY).wait_for()
    if not tab.evaluate("() => !!(window.document$ && window.document$.next)"):
        pytest.skip("the theme exposes no document$ here; navigation.instant is not on")
    navigate_to_fresh_copy(tab, ".attention-viewer")
    element = tab.locator(READY)
    element.wait_for()
    assert tab.locator(".attention-viewer").count() == 1
    assert tab.locator(".attention-viewer .av").count() == 1, "initialising twice must not build two viewers"
    viewer = Viewer(tab, element, errors, *model)
    viewer.choose(3, 1, 1)
    viewer.words.nth(3).click()
    viewer.check(3, 1, 1, 3)
    assert errors == []
    tab.context.close()
