"""Fixtures shared by the tests of the built site and the browser tests.

The site is built once per test session, with ``mkdocs build --strict``, into
artifacts/site, in the background, so that it runs on one core while the
pages' fences and the unit tests run on the other. It starts before collection
in a run of the whole suite (no paths, ``-k`` or ``-m`` given), otherwise as
soon as pytest knows that some test needs it (after collection). The tests that
need the site run last, and the first of them waits for it.

The browser's run (``browser_run``, ``support.visits``: every page at both
widths, the copy button, instant navigation) starts in a thread as soon as the
build is done, while the other tests go on: on two cores the suite would
otherwise wait for the build, then for the browser. What the tests share
besides fixtures (building, serving, the browser) is in tests/support/.

The tests that build or test a small project of their own (jobs,
``support.background``) start after collection too, one at a time in a
thread of their own, so their waits overlap the rest of the suite.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading

import pytest

from sitekit import nav, pages
from support import background
from support.browser import CHROMIUM_ARGS, require_chromium
from support.build import BuiltSite
from support.server import Server, shared_server, stop_shared_server
from support.visits import EARLY_RUN, BrowserRun, Visit, run_browser, start_early_run

ROOT = pages.ROOT

# Where the test session builds the site: .ci/run validates this build and
# reuses it as the first of the determinism check's two builds.
SITE = ROOT / "artifacts" / "site"
LOG = ROOT / "artifacts" / "build.log"
_build: subprocess.Popen | None = None


def _start_build() -> subprocess.Popen:
    """``mkdocs build --strict`` (never with -q: it hides what --strict counts), in the background."""
    shutil.rmtree(SITE, ignore_errors=True)
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("w") as log:  # a file, not a pipe: nothing blocks while no one reads
        return subprocess.Popen(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(SITE)],
            cwd=ROOT,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _needs_site(item) -> bool:
    return "built_site" in getattr(item, "fixturenames", ())


# Tests that measure peak memory with tracemalloc, which counts the allocations
# of every thread: they run first, and the browser's thread and the jobs' (below)
# start only once they are done, so that their allocations are never counted.
MEASURES_MEMORY = ("docs/at-scale.md", "tests/test_at_scale.py")
_memory_measured = threading.Event()
_stopping = threading.Event()


def _measures_memory(item) -> bool:
    return item.nodeid.startswith(MEASURES_MEMORY)


class _MemoryGate:
    """Sets ``_memory_measured`` when the last memory-measuring test has run (a plugin: it sees every item)."""

    def __init__(self, nodeids: set[str]):
        self.waiting = nodeids
        if not nodeids:
            _memory_measured.set()

    def pytest_runtest_logfinish(self, nodeid, location):  # noqa: ARG002
        self.waiting.discard(nodeid)
        if not self.waiting:
            _memory_measured.set()


def _whole_suite(config) -> bool:
    """Is this ``pytest`` as the README runs it: every test path, the default selection?"""
    return (
        config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and not config.option.keyword
        and config.option.markexpr in ("", "not notebooks")  # pytest.ini's own -m
        and not config.option.collectonly
    )


def pytest_collection(session):
    global _build
    if _build is None and _whole_suite(session.config):
        _build = _start_build()


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected
def pytest_collection_modifyitems(config, items):
    global _build
    if config.option.collectonly:  # nothing will run: start nothing
        return
    needed = any(_needs_site(item) for item in items)
    if _build is None and needed:
        _build = _start_build()
    config.pluginmanager.register(_MemoryGate({item.nodeid for item in items if _measures_memory(item)}))
    if needed and any("browser_run" in getattr(item, "fixturenames", ()) for item in items):
        start_early_run(_site_when_built_and_memory_measured, _config()["site_url"])
    # The tests of the built site run last, so that everything else runs while
    # the site is being built; the memory-measuring ones first (a stable sort:
    # the order is otherwise kept, so a page's fences stay in order).
    items.sort(key=lambda item: (_needs_site(item), not _measures_memory(item)))
    # The small projects' builds and test runs (support/background.py), in the order now fixed,
    # once the memory is measured: they allocate in this process too (copies, logs).
    background.start(items, after=_memory_measured)


def pytest_unconfigure(config):  # noqa: ARG001
    background.stop()
    # A session that ends before the memory-measuring tests ran (interrupted,
    # or stopped by -x) must not leave the browser's thread waiting for them.
    _stopping.set()
    _memory_measured.set()
    if _build is not None and _build.poll() is None:
        _build.kill()
        _build.wait()


@functools.cache
def _config():
    from mkdocs.config import load_config

    return load_config(str(ROOT / "mkdocs.yml"))


def _site_when_built() -> BuiltSite | None:
    """Wait for the build; the built site, or None if it failed."""
    _build.wait(timeout=600)
    if _build.returncode != 0:
        return None
    built = {source: nav.built_page(source) for source in nav.nav_sources(_config()["nav"])}
    return BuiltSite(SITE, LOG.read_text(), built)


def _site_when_built_and_memory_measured() -> BuiltSite | None:
    site = _site_when_built()
    _memory_measured.wait(timeout=600)
    return None if _stopping.is_set() else site


@pytest.fixture(scope="session")
def mkdocs_config():
    return _config()


@pytest.fixture(scope="session")
def built_site() -> BuiltSite:
    """The whole site, built once per test session into artifacts/site."""
    global _build
    if _build is None:  # a test that asks for the site indirectly
        _build = _start_build()
    site = _site_when_built()
    assert site is not None, f"mkdocs build --strict failed:\n{LOG.read_text()}"
    return site


@pytest.fixture(scope="session")
def server(built_site, mkdocs_config) -> Server:
    """The built site, served on 127.0.0.1 under the path of ``site_url``."""
    yield shared_server(built_site.path, mkdocs_config["site_url"])
    stop_shared_server()


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium and playwright, or a skip that says which is missing."""
    return require_chromium()


@pytest.fixture(scope="session")
def browser_run(chromium, server, built_site, mkdocs_config) -> BrowserRun:
    """Every page of the nav and the 404 page at both widths, then the interactive checks.

    In a run of the whole suite this started as soon as the build was done, in
    a thread, while the other tests went on (``pytest_collection_modifyitems``
    above); then this fixture waits for it. One browser serves it all (a
    launch costs about 1.5 s of CPU).
    """
    if EARLY_RUN:
        return EARLY_RUN[0].result()
    return run_browser(chromium, server, built_site, mkdocs_config["site_url"])


@pytest.fixture(scope="session")
def visits(browser_run) -> dict[str, Visit]:
    return browser_run.visits


@pytest.fixture(scope="session")
def browser(chromium):
    """One Chromium for the widgets' tests, driven through playwright's sync API.

    A launch costs about 1.5 s of CPU; the page visits of ``browser_run``
    run in their own, in a thread (asynchronous API).
    """
    from playwright.sync_api import sync_playwright

    executable = chromium
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
