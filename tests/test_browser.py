"""The built site in a real browser: Debian's Chromium, driven by playwright.

The site (the ``built_site`` fixture: one strict build per session) is served
from 127.0.0.1 under the path of ``site_url``, as GitHub Pages serves it, and
every page of the nav plus the 404 page is opened once at 1280 px and once at
390 px (``support.visits``: the ``browser_run`` fixture). What the browser saw
is recorded; the tests below check it:

- no console error and no uncaught exception;
- no request to any host but 127.0.0.1 (fonts, CDNs, analytics);
- every internal link leads to a file that exists, and every ``#anchor`` to an
  id in the target page;
- math is MathML, and no raw TeX (``\\(``, ``$$`` ...) is visible as text;
- every image, ``<svg role="img">`` and ``<figure>`` has a text alternative;
- every page has a title and nothing is wider than a 390 px phone, and no
  display formula is wider than the text column (at 390 px too);
- the copy button of a console session copies its statements only: no
  prompts, no output;
- on every page that offers one (each chapter, the recap notebook), the
  notebook download link, clicked, downloads a notebook (nbformat 4);
- no page load fetches the search index; search opened by a tap or by the
  "/" key finds results;
- an unknown address gets the 404 page, which links home;
- every widget starts after Material's instant navigation.

One test needs no browser: every page's social preview tags (Open Graph,
Twitter) point at the site's own 1200 x 630 card image.

With ``SCREENSHOTS=1`` in the environment, full-page screenshots of every
page at both widths (and one screen at 1280 px) are written to
``artifacts/screenshots/``; the README's screenshot is copied from there.
They cost about ten seconds, so a plain ``pytest`` takes none.

Needs the ``playwright`` package (requirements.txt) and Debian's ``chromium``
(``apt-get install chromium``; ``.ci/run`` installs it). Never run
``playwright install``. Without either, these tests are skipped with a reason
(shown by ``-ra``); with ``REQUIRE_BROWSER=1`` (set by ``.ci/run``) they fail
instead, so CI never passes without them (``support.browser``).
"""

from __future__ import annotations

import functools
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from sitekit import nav
from support.page_measures import code_summary
from support.page_queries import outside_fences
from support.server import NOT_FOUND
from support.visits import SCREENSHOTS, SEARCH_QUERY, TAKE_SCREENSHOTS, VIEWPORTS, shot_name

# ---------------------------------------------------------------- the checks


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value)


@functools.cache
def _ids(path: Path) -> frozenset[str]:
    parser = _Ids()
    parser.feed(path.read_text(encoding="utf-8"))
    return frozenset(parser.ids)


def _tex_written(source: str) -> int:
    """How many formulas the page's source writes (TeX outside code)."""
    text = re.sub(r"`[^`\n]*`", "", outside_fences(nav.read(source)))
    return text.count("\\(") + text.count("$$") // 2 + text.count("\\[")


def test_no_console_errors(visits):
    problems = [f"{v.url}: {error}" for v in visits.values() for error in v.errors]
    assert not problems, "\n".join(problems)


def test_no_request_to_another_host(visits):
    problems = [
        f"{v.url} requested {url}"
        for v in visits.values()
        for url in v.requests
        if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).hostname != "127.0.0.1"
    ]
    assert not problems, "\n".join(problems)
    assert all(v.requests for v in visits.values())


def test_every_internal_link_and_anchor_resolves(visits, server):
    problems = []
    checked = 0
    for visit in visits.values():
        for width, seen in visit.seen.items():
            if width == "download":
                continue
            for href in set(seen["links"]):
                parts = urlsplit(href)
                if parts.scheme not in ("http", "https") or parts.hostname != "127.0.0.1":
                    continue  # links to other sites are not fetched: the tests run offline
                checked += 1
                target = server.file(href)
                if target is None:
                    problems.append(f"{visit.url} ({width} px) links to {href}: no such file")
                elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in _ids(target):
                    problems.append(f"{visit.url} ({width} px) links to {href}: no id {parts.fragment!r}")
    assert not problems, "\n".join(sorted(set(problems)))
    assert checked > 50


def test_math_is_rendered_and_no_raw_tex_is_visible(visits):
    problems = []
    for visit in visits.values():
        written = _tex_written(visit.source) if visit.source else 0
        for width in VIEWPORTS:
            seen = visit.seen[width]
            if seen["math"] < written:
                problems.append(f"{visit.url}: {written} formulas written, {seen['math']} <math> elements")
            if seen["emptyMath"]:
                problems.append(f"{visit.url} ({width} px): {seen['emptyMath']} <math> elements drawn with no width")
            for raw in ("\\(", "\\)", "\\[", "\\]", "$$", "\\frac", "\\top", "\\sum"):
                if raw in seen["text"]:
                    at = seen["text"].index(raw)
                    problems.append(f"{visit.url} ({width} px) shows raw TeX {raw!r}: …{seen['text'][at - 40 : at + 40]!r}…")
    assert not problems, "\n".join(problems)
    assert sum(v.seen["1280"]["math"] for v in visits.values()) > 10


