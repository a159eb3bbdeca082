"""The finished site checks its own links: a broken one fails the strict build.

MkDocs validates the links it converts from Markdown, not those in raw or
printed HTML, those the post-build step writes, nor ``#anchors`` into ids a
block printed. After any engine's build, every internal ``href``/``src`` of
every page must name a file of the site (a relative link above the site's
root names none: Zensical writes such links) and, for an ``#anchor``, an
``id`` of that page; every ``<img>`` must carry a text alternative. lychee
was measured for the job and not taken (CONTRIBUTING.md, "Three engines").
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

_LINK = re.compile(r'<(a|link|img|script|source|iframe)\b[^>]*?\s(?:href|src)="([^"]*)"', re.IGNORECASE)
_ID = re.compile(r'\s(?:id|name)="([^"]+)"')
_IMG = re.compile(r"<img\b[^>]*>", re.IGNORECASE)
_ALT = re.compile(r'\salt="([^"]*)"', re.IGNORECASE)
_SKIP_SCHEMES = ("mailto:", "data:", "javascript:", "tel:", "blob:")


def _target(site: Path, page: str, url: str, site_url: str) -> tuple[str, str] | None:
    """The site file (relative path) and the fragment an internal URL names, or None if external.

    Relative URLs are read from the page's folder; absolute ones (the 404
    page's) from the site's root, which is at ``site_url``'s path.
    """
    root = urlsplit(site_url).path or "/"
    if site_url and url.startswith(site_url):
        url = root + url[len(site_url) :]
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or url.startswith(_SKIP_SCHEMES):
        return None
    path = unquote(parts.path)
    if not path:
        return page, parts.fragment  # "#anchor" on the same page
    if path.startswith("/"):
        if not (path + "/").startswith(root):
            return "(outside the site) " + path, parts.fragment
        path = "/" + path[len(root) :]
    elif posixpath.normpath(posixpath.join(posixpath.dirname(page), path)).startswith("../"):
        return "(above the site's root) " + path, parts.fragment
    else:
        path = posixpath.join("/" + posixpath.dirname(page), path)
    joined = posixpath.normpath(path).lstrip("/")
    if joined in ("", "."):
        joined = "index.html"
    elif (site / joined).is_dir() or path.endswith("/"):
        joined = posixpath.join(joined, "index.html")
    return joined, parts.fragment


# page -> (a digest of its HTML, what _read_page found): a serving process
# reads again only the pages that changed.
_read: dict[str, tuple[bytes, tuple]] = {}


def _alternative(image: str) -> str:
    alt = _ALT.search(image)
    return alt.group(1).strip() if alt else ""


def _read_page(page: str, text: str) -> tuple[list[tuple[str, str]], set[str], list[str]]:
    """The page's links ``(tag, url)``, its ids, and its images without a text alternative."""
    digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
    kept = _read.get(page)
    if kept is None or kept[0] != digest:
        unlabelled = [image for image in _IMG.findall(text) if not _alternative(image)]
        kept = digest, (_LINK.findall(text), set(_ID.findall(text)), unlabelled)
        _read[page] = kept
    return kept[1]


def check_site(site: Path, site_url: str) -> list[str]:
    """Every broken internal link and image without a text alternative of the site at ``site``."""
    pages = {path.relative_to(site).as_posix(): path.read_text(encoding="utf-8") for path in site.rglob("*.html")}
    read = {page: _read_page(page, text) for page, text in pages.items()}
    ids = {page: page_ids for page, (_, page_ids, _) in read.items()}
    problems = []
    for page in sorted(pages):
        links, _, unlabelled = read[page]
        for tag, url in links:
            target = _target(site, page, url.replace("&amp;", "&"), site_url)
            if target is None:
                continue
            path, fragment = target
            if not (site / path).is_file():
                problems.append(f"{page}: <{tag}> links to {url!r}, and the site has no {path}")
            elif fragment and path in ids and unquote(fragment) not in ids[path]:
                problems.append(f"{page}: <{tag}> links to {url!r}, and {path} has no id {fragment!r}")
        for image in unlabelled:
            problems.append(f"{page}: {image} has no text alternative: write what it shows in its alt")
    return problems

