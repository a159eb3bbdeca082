"""The build on public extension points: the site's Markdown extension works without MkDocs.

``sitekit.render`` is what every engine runs (MkDocs, ProperDocs, Zensical):
these tests convert Markdown with Python-Markdown alone, configured as the
engines configure it from mkdocs.yml (superfences' custom fences calling
markdown-exec's formatter), and check what a page needs: fences run in one
session, console sessions compared, TeX as MathML, code lines in spans, and
errors marked for the post-build step. The last tests hold the rule that the
build uses no private MkDocs name and no private markdown-exec name.
"""

from __future__ import annotations

import re
import subprocess

import markdown
import markdown_exec
import pytest

from sitekit import fences, pages, render
from sitekit.pages import ROOT


def site_fences() -> list[dict]:
    """mkdocs.yml's custom fences, then markdown-exec's (its entry in mkdocs.yml appends them, as every engine does)."""
    written = pages.read_config()["markdown_extensions"]
    superfences = next(entry["pymdownx.superfences"] for entry in written
                       if isinstance(entry, dict) and "pymdownx.superfences" in entry)
    named = {"sitekit.render.shown_python": render.shown_python,
             "sitekit.render.highlighted_python": render.highlighted_python}
    own = [{**fence, "validator": named[fence["validator"]], "format": named[fence["format"]]}
           for fence in superfences["custom_fences"]]
    fenced = {"validator": markdown_exec.validator, "format": markdown_exec.formatter}
    return [*own, *({"name": name, "class": name, **fenced} for name in ("python", "pycon"))]


def convert(text: str, extensions: tuple[str, ...] = ("pymdownx.arithmatex", "sitekit.render"),
            fences: list[dict] | None = None) -> str:
    md = markdown.Markdown(
        extensions=["pymdownx.highlight", "pymdownx.superfences", *extensions],
        extension_configs={
            "pymdownx.superfences": {"custom_fences": site_fences() if fences is None else fences},
            "pymdownx.arithmatex": {"generic": True},
        },
    )
    return md.convert(text)


def test_written_for_the_pinned_markdown_exec():
    pinned = re.search(r"^markdown-exec==(\S+)", (ROOT / "requirements.txt").read_text(), flags=re.MULTILINE)
    assert pinned, "requirements.txt pins no markdown-exec"
    assert pinned.group(1) == fences.WRITTEN_FOR, "requirements.txt pins another markdown-exec: check sitekit/fences.py"
    assert fences.version_problem() is None


def test_fences_share_a_session_and_consoles_are_checked():
    page = convert(
        '```python exec="on" session="render-test" source="above" result="text"\nx = 6 * 7\nprint(x)\n```\n\n'
        '```pycon exec="on" session="render-test"\n>>> x + 1\n43\n```\n'
    )
    assert markdown_exec.formatters["python"] is fences.format_python
    assert markdown_exec.formatters["pycon"] is fences.format_console
    assert '<span class="cl">42</span>' in page, page
    assert '<span class="cl go"><span class="go">43</span></span>' in page, page  # console output, hidden from the copy button
    assert fences.ERROR_MARKER not in page


def test_a_console_mismatch_is_marked_for_every_engine():
    page = convert('```pycon exec="on" session="render-mismatch"\n>>> 1 + 1\n3\n```\n')
    assert fences.ERROR_MARKER in page and "written output differs" in page


def test_a_plain_python_fence_is_highlighted_as_superfences_would_and_once(monkeypatch):
    """mkdocs serve highlighted the Snippets pages' 5,000 lines again at every rebuild; now once per text."""
    import pymdownx.highlight

    calls = []
    highlight = pymdownx.highlight.Highlight.highlight
    monkeypatch.setattr(pymdownx.highlight.Highlight, "highlight",
                        lambda self, src, *args, **kwargs: calls.append(src) or highlight(self, src, *args, **kwargs))
    module = f"def lookup(db, key):  # {id(calls)}\n    return db[key]\n"
    titled = f'```python title="lookup.py"\n{module}```\n'
    for text in (f"```python\n{module}```\n", f"Some text.\n\n```python\n{module}```\n", titled,
                 f"```{{.python .wide}}\n{module}```\n", f"```text\n{module}```\n"):
        assert convert(text, extensions=()) == convert(text, extensions=(), fences=[]), text
    calls.clear()
    for _ in range(3):
        convert(f"```python\n{module}```\n")
    assert calls == [], "a fence kept from before was highlighted again"
    convert(titled)
    assert calls == [module.rstrip()], "a fence with an option is superfences' own"
    assert render.shown_python("python", {}, {}, {}, markdown.Markdown(extensions=["pymdownx.highlight"]))
    numbered = markdown.Markdown(extensions=["pymdownx.highlight"],
                                 extension_configs={"pymdownx.highlight": {"anchor_linenums": True}})
    assert not render.shown_python("python", {}, {}, {}, numbered), "a numbered block is not kept"


