"""One run of Chromium over the built site: every page at two widths, recorded for the browser tests.

Every page of the nav, and the 404 page, is loaded once at 1280 px and looked
at again with the viewport narrowed to 390 px, a few tabs at a time; what the browser saw is recorded in a
:class:`Visit` (requests, console errors, and what :data:`_INSPECT` gathers in
the page). Then two interactive checks run: copying a console session, and
the widgets after Material's instant navigation. tests/test_browser.py
checks what was recorded; tests/conftest.py starts the run, in a process of
its own, as soon as the site is built (:func:`start_early_run`).

With ``SCREENSHOTS=1`` in the environment, full-page screenshots of every
page at both widths (and one screen at 1280 px) are written to
``artifacts/screenshots/``; the README's screenshot is copied from there.
"""

from __future__ import annotations

import asyncio
import base64
import os
import pickle
import re
import subprocess
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from sitekit import nav, pages, postbuild
from support.browser import CHROMIUM_ARGS, browser_problem, chromium_path
from support.page_measures import CODE_LINES, FIGURE_TEXT, OPEN_ALL, SHOW_ALL
from support.server import NOT_FOUND, Server, shared_server

SCREENSHOTS = pages.ROOT / "artifacts" / "screenshots"
TAKE_SCREENSHOTS = os.environ.get("SCREENSHOTS") == "1"
_TESTS = Path(__file__).resolve().parent.parent
VIEWPORTS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
WIDTHS = ("1280", "390")  # the order a visit looks at a page in (see _visit)


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


def shot_name(page: str) -> str:
    stem = re.sub(r"(^|/)index\.html$", "", page).removesuffix(".html").strip("/")
    return stem.replace("/", "-") or "index"


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
    search: dict | BaseException  # how opening search went, each way a reader opens it (_open_search)
    navigation: list[str] | BaseException  # problems of the widgets after instant navigation


class CheckRaised(Exception):
    """An interactive check raised in the browser's process: its traceback, as text (for its test to raise)."""


# The run started early, a concurrent.futures.Future (see start_early_run).
EARLY_RUN: list = []


def start_early_run(wait_for_site, pages: dict[str, str], site_url: str) -> None:
    """Start the browser's run as soon as ``wait_for_site()`` returns the built site's folder.

    ``pages`` maps each nav source to its built HTML file. A thread waits for
    the build and then for the browser's process (:func:`run_browser`); it
    runs no Python of the visits itself. The ``browser_run`` fixture
    (tests/conftest.py) collects the result. Nothing starts where the browser
    is missing: the fixture then skips (or fails, with REQUIRE_BROWSER=1) as
    usual; nothing is visited when the build failed (``wait_for_site()``
    returns None), and the ``built_site`` fixture reports the failure.
    """
    if browser_problem() is not None or EARLY_RUN:
        return
    executable = chromium_path()
    from concurrent.futures import ThreadPoolExecutor

    def run_when_built():
        site = wait_for_site()
        if site is None:
            return None
        return run_browser(executable, shared_server(site, site_url), site, pages, site_url)

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="browser")
    EARLY_RUN.append(pool.submit(run_when_built))
    pool.shutdown(wait=False)


def run_browser(executable: str, server: Server, site: Path, pages: dict[str, str], site_url: str) -> BrowserRun:
    """Every page of the built ``site`` at both widths, then the interactive checks, in a process of its own.

    A process, not a thread of the test session: its Python (playwright's
    client, reading every page's findings) would run beside the tests' own,
    and CPython 3.11's ``ast.parse`` is not thread-safe. The process dies with
    the session (it watches its standard input). What it saw comes back
    pickled.
    """
    with tempfile.TemporaryDirectory(prefix="pytest-browser-") as folder:
        job = Path(folder) / "job.pickle"
        job.write_bytes(pickle.dumps((executable, server, site, pages, site_url)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_TESTS.parent), str(_TESTS)])}
        process = subprocess.Popen([sys.executable, __file__, str(job)], stdin=subprocess.PIPE, env=env)
        process.wait()
        process.stdin.close()
        result = Path(folder) / "result.pickle"
        if not result.exists():
            raise RuntimeError(f"the browser's process exited with {process.returncode} and left no result")
        outcome, value = pickle.loads(result.read_bytes())
    if outcome == "raised":
        raise CheckRaised(f"the browser's run raised:\n{value}")
    return value