def test_every_image_and_figure_has_a_text_alternative(visits):
    problems = [
        f"{v.url}: {element}" for v in visits.values() for element in v.seen["1280"]["unlabelled"]
    ]
    assert not problems, "no text alternative:\n" + "\n".join(problems)


def test_pages_have_a_title_and_fit_a_phone(visits):
    problems = []
    for visit in visits.values():
        if not visit.seen["1280"]["title"].strip():
            problems.append(f"{visit.url}: no <title>")
        if visit.seen["390"]["overflow"] > 0:
            problems.append(f"{visit.url}: {visit.seen['390']['overflow']} px wider than a 390 px phone")
    assert not problems, "\n".join(problems)


def test_display_formulas_fit_the_column(visits):
    problems = [
        f"{v.url} ({width} px): formula {wide}"
        for v in visits.values()
        for width in VIEWPORTS
        for wide in v.seen[width].get("wideMath", [])
    ]
    assert not problems, "\n".join(problems)


# At 390 px: at most this share of a page's code lines cut (reaching past the
# code box, to be scrolled to), the Snippets page, which shows the library
# whole, aside; and none cut or wrapped in the code a chapter asks its reader
# to remember or write (a .remember element around it).
CUT_SHARE = 0.10
SHOWS_THE_LIBRARY = ("snippets.md", "snippets-part-iii.md", "snippets-part-iv.md")
# Pages that teach (every page but the library's and the training run, which
# is shown as it was stored): at most this share of their code lines wrap at
# 390 px (read in pieces), none runs under the copy button at the top right
# of its block at either width, and none scrolls sideways at 1280 px.
WRAP_SHARE = 0.10
SHOWN_AS_STORED = ("notebooks/training-run.md",)
# The library pages wrap their code at every width (extra.css, .code-wraps): no line scrolls sideways at 1280 px.
WRAPS_AT_EVERY_WIDTH = SHOWS_THE_LIBRARY
# Library pages whose modules are written to fit a phone: at most WRAP_SHARE of their lines wrap at 390 px, as a chapter's.
FITS_A_PHONE = ("snippets-part-iv.md",)

def test_code_fits_a_phone(visits):
    problems = []
    for visit in visits.values():
        blocks = visit.seen["390"].get("code_lines")
        if blocks is None:
            problems.append(f"{visit.url}: code lines not measured")
            continue
        summary = code_summary(blocks)
        if visit.source not in SHOWS_THE_LIBRARY and summary["cut"] > CUT_SHARE * summary["lines"]:
            problems.append(f"{visit.url}: {summary['cut']} of {summary['lines']} code lines cut at 390 px")
        if visit.source in SHOWS_THE_LIBRARY and summary["cut"]:
            # On a phone code wraps and never scrolls, so a11y.js gives no block a tab stop: a cut line
            # (an indentation wider than the screen) makes a region keyboard readers cannot scroll (axe).
            problems.append(f"{visit.url}: {summary['cut']} library code lines cut at 390 px (indented too deep)")
        for kind in ("cut", "wrapped"):
            problems += [f"{visit.url}: a line to remember is {kind} at 390 px: {line!r}"
                         for line in summary[f"remember {kind}"]]
        empty = sum(1 for block in blocks if not block["lines"])
        if empty:
            problems.append(f"{visit.url}: {empty} empty code boxes")
        sideways = [line["text"] for block in visit.seen["1280"].get("code_lines", [])
                    for line in block["lines"] if line["cut"]]
        if visit.source in WRAPS_AT_EVERY_WIDTH:
            problems += [f"{visit.url}: scrolls sideways at 1280 px: {line!r}" for line in sideways]
        teaches = visit.source not in SHOWS_THE_LIBRARY + SHOWN_AS_STORED
        if (teaches or visit.source in FITS_A_PHONE) and summary["wrapped"] > WRAP_SHARE * summary["lines"]:
            problems.append(f"{visit.url}: {summary['wrapped']} of {summary['lines']} code lines wrap at 390 px")
        if not teaches:
            continue
        wide = code_summary(visit.seen["1280"].get("code_lines", []))
        under = [f"at {width} px: {line!r}" for width, seen in (("390", summary), ("1280", wide))
                 for line in seen["under"]]
        problems += [f"{visit.url}: under the copy button {line}" for line in under]
        problems += [f"{visit.url}: scrolls sideways at 1280 px: {line!r}" for line in sideways]
    remembered = sum(code_summary(v.seen["390"].get("code_lines", []))["remember lines"] for v in visits.values())
    assert remembered > 100, f"only {remembered} lines to remember were found (the .remember elements)"
    measured = sum(code_summary(v.seen["1280"].get("code_lines", []))["lines"] for v in visits.values())
    assert measured > 1000, f"only {measured} code lines were measured at 1280 px"
    assert not problems, "\n".join(problems)


FIGURE_TEXT_PX = 9  # the smallest text a figure may show on a 390 px phone


