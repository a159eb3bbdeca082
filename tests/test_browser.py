"""The built site in a real browser: Debian's Chromium, driven by playwright.

The site (the ``built_site`` fixture: one strict build per session) is served
from 127.0.0.1 under the path of ``site_url``, as GitHub Pages serves it, and
every page of the nav plus the 404 page is opened once at 1280 px and once at
390 px. What the browser saw is recorded; the tests below check it:

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
- an unknown address gets the 404 page, which links home.

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
instead, so CI never passes without them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import gzip
import http.server
import json
import mimetypes
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from page_measures import CODE_LINES, FIGURE_TEXT, OPEN_ALL, SHOW_ALL, code_summary
from sitebuild import ROOT

SCREENSHOTS = ROOT / "artifacts" / "screenshots"
TAKE_SCREENSHOTS = os.environ.get("SCREENSHOTS") == "1"
VIEWPORTS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOT_FOUND = "404.html"


def _chromium_path() -> str | None:
    """Debian's Chromium (or the one named by $CHROMIUM), never playwright's download."""
    candidates = [os.environ.get("CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"]
    return next((path for path in candidates if path and os.access(path, os.X_OK)), None)


def _missing(reason: str) -> None:
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(f"browser tests skipped: {reason}")


# ---------------------------------------------------------------- serving


class SiteHandler(http.server.BaseHTTPRequestHandler):
    """Serve a built site the way GitHub Pages does, on 127.0.0.1.

    The site lives under ``prefix`` (the path of ``site_url``); a directory
    without its slash is redirected; an unknown address is answered with
    404.html and status 404; text is gzipped for clients that accept it, with
    GitHub Pages' ``Cache-Control: max-age=600``. Also used by .ci/lighthouse.
    """

    directory = "."
    prefix = "/"
    compress = True
    _TEXT = {".html", ".css", ".js", ".json", ".svg", ".xml", ".ipynb", ".txt", ".py", ".map"}

    def do_HEAD(self):
        self.do_GET(body=False)

    def do_GET(self, body=True):
        path = unquote(urlsplit(self.path).path)
        root = Path(self.directory).resolve()
        target = None
        if path.startswith(self.prefix):
            target = (root / path[len(self.prefix) :]).resolve()
            if not target.is_relative_to(root):
                target = None
        if target is not None and target.is_dir():
            if not path.endswith("/"):
                self.send_response(301)
                self.send_header("Location", path + "/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            target = target / "index.html"
        status = 200
        if target is None or not target.is_file():
            status, target = 404, root / NOT_FOUND
            if not target.is_file():
                self.send_error(404)
                return
        data = target.read_bytes()
        self.send_response(status)
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if target.suffix in self._TEXT:
            kind = f"{kind}; charset=utf-8"
            if self.compress and "gzip" in self.headers.get("Accept-Encoding", ""):
                data = gzip.compress(data, compresslevel=6, mtime=0)
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "max-age=600")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


@contextlib.contextmanager
def serve_site(directory: Path, prefix: str = "/"):
    """Serve ``directory`` on 127.0.0.1 (a free port) in a thread; yield the site's root URL."""
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    handler = type("Handler", (SiteHandler,), {"directory": str(directory), "prefix": prefix})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}{prefix}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@dataclass
class Server:
    root: str  # http://127.0.0.1:PORT/prefix/
    prefix: str
    directory: Path

    def url(self, page: str) -> str:
        """The URL of a built HTML file, as a reader's browser asks for it."""
        return self.root + re.sub(r"(^|/)index\.html$", r"\1", page)

    def file(self, url: str) -> Path | None:
        """The built file a URL of this server serves, or None if there is none."""
        path = unquote(urlsplit(url).path)
        if not path.startswith(self.prefix):
            return None
        target = self.directory / path[len(self.prefix) :]
        if target.is_dir():
            target = target / "index.html"
        return target if target.is_file() else None


# One server per session, shared by the fixture below and by the visits that
# tests/conftest.py starts early, in a thread (the URLs they record must be
# the server's that the tests then ask about).
_SERVER: list = []  # [Server, ExitStack] once started
_SERVER_LOCK = threading.Lock()


