"""Per page: how long it is, and how its checks are kept out of the reader's way.

    python .ci/page_metrics.py                 # builds the site, measures it in Chromium
    python .ci/page_metrics.py --site DIR      # an existing build
    python .ci/page_metrics.py --rev REV       # source counts only, as the pages were at REV

Prints a Markdown table, one row per page of the nav:

- screens: the page's height at 1280 x 900 in Chromium, in screens of 900 px
  (STYLE.md: a chapter fits in about 15);
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
import doctest
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_pages import visible_asserts  # noqa: E402

from sitebuild import built_page, nav_sources, run_mkdocs_build  # noqa: E402

_PARSER = doctest.DocTestParser()
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<marks>`{3,}|~{3,})(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)(?P=marks)[ \t]*$",
                    re.MULTILINE | re.DOTALL)


def source_counts(text: str, notebook: bool) -> dict[str, int]:
    if notebook:  # a notebook file shows every line of its code cells
        code = [line for line in text.splitlines() if not line.startswith("#")]
        asserts = sum(1 for line in code if re.match(r"\s*assert\b", line))
        return {"visible asserts": asserts, "hidden asserts": 0, "console blocks": 0, "doctest examples": 0}
    asserts = consoles = examples = 0
    for fence in _FENCE.finditer(text):
        info, body = fence.group("info"), fence.group("body")
        if 'exec="on"' not in info:
            continue
        if info.strip().startswith("pycon"):
            consoles += 1
            examples += len(_PARSER.get_examples(body))
            asserts += sum(1 for line in body.splitlines() if re.match(r"\s*>>> assert\b", line))
        else:
            asserts += sum(1 for line in body.splitlines() if re.match(r"\s*assert\b", line))
    visible = visible_asserts(text)
    return {"visible asserts": visible, "hidden asserts": asserts - visible,
            "console blocks": consoles, "doctest examples": examples}


async def _heights(site: Path, pages: list[str]) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "tests"))
    from playwright.async_api import async_playwright
    from test_browser import CHROMIUM_ARGS, _chromium_path, serve_site

    heights = {}
    with serve_site(site, "/attention-as-a-soft-dictionary/") as root:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=_chromium_path(), args=CHROMIUM_ARGS)
            tab = await browser.new_page(viewport={"width": 1280, "height": 900})
            for page in pages:
                await tab.goto(root + re.sub(r"(^|/)index\.html$", r"\1", page), wait_until="load")
                await tab.add_style_tag(content="* { content-visibility: visible !important; }")
                heights[page] = await tab.evaluate("document.documentElement.scrollHeight") / 900
            await browser.close()
    return heights


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", type=Path, help="a built site (default: build one)")
    parser.add_argument("--rev", help="count the sources as they were at this git revision (no screens)")
    args = parser.parse_args()
    from mkdocs.config import load_config

    sources = list(nav_sources(load_config(str(ROOT / "mkdocs.yml"))["nav"]))
    texts = {}
    for source in sources:
        if args.rev:
            shown = subprocess.run(["git", "show", f"{args.rev}:docs/{source}"], cwd=ROOT, capture_output=True, text=True)
            if shown.returncode:
                continue
            texts[source] = shown.stdout
        else:
            texts[source] = (ROOT / "docs" / source).read_text(encoding="utf-8")
    heights: dict[str, float] = {}
    if not args.rev:
        with tempfile.TemporaryDirectory() as tmp:
            site = args.site
            if site is None:
                site = Path(tmp) / "site"
                build = run_mkdocs_build(ROOT, site)
                if build.returncode:
                    print(build.stdout + build.stderr)
                    return 1
            heights = asyncio.run(_heights(site, [built_page(s) for s in texts]))
    columns = ["screens", "visible asserts", "hidden asserts", "console blocks", "doctest examples", "checks"]
    print("| page | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    totals = dict.fromkeys(columns, 0.0)
    for source, text in texts.items():
        row = source_counts(text, source.endswith(".py"))
        row["checks"] = row["visible asserts"] + row["hidden asserts"] + row["doctest examples"]
        row["screens"] = heights.get(built_page(source), float("nan"))
        for column in columns:
            totals[column] += row[column] if row[column] == row[column] else 0
        cells = [f"{row['screens']:.1f}" if row["screens"] == row["screens"] else "–"]
        cells += [str(row[column]) for column in columns[1:]]
        print(f"| {source} | " + " | ".join(cells) + " |")
    print("| **total** | " + " | ".join(
        [f"{totals['screens']:.0f}" if heights else "–"] + [str(int(totals[c])) for c in columns[1:]]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