def test_figure_text_is_readable_on_a_phone(visits):
    """Every text of every figure is at least 9 px high when the page is 390 px wide."""
    small = [
        f"{v.url}: {found['px']:.1f} px {found['text']!r} in the figure {found['figure']!r}"
        for v in visits.values()
        for found in v.seen["390"].get("figure_text", [])
        if found["px"] < FIGURE_TEXT_PX
    ]
    measured = sum(len(v.seen["390"].get("figure_text", [])) for v in visits.values())
    assert measured > 100, "no figure text was measured"
    assert not small, f"figure text below {FIGURE_TEXT_PX} px at 390 px:\n" + "\n".join(small)


def test_copying_a_console_session_copies_the_statements_only(browser_run, server):
    """Material's copy button, clicked in Chromium: the clipboard holds code, no prompts or output."""
    if isinstance(browser_run.copy, BaseException):
        raise browser_run.copy
    shown, copied = browser_run.copy
    url = server.url("dictionaries/index.html")
    statements = [line[4:] for line in shown.splitlines() if line.startswith((">>> ", "... "))]
    outputs = [line for line in shown.splitlines() if line and not line.startswith((">>>", "..."))]
    assert statements and outputs, f"the first console session on {url} has no statements or no output"
    assert copied.rstrip("\n").splitlines() == statements, f"copied {copied!r}, shown {shown!r}"


def test_search_index_waits_for_the_reader_to_open_search(visits, browser_run):
    """No page load asks for the search index (about 90 KB gzip); a search opened by tap or by key finds results."""
    asked = [v.page for v in visits.values() if any(url.endswith("/search/search_index.json") for url in v.requests)]
    assert not asked, f"pages that fetched the search index as they loaded: {asked}"
    if isinstance(browser_run.search, BaseException):
        raise browser_run.search
    assert not browser_run.search["index_before_opening"], "the index was fetched before search was opened"
    for how in ("tap", "key"):
        assert browser_run.search[how] >= 1, f"opened by {how}, a search for {SEARCH_QUERY!r} found nothing"


def test_notebook_download_link_returns_the_notebook(visits):
    # every chapter and the recap notebook page offer themselves as a notebook
    notebooks = [v for v in visits.values() if v.seen["1280"]["downloads"]]
    assert len(notebooks) >= 13, [v.page for v in notebooks]
    for visit in notebooks:
        download = visit.seen.get("download")
        assert download, f"{visit.url} has no download link"
        assert download["failure"] is None, f"{download['href']}: {download['failure']}"
        assert download["filename"].endswith(".ipynb"), download
        notebook = json.loads(download["content"])
        assert notebook["nbformat"] == 4, download["href"]
        assert notebook["cells"] and notebook["metadata"]["kernelspec"]["language"] == "python"


def test_not_found_page_answers_unknown_addresses(visits, server):
    seen = visits[NOT_FOUND].seen["1280"]
    assert "404" in seen["title"] or "not found" in seen["title"].lower(), seen["title"]
    home = [href for href in seen["links"] if href.rstrip("/") == server.root.rstrip("/")]
    assert home, f"the 404 page does not link to the home page {server.root}"


@pytest.mark.skipif(not TAKE_SCREENSHOTS, reason="screenshots are taken with SCREENSHOTS=1")
def test_screenshots_were_written(visits):
    for visit in visits.values():
        for width in VIEWPORTS:
            shot = SCREENSHOTS / f"{shot_name(visit.page)}-{width}.png"
            assert shot.is_file() and shot.stat().st_size > 1000, shot


def test_social_preview_metadata_points_at_the_sites_own_card(built_site, mkdocs_config):
    """Open Graph and Twitter card tags on every page; the image is served by the site itself."""
    site_url = mkdocs_config["site_url"]
    assert site_url and site_url.startswith("https://"), site_url
    for source, page in built_site.pages.items():
        html = built_site.html(source)
        tags = dict(re.findall(r'<meta (?:property|name)="((?:og|twitter):[a-z:]+)" content="([^"]*)"', html))
        for key in ("og:title", "og:description", "og:url", "og:image", "og:image:alt", "twitter:card", "twitter:image"):
            assert tags.get(key, "").strip(), f"{source}: no {key}"
        assert tags["og:url"] == site_url + page.removesuffix("index.html"), (source, tags["og:url"])
        for key in ("og:image", "twitter:image"):
            assert tags[key].startswith(site_url), f"{source}: {key} {tags[key]} is not on this site"
        image = built_site.path / tags["og:image"][len(site_url) :]
        assert image.is_file(), f"{source}: {tags['og:image']} is not in the built site"
    png = image.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) < 300_000
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1200, 630), "link previews crop other sizes"


def test_widgets_start_after_instant_navigation(browser_run):
    """Material's instant navigation swaps pages without reloading scripts: every widget must still start.

    The reader arrives on the home page and follows a link to each widget's
    chapter in turn: every chapter is swapped in by Material's own navigation,
    never loaded as a new document, and its widget must be built
    (``data-ready="true"``) and answer its first input.
    """
    if isinstance(browser_run.navigation, BaseException):
        raise browser_run.navigation
    assert not browser_run.navigation, "\n".join(browser_run.navigation)
