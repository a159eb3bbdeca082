"""What a Zensical build of this site renders, and what it does not: the Zensical job's gate.

    python -m zensical build --clean            # from the repository's root (README.md)
    python -m sitekit.postbuild site/           # the post-build steps every engine needs
    python .ci/zensical_report.py [SITE]        # default: site/

Zensical reads mkdocs.yml and runs its Markdown extensions (``sitekit.render``
among them) and markdown-exec, but no MkDocs hook and not mkdocs-jupyter.
For every page of the nav this prints what the MkDocs build gives it and
the Zensical build in SITE may not:

- built: the page's ``index.html`` is there;
- TeX left: formulas left as TeX (``sitekit.render`` turns them into MathML);
- build errors: what the page holds of ``sitekit.fences.build_error`` (a block
  that raised, a console session whose written output differs, bad TeX);
- consoles unchecked: console sessions on a page that ``sitekit.render`` did
  not render (its code lines would be in spans): run by markdown-exec's own
  formatter, without comparing their written output;
- notebook: the page offers its ``.ipynb`` and the file is there;

and, for the whole site, the link check (``sitekit.site_check``) and the
modules of snippets/ the Snippets page offers for download.

It exits 1 when any of these is missing, with one stated exception: the
training run's page (docs/notebooks/training-run.ipynb), which mkdocs-jupyter
renders for MkDocs and Zensical does not build (the design card keeps
mkdocs-jupyter for the MkDocs build); its links are not counted either.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sitekit import nav as site_nav  # noqa: E402
from sitekit import pages, site_check  # noqa: E402
from sitekit.report import ERROR_MARKER  # noqa: E402

# Built by mkdocs-jupyter, a MkDocs plugin: not by Zensical.
EXCEPTION = "notebooks/training-run.ipynb"


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
    columns = ["built", "TeX left", "MathML", "build errors", "consoles unchecked", "notebook"]
    print("| page | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for source, row in rows.items():
        print(f"| {source} | " + " | ".join(row.get(column, "") for column in columns) + " |")

    counted = {source: row for source, row in rows.items() if source != EXCEPTION}

    def total(column: str) -> int:
        return sum(int(row.get(column, "0")) for row in counted.values() if row.get(column, "-").isdigit())

    exception_page = site_nav.built_page(EXCEPTION)
    site_url = (config.get("site_url") or "").rstrip("/") + "/"
    broken = sorted(problem for problem in set(site_check.check_site(args.site, site_url))
                    if "notebooks/training-run/" not in problem)
    offered = sorted(path.stem for path in (ROOT / "snippets").glob("*.py") if path.stem != "__init__")
    published = [name for name in offered if (args.site / "snippets" / f"{name}.py").is_file()]
    gaps = {
        "pages not built": sum(row["built"] != "yes" for row in counted.values()),
        "formulas left as TeX": total("TeX left"),
        "build errors shipped": total("build errors"),
        "console sessions unchecked": total("consoles unchecked"),
        "notebooks missing": sum(row.get("notebook") == "missing" for row in counted.values()),
        "snippets/ downloads missing": len(offered) - len(published),
        "broken internal links": len(broken),
    }
    print()
    print(f"The stated exception: {EXCEPTION} (mkdocs-jupyter, MkDocs only): "
          f"{'built' if (args.site / exception_page).is_file() else 'not built'}, not counted.")
    print(f"MathML formulas: {total('MathML')}. The gaps, all of which must be 0:")
    for name, count in gaps.items():
        print(f"- {name}: {count}")
    for problem in broken[:20]:
        print(f"    {problem}")
    if len(broken) > 20:
        print(f"    ... and {len(broken) - 20} more")
    return 1 if any(gaps.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
