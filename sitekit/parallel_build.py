"""Two cores for one build: a second process runs pages' code from the end while the build runs it from the start.

``mkdocs build`` renders the pages one after the other, in one process, and
most of a build is the pages' code. hooks/parallel_build.py starts this
module as a second process (the *helper*) as soon as the build has its
config. The helper loads the same config and renders the pages whose front
matter says ``slow_code: true`` first (chapter 14: the build reaches it after
nine other pages), then the others in the reverse of the build's order,
recording what every executed block printed (``sitekit.block_outputs``); the
build renders them in its own order. They share a folder:

- before a page's code runs, its runner *claims* it by creating
  ``<n>.claim`` (``O_EXCL``: only one of the two can);
- the helper writes what the page's blocks printed to ``<n>.done`` when it
  is finished (atomically: written aside, then renamed), or nothing if a
  block failed or anything was logged at WARNING level while the page was
  rendered;
- the build, reaching a page: if the helper finished it, the build renders
  the page with those outputs (a replay, which checks that every block is the
  one recorded); if the helper holds the claim, it waits for it; otherwise it
  claims the page and runs its code itself. A page the helper could not
  finish, or whose replay did not match, is rendered by the build as if
  there were no helper, with its errors reported there;
- the helper stops at the first page, from the end, that the build has
  claimed.

The Markdown of every page is still rendered by the build, and only the
build writes the site. Only pages with executed fences are shared. The
helper's outputs are those of the same code, hooks and versions in a process
of the same environment, so the site is the same byte for byte: .ci/run's
determinism check compares the test session's build, made in one process
(``SITEKIT_ONE_PROCESS=1``, which turns the helper off), with one made with a
helper.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

HELPER = "SITEKIT_BUILD_HELPER"      # set in the helper's environment: its own build starts no helper
ONE_PROCESS = "SITEKIT_ONE_PROCESS"  # "1": the build runs every page's code itself


class Exchange:
    """The folder the build and its helper share: one claim and one result per page."""

    def __init__(self, folder: Path, order: list[str]):
        self.folder = folder
        self.number = {uri: n for n, uri in enumerate(order)}

    def _path(self, uri: str, kind: str) -> Path:
        return self.folder / f"{self.number[uri]}.{kind}"

    def claim(self, uri: str) -> bool:
        """Take the page: True for the one of the two processes that asks first."""
        try:
            os.close(os.open(self._path(uri, "claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def publish(self, uri: str, blocks: list[tuple[str, str]] | None) -> None:
        """The page's ``(code, output)`` blocks, or None when the helper could not render it."""
        aside = self._path(uri, "writing")
        aside.write_bytes(pickle.dumps(blocks))
        os.replace(aside, self._path(uri, "done"))

    def result(self, uri: str, helper: subprocess.Popen | None, timeout: float = 900.0):
        """The helper's blocks for a page it claimed, waiting while it runs them; None if it could not."""
        done = self._path(uri, "done")
        end = time.monotonic() + timeout
        while not done.exists():
            if helper is None or helper.poll() is not None or time.monotonic() > end:
                break  # it died or hangs: the build runs the page itself
            time.sleep(0.005)
        if not done.exists():
            return None
        return pickle.loads(done.read_bytes())  # noqa: S301 (written by the helper this build started)


def shared_pages(files, executed) -> list[str]:
    """The build's order of the documentation pages whose code runs (``executed(uri)``)."""
    return [file.src_uri for file in files.documentation_pages() if executed(file.src_uri)]


def start_helper(config_file: str, folder: Path) -> subprocess.Popen:
    """The helper process, its output discarded (the build reports every page it could not take)."""
    env = {**os.environ, HELPER: "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "sitekit.parallel_build", config_file, str(folder)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd=Path(config_file).parent,
    )


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record):  # noqa: ARG002
        self.count += 1


def _help(config_file: str, folder: Path) -> None:
    """The helper: render the slow pages, then pages from the last, recording their blocks, until the build has claimed one.

    It prepares the pages as ``mkdocs build`` does and renders each with
    MkDocs's own ``_populate_page`` (a private name: requirements.txt pins
    MkDocs, and tests/test_parallel_build.py fails if the helper stops
    taking pages; the build itself would only be slower).
    """
    from mkdocs.commands.build import _populate_page
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files, set_exclusions
    from mkdocs.structure.nav import get_navigation
    from mkdocs.structure.pages import Page

    from sitekit import block_outputs, pages

    config = load_config(config_file=config_file)
    config.plugins.on_startup(command="build", dirty=False)
    config = config.plugins.on_config(config)
    config.plugins.on_pre_build(config=config)
    files = get_files(config)
    files.add_files_from_theme(config.theme.get_env(), config)
    files = config.plugins.on_files(files, config=config)
    set_exclusions(files, config)
    nav = get_navigation(files, config)
    config.plugins.on_nav(nav, config=config, files=files)
    docs = Path(config["docs_dir"])
    order = shared_pages(files, lambda uri: pages.executes(docs / uri))
    exchange = Exchange(folder, order)
    # Pages whose code is slow first (while the build renders the pages before them), then from the last.
    slow = [uri for uri in order if pages.slow_code((docs / uri).read_text(encoding="utf-8"))]
    taken = set()
    warned = _Warnings()
    logging.getLogger("mkdocs").addHandler(warned)
    by_uri = {file.src_uri: file for file in files.documentation_pages()}
    for uri in [*slow, *reversed(order)]:
        if uri in taken:
            continue
        taken.add(uri)
        if not exchange.claim(uri):
            if uri in slow:
                continue  # the build got there first
            return  # the build has come this far
        file = by_uri[uri]
        page = file.page if file.page is not None else Page(None, file, config)
        before = warned.count
        try:
            with block_outputs.recording() as record:
                _populate_page(page, config, files)
        except Exception:  # noqa: BLE001 (the build renders the page itself, and reports the error)
            record.failed = True
        ok = not record.failed and warned.count == before
        exchange.publish(uri, record.blocks if ok else None)


if __name__ == "__main__":
    _help(sys.argv[1], Path(sys.argv[2]))
