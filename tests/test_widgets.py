"""Every widget of sitekit/widgets/ is declared, loaded, shown and tested (CONTRIBUTING.md, "Adding a widget").

A widget is found by being a module of sitekit/widgets/ (sitekit.widgets.widgets);
these tests say what else it needs, so a new widget cannot be half added.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sitekit import nav, postbuild
from sitekit.pages import DOCS, ROOT
from sitekit.widgets import data_attribute, widgets

WIDGETS = widgets()
TESTS = {path.name: path.read_text(encoding="utf-8") for path in (ROOT / "tests").glob("test_*.py")}


def _paths(entries) -> list[str]:
    return [entry if isinstance(entry, str) else entry["path"] for entry in entries]


def test_there_are_widgets():
    assert {widget.module for widget in WIDGETS} >= {"sitekit.widgets.playground", "sitekit.widgets.memory_widget"}


@pytest.mark.parametrize("widget", WIDGETS, ids=lambda widget: widget.module.rsplit(".", 1)[-1])
def test_the_widget_is_declared_and_loaded(widget, mkdocs_config):
    assert re.fullmatch(r"[a-z][a-z-]*", widget.element) and widget.name.strip(), widget
    script = DOCS / widget.script
    assert script.is_file(), f"{widget.module}: no {script}"
    scripts = _paths(mkdocs_config["extra_javascript"])
    assert "javascripts/widgets.js" in scripts, "widgets.js loads every widget's script: list it in extra_javascript"
    # widgets.js loads it on the pages that show the widget; listed, every page would carry it
    assert widget.script not in scripts, f"do not list {widget.script} in extra_javascript: widgets.js loads it"
    assert "stylesheets/widgets.css" in _paths(mkdocs_config["extra_css"])
    started = re.search(r'\.start\(\s*"\.([\w-]+)",\s*"([^"]+)"', script.read_text(encoding="utf-8"))
    assert started and started.groups() == (widget.element, widget.name), (
        f'{widget.script} must start the widget with softDictionaryWidgets.start(".{widget.element}", "{widget.name}", ...)'
    )


@pytest.mark.parametrize("widget", WIDGETS, ids=lambda widget: widget.module.rsplit(".", 1)[-1])
def test_the_widget_prints_its_element(widget):
    module = importlib.import_module(widget.module)
    name = widget.module.rsplit(".", 1)[-1]
    function = getattr(module, f"{name}_html", None)
    assert callable(function), f"{widget.module} has no {name}_html function"
    # tests/test_bad_input.py starts from the docstring's example
    assert ">>> " in (inspect.getdoc(function) or ""), f"{name}_html has no docstring example"
    source = inspect.getsource(function)
    assert 'class="{ELEMENT}"' in source
    # widgets.js loads the widget's script from this attribute
    assert 'data_attribute("widget-script", SCRIPT)' in source, f"{name}_html must print data-widget-script"


@pytest.mark.parametrize("widget", WIDGETS, ids=lambda widget: widget.module.rsplit(".", 1)[-1])
def test_the_widget_is_on_a_page_and_tested(widget):
    shown_on = [source for source, shown in postbuild.widget_pages(nav.load_nav()).items() if widget in shown]
    assert shown_on, f"no page of the nav imports {widget.module}"
    others = {name: text for name, text in TESTS.items() if name != "test_widgets.py"}
    assert any(widget.module in text for text in others.values()), f"no test in tests/ imports {widget.module}"
    in_browser = [name for name, text in others.items() if widget.element in text and "def test_" in text and "browser" in text]
    assert in_browser, f"no browser test of tests/ drives .{widget.element} (tests/test_<widget>_browser.py)"


# --- data_attribute: the name is the one part of the attribute not escaped -----------


@given(st.text(max_size=12))
@settings(max_examples=300, derandomize=True, deadline=None)
def test_a_data_attributes_name_is_an_identifier_or_refused(name):
    """Issue 34: a name holding a quote or a space ended the attribute and started another."""
    from html.parser import HTMLParser

    try:
        attribute = data_attribute(name, {"x": [1, 2]})
    except ValueError as error:
        assert "name" in str(error) and not re.fullmatch(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*", name)
        return
    seen = []
    parser = HTMLParser()
    parser.handle_starttag = lambda tag, attrs: seen.extend(attrs)
    parser.feed(f"<div {attribute}>")
    assert seen == [(f"data-{name}", '{"x": [1, 2]}')]


@pytest.mark.parametrize("name", ["", " ", 'x" onload="alert(1)', "x y", "X", "1x", "x-", "x--y"])
def test_a_data_attribute_with_a_bad_name_is_refused(name):
    with pytest.raises(ValueError, match="name must be lower-case letters"):
        data_attribute(name, 1)


@pytest.mark.parametrize(("data", "error"), [(float("inf"), ValueError), ({"x": {1, 2}}, TypeError), (object, TypeError)])
def test_data_that_is_not_json_is_refused_by_name(data, error):
    """Issue 44: json's own errors came through, naming neither the argument nor what it takes."""
    with pytest.raises(error, match=r"^data must be JSON data \(dicts, lists, strings, finite numbers, True, False, "
                                    r"None\), got "):
        data_attribute("x", data)
