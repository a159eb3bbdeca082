"""Unit tests of sitekit/widgets/memory_widget.py: the HTML that embeds the memory widget of chapter 9.

The widget's behaviour in a browser is tested by tests/test_memory_widget_browser.py.
"""

from __future__ import annotations

import html
import json
import re

import pytest

from sitekit.widgets.memory_widget import ANGLE_STEP, ANGLES, BETAS, SCRIPT, memory_widget_html


def attributes(markup: str) -> dict[str, object]:
    """The data- attributes of the widget element, decoded from JSON."""
    found = dict(re.findall(r'data-([\w-]+)="([^"]*)"', markup.split(">", 1)[0]))
    return {name: json.loads(html.unescape(value)) for name, value in found.items()}


def test_the_element_carries_the_values_and_the_sliders_settings():
    markup = memory_widget_html([2, 0, 1], [0, 3, -1], angle=45, beta=0.3)
    assert markup.startswith('<div class="memory-widget" ')
    assert attributes(markup) == {
        "widget-script": SCRIPT,
        "old-value": [2.0, 0.0, 1.0],
        "new-value": [0.0, 3.0, -1.0],
        "angle": 45,
        "angle-step": ANGLE_STEP,
        "beta": 0.3,
        "betas": list(BETAS),
    }
    assert "needs JavaScript" in markup  # the fallback text


def test_the_slider_steps():
    assert ANGLES[0] == 0 and ANGLES[-1] == 180 and 90 in ANGLES
    assert BETAS == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"old_value": [1, 2], "new_value": [1, 2, 3]}, r"same shape \(d_v,\), got \(2,\) and \(3,\)"),
        ({"old_value": [[1, 2]], "new_value": [1, 2]}, r"old_value must have shape \(d_v,\)"),
        ({"old_value": [], "new_value": []}, r"old_value must have shape \(d_v,\) with 1 <= d_v <= 6"),
        ({"old_value": [1, float("nan")], "new_value": [1, 2]}, "old_value must be finite"),
        ({"old_value": [1, 2], "new_value": [float("inf"), 2]}, "new_value must be finite"),
        ({"old_value": ["a", "b"], "new_value": [1, 2]}, "old_value must be a vector of real numbers"),
        ({"old_value": None, "new_value": [1, 2]}, "old_value must be a vector of real numbers"),
        ({"old_value": [1, 2], "new_value": [1j, 2]}, "new_value must be a vector of real numbers"),
        ({"old_value": [[1], [2, 3]], "new_value": [1, 2]}, "old_value must be a vector of numbers"),
        ({"old_value": [1, 2], "new_value": [1, 2], "angle": 33}, "angle must be a whole number .* got 33"),
        ({"old_value": [1, 2], "new_value": [1, 2], "angle": 30.0}, "angle must be a whole number .* got 30.0"),
        ({"old_value": [1, 2], "new_value": [1, 2], "angle": True}, "angle must be a whole number .* got True"),
        ({"old_value": [1, 2], "new_value": [1, 2], "beta": 0.25}, r"beta must be one of 0, 0.1, ..., 1 .* got 0.25"),
        ({"old_value": [1, 2], "new_value": [1, 2], "beta": "1"}, "beta must be one of .* got '1'"),
    ],
)
def test_bad_input_is_refused_with_a_message_naming_it(kwargs, message):
    with pytest.raises(ValueError, match=message):
        memory_widget_html(**kwargs)
