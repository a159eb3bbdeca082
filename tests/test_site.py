"""Build the whole site with ``mkdocs build --strict`` and check the HTML."""

from __future__ import annotations

import ctypes
import json
import os
import re
from pathlib import Path

import numpy
import pytest

from sitekit.pages import ROOT
from support.build import PAGE_BUDGET_BYTES, page_weight

CHAPTERS = ["index.md", "dictionaries.md", "matrix-lookup.md", "notebooks/dict-to-attention.md"]


def test_build_is_strict_and_clean(built_site):
    # mkdocs' own log lines: "WARNING -  ..."
    problems = re.findall(r"^(?:WARNING|ERROR)\s+-.*$", built_site.log, flags=re.MULTILINE)
    assert not problems, "\n".join(problems)
    assert "Documentation built" in built_site.log


def test_every_chapter_is_in_the_nav_and_built(built_site):
    for chapter in CHAPTERS:
        assert chapter in built_site.pages, f"{chapter} is missing from the nav"
    for source, page in built_site.pages.items():
        assert (built_site.path / page).is_file(), f"{source} was not built to {page}"


def test_no_builder_paths_tracebacks_or_raw_tex(built_site):
    for source in built_site.pages:
        html = built_site.html(source)
        assert str(ROOT) not in html, f"{source} leaks the builder's path"
        # A block that failed shows markdown-exec's traceback of "<code block: ...>".
        # A console session may show a traceback on purpose (KeyError in chapter
        # 1): its written output said so, and the doctest compared it.
        assert "&lt;code block: " not in html and "<code block: " not in html, f"{source} ships a failed block"
        outside_consoles = re.sub(r"<code>(?:(?!</code>).)*?class=\"gp\".*?</code>", "", html, flags=re.DOTALL)
        assert "Traceback (most recent call last)" not in outside_consoles, f"{source} ships a traceback"
        # arithmatex's generic output is replaced by MathML; any left-over TeX
        # delimiter (in the page or in its table of contents) was not rendered.
        for raw in ("\\(", "\\)", "\\[", "\\]", "$$", 'class="arithmatex"'):
            text = re.sub(r"<(pre|code)\b.*?</\1>", "", html, flags=re.DOTALL)
            assert raw not in text, f"{source} has unrendered TeX {raw!r}"


def test_math_is_mathml(built_site):
    assert '<math display="block">' in built_site.html("index.md")
    assert "<math>" in built_site.html("matrix-lookup.md")
    assert '<math display="block">' in built_site.html("notebooks/dict-to-attention.md")


