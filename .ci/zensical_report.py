"""What a Zensical build of this site renders, and what it does not: the Zensical job's gate.

    python -m zensical build --clean            # from the repository's root (README.md)
    python -m sitekit.postbuild site/           # the post-build steps every engine needs
    python .ci/zensical_report.py [SITE]        # default: site/

Zensical reads mkdocs.yml and runs its Markdown extensions (``sitekit.render``
and ``sitekit.training_run`` among them) and markdown-exec, but no MkDocs hook:
the templates that override Material for MkDocs' own (overrides/material/)
are not its. For every page of the nav this prints what the MkDocs build gives
it and the Zensical build in SITE may not:

- built: the page's ``index.html`` is there (the training run's page too:
  a page, not the raw ``.ipynb``);
- TeX left: formulas left as TeX (``sitekit.render`` turns them into MathML);
- build errors: what the page holds of ``sitekit.report.build_error`` (a block
  that raised, a console session whose written output differs, bad TeX);
- consoles unchecked: console sessions on a page that ``sitekit.render`` did
  not render (its code lines would be in spans): run by markdown-exec's own
  formatter, without comparing their written output;
- notebook: the page offers its ``.ipynb`` and the file is there;
- search: the header holds the engine's own search and nothing of another
  theme's (Material 9.8's partial left a raw input box and "Initializing
  search" in Zensical's header);
- edit: the page has its "Edit this page" link;

and, for the whole site, nav items that open a file instead of a page, the
link check (``sitekit.site_check``) and the modules of snippets/ the Snippets
page offers for download. It exits 1 when any of these is missing.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sitekit import nav as site_nav  # noqa: E402
from sitekit import pages, site_check  # noqa: E402
from sitekit.report import ERROR_MARKER  # noqa: E402

# Material 9.8's search partial (overrides/material/partials/search.html) in a header it does not fit.
FOREIGN_SEARCH = ("md-search__form", "Initializing search")
NAV_LINK = re.compile(r'<a href="([^"]*)" class="md-nav__link')


def page_row(site: Path, source: str, offers_notebook: bool) -> dict[str, str]:
    built = site / site_nav.built_page(source)
    if not built.is_file():
        return {"built": "no"}
    page = built.read_text(encoding="utf-8")
    consoles = sum(fence.console for fence in pages.executed_fences(site_nav.read(source))) if source.endswith(".md") else 0
    notebook = Path(source).with_suffix(".ipynb").name
    return {
        "built": "yes",
        "TeX left": str(page.count('class="arithmatex"')),
        "MathML": str(page.count("<math")),
        "build errors": str(page.count(ERROR_MARKER)),
        "consoles unchecked": "0" if 'class="cl' in page else str(consoles),
        "notebook": "-" if not offers_notebook else
                    ("yes" if f'href="{notebook}"' in page and (built.parent / notebook).is_file() else "missing"),
        "search": "broken" if any(mark in page for mark in FOREIGN_SEARCH) or 'data-md-component="search"' not in page
                  else "ok",
        "edit": "yes" if 'rel="edit"' in page else "missing",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("site", nargs="?", type=Path, default=ROOT / "site")
    args = parser.parse_args()
    if not (args.site / "index.html").is_file():
        print(f"no built site in {args.site}: the Zensical build did not finish (see the step above)")
        return 1
    config = site_nav.read_config()
    nav = config["nav"]
    notebooks = set(site_nav.notebook_pages(nav))
    rows = {source: page_row(args.site, source, source in notebooks) for source in site_nav.nav_sources(nav)}
    columns = ["built", "TeX left", "MathML", "build errors", "consoles unchecked", "notebook", "search", "edit"]
    print("| page | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for source, row in rows.items():
        print(f"| {source} | " + " | ".join(row.get(column, "") for column in columns) + " |")

    def total(column: str) -> int:
        return sum(int(row.get(column, "0")) for row in rows.values() if row.get(column, "-").isdigit())

    site_url = (config.get("site_url") or "").rstrip("/") + "/"
    broken = sorted(set(site_check.check_site(args.site, site_url)))
    home = (args.site / "index.html").read_text(encoding="utf-8")
    files_in_nav = sorted({url for url in NAV_LINK.findall(home) if "." in url.rsplit("/", 1)[-1].lstrip(".")
                           and not url.endswith(".html")})
    offered = sorted(path.stem for path in (ROOT / "snippets").glob("*.py") if path.stem != "__init__")
    published = [name for name in offered if (args.site / "snippets" / f"{name}.py").is_file()]
    gaps = {
        "pages not built": sum(row["built"] != "yes" for row in rows.values()),
        "formulas left as TeX": total("TeX left"),
        "build errors shipped": total("build errors"),
        "console sessions unchecked": total("consoles unchecked"),
        "notebooks missing": sum(row.get("notebook") == "missing" for row in rows.values()),
        "pages whose header search is broken": sum(row.get("search") == "broken" for row in rows.values()),
        "pages without an edit link": sum(row.get("edit") == "missing" for row in rows.values()),
        "nav items that open a file, not a page": len(files_in_nav),
        "snippets/ downloads missing": len(offered) - len(published),
        "broken internal links": len(broken),
    }
    print()
    print(f"MathML formulas: {total('MathML')}. The gaps, all of which must be 0:")
    for name, count in gaps.items():
        print(f"- {name}: {count}")
    for url in files_in_nav:
        print(f"    the nav opens {url}")
    for problem in broken[:20]:
        print(f"    {problem}")
    if len(broken) > 20:
        print(f"    ... and {len(broken) - 20} more")
    return 1 if any(gaps.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
