"""The conventions every page keeps, checked on the Markdown sources through the page model."""

from __future__ import annotations

import re

import pytest

from sitekit import nav, pages
from sitekit.pages import DOCS
from support.page_queries import session_name, visible_asserts

PAGES = sorted(path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md"))
NAV = nav.load_nav()
# Chapters are the nav entries titled with their number ("3. Soft keys: soft-keys.md").
CHAPTERS = nav.chapters(NAV)
# A colour written on a page ("#3f51b5"): figures name the palette's colours instead.
COLOUR_LITERAL = re.compile(r"""["']#(?:[0-9a-fA-F]{3}){1,2}["']""")


def test_every_page_is_in_the_nav(mkdocs_config):
    in_nav = set(nav.nav_sources(mkdocs_config["nav"]))
    missing = [page for page in PAGES if page not in in_nav]
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_one_session_per_page_named_after_the_page(page):
    expected = session_name(page)
    for fence in pages.executed_fences(nav.read(page)):
        assert fence.session == expected, (
            f"{page}, line {fence.line + 1}: executed fence {fence.info.strip()!r} should have session={expected!r}"
        )


def test_the_chapters_are_numbered_in_nav_order():
    """Chapter N is the N-th numbered entry of the nav, across the parts: no number skipped or repeated."""
    titles = [title for title, source in nav.nav_entries(NAV) if source in CHAPTERS]
    numbers = [int(nav.CHAPTER_TITLE.match(title)["number"]) for title in titles]
    assert CHAPTERS and numbers == list(range(1, len(CHAPTERS) + 1)), titles


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_titles_carry_their_number(page):
    number = CHAPTERS.index(page) + 1
    # (after the front matter, where a page has one: chapter 14's "notebook: false")
    first_line = pages.without_front_matter(nav.read(page), f"docs/{page}").split("\n", 1)[0]
    assert first_line.startswith(f"# {number}. "), f"{page}: {first_line!r}"


def test_at_most_ten_visible_asserts_on_the_chapters():
    """Checks hide; an assert stays visible only where the equality is the lesson (CONTRIBUTING.md)."""
    counts = {page: visible_asserts(nav.read(page)) for page in PAGES}
    chapters = {page: n for page, n in counts.items() if n and page not in ("snippets.md", "glossary.md")}
    assert sum(chapters.values()) <= 10, chapters


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapters_have_a_write_it_yourself_exercise(page):
    exercises = nav.read(page).split("\n## Exercises\n", 1)[-1]
    assert re.search(r"write it yourself", exercises, flags=re.IGNORECASE), f"{page}: no 'write it yourself' exercise"


def _checked_solution(block) -> bool:
    """A collapsed success block titled "Solution N" whose first block is an executed python fence.

    It may carry more classes: "remember" marks the code a reader is asked to write.
    """
    if not (isinstance(block, pages.Container) and block.collapsed and block.kind == "success"
            and block.title.startswith("Solution")):
        return False
    first = next((inner for inner in block.blocks if not isinstance(inner, str) or inner.strip()), None)
    return isinstance(first, pages.Fence) and first.executed and first.language == "python"


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapters_end_with_summary_and_checked_exercises(page):
    source = nav.read(page)
    headings = re.findall(r"^## (.+)$", source, flags=re.MULTILINE)
    assert headings[-2:] == ["Summary", "Exercises"], f"{page}: last sections are {headings[-2:]}"
    exercises = source.split("\n## Exercises\n", 1)[1]
    start = source.count("\n", 0, len(source) - len(exercises))
    solutions = [block for block in pages.parse(source) if _checked_solution(block) and block.line >= start]
    numbered = re.findall(r"^\d+\. ", exercises, flags=re.MULTILINE)
    assert solutions and len(solutions) >= len(numbered), (
        f"{page}: {len(numbered)} exercises but {len(solutions)} executed, collapsed solutions"
    )


@pytest.mark.parametrize("page", PAGES)
def test_no_math_in_headings(page):
    """The table of contents shows headings as plain text: TeX there is never rendered."""
    for heading in re.findall(r"^#+ .*$", nav.read(page), flags=re.MULTILINE):
        assert "\\(" not in heading and "$" not in heading, f"{page}: {heading}"


@pytest.mark.parametrize("page", PAGES)
def test_figures_name_the_palettes_colours(page):
    """Colours come from sitekit/figures.py's palette (INDIGO, PINK, ...), never written on a page."""
    written = [
        f"line {fence.line + 1}: {match.group(0)}"
        for fence in pages.executed_fences(nav.read(page))
        for match in COLOUR_LITERAL.finditer(fence.code)
    ]
    assert not written, f"{page}: name the palette's colours (sitekit.figures): {written}"


def test_the_snippets_pages_name_what_each_module_imports():
    """"Imports `a.py` and `b.py`." under a module's heading is what its code imports from snippets/ (issue 44)."""
    import ast

    said = {}
    for page in ("snippets.md", "snippets-part-iii.md", "snippets-part-iv.md"):
        for name, section in re.findall(r"^## (\w+)\.py\n\n(.*)$", nav.read(page), flags=re.MULTILINE):
            sentence = re.search(r"Imports ([^.]*(?:\.py[^.]*)*)\.(?: |$)", section)
            said[name] = set(re.findall(r"`(\w+)\.py`", sentence.group(1))) if sentence else set()
    modules = sorted(path for path in (pages.ROOT / "snippets").glob("*.py") if path.stem != "__init__")
    assert sorted(said) == [path.stem for path in modules], "a module of snippets/ has no section, or one too many"
    for path in modules:
        imported = {node.module.removeprefix("snippets.") for node in ast.parse(path.read_text()).body
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("snippets.")}
        assert said[path.stem] == imported, f"{path.stem}.py imports {sorted(imported)}, its section: {sorted(said[path.stem])}"
