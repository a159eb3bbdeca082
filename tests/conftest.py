"""Fixtures shared by the tests of the built site.

The site is built once per test session, with ``mkdocs build --strict``, into
artifacts/site. The build starts in the background as soon as pytest knows
that some test needs it (after collection), so that it runs on one core while
the pages' fences and the unit tests run on the other; the tests that need
the site run last, and the first of them waits for it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from sitebuild import ROOT, BuiltSite, built_page, nav_sources

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


def pytest_collection_modifyitems(items):
    global _build
    if _build is None and any(_needs_site(item) for item in items):
        _build = _start_build()
    # The tests of the built site run last, so that everything else runs while
    # the site is being built (a stable sort: the order is otherwise kept).
    items.sort(key=_needs_site)


def pytest_unconfigure(config):  # noqa: ARG001
    if _build is not None and _build.poll() is None:
        _build.kill()
        _build.wait()


@pytest.fixture(scope="session")
def mkdocs_config():
    from mkdocs.config import load_config

    return load_config(str(ROOT / "mkdocs.yml"))


@pytest.fixture(scope="session")
def built_site(mkdocs_config) -> BuiltSite:
    """The whole site, built once per test session into artifacts/site."""
    global _build
    if _build is None:  # a test that asks for the site indirectly
        _build = _start_build()
    _build.wait(timeout=600)
    log = LOG.read_text()
    assert _build.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    pages = {source: built_page(source) for source in nav_sources(mkdocs_config["nav"])}
    return BuiltSite(SITE, log, pages)
