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
    notebooks = sorted(p.relative_to(DOCS).as_posix() for p in (DOCS / "notebooks").glob("*.py"))
    missing = [page for page in PAGES + notebooks if page not in in_nav]
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_one_session_per_page_named_after_the_page(page):
    source = (DOCS / page).read_text(encoding="utf-8")
    expected = page.removesuffix(".md").replace("/", "-")
    for match in EXECUTED_FENCE.finditer(source):
        assert f'session="{expected}"' in match.group("options"), (
            f"{page}: executed fence {match.group(0).strip()!r} should have session={expected!r}"
        )


def test_the_five_chapters_are_found():
    assert CHAPTERS == ["dictionaries.md", "matrix-lookup.md", "soft-keys.md", "multi-head.md", "at-scale.md"]


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapters_end_with_summary_and_checked_exercises(page):
    source = (DOCS / page).read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", source, flags=re.MULTILINE)
    assert headings[-2:] == ["Summary", "Exercises"], f"{page}: last sections are {headings[-2:]}"
    exercises = source.split("\n## Exercises\n", 1)[1]
    solutions = re.findall(r'^\?\?\? success "Solution[^"]*"\n\n    ```python exec="on"', exercises, flags=re.MULTILINE)
    numbered = re.findall(r"^\d+\. ", exercises, flags=re.MULTILINE)
    assert solutions and len(solutions) >= len(numbered), (
        f"{page}: {len(numbered)} exercises but {len(solutions)} executed, collapsed solutions"
    )


@pytest.mark.parametrize("page", PAGES)
def test_no_math_in_headings(page):
    """The table of contents shows headings as plain text: TeX there is never rendered."""
    for heading in re.findall(r"^#+ .*$", (DOCS / page).read_text(encoding="utf-8"), flags=re.MULTILINE):
        assert "\\(" not in heading and "$" not in heading, f"{page}: {heading}"
