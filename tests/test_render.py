"""The build on public extension points: the site's Markdown extension works without MkDocs.

``sitekit.render`` is what every engine runs (MkDocs, ProperDocs, Zensical):
these tests convert Markdown with Python-Markdown alone, configured as the
engines configure it from mkdocs.yml (superfences' custom fences calling
markdown-exec's formatter), and check what a page needs: fences run in one
session, console sessions compared, TeX as MathML, code lines in spans, and
errors marked for the post-build step; a page's blocks run in order and stop
at the first that fails, and may not change the clone. The hook's tests hold
the rule that the build uses no private MkDocs name and no private
markdown-exec name.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import markdown
import markdown_exec
import pytest

from sitekit import nav, render, run
from sitekit.pages import ROOT
from sitekit.report import ERROR_MARKER


def site_fences() -> list[dict]:
    """mkdocs.yml's custom fences, then markdown-exec's (its entry in mkdocs.yml appends them, as every engine does)."""
    written = nav.read_config()["markdown_extensions"]
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
    assert pinned.group(1) == render.WRITTEN_FOR, "requirements.txt pins another markdown-exec: check sitekit/render.py"
    assert render.version_problem() is None


def test_fences_share_a_session_and_consoles_are_checked():
    page = convert(
        '```python exec="on" session="render-test" source="above" result="text"\nx = 6 * 7\nprint(x)\n```\n\n'
        '```pycon exec="on" session="render-test"\n>>> x + 1\n43\n```\n'
    )
    assert markdown_exec.formatters["python"] is render.format_python
    assert markdown_exec.formatters["pycon"] is render.format_console
    assert '<span class="cl">42</span>' in page, page
    assert '<span class="cl go"><span class="go">43</span></span>' in page, page  # console output, hidden from the copy button
    assert ERROR_MARKER not in page


def test_a_console_mismatch_is_marked_for_every_engine():
    page = convert('```pycon exec="on" session="render-mismatch"\n>>> 1 + 1\n3\n```\n')
    assert ERROR_MARKER in page and "written output differs" in page


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
    assert ERROR_MARKER in convert(r"Not one: \(\notacommand{x}\).")


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
    assert events == ["on_startup", "on_config", "on_files", "on_page_markdown", "on_page_content", "on_post_page",
                      "on_env", "on_post_build"], events


def test_mkdocs_serve_watches_every_folder_of_code_a_page_depends_on(mkdocs_config):
    """An edit under hooks/ or sitekit/ restarts the server (hooks/site.py), one under snippets/ or tools/ rebuilds."""
    from sitekit import keys

    watched = {Path(folder).resolve() for folder in mkdocs_config["watch"]}
    assert {ROOT / folder for folder in (*keys.SITE_CODE, *keys.LOCAL_PACKAGES)} <= watched


def test_a_page_runs_in_order_and_stops_at_the_block_that_fails():
    """The blocks after a failing one are not run and say so: no NameError for the names it did not define."""
    page = convert(
        '# A page\n\n```python exec="on" session="stops"\nx = 1\nprint(x)\n```\n\n'
        '```python exec="on" session="stops"\ny = x + 1\nraise RuntimeError("broken on purpose")\n```\n\n'
        '```python exec="on" session="stops"\nprint(y)\n```\n\n'
        '```pycon exec="on" session="stops"\n>>> y\n2\n```\n'
    )
    assert '<span class="cl">1</span>' in page or ">1<" in page, page
    assert "RuntimeError: broken on purpose" in page and "NameError" not in page, page
    assert page.count("not run: an earlier block of this page failed (the page line 8)") == 2, page
    assert page.count(ERROR_MARKER) == 1, "one error: the block that failed"


def test_a_fence_the_page_model_did_not_find_there_is_an_error():
    """The formatters place the page's n-th block at markdown-exec's n-th call, and check that it is that fence."""
    html = render.format_python("print(2)", markdown.Markdown(), session="lost")
    assert ERROR_MARKER in html and "where the page model (sitekit.pages) finds no executed fence" in html, html


def test_a_py_fence_is_refused_and_the_fence_it_swallows_is_missed(caplog):
    """markdown-exec runs no ``py`` fence, and superfences reads the next fence into it: both are build errors."""
    convert('# A page\n\n```py exec="on" session="py"\nprint(1)\n```\n\n'
            '```python exec="on" session="py"\nprint(2)\n```\n')
    logged = caplog.text
    assert 'the page line 3: ```py exec="on" session="py" is marked exec="on", but this site executes only' in logged
    assert "the page line 7: the page model finds an executed fence here that markdown-exec was never handed" in logged


def test_a_named_page_with_a_front_matter_mkdocs_cannot_read_is_an_error_naming_it(tmp_path):
    """MkDocs would show it as text, and read no setting from it (hooks/site.py names the page's file)."""
    page = tmp_path / "bad.md"
    page.write_text("---\nnotebook: [false\n---\n\n# 2. Bad\n")
    html = convert(render.named("# 2. Bad\n", str(page)))
    assert ERROR_MARKER in html and re.search(r"bad\.md front matter: .*bad\.md: the front matter .* is not valid YAML", html)


def test_a_named_page_is_run_from_its_file_and_its_errors_name_its_lines(tmp_path):
    """With the page's file named, a block's line is the file's, front matter included."""
    text = '---\ntitle: Named\n---\n\n# Named\n\n```python exec="on" session="named"\nraise ValueError("line 8")\n```\n'
    page = tmp_path / "named.md"
    page.write_text(text)
    html = convert(render.named(text.split("---\n\n", 1)[1], str(page)))
    assert f"{page} line 8: the block raised ValueError" in html, html


def test_markdown_exec_is_told_to_report_headings_only_for_outputs_that_may_hold_one():
    """markdown-exec keeps every page it reported headings for, for the life of the process (serve grew ~2 MB a rebuild)."""
    fence = run.pages.Fence('python exec="on"', "", 0, "")
    for output, may in [("| a | b |\n|---|---|\n| 1 | 2 |\n", False), ("plain text, 3 numbers\n", False),
                        ("<figure><svg></svg></figure>", False), ("## A heading\n", True),
                        ("<h2 id='x'>Term</h2>", True), ("Title\n=====\n", True), ("Title\n---\n", True),
                        ("#hashtag\n", False)]:
        assert render.update_toc(run.Block(fence, "", output), {}) is may, output
        assert render.update_toc(run.Block(fence, "", output), {"result": "text"}) is False
    assert render.update_toc(run.Block(fence, "", "## A heading", run.Failure("raised")), {}) is False


def test_a_block_that_changes_the_clone_fails_and_the_clone_is_put_back():
    """Anywhere in the clone, not only docs/ and snippets/: the file written, deleted or made is put back as it was."""
    existing = ROOT / "artifacts" / f"kept-{uuid.uuid4().hex}.txt"
    existing.parent.mkdir(exist_ok=True)
    existing.write_text("as it was")
    made = ROOT / "tools" / f"made-{uuid.uuid4().hex}"
    try:
        with run.PageRun() as page_run:
            with pytest.raises(run.WriteError) as raised, page_run.block("docs/a-page.md line 3"):
                existing.write_text("changed")
                made.mkdir()
                (made / "inside.txt").write_text("new")
                Path("relative.txt").write_text("into the page's own working folder: allowed")
            message = str(raised.value)
            assert message.startswith("docs/a-page.md line 3: the block ")
            assert f"wrote artifacts/{existing.name}" in message and f"made tools/{made.name}/" in message
            assert "relative.txt" not in message and (Path(page_run.folder) / "relative.txt").is_file()
            assert existing.read_text() == "as it was" and not made.exists()
            with pytest.raises(run.WriteError, match=f"deleted artifacts/{existing.name}"), page_run.block("line 5"):
                existing.unlink()
            assert existing.read_text() == "as it was"
    finally:
        existing.unlink(missing_ok=True)


def test_byte_code_the_import_system_writes_is_not_a_change_to_the_clone(monkeypatch):
    """A newcomer's Python writes byte code (PYTHONDONTWRITEBYTECODE unset): the __pycache__ folder an import makes is allowed."""
    package = ROOT / "tools" / f"fresh_{uuid.uuid4().hex}"
    package.mkdir()
    (package / "__init__.py").write_text("ANSWER = 42\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.syspath_prepend(str(package.parent))
    try:
        with run.PageRun() as page_run, page_run.block("docs/a-page.md line 3"):
            assert importlib.import_module(package.name).ANSWER == 42
        assert (package / "__pycache__").is_dir()
    finally:
        sys.modules.pop(package.name, None)
        shutil.rmtree(package)


def test_a_console_session_shows_its_comment_lines_where_they_were_written():
    """doctest skips a prompt that holds only a comment; the page must not (readers lost 97 of them)."""
    from sitekit.console import run_console

    written = ">>> # the keys\n>>> 1 + 1\n2\n    >>> #  indented\n>>> x = 3\n>>> # last\n"
    transcript, mismatches = run_console(written, {})
    assert mismatches == []
    assert transcript.split("\n") == [">>> # the keys", ">>> 1 + 1", "2", ">>> #  indented", ">>> x = 3", ">>> # last"]
