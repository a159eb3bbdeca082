"""The private parts of markdown-exec the build uses (sitekit/markdown_exec_internals.py) still exist.

A new markdown-exec may move or rename them. These tests fail first, with
the name that is gone, before a build would fail in a less clear way. The
module was written for one version: the one requirements.txt pins.
"""

from __future__ import annotations

import importlib
import re

import pytest

from sitekit import markdown_exec_internals
from sitekit.pages import ROOT


def test_written_for_the_pinned_version():
    pinned = re.search(r"^markdown-exec==(\S+)", (ROOT / "requirements.txt").read_text(), flags=re.MULTILINE)
    assert pinned, "requirements.txt pins no markdown-exec"
    assert pinned.group(1) == markdown_exec_internals.WRITTEN_FOR, (
        "requirements.txt pins another markdown-exec: check sitekit/markdown_exec_internals.py against it"
    )
    assert markdown_exec_internals.version_problem() is None


@pytest.mark.parametrize(("module", "name"), markdown_exec_internals.PRIVATE_NAMES)
def test_every_private_name_resolves(module, name):
    assert hasattr(importlib.import_module(module), name), f"markdown-exec has no {module}.{name} any more"


def test_the_session_globals_are_markdown_execs_own():
    namespace = markdown_exec_internals.session_globals("test-session")
    namespace["x"] = 1
    assert markdown_exec_internals.session_globals("test-session") == {"x": 1}
    markdown_exec_internals.clear_sessions()
    assert markdown_exec_internals.session_globals("test-session") == {}


def test_the_hooks_run_in_the_declared_order(mkdocs_config):
    """Order comes from event_priority in the hooks, not from the order of mkdocs.yml's list."""
    events = mkdocs_config.plugins.events
    assert events["startup"][0].__module__ == "hooks/build.py"
    content = [handler.__module__ for handler in events["page_content"]]
    assert content[-1] == "hooks/build.py"
    # code_lines.py wraps the lines console.py marked as output
    assert content.index("hooks/console.py") < content.index("hooks/code_lines.py")
    assert events["post_page"][-1].__module__ == "hooks/build.py"
