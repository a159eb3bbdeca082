"""The fixed-size memory widget of chapter 9, driven in Debian's Chromium.

The widget (docs/javascripts/memory-widget.js) writes two entries into a
memory in the reader's browser and reads both keys back. These tests move its
sliders, with the keyboard and by setting values, and check every number it
shows against ``snippets.linear_memory`` computed here for the same keys and
values: ``linear_attention(K, K, V, causal=False)`` for the additive memory
and ``K @ delta_rule(K, V, beta)`` for the delta rule. They also swap the page
in the way Material's instant navigation does and check that the widget
starts exactly once (test_browser.py follows a real instant-navigation link to
both widgets). Skipped,
with the reason, where Chromium or playwright is missing (see tests/support/browser.py).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from sitekit.pages import ROOT
from sitekit.widgets.memory_widget import ELEMENT
from snippets.linear_memory import delta_rule, linear_attention
from support.browser import navigate_to_fresh_copy, open_tab, open_widget, set_slider

WIDGET_PAGE = "linear-attention/index.html"
DECIMALS = 3
HALF_UNIT = 0.5 * 10**-DECIMALS + 1e-12
READY = f'.{ELEMENT}[data-ready="true"]'


@pytest.fixture(scope="module")
def widget(browser, server):
    # (that the page loads its script, tests/test_widgets.py checks)
    tab, element, errors = open_widget(browser, server.url(WIDGET_PAGE), ELEMENT)
    yield MemoryWidget(tab, element, errors)
    tab.context.close()


class MemoryWidget:
    """What the widget shows and the data it was built from."""

    def __init__(self, tab, element, errors):
        self.tab, self.element, self.errors = tab, element, errors
        self.old_value = json.loads(element.get_attribute("data-old-value"))
        self.new_value = json.loads(element.get_attribute("data-new-value"))
        self.betas = json.loads(element.get_attribute("data-betas"))
        self.angle_slider = element.locator("input[id$='-angle']")
        self.beta_slider = element.locator("input[id$='-beta']")

    def set(self, angle, beta) -> None:
        set_slider(self.angle_slider, angle)
        set_slider(self.beta_slider, self.betas.index(beta))

    def state(self) -> tuple[int, float]:
        return int(self.angle_slider.input_value()), self.betas[int(self.beta_slider.input_value())]

    def shown(self) -> dict:
        def vector(text):
            return [float(x) for x in text.strip("[]").split(",")]

        def cell(selector):
            return self.element.locator(selector).inner_text()

        shown = {"overlap": float(cell(".mw-overlap")), "new_key": vector(cell(".mw-new-key"))}
        for memory in ("additive", "delta"):
            for s, key in enumerate(("old", "new")):
                row = f".mw-{memory}-{key}"
                shown[memory, s] = (vector(cell(f"{row} .mw-read")), float(cell(f"{row} .mw-error")))
        return shown

    def expected(self, angle, beta) -> dict:
        """The same writes and reads, computed by snippets.linear_memory."""
        theta = np.deg2rad(angle)
        K = np.array([[1.0, 0.0], [np.cos(theta), np.sin(theta)]])
        V = np.array([self.old_value, self.new_value], dtype=float)
        reads = {"additive": linear_attention(K, K, V, causal=False), "delta": K @ delta_rule(K, V, beta)}
        expected = {"overlap": float(K[0] @ K[1]), "new_key": K[1].tolist()}
        for memory, read in reads.items():
            for s in range(2):
                expected[memory, s] = (read[s].tolist(), float(np.linalg.norm(read[s] - V[s])))
        return expected


def assert_shows(widget: MemoryWidget, angle, beta) -> dict:
    shown, expected = widget.shown(), widget.expected(angle, beta)
    assert abs(shown["overlap"] - expected["overlap"]) <= HALF_UNIT
    assert np.abs(np.subtract(shown["new_key"], expected["new_key"])).max() <= HALF_UNIT
    for key in [(memory, s) for memory in ("additive", "delta") for s in range(2)]:
        (shown_read, shown_error), (expected_read, expected_error) = shown[key], expected[key]
        assert np.abs(np.subtract(shown_read, expected_read)).max() <= HALF_UNIT, (key, shown_read, expected_read)
        assert abs(shown_error - expected_error) <= HALF_UNIT, (key, shown_error, expected_error)
    return shown


def test_the_widget_starts_with_the_pages_data_and_no_error(widget):
    angle, beta = widget.state()
    assert (angle, beta) == (30, 1.0)
    assert widget.old_value == [2.0, 0.0, 1.0] and widget.new_value == [0.0, 3.0, -1.0]
    assert_shows(widget, angle, beta)
    assert widget.errors == []


@pytest.mark.parametrize(
    ("angle", "beta"),
    [(0, 1.0), (0, 0.5), (30, 1.0), (45, 0.3), (90, 1.0), (90, 0.7), (120, 1.0), (180, 0.0), (155, 0.9)],
)
def test_numbers_shown_equal_linear_memory_in_python(widget, angle, beta):
    widget.set(angle, beta)
    assert widget.state() == (angle, beta)
    assert_shows(widget, angle, beta)


def test_same_key_twice_additive_reads_the_sum_delta_rule_the_newer_value(widget):
    widget.set(0, 1.0)
    shown = assert_shows(widget, 0, 1.0)
    assert shown["additive", 0][0] == [a + b for a, b in zip(widget.old_value, widget.new_value, strict=True)]
    assert shown["delta", 0][0] == widget.new_value and shown["delta", 1][1] == 0
    assert "the delta rule overwrites" in widget.element.locator(".mw-mode").inner_text()


def test_keys_at_right_angles_read_back_exactly(widget):
    widget.set(90, 1.0)
    shown = assert_shows(widget, 90, 1.0)
    assert all(shown[memory, s][1] == 0 for memory in ("additive", "delta") for s in range(2))
    assert "at right angles" in widget.element.locator(".mw-mode").inner_text()


def test_keyboard_moves_the_angle_and_the_old_key_degrades(widget):
    widget.set(90, 1.0)
    widget.angle_slider.focus()
    errors = []
    for _ in range(3):
        widget.tab.keyboard.press("ArrowLeft")
        angle, beta = widget.state()
        errors.append(assert_shows(widget, angle, beta)["additive", 0][1])
    assert widget.state()[0] == 75
    assert errors == sorted(errors) and errors[0] > 0, "closer keys, larger error on the old key"
    widget.tab.keyboard.press("Home")
    assert widget.state()[0] == 0
    widget.beta_slider.focus()
    widget.tab.keyboard.press("End")
    assert widget.state()[1] == 1.0
    assert_shows(widget, *widget.state())
    live = widget.element.locator(".mw-live")
    assert live.get_attribute("aria-live") == "polite"
    widget.tab.wait_for_function("el => el.textContent.startsWith('Angle 0 degrees')", arg=live.element_handle())
    assert widget.errors == []


def test_sliders_are_labelled_native_range_inputs(widget):
    for slider, label in ((widget.angle_slider, "Angle between the keys"), (widget.beta_slider, "β of the delta rule")):
        assert slider.get_attribute("type") == "range"
        slider_id = slider.get_attribute("id")
        assert widget.element.locator(f"label[for='{slider_id}']").inner_text() == label


def test_the_widget_fits_a_phone_and_is_screenshotted(widget):
    overflow = widget.tab.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0
    box = widget.element.bounding_box()
    assert box["width"] <= 390
    path = ROOT / "artifacts" / "screenshots" / "memory-widget-390.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    widget.element.screenshot(path=str(path))
    assert path.stat().st_size > 10_000


def test_instant_navigation_starts_the_widget_once(browser, server):
    """With navigation.instant on, Material swaps in the page and emits on document$.

    Here the same is done by hand when the theme does not: the page's content
    is replaced by a fresh copy of the widget's markup and document$ (or, where
    the theme has none, a stand-in the script subscribed to) fires twice.
    """
    tab, errors = open_tab(browser, width=1280, height=800)
    tab.goto(server.url(WIDGET_PAGE))
    tab.locator(READY).wait_for()
    has_document_subject = tab.evaluate("() => !!(window.document$ && window.document$.next)")
    if not has_document_subject:
        pytest.skip("the theme exposes no document$ here; navigation.instant is not on")
    navigate_to_fresh_copy(tab, ".memory-widget")
    tab.locator(READY).wait_for()
    assert tab.locator(".memory-widget").count() == 1
    assert tab.locator(".memory-widget .mw").count() == 1, "initialising twice must not build two widgets"
    assert errors == []
    tab.context.close()
