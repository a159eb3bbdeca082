"""Building the site from tests and scripts: one way to call mkdocs, the built site, a page's weight."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


def console_script(name: str) -> str:
    """The command ``name`` of this virtual environment (``mkdocs``, ``pytest``), as a reader types it.

    Never ``python -m mkdocs``: that puts the working folder on the import
    path, so it builds where the ``mkdocs`` command a reader types cannot
    (README.md's set-up must make the site's modules importable for it).
    """
    script = Path(sys.executable).parent / name
    if not script.is_file():
        raise FileNotFoundError(f"no {name} command beside {sys.executable}: install requirements.txt into this environment")
    return str(script)


def run_mkdocs_build(project: Path, site_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    """Run ``mkdocs build --strict`` (never with -q: it hides what --strict counts) in ``project``.

    A copy of the repository (tests/support/project.py) is first on the
    import path, so that its own sitekit and snippets build it, not those the
    environment's editable install names.
    """
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(project)}
    return subprocess.run(
        [console_script("mkdocs"), "build", "--strict", "-d", str(site_dir), *extra],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def site_or_build(site: Path | None, scratch: Path) -> Path | None:
    """``site`` if given, else a fresh strict build into ``scratch``/site; None (the log printed) if it fails.

    For the scripts of .ci/ that measure a built site (``--site DIR`` or build one).
    """
    if site is not None:
        return site
    site = Path(scratch) / "site"
    print("building the site (mkdocs build --strict)", file=sys.stderr)
    build = run_mkdocs_build(Path(__file__).resolve().parents[2], site)
    if build.returncode != 0:
        print(build.stdout + build.stderr, file=sys.stderr)
        return None
    return site


@dataclass
class BuiltSite:
    path: Path
    log: str
    pages: dict[str, str]  # nav source file -> built HTML file, relative to path (sitekit.nav.built_page)

    def html(self, source: str) -> str:
        return (self.path / self.pages[source]).read_text(encoding="utf-8")


PAGE_BUDGET_BYTES = 250_000  # CONTRIBUTING.md's budget: every page <= 250 KB gzip on a first visit
_ASSET = re.compile(r'<(?:script|link|img)\b[^>]*?(?:src|href)="([^"#?]+)')
# Material's search worker, started on every page load though no tag names it.
# The search index is not part of a first visit: it is fetched only when the
# reader opens search (overrides/main.html; tests/test_browser.py checks that
# no page load asks for it).
_SEARCH_WORKER = "assets/javascripts/workers/search.*.min.js"


def page_weight(site: Path, page: str) -> tuple[int, int]:
    """Bytes a first visit to ``page`` transfers, as ``(raw, gzip)``.

    Counts the HTML, the local CSS, JS and images it loads, and the search
    worker (not the search index, fetched when the reader opens search).
    ``gzip`` is what a compressing server such as GitHub Pages sends; the
    budget applies to it.
    """
    path = site / page
    html = path.read_text(encoding="utf-8")
    files = {path}
    for url in _ASSET.findall(html):
        if url.startswith("data:"):  # inlined (an image of a notebook's output): already in the HTML
            continue
        asset = (path.parent / url).resolve()
        if asset.is_file() and asset.suffix in {".css", ".js", ".png", ".svg", ".ico", ".webp"}:
            files.add(asset)
    files.update(site.glob(_SEARCH_WORKER))
    raw = sum(file.stat().st_size for file in files)
    compressed = sum(len(gzip.compress(file.read_bytes(), mtime=0)) for file in files)
    return raw, compressed
