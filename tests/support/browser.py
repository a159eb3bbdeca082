"""Debian's Chromium, driven by playwright: where it is, how it starts, and why it cannot.

Needs the ``playwright`` package (requirements.txt) and Debian's ``chromium``
(``apt-get install chromium``; ``.ci/run`` installs it). Never run
``playwright install``: it downloads another browser.
"""

from __future__ import annotations

import os
import shutil

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    """Debian's Chromium (or the one named by $CHROMIUM), never playwright's download."""
    candidates = [os.environ.get("CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"]
    return next((path for path in candidates if path and os.access(path, os.X_OK)), None)


def browser_problem() -> str | None:
    """Why the browser cannot run here, or None if it can."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -r requirements.txt)"
    if chromium_path() is None:
        return "Debian's chromium is not installed (apt-get install chromium)"
    return None


def require_chromium() -> str:
    """Chromium's path for a test; else skip the test, or fail it with ``REQUIRE_BROWSER=1`` (.ci/run sets it)."""
    import pytest

    problem = browser_problem()
    if problem is None:
        return chromium_path()
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but {problem}", pytrace=False)
    pytest.skip(f"browser tests skipped: {problem}")


# ------------------------------------------------- a widget's tests (sync API)


# What pages' scripts threw, as "URL: message", not yet reported (see watch_errors).
THROWN: list[str] = []


def watch_errors(tab) -> list[str]:
    """Record ``tab``'s console errors; a script that throws closes the tab at once.

    Closing it ends every wait on the tab there and then (a widget that threw
    would otherwise fail its tests only by their time-outs, 30 s each, with no
    word of what it threw). What it threw, with the page, is kept in
    :data:`THROWN` for tests/conftest.py to report as the test's failure.
    """
    errors: list[str] = []

    def thrown(error):
        errors.append(str(error))
        THROWN.append(f"{tab.url}: {error.name}: {error.message}")
        tab.close()

    tab.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    tab.on("pageerror", thrown)
    return errors


def open_tab(browser, width: int = 390, height: int = 844, has_touch: bool = False):
    """A new tab, in a browser context of its own, and the list its console errors are recorded in."""
    tab = browser.new_context(viewport={"width": width, "height": height}, has_touch=has_touch).new_page()
    return tab, watch_errors(tab)


def open_widget(browser, url: str, element: str):
    """A phone-sized tab on ``url`` with the widget of class ``element`` built: ``(tab, widget, errors)``."""
    tab, errors = open_tab(browser)
    tab.goto(url)
    widget = tab.locator(f'.{element}[data-ready="true"]')
    widget.wait_for()
    widget.scroll_into_view_if_needed()
    return tab, widget, errors


def navigate_to_fresh_copy(tab, selector: str) -> None:
    """What Material's instant navigation does to a widget: new markup, and document$ firing (twice here).

    The element matching ``selector`` is replaced by a fresh copy of its markup
    (without the ``data-ready`` mark its script set), then ``document$`` fires
    twice: the widget must start again, once.
    """
    tab.evaluate(
        """(selector) => {
          const old = document.querySelector(selector);
          const fresh = document.createElement('div');
          for (const name of old.getAttributeNames()) {
            if (name !== 'data-ready') fresh.setAttribute(name, old.getAttribute(name));
          }
          old.replaceWith(fresh);
          window.document$.next(document);
          window.document$.next(document);
        }""",
        selector,
    )


def set_slider(slider, value) -> None:
    """Set a range input as a script would, and let the page hear it."""
    slider.evaluate(
        "(input, value) => { input.value = value; input.dispatchEvent(new Event('input', {bubbles: true})); }",
        str(value),
    )
