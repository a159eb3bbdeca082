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
from pathlib import Path

import pytest

from sitekit import nav, pages
from support import background
from support.browser import CHROMIUM_ARGS, THROWN, require_chromium
from support.build import BuiltSite, console_script
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
            [console_script("mkdocs"), "build", "--strict", "-d", str(SITE)],
            cwd=ROOT,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _needs_site(item) -> bool:
    return "built_site" in getattr(item, "fixturenames", ())


def _needs_a_build(item) -> bool:
    """Does this test need a build: the site (its pages, its server, the browser) or a copy's (a job)?"""
    return bool(set(getattr(item, "fixturenames", ())) & {"built_site", *background.names()})


def _whole_suite(config) -> bool:
    """Is this ``pytest`` as the README runs it: every test path, the default selection?"""
    return (
        not config.getoption("--no-build")
        and config.args_source == pytest.Config.ArgsSource.TESTPATHS
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
    if config.getoption("--no-build"):
        left_out = [item for item in items if _needs_a_build(item)]
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not _needs_a_build(item)]
    if config.option.collectonly:  # nothing will run: start nothing
        return
    needed = any(_needs_site(item) for item in items)
    if _build is None and needed:
        _build = _start_build()
    if needed and any("browser_run" in getattr(item, "fixturenames", ()) for item in items):
        start_early_run(_site_when_built, _built_pages(), _config()["site_url"])
    # The tests of the built site run last, so that everything else runs while
    # the site is being built (a stable sort: the order is otherwise kept, so a
    # page's fences stay in order).
    items.sort(key=_needs_site)
    # The small projects' builds and test runs (support/background.py), in the order now fixed.
    background.start(items)


def pytest_unconfigure(config):  # noqa: ARG001
    background.stop()
    if _build is not None and _build.poll() is None:
        _build.kill()
        _build.wait()
    stop_shared_server()


@functools.cache
def _config():
    from mkdocs.config import load_config

    return load_config(str(ROOT / "mkdocs.yml"))


def _built_pages() -> dict[str, str]:
    """Each page of the nav, by its source file: the built HTML file."""
    return {source: nav.built_page(source) for source in nav.nav_sources(_config()["nav"])}


def _site_when_built() -> Path | None:
    """Wait for the build (only waits: a thread may call it); the built site's folder, or None if it failed."""
    _build.wait(timeout=600)
    return SITE if _build.returncode == 0 else None


@pytest.fixture(scope="session")
def mkdocs_config():
    return _config()


@pytest.fixture(scope="session")
def built_site() -> BuiltSite:
    """The whole site, built once per test session into artifacts/site."""
    global _build
    if _build is None:  # a test that asks for the site indirectly
        _build = _start_build()
    assert _site_when_built() is not None, f"mkdocs build --strict failed:\n{LOG.read_text()}"
    return BuiltSite(SITE, LOG.read_text(), _built_pages())


@pytest.fixture(scope="session")
def server(built_site, mkdocs_config) -> Server:
    """The built site, served on 127.0.0.1 under the path of ``site_url``."""
    return shared_server(built_site.path, mkdocs_config["site_url"])


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
    return run_browser(chromium, server, built_site.path, built_site.pages, mkdocs_config["site_url"])


@pytest.fixture(scope="session")
def visits(browser_run) -> dict[str, Visit]:
    return browser_run.visits


@pytest.fixture(autouse=True)
def _no_script_threw(request):
    """A test in Chromium fails, naming the page and what its script threw, when a page's script throws.

    support.browser.watch_errors closes the tab at the throw, so the test's
    waits end at once instead of at their time-outs.
    """
    yield
    if "browser" in request.fixturenames and THROWN:
        thrown = "\n".join(THROWN)
        THROWN.clear()
        pytest.fail(f"a page's script threw (its tab was closed there):\n{thrown}", pytrace=False)


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
