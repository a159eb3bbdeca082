"""Per page: how long it is, and how its checks are kept out of the reader's way.

    python .ci/page_metrics.py                 # builds the site, measures it in Chromium
    python .ci/page_metrics.py --site DIR      # an existing build
    python .ci/page_metrics.py --rev REV       # source counts only, as the pages were at REV

Prints a Markdown table, one row per page of the nav:

- screens: the page's height at 1280 x 900 in Chromium, in screens of 900 px
  (CONTRIBUTING.md: a chapter fits in about 15);
- code lines, cut and wrapped at 390 px: the non-empty lines of every code
  block (collapsed boxes opened), those that reach past the code box at
  390 px, so that a reader must scroll sideways, and those that fit only by
  wrapping onto more rows; "code wrapped" counts the wrapped lines that are
  code, not printed output (tests/support/page_measures.py measures them; a chapter
  cuts none and wraps at most 10 %);
- under copy button: lines at 390 px whose text runs under the copy button
  at the block's top right (Material's, shown on hover or tap; a chapter has none);
- sideways at 1280 px: code lines that reach past their box at 1280 px, to be
  scrolled to (a chapter has none);
- visible asserts: ``assert`` lines a reader sees (site budget: 10);
- hidden asserts: ``assert`` lines that run but are not shown;
- console blocks and doctest examples: ``pycon`` fences and their ``>>>``
  statements, each compared with its written output;
- checks: asserts of both kinds plus doctest examples (the number the
  lesson-first rewrite must not lower).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from sitekit import nav, pages  # noqa: E402
from sitekit.console import count_examples  # noqa: E402
from support.browser import CHROMIUM_ARGS, chromium_path  # noqa: E402
from support.build import site_or_build  # noqa: E402
from support.page_measures import CODE_LINES, OPEN_ALL, SHOW_ALL, code_summary  # noqa: E402
from support.page_queries import visible_asserts  # noqa: E402
from support.server import serve_site  # noqa: E402


def source_counts(text: str) -> dict[str, int]:
    asserts = consoles = examples = 0
    for fence in pages.executed_fences(text):
        lines = fence.code.splitlines()
        if fence.console:
            consoles += 1
            examples += count_examples(fence.code)
            asserts += sum(1 for line in lines if re.match(r"\s*>>> assert\b", line))
        else:
            asserts += sum(1 for line in lines if re.match(r"\s*assert\b", line))
    visible = visible_asserts(text)
    return {"visible asserts": visible, "hidden asserts": asserts - visible,
            "console blocks": consoles, "doctest examples": examples}


async def _measure(site: Path, built: list[str]) -> tuple[dict[str, float], dict[str, dict]]:
    """Each page's height at 1280 px in screens, and its code lines at 390 px."""
    from playwright.async_api import async_playwright

    heights, code = {}, {}
    with serve_site(site, "/attention-as-a-soft-dictionary/") as root:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            wide = await browser.new_page(viewport={"width": 1280, "height": 900})
            phone = await browser.new_page(viewport={"width": 390, "height": 844})
            for page in built:
                url = root + re.sub(r"(^|/)index\.html$", r"\1", page)
                await wide.goto(url, wait_until="load")
                await wide.add_style_tag(content=SHOW_ALL)
                heights[page] = await wide.evaluate("document.documentElement.scrollHeight") / 900
                await phone.goto(url, wait_until="load")
                await phone.add_style_tag(content=SHOW_ALL)
                await phone.evaluate(OPEN_ALL)
                code[page] = code_summary(await phone.evaluate(CODE_LINES))
                await wide.evaluate(OPEN_ALL)
                code[page]["sideways at 1280 px"] = code_summary(await wide.evaluate(CODE_LINES))["cut"]
            await browser.close()
    return heights, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, help="a built site (default: build one)")
    parser.add_argument("--rev", help="count the sources as they were at this git revision (no screens)")
    args = parser.parse_args()
    sources = nav.nav_sources(nav.load_nav())
    texts = {}
    for source in sources:
        if args.rev:
            shown = subprocess.run(["git", "show", f"{args.rev}:docs/{source}"], cwd=ROOT, capture_output=True, text=True)
            if shown.returncode:
                continue
            texts[source] = shown.stdout
        else:
            texts[source] = nav.read(source)
    heights: dict[str, float] = {}
    code: dict[str, dict] = {}
    if not args.rev:
        with tempfile.TemporaryDirectory() as tmp:
            site = site_or_build(args.site, tmp)
            if site is None:
                return 1
            heights, code = asyncio.run(_measure(site, [nav.built_page(s) for s in texts]))
    measured = ["screens", "code lines", "cut at 390 px", "wrapped at 390 px", "code wrapped",
                "under copy button", "sideways at 1280 px"]
    columns = [*measured, "visible asserts", "hidden asserts", "console blocks", "doctest examples", "checks"]
    print("| page | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    totals = dict.fromkeys(columns, 0.0)
    for source, text in texts.items():
        row = source_counts(text)
        row["checks"] = row["visible asserts"] + row["hidden asserts"] + row["doctest examples"]
        row["screens"] = heights.get(nav.built_page(source), float("nan"))
        lines = code.get(nav.built_page(source))
        row["code lines"] = lines["lines"] if lines else float("nan")
        row["cut at 390 px"] = lines["cut"] if lines else float("nan")
        row["wrapped at 390 px"] = lines["wrapped"] if lines else float("nan")
        row["code wrapped"] = lines["code lines wrapped"] if lines else float("nan")
        row["under copy button"] = len(lines["under"]) if lines else float("nan")
        row["sideways at 1280 px"] = lines["sideways at 1280 px"] if lines else float("nan")
        for column in columns:
            totals[column] += row[column] if row[column] == row[column] else 0
        cells = [f"{row['screens']:.1f}" if row["screens"] == row["screens"] else "–"]
        cells += [_count(row["code lines"])] + [_count(row[c], row["code lines"]) for c in measured[2:]]
        cells += [str(row[column]) for column in columns[len(measured):]]
        print(f"| {source} | " + " | ".join(cells) + " |")
    total_cells = [f"{totals['screens']:.0f}" if heights else "–"]
    total_cells += [_count(totals["code lines"])] + [_count(totals[c], totals["code lines"]) for c in measured[2:]]
    if not heights:
        total_cells = ["–"] * len(measured)
    total_cells += [str(int(totals[c])) for c in columns[len(measured):]]
    print("| **total** | " + " | ".join(total_cells) + " |")
    return 0


def _count(n: float, of: float | None = None) -> str:
    """A count (– when not measured), with its share of ``of`` when given: ``12 (4 %)``."""
    if n != n:
        return "–"
    if of is None or not of:
        return str(int(n))
    return f"{int(n)} ({100 * n / of:.0f} %)"


if __name__ == "__main__":
    sys.exit(main())