def test_tex_becomes_mathml_and_bad_tex_is_marked():
    assert "<math" in convert(r"A formula: \(x^2\).")
    assert fences.ERROR_MARKER in convert(r"Not one: \(\notacommand{x}\).")


def test_no_private_mkdocs_or_markdown_exec_name_and_no_patched_render():
    # The names, joined here so that this file is not a hit of the same grep over the repository.
    private = ["_populate" "_page", r"mkdocs\.commands" r"\.build", "_title_from" "_render", r"\.render" " *= ",
               r"markdown_exec\." "_internal", "present_anchor" "_ids"]
    found = subprocess.run(["git", "grep", "-nE", "|".join(private), "--", "hooks", "sitekit", "conftest.py"],
                           cwd=ROOT, capture_output=True, text=True)
    assert found.stdout == "", found.stdout


def test_the_hook_handles_only_what_an_engine_must():
    hook = (ROOT / "hooks" / "site.py").read_text()
    events = re.findall(r"^def (on_\w+)", hook, flags=re.MULTILINE)
    assert events == ["on_startup", "on_config", "on_files", "on_page_content", "on_post_page", "on_env", "on_post_build"], events


def test_a_replay_that_meets_another_block_runs_the_blocks_before_it_first():
    """mkdocs serve replays a page whose code key is unchanged; a block it did not keep still runs in a full session."""
    sessions = fences.Sessions()
    kept = [fences.Block("python", "x = 20", ""), fences.Block("python", "print(x)", "20\n")]
    page = fences.Page("p.md", "docs/p.md", "", [], "key", kept)
    assert sessions.run(page, "python", "x = 20", "replayed") == ""
    assert "x" not in sessions.namespaces.get("replayed", {}), "a replayed block ran"
    assert sessions.run(page, "python", "print(x + 1)", "replayed") == "21\n"
    assert page.printed[-1] == fences.Block("python", "print(x + 1)", "21\n")


def test_a_front_matter_mkdocs_cannot_read_stops_the_build_naming_the_page(tmp_path, monkeypatch):
    """MkDocs would show it as text, and read no setting from it: the extension stops instead."""
    (tmp_path / "fine.md").write_text("# 1. Fine\n")
    (tmp_path / "bad.md").write_text("---\nnotebook: [false\n---\n\n# 2. Bad\n")
    monkeypatch.setattr(pages, "DOCS", tmp_path)
    with pytest.raises(pages.FrontMatterError, match=r"bad\.md: the front matter .* is not valid YAML"):
        render._PageSources().find("# 1. Fine")


def test_markdown_exec_is_told_to_report_headings_only_for_outputs_that_may_hold_one():
    """markdown-exec keeps every page it reported headings for, for the life of the process (serve grew ~2 MB a rebuild)."""
    for output, may in [("| a | b |\n|---|---|\n| 1 | 2 |\n", False), ("plain text, 3 numbers\n", False),
                        ("<figure><svg></svg></figure>", False), ("## A heading\n", True),
                        ("<h2 id='x'>Term</h2>", True), ("Title\n=====\n", True), ("Title\n---\n", True),
                        ("#hashtag\n", False)]:
        run, update_toc = fences._run_first(lambda code, output=output, **_: output, "code", {})
        assert update_toc is may, output
        assert run("code", session=None) == output
    problem = fences.ExecutionError("the block raised")

    def raising(code, **_):
        raise problem

    run, update_toc = fences._run_first(raising, "code", {})
    assert update_toc is False
    with pytest.raises(fences.ExecutionError) as raised:
        run("code")
    assert raised.value is problem


def test_a_console_session_shows_its_comment_lines_where_they_were_written():
    """doctest skips a prompt that holds only a comment; the page must not (readers lost 97 of them)."""
    from sitekit.console import run_console

    written = ">>> # the keys\n>>> 1 + 1\n2\n    >>> #  indented\n>>> x = 3\n>>> # last\n"
    transcript, mismatches = run_console(written, {})
    assert mismatches == []
    assert transcript.split("\n") == [">>> # the keys", ">>> 1 + 1", "2", ">>> #  indented", ">>> x = 3", ">>> # last"]
