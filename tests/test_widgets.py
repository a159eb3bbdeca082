"""Every widget of sitekit/widgets/ is declared, loaded, shown and tested (CONTRIBUTING.md, "Adding a widget").

A widget is found by being a module of sitekit/widgets/ (sitekit.widgets.widgets);
these tests say what else it needs, so a new widget cannot be half added.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from sitekit import pages
from sitekit.pages import DOCS, ROOT
from sitekit.widgets import widgets

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
    assert "javascripts/widgets.js" in scripts and widget.script in scripts, f"list {widget.script} in extra_javascript"
    assert scripts.index(widget.script) > scripts.index("javascripts/widgets.js"), "widgets.js must load first"
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
    assert 'class="{ELEMENT}"' in inspect.getsource(function)


@pytest.mark.parametrize("widget", WIDGETS, ids=lambda widget: widget.module.rsplit(".", 1)[-1])
def test_the_widget_is_on_a_page_and_tested(widget):
    shown_on = [source for source, shown in pages.widget_pages(pages.load_nav()).items() if widget in shown]
    assert shown_on, f"no page of the nav imports {widget.module}"
    others = {name: text for name, text in TESTS.items() if name != "test_widgets.py"}
    assert any(widget.module in text for text in others.values()), f"no test in tests/ imports {widget.module}"
    in_browser = [name for name, text in others.items() if widget.element in text and "def test_" in text and "browser" in text]
    assert in_browser, f"no browser test of tests/ drives .{widget.element} (tests/test_<widget>_browser.py)"