def test_the_home_pages_chapter_lists_number_the_chapters(built_site):
    """Each part's list of chapters starts at its first chapter's number (an ordered list keeps its start)."""
    html = built_site.html("index.md")
    lists = re.findall(r"<ol(?: start=\"(\d+)\")?>(.*?)</ol>", html, flags=re.DOTALL)
    chapters = [(int(start or 1), re.findall(r'<li><a href="([^"]+)"', items)) for start, items in lists]
    numbered = {link: start + i for start, links in chapters for i, link in enumerate(links)}
    # every chapter the nav numbers ("8. Writing to the dictionary: kv-cache.md"), with its number
    nav = re.findall(r"^\s*- (\d+)\. [^:\n]+: ([\w-]+)\.md$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    assert len(nav) >= 17, nav
    assert {f"{page}/": int(number) for number, page in nav} == numbered, (nav, chapters)


def test_every_figure_has_a_caption_and_a_text_alternative(built_site):
    figures = 0
    for source in built_site.pages:
        for figure in re.findall(r"<figure\b.*?</figure>", built_site.html(source), flags=re.DOTALL):
            figures += 1
            assert re.search(r"<figcaption>\s*\S", figure), f"a figure on {source} has no caption"
            # (in either order: nbconvert, which renders the training notebook's page, sorts attributes)
            svg = re.search(r"<svg\b[^>]*>", figure)
            assert svg and 'role="img"' in svg.group(0) and re.search(r'\saria-label="[^"]+"', svg.group(0)), (
                f"a figure on {source} has no text alternative"
            )
    assert figures >= 3


def test_no_asset_from_another_host(built_site):
    for path in built_site.path.rglob("*.html"):
        html = path.read_text(encoding="utf-8")
        # Tags that make the browser fetch: a canonical <link> or an <a> is never fetched.
        fetching = (
            r"<(?:script|img|iframe|source|video|audio)\b[^>]*"
            r"|<link\b(?=[^>]*rel=\"(?:stylesheet|icon|preload|modulepreload|manifest)\")[^>]*"
        )
        for tag in re.findall(fetching, html):
            url = re.search(r"(?:src|href)=\"(https?:[^\"]*)\"", tag)
            assert url is None, f"{path.relative_to(built_site.path)} loads {url.group(1)}"
        assert "fonts.googleapis.com" not in html and "cdnjs.cloudflare.com" not in html


def test_notebook_download_is_a_notebook(built_site):
    page = built_site.pages["notebooks/dict-to-attention.md"]
    html = built_site.html("notebooks/dict-to-attention.md")
    assert 'href="dict-to-attention.ipynb" download' in html
    notebook = json.loads((built_site.path / page).parent.joinpath("dict-to-attention.ipynb").read_text())
    assert notebook["nbformat"] == 4
    ids = [cell["id"] for cell in notebook["cells"]]
    assert len(set(ids)) == len(ids) and ids[0] == "cell-000", ids[:3]
    assert any("KVdict" in "".join(cell["source"]) for cell in notebook["cells"])


TRAINING_NOTEBOOK = "notebooks/training-run.ipynb"
TRAINING_PAGE = "notebooks/training-run.md"


def test_the_training_notebook_shows_its_code_as_every_page_does(built_site):
    """Its cells' code and outputs are ``<pre><code>`` with a span per line, as on every page (sitekit.training_run).

    So on a phone a long line wraps with the site's "↪" mark, its rows
    indented past the line's own indentation, instead of wrapping at the
    left edge as a line of its own.
    """
    html = built_site.html(TRAINING_PAGE)
    opened = re.findall(r"<pre\b[^>]*>(?:<span></span>)?(<code\b)?", html)
    assert len(opened) > 10 and all(opened), f"{opened.count('')} of {len(opened)} blocks have no <code>"
    assert html.count('<span class="cl"') > 100
    assert not re.search(r"<pre><code>\s*</code></pre>", html), "an output box with nothing in it"


def test_the_training_notebook_offers_a_copy_that_brings_its_modules_and_describes_its_figure(built_site):
    """The download runs where it is saved (sitekit.training_run.self_contained); the figure has a real text alternative."""
    html = built_site.html(TRAINING_PAGE)
    assert 'href="../training-run.ipynb"' in html
    download = json.loads((built_site.path / TRAINING_NOTEBOOK).read_text(encoding="utf-8"))
    setup = "".join(download["cells"][1]["source"])
    assert "'snippets/training.py':" in setup and "'tools/corpus.py':" in setup, "the download brings no modules"
    [figure] = re.findall(r"<figure\b.*?</figure>", html, flags=re.DOTALL)
    assert re.search(r'<svg\b[^>]*\baria-label="Two line charts[^"]+"', figure)
    assert "<img" not in html and "No description has been provided" not in html


# About 45 characters of code fit a 390 px phone (docs/stylesheets/extra.css);
# a wrapped row starts 2 past its line's indentation and should keep 25 of them.
PHONE_CHARACTERS, KEPT_ON_A_ROW = 45, 25


def test_the_training_notebooks_lines_are_not_indented_past_what_a_phone_can_wrap():
    cells = json.loads((ROOT / "docs" / TRAINING_NOTEBOOK).read_text())["cells"]
    deep = [
        line for cell in cells if cell["cell_type"] == "code" for line in "".join(cell["source"]).splitlines()
        if len(line) - len(line.lstrip(" ")) + 2 + KEPT_ON_A_ROW > PHONE_CHARACTERS
    ]
    assert not deep, "indented too deeply to wrap on a phone (break the line after its opening bracket):\n" + "\n".join(deep)


def test_the_session_and_its_build_run_openblas_on_one_thread_each():
    """conftest.py sets OPENBLAS_NUM_THREADS before NumPy loads OpenBLAS; the build inherits it.

    Should a pytest plugin ever import NumPy first, the setting would come too
    late and the suite would silently slow down by a third on two cores.
    """
    libraries = sorted((Path(numpy.__file__).parent.parent / "numpy.libs").glob("*openblas*"))
    getter = None
    for library in libraries:
        getter = getattr(ctypes.CDLL(str(library)), "scipy_openblas_get_num_threads64_", None) or getter
    if getter is None:
        pytest.skip(f"this NumPy's BLAS is not the scipy-openblas of its wheel (found {libraries})")
    assert os.environ["OPENBLAS_NUM_THREADS"] == str(getter()), (
        f"OpenBLAS runs {getter()} threads, OPENBLAS_NUM_THREADS is {os.environ['OPENBLAS_NUM_THREADS']}"
    )


def test_every_page_is_under_the_size_budget(built_site):
    for source, page in built_site.pages.items():
        raw, compressed = page_weight(built_site.path, page)
        assert compressed < PAGE_BUDGET_BYTES, f"{source}: {compressed} bytes gzipped ({raw} raw)"


def test_measured_timings_are_kept_out_of_the_search_index(built_site):
    """Wall-clock timings change from build to build; the search index must not (determinism)."""
    html = built_site.html("at-scale.md")
    sections = re.findall(r'<section class="measured"([^>]*)>(.*?)</section>', html, flags=re.DOTALL)
    assert sections, "chapter 7 has no measured section"
    index = json.loads((built_site.path / "search" / "search_index.json").read_text(encoding="utf-8"))
    indexed = " ".join(doc["text"] for doc in index["docs"] if doc["location"].startswith("at-scale/"))
    indexed = " ".join(re.sub(r"<[^>]+>", " ", indexed).split())
    for attributes, body in sections:
        assert "data-search-exclude" in attributes, attributes
        words = re.sub(r"<[^>]+>", " ", body).split()
        runs = [" ".join(words[i : i + 6]) for i in range(0, max(len(words) - 6, 0), 6)]
        leaked = [run for run in runs if re.search(r"\d", run) and run in indexed]
        assert not leaked, f"measured text in the search index: {leaked[:3]}"


def test_every_page_links_its_source_and_the_repository(built_site, mkdocs_config):
    """Edit links and a repository link, from edit_uri and extra.social: no repo_url, so no GitHub API call."""
    assert not mkdocs_config["repo_url"], "repo_url makes Material call api.github.com from every page"
    repository = mkdocs_config["extra"]["social"][0]["link"]
    for source in built_site.pages:
        html = built_site.html(source)
        assert f'href="{mkdocs_config["edit_uri"]}{source}" title="Edit this page"' in html, source
        assert f'href="{repository}"' in html, source