def shared_server(directory: Path, site_url: str) -> Server:
    """Serve the built site for this session (started on first use)."""
    with _SERVER_LOCK:
        if not _SERVER:
            prefix = urlsplit(site_url or "/").path or "/"
            stack = contextlib.ExitStack()
            root = stack.enter_context(serve_site(directory, prefix))
            _SERVER.extend([Server(root, urlsplit(root).path, directory), stack])
        return _SERVER[0]


@pytest.fixture(scope="session")
def server(built_site, mkdocs_config):
    yield shared_server(built_site.path, mkdocs_config["site_url"])
    with _SERVER_LOCK:
        if _SERVER:
            _SERVER.pop().close()
            _SERVER.clear()


# ---------------------------------------------------------------- visiting

# Run in the page: what a reader sees, gathered in one round trip.
_INSPECT = """() => {
  const visible = (el) => el.checkVisibility ? el.checkVisibility() : true;
  const describe = (el) => el.outerHTML.slice(0, 120);
  // Text a reader can see, outside code (code may legitimately contain "\\(").
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest("pre, code, script, style, noscript, template, annotation")) continue;
    if (node.textContent.trim() && visible(parent)) texts.push(node.textContent);
  }
  const label = (el) => (el.getAttribute("aria-label") || el.getAttribute("alt") || "").trim()
    || (el.getAttribute("aria-labelledby") || "").trim()
    || (el.querySelector(":scope > title") ? el.querySelector(":scope > title").textContent.trim() : "");
  const unlabelled = [];
  for (const img of document.querySelectorAll("img")) {
    if (!img.hasAttribute("alt")) unlabelled.push(describe(img));
  }
  for (const svg of document.querySelectorAll('svg[role="img"]')) {
    if (!label(svg)) unlabelled.push(describe(svg));
  }
  for (const figure of document.querySelectorAll("figure")) {
    const inner = [...figure.querySelectorAll('img, svg[role="img"], [aria-label]')];
    if (!label(figure) && !inner.some((el) => label(el))) unlabelled.push(describe(figure));
  }
  const maths = [...document.querySelectorAll("math")];
  // A display formula wider than the column it sits in (MathML lays out at its
  // natural width: scrollWidth is what it needs, the column what it has).
  const wideMath = maths
    .filter((m) => m.getAttribute("display") === "block" && visible(m))
    .map((m) => {
      const column = m.closest(".md-typeset") || document.body;
      const style = getComputedStyle(column);
      const room = column.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      const needed = Math.max(m.scrollWidth, m.getBoundingClientRect().width);
      return needed > room + 1 ? `${Math.round(needed)} px in ${Math.round(room)} px: ${m.textContent.slice(0, 60)}` : null;
    })
    .filter(Boolean);
  return {
    title: document.title,
    links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
    downloads: [...document.querySelectorAll("a[download]")].map((a) => a.href),
    text: texts.join("\\n"),
    math: maths.length,
    emptyMath: maths.filter((m) => visible(m) && m.getBoundingClientRect().width === 0).length,
    wideMath,
    unlabelled,
    overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  };
}"""


@dataclass
class Visit:
    page: str  # built HTML file, relative to the site
    source: str | None  # nav source file; None for the 404 page
    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seen: dict = field(default_factory=dict)  # width -> what _INSPECT returned


def _shot_name(page: str) -> str:
    stem = re.sub(r"(^|/)index\.html$", "", page).removesuffix(".html").strip("/")
    return stem.replace("/", "-") or "index"


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium and playwright, or a skip that says which is missing."""
    return find_chromium()


def find_chromium() -> str:
    """Debian's Chromium, where playwright can drive it; else a skip (a failure with REQUIRE_BROWSER=1)."""
    executable, missing = _browser()
    if missing:
        _missing(missing)
    return executable


