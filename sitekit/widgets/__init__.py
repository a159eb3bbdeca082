"""The site's interactive widgets: one module per widget, and nothing else lists them.

A widget is a module of this package that declares:

- ``ELEMENT``: the class of the element it prints (``"soft-lookup-playground"``);
- ``NAME``: what the widget is called where it fails (``"soft-lookup playground"``);
- ``SCRIPT``: its script under docs/ (``"javascripts/playground.js"``), which
  builds the widget in every element of that class
  (``softDictionaryWidgets.start(".ELEMENT", NAME, build)``) and marks it
  ``data-ready="true"``. It is not in mkdocs.yml's ``extra_javascript``:
  ``javascripts/widgets.js`` (which is) loads it on the pages that show the
  widget, named by the element's ``data-widget-script``, so that no page's
  first visit carries the scripts of widgets it does not show;

and a function ``<module>_html(...)`` that a page prints from a fence with
``html="true"``: an element of class ``ELEMENT`` whose ``data-`` attributes
(:func:`data_attribute`) carry ``data-widget-script`` (``SCRIPT``) and the
data as JSON, around a text for readers without JavaScript. Its styles go in
docs/stylesheets/widgets.css.

:func:`widgets` finds them all: the notebook writer (a fence that imports a
widget shows a link to its page instead), the browser tests (every widget
starts after Material's instant navigation, on every page that imports it)
and tests/test_widgets.py (every widget is declared, loaded and tested) ask it.
"""

from __future__ import annotations

import html
import importlib
import json
import pkgutil
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Widget:
    module: str  # "sitekit.widgets.playground"
    element: str  # the class of the element the page prints
    name: str
    script: str  # under docs/


def widgets() -> list[Widget]:
    """Every widget of this package, by module name."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.append(Widget(module.__name__, module.ELEMENT, module.NAME, module.SCRIPT))
    return found


_DATA_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


def data_attribute(name: str, data) -> str:
    """One ``data-`` attribute holding ``data`` as JSON, escaped for HTML.

    ``name`` is what follows ``data-``: lower-case letters, digits and
    hyphens, starting with a letter (anything else could end the attribute
    and start another).

    >>> data_attribute("keys", ["dog", "cat"])
    'data-keys="[&quot;dog&quot;, &quot;cat&quot;]"'
    >>> data_attribute('x" onload="alert(1)', 1)
    Traceback (most recent call last):
    ...
    ValueError: name must be lower-case letters, digits and hyphens, starting with a letter (data-NAME); got 'x" onload="alert(1)'
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__} {name!r:.60}")
    if not _DATA_NAME.fullmatch(name):
        raise ValueError(
            f"name must be lower-case letters, digits and hyphens, starting with a letter (data-NAME); got {name!r:.80}"
        )
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as error:   # a set or another object, NaN or an infinity
        raise type(error)(f"data must be JSON data (dicts, lists, strings, finite numbers, True, False, None), "
                          f"got {type(data).__name__} {data!r:.60}: {error}") from None
    return f'data-{name}="{html.escape(text, quote=True)}"'