def _run_in_this_process(job: Path) -> None:
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(1)), daemon=True).start()
    executable, server, site, pages, site_url = pickle.loads(job.read_bytes())
    try:
        found = {page: Visit(page, source, server.url(page)) for source, page in pages.items()}
        # An address that does not exist: GitHub Pages answers it with 404.html.
        found[NOT_FOUND] = Visit(NOT_FOUND, None, server.root + "no/such/page/")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        outcome = "returned", asyncio.run(_run_all(executable, found, server, site_url))
    except BaseException:  # noqa: BLE001 (handed to the tests that wait for it)
        outcome = "raised", traceback.format_exc()
    (job.parent / "result.pickle").write_bytes(pickle.dumps(outcome))


async def _outcome(check):
    try:
        return await check
    except Exception:  # noqa: BLE001 (kept for the check's own test to raise)
        return CheckRaised(traceback.format_exc())


async def _run_all(executable: str, visits: dict[str, Visit], server: Server, site_url: str) -> BrowserRun:
    from playwright.async_api import Error, async_playwright

    async with async_playwright() as playwright:
        try:
            browser = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        except Error as error:
            import pytest

            pytest.fail(f"{executable} did not start under playwright: {error}", pytrace=False)
        try:
            context = await browser.new_context(viewport=VIEWPORTS[WIDTHS[0]], accept_downloads=True)
            queue = asyncio.Queue()
            for visit in visits.values():
                queue.put_nowait(visit)
            await asyncio.gather(*(_visitor(context, queue) for _ in range(TABS_AT_ONCE)))
            await context.close()
            copy, navigation, search = await asyncio.gather(
                _outcome(_copy_console_session(browser, server.url("dictionaries/index.html"))),
                _outcome(_navigate_to_widgets(browser, server, site_url)),
                _outcome(_open_search(browser, server.url("soft-keys/index.html"))),
            )
        finally:
            await browser.close()
    return BrowserRun(visits, copy=copy, search=search, navigation=navigation)


class _Tab:
    """A tab that loads one page after another, recording each into the visit it is given.

    Every visit is a new document, loaded afresh; only the tab is kept (opening
    one costs Chromium about 0.17 s of CPU). ``width`` is the viewport's width now.
    """

    def __init__(self, context):
        self.context, self.width = context, WIDTHS[0]
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


async def _visitor(context, queue: asyncio.Queue) -> None:
    """Take visits from the queue until it is empty, in one reused tab."""
    state = None
    while not queue.empty():
        visit = queue.get_nowait()
        if state is None:
            state = await _Tab(context).open()
        await _visit(state, visit)
    if state is not None:
        await state.tab.close()