def _browser() -> tuple[str | None, str | None]:
    """Chromium's path and, if the browser tests cannot run, why not."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return None, "the playwright package is not installed (pip install -r requirements.txt)"
    executable = _chromium_path()
    if executable is None:
        return None, "Debian's chromium is not installed (apt-get install chromium)"
    return executable, None


# Pages open in a few tabs at once: loading, rendering and PNG encoding of one
# tab overlap with the others' (on two cores, about 1.5 times as fast as one
# tab at a time; more tabs gain nothing).
TABS_AT_ONCE = 3


@dataclass
class BrowserRun:
    """What one Chromium session saw: every page at both widths, and the two interactive checks.

    A check that raised keeps its exception, for its test to raise.
    """

    visits: dict[str, Visit]
    copy: tuple[str, str] | BaseException  # a console session as shown, and as copied
    navigation: list[str] | BaseException  # problems of the widgets after instant navigation


@pytest.fixture(scope="session")
def browser_run(chromium, server, built_site, mkdocs_config) -> BrowserRun:
    """Open every page of the nav and the 404 page at both widths, then run the interactive checks.

    In a run of the whole suite this starts as soon as the build is done, in a
    thread, while the other tests go on (tests/conftest.py); then this fixture
    waits for it. One browser serves it all (a launch costs about 1.5 s of CPU).
    """
    if EARLY_RUN:
        return EARLY_RUN[0].result()
    return run_browser(chromium, server, built_site, mkdocs_config["site_url"])


@pytest.fixture(scope="session")
def visits(browser_run) -> dict[str, Visit]:
    return browser_run.visits


# The run started early, a concurrent.futures.Future (see start_early_run).
EARLY_RUN: list = []


def start_early_run(wait_for_site, site_url: str) -> None:
    """Start the browser's run in a thread, as soon as ``wait_for_site()`` returns the built site.

    The fixture above collects the result. Nothing starts where the browser
    is missing: the fixture then skips (or fails, with REQUIRE_BROWSER=1) as
    usual; nothing is visited when the build failed (``wait_for_site()``
    returns None), and the ``built_site`` fixture reports the failure.
    """
    executable, missing = _browser()
    if missing or EARLY_RUN:
        return
    from concurrent.futures import ThreadPoolExecutor

    def run_when_built():
        built_site = wait_for_site()
        if built_site is None:
            return None
        return run_browser(executable, shared_server(built_site.path, site_url), built_site, site_url)

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="browser")
    EARLY_RUN.append(pool.submit(run_when_built))
    pool.shutdown(wait=False)


def run_browser(executable: str, server: Server, built_site, site_url: str) -> BrowserRun:
    pages = {page: source for source, page in built_site.pages.items()}
    pages[NOT_FOUND] = None
    found = {page: Visit(page, source, server.url(page)) for page, source in pages.items()}
    # An address that does not exist: GitHub Pages answers it with 404.html.
    found[NOT_FOUND].url = server.root + "no/such/page/"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_run_all(executable, found, server, site_url))


async def _outcome(check):
    try:
        return await check
    except Exception as error:  # noqa: BLE001 (kept for the check's own test to raise)
        return error


async def _run_all(executable: str, visits: dict[str, Visit], server: Server, site_url: str) -> BrowserRun:
    from playwright.async_api import Error, async_playwright

    async with async_playwright() as playwright:
        try:
            browser = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        except Error as error:
            pytest.fail(f"{executable} did not start under playwright: {error}", pytrace=False)
        try:
            contexts = {
                width: await browser.new_context(viewport=viewport, accept_downloads=True)
                for width, viewport in VIEWPORTS.items()
            }
            queue = asyncio.Queue()
            for width in VIEWPORTS:
                for visit in visits.values():
                    queue.put_nowait((width, visit))
            await asyncio.gather(*(_visitor(contexts, queue) for _ in range(TABS_AT_ONCE)))
            for context in contexts.values():
                await context.close()
            copy, navigation = await asyncio.gather(
                _outcome(_copy_console_session(browser, server.url("dictionaries/index.html"))),
                _outcome(_navigate_to_widgets(browser, server, site_url)),
            )
        finally:
            await browser.close()
    return BrowserRun(visits, copy, navigation)


class _Tab:
    """A tab that loads one page after another, recording each into the visit it is given.

    Every visit is a new document, loaded afresh; only the tab is kept (opening
    one costs Chromium about 0.17 s of CPU, 36 times per run).
    """

    def __init__(self, context, width: str):
        self.context, self.width = context, width
        self.visit: Visit | None = None
        self.pending: set = set()
        self.owners: dict = {}  # request -> the visit that made it

    async def open(self) -> _Tab:
        self.tab = await self.context.new_page()
        self.tab.on("request", self._requested)
        self.tab.on("requestfinished", self._finished)
        self.tab.on("requestfailed", self._failed)
        self.tab.on("console", self._console)
        self.tab.on("pageerror", lambda error: self.visit.errors.append(f"{self.width} px exception: {error}"))
        return self

    def _requested(self, request):
        self.visit.requests.append(request.url)
        self.pending.add(request)
        self.owners[request] = self.visit

    def _finished(self, request):
        self.pending.discard(request)
        self.owners.pop(request, None)

    def _failed(self, request):
        self.pending.discard(request)
        owner = self.owners.pop(request, self.visit)
        aborted = "ERR_ABORTED" in (request.failure or "")
        # A download link's request ends as "aborted" when it turns into a
        # download; a request the page made as the tab left it (the favicon,
        # asked for after "load") is aborted by the next page's load, as when
        # a reader follows a link.
        if aborted and (request.url.endswith(".ipynb") or owner is not self.visit):
            return
        owner.errors.append(f"{self.width} px request failed: {request.url} ({request.failure})")

    def _console(self, message):
        # The 404 page is itself answered with status 404, which Chromium logs.
        visit = self.visit
        if message.type == "error" and not (visit.page == NOT_FOUND and message.location.get("url") == visit.url):
            visit.errors.append(f"{self.width} px console: {message.text} ({message.location.get('url')})")


async def _visitor(contexts: dict, queue: asyncio.Queue) -> None:
    """Take (width, visit) pairs from the queue until it is empty, one reused tab per width."""
    tabs: dict[str, _Tab] = {}
    while not queue.empty():
        width, visit = queue.get_nowait()
        if width not in tabs:
            tabs[width] = await _Tab(contexts[width], width).open()
        await _visit(tabs[width], visit)
    for tab in tabs.values():
        await tab.tab.close()


async def _visit(state: _Tab, visit: Visit) -> None:
    tab, width = state.tab, state.width
    state.visit = visit
    await tab.goto(visit.url, wait_until="load")
    visit.seen[width] = await tab.evaluate(_INSPECT)
    if TAKE_SCREENSHOTS:
        name = _shot_name(visit.page)
        if width == "1280":
            await tab.screenshot(path=SCREENSHOTS / f"{name}-{width}-screen.png", animations="disabled")
        await _full_page_screenshot(state.context, tab, SCREENSHOTS / f"{name}-{width}.png")
    if width == "1280" and visit.seen[width]["downloads"]:
        visit.seen["download"] = await _click_download(tab)
    if width == "390":
        # What a phone shows of the code and the figures (tests/page_measures.py):
        # everything drawn, every collapsed box open, as a reader may open it.
        await tab.add_style_tag(content=SHOW_ALL)
        await tab.evaluate(OPEN_ALL)
        visit.seen[width]["figure_text"] = await tab.evaluate(FIGURE_TEXT)
        visit.seen[width]["code_lines"] = await tab.evaluate(CODE_LINES)
    # Requests made after "load" (Material's search worker fetches its
    # index) are recorded too: wait until none is in flight. Cheaper than
    # "networkidle", which always waits 500 ms more.
    for _ in range(100):
        if not state.pending:
            break
        await asyncio.sleep(0.05)


async def _full_page_screenshot(context, tab, path: Path) -> None:
    """The whole page as a PNG, through Chromium's own call.

    Playwright's ``full_page=True`` takes about twice as long on these tall
    pages (3 MB PNGs); Chromium's ``optimizeForSpeed`` encoding is quicker.
    """
    # content-visibility would leave blocks far from the screen blank: draw everything
    await tab.add_style_tag(content=SHOW_ALL)
    width, height = await tab.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
    )
    session = await context.new_cdp_session(tab)
    shot = await session.send(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
            "optimizeForSpeed": True,
        },
    )
    await session.detach()
    path.write_bytes(base64.b64decode(shot["data"]))


async def _click_download(tab) -> dict:
    """Click the notebook's download link as a reader would and read what arrives."""
    link = tab.locator("p.notebook-download a[download]")
    async with tab.expect_download() as info:
        await link.click()
    download = await info.value
    return {
        "href": await link.evaluate("a => a.href"),
        "filename": download.suggested_filename,
        "failure": await download.failure(),
        "content": Path(await download.path()).read_text(encoding="utf-8"),
    }


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
    text = (ROOT / "docs" / source).read_text(encoding="utf-8")
    text = re.sub(r"^(\s*)(```|~~~).*?^\1\2\s*$", "", text, flags=re.DOTALL | re.MULTILINE)
    text = re.sub(r"`[^`\n]*`", "", text)
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
SHOWS_THE_LIBRARY = "snippets.md"


