"""The soft-lookup playground of chapter 3, driven in Debian's Chromium.

The widget (docs/javascripts/playground.js) computes attention weights in the
reader's browser. These tests move its sliders, with the keyboard and by
setting values, and check every number it shows against
``snippets.attention.softmax`` computed here for the same inputs. Skipped,
with the reason, where Chromium or playwright is missing (see tests/support/browser.py).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from sitekit.pages import ROOT
from sitekit.widgets.playground import ELEMENT
from snippets.attention import softmax
from support.browser import THROWN, open_tab, open_widget, set_slider

PLAYGROUND_PAGE = "soft-keys/index.html"
DECIMALS = 3


@pytest.fixture(scope="module")
def playground(browser, server):
    tab, widget, errors = open_widget(browser, server.url(PLAYGROUND_PAGE), ELEMENT)
    yield Playground(tab, widget, errors)
    tab.context.close()


class Playground:
    """What the widget shows and the data it was built from."""

    def __init__(self, tab, widget, errors):
        self.tab, self.widget, self.errors = tab, widget, errors
        data = {name: json.loads(widget.get_attribute(f"data-{name}"))
                for name in ("keys", "key-vectors", "values", "temperatures")}
        self.keys = data["keys"]
        self.K = np.array(data["key-vectors"], dtype=float)
        self.V = np.array(data["values"], dtype=float)
        self.temperatures = data["temperatures"]
        self.mix_sliders = [widget.locator(f"input[id$='-mix-{i}']") for i in range(len(self.keys))]
        self.temperature_slider = widget.locator("input[id$='-temperature']")

    def shown(self) -> dict:
        weights = [float(text) for text in self.widget.locator(".slp-weight").all_inner_texts()]
        scores = [float(text) for text in self.widget.locator(".slp-score").all_inner_texts()]
        output = float(self.widget.locator(".slp-output").inner_text())
        return {"weights": np.array(weights), "scores": np.array(scores), "output": output}

    def expected(self, mix, temperature) -> dict:
        q = np.asarray(mix, dtype=float) @ self.K
        scores = self.K @ q
        weights = softmax(scores, temperature=temperature)
        return {"weights": weights, "scores": scores, "output": float(weights @ self.V)}

    def state(self) -> tuple[list[float], float]:
        mix = [float(slider.input_value()) for slider in self.mix_sliders]
        return mix, self.temperatures[int(self.temperature_slider.input_value())]


def assert_shows(playground: Playground, mix, temperature) -> dict:
    shown, expected = playground.shown(), playground.expected(mix, temperature)
    half_unit = 0.5 * 10 ** -DECIMALS + 1e-12
    for name in ("weights", "scores"):
        assert np.abs(shown[name] - expected[name]).max() <= half_unit, (name, shown[name], expected[name])
    assert abs(shown["output"] - expected["output"]) <= half_unit, (shown["output"], expected["output"])
    return shown


def test_the_widget_starts_with_the_pages_data_and_no_error(playground):
    mix, temperature = playground.state()
    assert playground.keys == ["dog", "cat", "tiger", "8"] and temperature == 1.0
    assert mix == [1.0, 0.0, 0.0, 0.0]
    assert_shows(playground, mix, temperature)
    assert playground.errors == []


@pytest.mark.parametrize(
    ("mix", "temperature"),
    [
        ([1, 0, 0, 0], 0.1),
        ([0.5, 0.5, 0, 0], 1.0),
        ([0.25, 0.75, 0.4, 0.1], 2.5),
        ([0, 0.35, 0, 1], 0.01),
        ([1, 1, 1, 1], 63.0),
    ],
)
def test_numbers_shown_equal_softmax_in_python(playground, mix, temperature):
    for slider, amount in zip(playground.mix_sliders, mix, strict=False):
        set_slider(slider, amount)
    set_slider(playground.temperature_slider, playground.temperatures.index(temperature))
    assert playground.state() == ([float(a) for a in mix], temperature)
    assert_shows(playground, mix, temperature)


def test_keyboard_moves_the_temperature_and_changes_the_weights(playground):
    for slider, amount in zip(playground.mix_sliders, [1, 0, 0, 0], strict=False):
        set_slider(slider, amount)
    set_slider(playground.temperature_slider, playground.temperatures.index(1.0))
    before = playground.shown()["weights"]
    playground.temperature_slider.focus()
    playground.tab.keyboard.press("ArrowLeft")
    mix, temperature = playground.state()
    assert temperature < 1.0
    after = assert_shows(playground, mix, temperature)["weights"]
    assert after[0] > before[0], "a colder lookup puts more weight on the matching key"


def test_lowest_temperature_is_the_dict_lookup_highest_the_average(playground):
    for slider, amount in zip(playground.mix_sliders, [0, 0.3, 1, 0], strict=False):
        set_slider(slider, amount)
    playground.temperature_slider.focus()
    playground.tab.keyboard.press("Home")
    mix, temperature = playground.state()
    assert temperature == playground.temperatures[0]
    cold = assert_shows(playground, mix, temperature)
    best = int(np.argmax(playground.K @ (np.array(mix) @ playground.K)))
    assert playground.keys[best] == "tiger"
    assert cold["output"] == playground.V[best]
    assert "exact dictionary lookup" in playground.widget.locator(".slp-mode").inner_text()

    playground.tab.keyboard.press("End")
    mix, temperature = playground.state()
    assert temperature == playground.temperatures[-1]
    hot = assert_shows(playground, mix, temperature)
    assert abs(hot["output"] - playground.V.mean()) <= 0.5 * 10 ** -DECIMALS
    assert playground.errors == []


def test_screenshot_of_the_widget_at_phone_width(playground):
    path = ROOT / "artifacts" / "screenshots" / "playground-390.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    playground.widget.screenshot(path=str(path))
    assert path.stat().st_size > 10_000


def test_tied_weights_name_every_tied_key(playground):
    """Equal largest weights: the widget names every tied key, not just the first one."""
    for slider, amount in zip(playground.mix_sliders, [1, 1, 0, 0], strict=True):
        set_slider(slider, amount)
    set_slider(playground.temperature_slider, playground.temperatures.index(1.0))
    mix, temperature = playground.state()
    shown = assert_shows(playground, mix, temperature)
    assert shown["weights"][0] == shown["weights"][1] > shown["weights"][2:].max()
    mode = playground.widget.locator(".slp-mode").inner_text()
    assert "\u201cdog\u201d and \u201ccat\u201d tie for the most weight" in mode, mode
    assert playground.errors == []


def test_a_widget_that_cannot_start_says_so(browser, server):
    """docs/javascripts/widgets.js starts both widgets: one with no data shows why, and logs it."""
    tab, errors = open_tab(browser)
    tab.goto(server.url(PLAYGROUND_PAGE))
    tab.locator('.soft-lookup-playground[data-ready="true"]').wait_for()
    tab.evaluate(
        """() => {
          const broken = document.createElement('div');
          broken.className = 'soft-lookup-playground broken';
          document.querySelector('article').append(broken);
          window.document$.next(document);  // as after an instant navigation
        }"""
    )
    failure = tab.locator('.soft-lookup-playground.broken[data-ready="error"] .widget-failure')
    failure.wait_for()
    assert failure.inner_text() == "The soft-lookup playground could not start: the element has no data-keys attribute"
    assert [e for e in errors if e.startswith("soft-lookup playground:")], errors
    assert tab.locator('.soft-lookup-playground[data-ready="true"]').count() == 1, "the working widget is built once"
    tab.context.close()


def test_a_widget_script_that_throws_fails_its_test_at_once_with_what_it_threw(browser, server):
    """A thrown error closes the tab (support.browser.watch_errors): the wait ends there, not at its time-out."""
    from playwright.sync_api import Error

    tab, errors = open_tab(browser)
    tab.route("**/javascripts/playground.js", lambda route: route.fulfill(
        content_type="text/javascript", body='throw new Error("the playground broke on purpose");'))
    tab.goto(server.url(PLAYGROUND_PAGE))
    with pytest.raises(Error, match="closed"):
        tab.locator('.soft-lookup-playground[data-ready="true"]').wait_for(timeout=60_000)
    assert errors == ["the playground broke on purpose"]
    assert [f"{server.url(PLAYGROUND_PAGE)}: Error: the playground broke on purpose"] == THROWN
    THROWN.clear()  # shown here on purpose: tests/conftest.py would report it as this test's failure
    tab.context.close()
