"""The conventions every page keeps, checked on the Markdown sources."""

from __future__ import annotations

import re

import pytest

from sitebuild import ROOT, nav_sources

DOCS = ROOT / "docs"
PAGES = sorted(path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md"))
# Chapters are the nav entries titled with their number ("3. Soft keys: soft-keys.md").
CHAPTERS = re.findall(r"^\s*- \d+\. [^:]+: (\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), flags=re.MULTILINE)
EXECUTED_FENCE = re.compile(r'^\s*```(?:python|py|pycon)\b(?P<options>.*exec="(?:on|true|1)".*)$', re.MULTILINE)


def test_every_page_is_in_the_nav(mkdocs_config):
    in_nav = set(nav_sources(mkdocs_config["nav"]))
    missing = [page for page in PAGES if page not in in_nav]
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_one_session_per_page_named_after_the_page(page):
    source = (DOCS / page).read_text(encoding="utf-8")
    expected = page.removesuffix(".md").replace("/", "-")
    for match in EXECUTED_FENCE.finditer(source):
        assert f'session="{expected}"' in match.group("options"), (
            f"{page}: executed fence {match.group(0).strip()!r} should have session={expected!r}"
        )


def test_the_chapters_are_found_in_the_curriculums_order():
    assert CHAPTERS == [
        "dictionaries.md", "matrix-lookup.md", "soft-keys.md", "learning-soft-keys.md",
        "keys-and-positions.md", "multi-head.md", "at-scale.md",
        "kv-cache.md", "linear-attention.md", "attention-sinks.md", "weight-memories.md", "induction-heads.md",
        "transformer-block.md",
    ]


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_titles_carry_their_number(page):
    number = CHAPTERS.index(page) + 1
    first_line = (DOCS / page).read_text(encoding="utf-8").split("\n", 1)[0]
    assert first_line.startswith(f"# {number}. "), f"{page}: {first_line!r}"


def visible_asserts(source: str) -> int:
    """``assert`` lines a reader sees in the fences of a page (hidden ones end in the hide marker)."""
    count, fenced, shown = 0, False, False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            # markdown-exec shows an executed fence's code only with a source= option
            shown = fenced and ("exec=" not in stripped or "source=" in stripped or stripped.startswith("```pycon"))
            continue
        if fenced and shown and re.match(r"(>>> )?assert\b", stripped) and not stripped.endswith("# markdown-exec: hide"):
            count += 1
    return count


def test_at_most_ten_visible_asserts_on_the_chapters():
    """Checks hide; an assert stays visible only where the equality is the lesson (STYLE.md)."""
    counts = {page: visible_asserts((DOCS / page).read_text(encoding="utf-8")) for page in PAGES}
    chapters = {page: n for page, n in counts.items() if n and page not in ("snippets.md", "glossary.md")}
    assert sum(chapters.values()) <= 10, chapters


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapters_have_a_write_it_yourself_exercise(page):
    exercises = (DOCS / page).read_text(encoding="utf-8").split("\n## Exercises\n", 1)[-1]
    assert re.search(r"write it yourself", exercises, flags=re.IGNORECASE), f"{page}: no 'write it yourself' exercise"


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapters_end_with_summary_and_checked_exercises(page):
    source = (DOCS / page).read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", source, flags=re.MULTILINE)
    assert headings[-2:] == ["Summary", "Exercises"], f"{page}: last sections are {headings[-2:]}"
    exercises = source.split("\n## Exercises\n", 1)[1]
    # a solution may carry more classes: "remember" marks the code a reader is asked to write
    solutions = re.findall(r'^\?\?\? success(?: [\w-]+)* "Solution[^"]*"\n\n    ```python exec="on"', exercises,
                           flags=re.MULTILINE)
    numbered = re.findall(r"^\d+\. ", exercises, flags=re.MULTILINE)
    assert solutions and len(solutions) >= len(numbered), (
        f"{page}: {len(numbered)} exercises but {len(solutions)} executed, collapsed solutions"
    )


@pytest.mark.parametrize("page", PAGES)
def test_no_math_in_headings(page):
    """The table of contents shows headings as plain text: TeX there is never rendered."""
    for heading in re.findall(r"^#+ .*$", (DOCS / page).read_text(encoding="utf-8"), flags=re.MULTILINE):
        assert "\\(" not in heading and "$" not in heading, f"{page}: {heading}"