def test_code_fits_a_phone(visits):
    problems = []
    for visit in visits.values():
        blocks = visit.seen["390"].get("code_lines")
        if blocks is None:
            problems.append(f"{visit.url}: code lines not measured")
            continue
        summary = code_summary(blocks)
        if visit.source != SHOWS_THE_LIBRARY and summary["cut"] > CUT_SHARE * summary["lines"]:
            problems.append(f"{visit.url}: {summary['cut']} of {summary['lines']} code lines cut at 390 px")
        for kind in ("cut", "wrapped"):
            problems += [f"{visit.url}: a line to remember is {kind} at 390 px: {line!r}"
                         for line in summary[f"remember {kind}"]]
        empty = sum(1 for block in blocks if not block["lines"])
        if empty:
            problems.append(f"{visit.url}: {empty} empty code boxes")
    remembered = sum(code_summary(v.seen["390"].get("code_lines", []))["remember lines"] for v in visits.values())
    assert remembered > 100, f"only {remembered} lines to remember were found (the .remember elements)"
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


async def _copy_console_session(browser, url: str) -> tuple[str, str]:
    """Click the copy button of the page's first console session; what it showed, and what was copied."""
    context = await browser.new_context(viewport=VIEWPORTS["1280"])
    try:
        await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url.split("/attention")[0])
        tab = await context.new_page()
        await tab.goto(url, wait_until="load")
        block = tab.locator(".highlight:has(code .gp)").first
        shown = await block.locator("code").inner_text()
        await block.hover()
        await block.locator('button[data-md-type="copy"]').click()
        return shown, await tab.evaluate("navigator.clipboard.readText()")
    finally:
        await context.close()


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
            shot = SCREENSHOTS / f"{_shot_name(visit.page)}-{width}.png"
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


