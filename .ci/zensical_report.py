"""What a Zensical build of this site renders, and what it does not: the CI job's log.

    python -m zensical build --clean      # from the repository's root (CONTRIBUTING.md)
    python .ci/zensical_report.py [SITE]  # default: site/, where that build writes

Zensical reads mkdocs.yml but runs none of hooks/. For every page of the nav
this prints what the MkDocs build gives it and the Zensical build in SITE
does not:

- built: the page's ``index.html`` is there;
- math: formulas left as TeX (hooks/mathml.py turns them into MathML);
- failed fences: fences whose code raised, shipped as a traceback with the
  builder's paths (the strict MkDocs build fails instead). Console sessions
  that show an exception on purpose fail here: markdown-exec's own ``pycon``
  formatter runs them, not hooks/console.py;
- console sessions: run without comparing their written output;
- notebook: the page offers its ``.ipynb`` (hooks/chapter_notebooks.py);

and, for the whole site, the link check of hooks/site_check.py and the
modules of snippets/ the Snippets page offers for download. It always exits
0: the job shows the gap to Zensical, it does not gate a change.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "hooks"))

from site_check import check_site  # noqa: E402

from sitekit import pages  # noqa: E402

_TAG = re.compile(r"<[^>]+>")


def page_row(site: Path, source: str, offers_notebook: bool) -> dict[str, str]:
    built = site / pages.built_page(source)
    fences = pages.executed_fences(pages.read(source))
    consoles = sum(fence.console for fence in fences)
    if not built.is_file():
        return {"built": "no"}
    page = built.read_text(encoding="utf-8")
    text = html.unescape(_TAG.sub("", page))
    return {
        "built": "yes",
        "TeX left": str(page.count('class="arithmatex"')),
        "MathML": str(page.count("<math")),
        "failed fences": str(text.count("in _run_python")),
        "consoles unchecked": str(consoles),
        "notebook": "-" if not offers_notebook else ("yes" if ".ipynb" in page else "missing"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("site", nargs="?", type=Path, default=ROOT / "site")
    args = parser.parse_args()
    if not (args.site / "index.html").is_file():
        print(f"no built site in {args.site}: the Zensical build did not finish (see the step above)")
        return 0
    config = pages.read_config()
    nav = config["nav"]
    notebooks = set(pages.notebook_pages(nav))
    rows = {source: page_row(args.site, source, source in notebooks) for source in pages.nav_sources(nav)}
    columns = ["built", "TeX left", "MathML", "failed fences", "consoles unchecked", "notebook"]
    print("| page | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for source, row in rows.items():
        print(f"| {source} | " + " | ".join(row.get(column, "") for column in columns) + " |")

    def total(column: str) -> int:
        return sum(int(row.get(column, "0")) for row in rows.values() if row.get(column, "-").isdigit())

    built = sum(row["built"] == "yes" for row in rows.values())
    broken = sorted(set(check_site(args.site, (config.get("site_url") or "").rstrip("/") + "/")))
    offered = sorted(path.stem for path in (ROOT / "snippets").glob("*.py") if path.stem != "__init__")
    published = [name for name in offered if (args.site / "snippets" / f"{name}.py").is_file()]
    print()
    print("Renders:")
    not_found = "and the 404 page" if (args.site / "404.html").is_file() else "but no 404 page"
    print(f"- {built} of {len(rows)} pages of the nav, {not_found}")
    print("- the executed fences that do not raise, their printed output and figures; includes; admonitions")
    print("Does not render (hooks/ do not run under Zensical):")
    print(f"- math: {total('TeX left')} formulas left as TeX, {total('MathML')} as MathML (hooks/mathml.py)")
    print(f"- {total('failed fences')} fences ship a traceback with the builder's paths, and the build exits 0")
    print(f"- {total('consoles unchecked')} console sessions run by markdown-exec's formatter, outputs not compared "
          "(hooks/console.py)")
    missing = sum(row.get("notebook") == "missing" for row in rows.values())
    print(f"- notebook downloads: {missing} of {len(notebooks)} missing (hooks/chapter_notebooks.py)")
    print(f"- snippets/ downloads: {len(offered) - len(published)} of {len(offered)} missing (hooks/snippet_files.py)")
    print(f"- {len(broken)} broken internal links (hooks/site_check.py):")
    for problem in broken[:20]:
        print(f"    {problem}")
    if len(broken) > 20:
        print(f"    ... and {len(broken) - 20} more")
    return 0


if __name__ == "__main__":
    sys.exit(main())
