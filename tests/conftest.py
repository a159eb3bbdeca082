"""Fixtures shared by the tests of the built site."""

from __future__ import annotations

import shutil

import pytest

from sitebuild import ROOT, BuiltSite, built_page, nav_sources, run_mkdocs_build


@pytest.fixture(scope="session")
def mkdocs_config():
    from mkdocs.config import load_config

    return load_config(str(ROOT / "mkdocs.yml"))


# Where the test session builds the site: .ci/run validates this build and
# reuses it as the first of the determinism check's two builds.
SITE = ROOT / "artifacts" / "site"


@pytest.fixture(scope="session")
def built_site(mkdocs_config) -> BuiltSite:
    """The whole site, built once per test session with ``mkdocs build --strict``, into artifacts/site."""
    shutil.rmtree(SITE, ignore_errors=True)
    site = SITE
    result = run_mkdocs_build(ROOT, site)
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    pages = {source: built_page(source) for source in nav_sources(mkdocs_config["nav"])}
    return BuiltSite(site, log, pages)