# Pages with an interactive widget, and the element each widget marks as ready.
WIDGETS = {
    "soft-keys/index.html": ".soft-lookup-playground",
    "linear-attention/index.html": ".memory-widget",
}


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


async def _navigate_to_widgets(browser, server, site_url: str) -> list[str]:
    async def local_sitemap(route):
        # Material follows a link instantly only if the sitemap lists it, after
        # moving the sitemap's addresses to the reader's protocol and host but
        # not port: served from here, the sitemap names the test server.
        response = await route.fetch()
        body = (await response.text()).replace(site_url, server.root)
        await route.fulfill(status=200, body=body, headers={"Content-Type": "application/xml"})

    problems = []
    context = await browser.new_context(viewport=VIEWPORTS["1280"])
    try:
        tab = await context.new_page()
        errors = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        await tab.route("**/sitemap.xml", local_sitemap)
        async with tab.expect_response(lambda response: response.url.endswith("/sitemap.xml")):
            await tab.goto(server.url("index.html"), wait_until="load")
        await tab.evaluate("() => { window.__sameDocument = true; }")  # lost on a new document
        await tab.wait_for_timeout(200)  # let Material read the sitemap
        for page, selector in WIDGETS.items():
            await tab.evaluate(
                """(url) => {
                  const link = document.createElement('a');
                  link.href = url;
                  link.className = 'to-widget';
                  link.textContent = 'the widget';
                  document.querySelector('article').append(link);
                }""",
                server.url(page),
            )
            await tab.locator("article a.to-widget").last.click()
            await tab.wait_for_url(server.url(page))
            widget = tab.locator(f'{selector}[data-ready="true"]')
            try:
                await widget.wait_for(timeout=10_000)
            except Exception:  # noqa: BLE001 (report which widget did not start)
                problems.append(f"{page}: the widget did not start after instant navigation")
                continue
            if not await tab.evaluate("() => window.__sameDocument === true"):
                problems.append(f"{page}: loaded as a new document, not swapped in by instant navigation")
            before = await widget.inner_text()
            slider = widget.locator('input[type="range"]').first
            await slider.focus()
            await slider.press("Home")
            if await widget.inner_text() == before:  # it started at its lowest value
                await slider.press("End")
            if await widget.inner_text() == before:
                problems.append(f"{page}: moving the first slider changed nothing")
        problems += [f"page error: {error}" for error in errors]
    finally:
        await context.close()
    return problems
