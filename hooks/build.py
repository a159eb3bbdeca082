"""Build set-up shared by every page.

- Put the repository root on ``sys.path`` (for markdown-exec blocks) and on
  ``PYTHONPATH`` (for the notebook kernel, a separate process started where
  mkdocs was started), so pages can ``import snippets``.
- Pin the build date to the last commit, so two builds of one commit are
  byte-identical (mkdocs stamps the sitemap with it).
- A warning raised by a page's code is an error: the block fails and the
  strict build with it (pytest does the same with ``filterwarnings = error``).
- Start every build with empty markdown-exec sessions: ``mkdocs serve`` keeps
  the interpreter alive, and variables from a previous build would otherwise
  leak into the next one and hide a missing definition.
- Let links to ids that executed blocks print (the glossary's term anchors)
  validate: mkdocs collects anchors before markdown-exec's output is in the
  page, so the ids of the finished HTML are added to the page's anchors.
- Keep measured wall-clock timings (``<section class="measured" markdown>``) out
  of the search index: they change from build to build, and the index must
  not (.ci/check-determinism compares everything outside those blocks).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _last_commit_time() -> str | None:
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%ct"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out or None


def warnings_are_errors(run):
    """``run`` with every Python warning raised as an exception."""

    @functools.wraps(run)
    def run_strictly(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return run(*args, **kwargs)

    run_strictly.warnings_are_errors = True
    return run_strictly


def on_startup(command, dirty):  # noqa: ARG001 (mkdocs hook signature)
    # markdown-exec runs a block through this module-level name (pinned version).
    from markdown_exec._internal.formatters import python as exec_python

    if not getattr(exec_python.exec_python, "warnings_are_errors", False):
        exec_python.exec_python = warnings_are_errors(exec_python.exec_python)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    os.environ.setdefault("MPLBACKEND", "Agg")
    if "SOURCE_DATE_EPOCH" not in os.environ:
        stamp = _last_commit_time()
        if stamp:
            os.environ["SOURCE_DATE_EPOCH"] = stamp


def on_pre_build(config):  # noqa: ARG001
    # markdown-exec keeps one globals dict per session name in this module-level
    # mapping; it has no public reset, and requirements.txt pins the version.
    from markdown_exec._internal.formatters import python as exec_python

    exec_python._sessions_globals.clear()


_ID = re.compile(r'\bid="([^"]+)"')


def on_page_content(html, page, config, files):  # noqa: ARG001
    if page.present_anchor_ids is not None:
        page.present_anchor_ids.update(_ID.findall(html))
    # md_in_html drops a bare data-search-exclude attribute, so it is added here,
    # before Material's search plugin reads the page. (A <section>, not a <div>:
    # the search plugin tracks excluded elements by tag name, and the first
    # nested </div> would end the exclusion.)
    return html.replace('<section class="measured">', '<section class="measured" data-search-exclude>')