async def _visit(state: _Tab, visit: Visit) -> None:
    """Load the page once at 1280 px, then look at it again at 390 px.

    The second look is the same document with the viewport narrowed, as when
    a window is resized: the style sheets' media queries and Material's
    listeners apply the phone's layout without a second load (loading the
    pages twice was a third of the browser's CPU in the test suite).
    """
    tab = state.tab
    state.visit = visit
    for width in WIDTHS:
        state.width = width
        await tab.set_viewport_size(VIEWPORTS[width])
        if width == WIDTHS[0]:
            await tab.goto(visit.url, wait_until="load")
        else:
            # wait for the narrowed layout to be drawn
            await tab.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
        visit.seen[width] = await tab.evaluate(_INSPECT)
        if TAKE_SCREENSHOTS:
            name = shot_name(visit.page)
            if width == "1280":
                await tab.screenshot(path=SCREENSHOTS / f"{name}-{width}-screen.png", animations="disabled")
            await _full_page_screenshot(state.context, tab, SCREENSHOTS / f"{name}-{width}.png")
        if width == "1280" and visit.seen[width]["downloads"]:
            visit.seen["download"] = await _click_download(tab)
        if width == "390":
            # What a phone shows of the code and the figures (support/page_measures.py):
            # everything drawn, every collapsed box open, as a reader may open it.
            await tab.add_style_tag(content=SHOW_ALL)
            await tab.evaluate(OPEN_ALL)
            visit.seen[width]["figure_text"] = await tab.evaluate(FIGURE_TEXT)
            visit.seen[width]["code_lines"] = await tab.evaluate(CODE_LINES)
            # The same code, everything still drawn and open, at 1280 px again
            # (a resize, no second load): which lines scroll sideways there.
            await tab.set_viewport_size(VIEWPORTS["1280"])
            await tab.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
            visit.seen["1280"]["code_lines"] = await tab.evaluate(CODE_LINES)
    # Requests made after "load" (Material's search worker script, a lazy
    # image) are recorded too: wait until none is in flight. Cheaper than
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


SEARCH_QUERY = "softmax"


async def _open_search(browser, url: str) -> dict:
    """Open search as a reader does, by a tap on the search icon (390 px), then by the "/" key (1280 px), and search.

    One page load serves both ways (the index is built once, the costly part):
    whether the index had been asked for before search was first opened (it
    must not: overrides/main.html holds it back), and how many results
    ``SEARCH_QUERY`` found each way. Between the two, the query is cleared and
    search closed, so the results of the second are its own.
    """
    context = await browser.new_context(viewport=VIEWPORTS["390"], has_touch=True)
    try:
        tab = await context.new_page()
        asked = []
        tab.on("request", lambda request: asked.append(request.url))
        await tab.goto(url, wait_until="load")
        await tab.wait_for_timeout(300)  # time for a request the bundle would make at start
        found = {"index_before_opening": any(address.endswith("/search/search_index.json") for address in asked)}
        results = tab.locator(".md-search-result__item")
        for how in ("tap", "key"):
            if how == "tap":
                await tab.locator('label[for="__search"]').first.tap()
            else:
                query = tab.locator("input.md-search__input")
                await query.fill("")
                await tab.keyboard.press("Escape")
                await results.first.wait_for(state="detached", timeout=10_000)
                await tab.set_viewport_size(VIEWPORTS["1280"])
                await tab.keyboard.press("/")
            await tab.keyboard.type(SEARCH_QUERY)
            await results.first.wait_for(timeout=10_000)
            found[how] = await results.count()
    finally:
        await context.close()
    return found


def widget_elements() -> dict[str, str]:
    """Built page -> the selector of a widget it shows, for every page that shows one (sitekit.widgets)."""
    return {
        nav.built_page(source): "." + widget.element
        for source, shown in postbuild.widget_pages(nav.load_nav()).items()
        for widget in shown
    }




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
        for page, selector in widget_elements().items():
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
            # Its first slider, or for a widget without one (the attention viewer) its first button;
            # a button that is not one of a row (the model writer's start button) is pressed.
            sliders = widget.locator('input[type="range"]')
            control = sliders.first if await sliders.count() else widget.locator("button").first
            await control.focus()
            await control.press("Home")
            if await widget.inner_text() == before:  # it started at its lowest value
                await control.press("End")
            if await widget.inner_text() == before and not await sliders.count():
                await control.press("Enter")
            if await widget.inner_text() == before:
                problems.append(f"{page}: moving the first slider (or pressing the first button) changed nothing")
        problems += [f"page error: {error}" for error in errors]
    finally:
        await context.close()
    return problems


if __name__ == "__main__":
    # Through the module's own name, so that what is pickled back names support.visits's classes.
    from support import visits

    visits._run_in_this_process(Path(sys.argv[1]))
