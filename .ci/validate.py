"""Validate the built site: the W3C Nu HTML checker and axe-core, zero findings.

    python .ci/validate.py [--site DIR]     # default: artifacts/site, the build pytest made
    python .ci/validate.py --site DIR --only axe --pages soft-keys/index.html -v

- **Nu HTML checker** (npm ``vnu-jar``, run with Java): every HTML page,
  errors only.
- **axe-core** (npm ``axe-core``), injected into every page of the site in
  Debian's Chromium (playwright) at 1280 and 390 px, in the light and the
  dark colour scheme: every violation of its default rules.

Both npm packages are installed on first use into
``~/.cache/soft-dictionary-validators`` (the npm registry only; no browser
download). Java comes from Debian (``apt-get install default-jre-headless``;
.ci/run installs it). Prints what each found and exits 1 if anything was.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

CACHE = Path.home() / ".cache" / "soft-dictionary-validators"
PACKAGES = {"vnu-jar": "26.9.27", "axe-core": "4.14.1"}
WIDTHS = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}
SCHEMES = ("light", "dark")


def install() -> None:
    wanted = [
        f"{name}@{version}"
        for name, version in PACKAGES.items()
        if not (CACHE / "node_modules" / name / "package.json").is_file()
        or json.loads((CACHE / "node_modules" / name / "package.json").read_text())["version"] != version
    ]
    if wanted:
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(CACHE), *wanted], check=True)


def nu_checker(site: Path) -> list[str]:
    jar = CACHE / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"
    java = shutil.which("java")
    if java is None:
        return ["java is not installed (apt-get install default-jre-headless)"]
    result = subprocess.run(
        [java, "-jar", str(jar), "--errors-only", "--skip-non-html", "--format", "json", str(site)],
        capture_output=True,
        text=True,
    )
    messages = json.loads(result.stderr or result.stdout or '{"messages": []}')["messages"]
    return [f"{m.get('url', '').split(str(site))[-1]}:{m.get('lastLine', '?')}: {m['message']}" for m in messages]


def site_pages(site: Path) -> list[str]:
    """Every HTML page of the site (relative paths), the 404 page included."""
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))


# Material builds parts of the page with JavaScript after "load" (code block
# buttons, docs/javascripts/a11y.js's repairs run on its document$; the tab
# stops of wide code blocks are given when the browser is first idle, and
# a11y.js marks <html data-a11y-code="done"> then): axe runs once that is
# done and the page has settled for two animation frames.
_SETTLED = """() => new Promise(done => {
  const settle = () => requestAnimationFrame(() => requestAnimationFrame(done));
  const start = performance.now();
  (function wait() {
    if (document.documentElement.getAttribute("data-a11y-code") === "done" || performance.now() - start > 5000) settle();
    else setTimeout(wait, 20);
  })();
})"""
# Code blocks and figures off screen are not laid out until they come near it
# (content-visibility: auto in extra.css; a speed setting that changes no
# colour or position a reader sees). axe scrolls to each element it checks
# for colour contrast, the blocks near it then get their real height, and the
# element moves under axe's feet: it has read the colour of whatever code
# block slid into its place (a false "1.06:1" on a footer link). Everything
# is laid out at once for axe, so it measures the page as the reader sees it.
_ALL_LAID_OUT = "*, *::before, *::after { content-visibility: visible !important; }"
_RUN_AXE = """async () => (await axe.run(document, {resultTypes: ['violations']})).violations.map(v => ({
    id: v.id, impact: v.impact,
    nodes: v.nodes.map(n => n.target.join(' ')),
    why: (v.nodes[0] && v.nodes[0].failureSummary || '').replace(/\\s+/g, ' ').slice(0, 300),
}))"""


async def axe(site: Path, pages: list[str], verbose: bool = False) -> list[str]:
    from playwright.async_api import async_playwright

    from support.browser import CHROMIUM_ARGS, chromium_path
    from support.server import serve_site

    script = (CACHE / "node_modules" / "axe-core" / "axe.min.js").read_text(encoding="utf-8")
    problems: list[str] = []
    with serve_site(site, "/attention-as-a-soft-dictionary/") as root:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            try:
                for width, viewport in WIDTHS.items():
                    for scheme in SCHEMES:
                        context = await browser.new_context(viewport=viewport, color_scheme=scheme)
                        tab = await context.new_page()
                        for page in pages:
                            url = root + page.removesuffix("index.html")
                            await tab.goto(url, wait_until="load")
                            await tab.add_style_tag(content=_ALL_LAID_OUT)
                            await tab.evaluate(_SETTLED)
                            await tab.add_script_tag(content=script)
                            for violation in await tab.evaluate(_RUN_AXE):
                                where = violation["nodes"][:3]
                                more = f" (+{len(violation['nodes']) - 3} more)" if len(violation["nodes"]) > 3 else ""
                                why = f"\n      {violation['why']}" if verbose else ""
                                problems.append(
                                    f"{page} ({width} px, {scheme}): {violation['id']} "
                                    f"[{violation['impact']}] at {where}{more}{why}"
                                )
                        await context.close()
            finally:
                await browser.close()
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, default=ROOT / "artifacts" / "site")
    parser.add_argument(
        "--pages",
        nargs="*",
        help="built pages to check with axe, e.g. soft-keys/index.html "
        "(default: every page; the Nu checker always reads the whole site)",
    )
    parser.add_argument("--only", choices=["nu", "axe"], help="run one of the two checkers")
    parser.add_argument("--verbose", "-v", action="store_true", help="say why axe failed each violation")
    args = parser.parse_args()
    if not (args.site / "index.html").is_file():
        print(f"no built site at {args.site}: run pytest first (it builds the site there)", file=sys.stderr)
        return 1
    install()
    found = 0
    if args.only in (None, "nu"):
        started = time.perf_counter()
        nu = nu_checker(args.site)
        print(f"Nu HTML checker: {len(nu)} error(s) ({time.perf_counter() - started:.0f} s)")
        print("\n".join(f"  {line}" for line in nu[:50]))
        found += len(nu)
    if args.only in (None, "axe"):
        started = time.perf_counter()
        pages = args.pages or site_pages(args.site)
        violations = asyncio.run(axe(args.site, pages, args.verbose))
        print(
            f"axe-core: {len(violations)} violation(s) over {len(pages)} page(s) at 1280 and 390 px, "
            f"light and dark ({time.perf_counter() - started:.0f} s)"
        )
        print("\n".join(f"  {line}" for line in violations[:80]))
        found += len(violations)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
