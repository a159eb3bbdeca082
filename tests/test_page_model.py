"""The page model (sitekit/pages.py) and what is read with it: fences, containers, includes, imports, keys and the nav."""

from __future__ import annotations

import html
import re
import textwrap
from pathlib import Path

import pytest

from sitekit import keys, nav, pages
from sitekit.notebooks import chapter_notebook
from support.page_queries import outside_fences, session_name, visible_asserts

PAGE = textwrap.dedent(
    '''\
    # 1. A page

    ```python exec="on" session="a-page" source="above"
    x = 1
    ```

    ```pycon exec="on" session="a-page"
    >>> x + 1
    2
    ```

    ```python
    shown = "not run"
    ```

    ??? success "Solution 1"

        ```python exec="on" session="a-page"
        assert x == 1  # markdown-exec: hide
        ```

    ```bash exec="on" session="a-page"
    echo "a language the site does not run"
    ```
    '''
)


def test_fences_are_found_in_containers_with_the_lines_of_the_page():
    found = list(pages.fences(PAGE))
    assert [fence.language for fence in found] == ["python", "pycon", "python", "python", "bash"]
    assert [fence.line + 1 for fence in found] == [3, 7, 12, 18, 22]
    executed = pages.executed_fences(PAGE)
    assert [fence.line + 1 for fence in executed] == [3, 7, 18]
    assert {fence.session for fence in executed} == {"a-page"}
    assert executed[2].code == 'assert x == 1  # markdown-exec: hide'
    assert [fence.language for fence in pages.unexecuted_fences(PAGE)] == ["bash"]


def test_the_container_keeps_its_title_and_blocks():
    containers = [block for block in pages.parse(PAGE) if isinstance(block, pages.Container)]
    assert len(containers) == 1
    solution = containers[0]
    assert (solution.kind, solution.title, solution.collapsed) == ("success", "Solution 1", True)
    assert [block.line for block in solution.blocks if isinstance(block, pages.Fence)] == [17]


def test_what_a_reader_sees():
    first, console, shown, hidden, _ = pages.fences(PAGE)
    assert first.shows_code and console.shows_code and shown.shows_code and not hidden.shows_code
    assert console.python() == "x + 1\n"
    assert visible_asserts(PAGE) == 0
    assert "x = 1" not in outside_fences(PAGE) and "??? success" in outside_fences(PAGE)


# ---------------------------------------------------------------- containers

_RENDERED = [
    # Python-Markdown's admonition
    re.compile(r'<div class="admonition (?P<classes>[^"]*)">\s*(?:<p class="admonition-title">(?P<title>.*?)</p>)?'),
    # pymdownx.details
    re.compile(r'<details(?: class="(?P<classes>[^"]*)")?(?P<open> open="open")?>\s*<summary>(?P<title>.*?)</summary>'),
]


def _as_rendered(header: str) -> tuple[tuple[str, ...], str, bool] | None:
    """``(classes, title, collapsed)`` of the container Python-Markdown makes of ``header``, or None."""
    import markdown

    text = markdown.markdown(header + "\n\n    body\n", extensions=list(pages.CONTAINER_EXTENSIONS.values()))
    for pattern in _RENDERED:
        found = pattern.match(text)
        if found:
            fields = found.groupdict()
            collapsed = text.startswith("<details") and not fields.get("open")
            return tuple((fields.get("classes") or "").split()), html.unescape(fields["title"] or ""), collapsed
    return None


@pytest.mark.parametrize(
    "header",
    [
        "!!! note",
        "!!!note",
        '!!! note ""',
        '!!! Note Extra  "A  title"',
        '!!! note "Why "soft" keys?"',
        "??? info",
        "??? success remember",
        '??? success remember "Solution 5"',
        '???+ note "Open at first"',
        '??? "Only a title"',
        '=== "A tab: pymdownx.tabbed is not loaded, so prose"',
        '!!! "a title, no class"',
        "=== no quotes",
        "??? ",
    ],
)
def test_container_headers_read_as_python_markdown_reads_them(header):
    """Every class and the title, as the extensions mkdocs.yml loads render them; a header they do not read is prose."""
    read = pages.container_header(header)
    rendered = _as_rendered(header)
    assert (read is None) == (rendered is None), (read, rendered)
    if read is not None:
        mark, classes, title = read
        container = pages.Container(mark, classes, title, (), 0, header)
        assert (classes, title, container.collapsed) == rendered


# A line that looks like a container's header: the check below needs no parser's opinion.
_LOOKS_LIKE_A_HEADER = re.compile(r'^\s*(?:!!!|\?\?\?|={3}[+!]* +")')


@pytest.mark.parametrize("page", sorted(path.relative_to(pages.DOCS).as_posix() for path in pages.DOCS.rglob("*.md")))
def test_every_container_header_on_every_page_parses_into_a_container(page):
    """No ``???``/``!!!`` line is left as prose: it would reach the notebook and the tests as text.

    Nor a tab's ``===``: pymdownx.tabbed is not loaded, and the line would be a paragraph.
    """
    text = nav.read(page)

    def containers(blocks):
        for block in blocks:
            if isinstance(block, pages.Container):
                yield block
                yield from containers(block.blocks)

    parsed = {block.line: block for block in containers(pages.parse(text))}
    in_fences = {fence.line + n for fence in pages.fences(text) for n in range(fence.source.count("\n") + 1)}
    lines = text.split("\n")
    written = {n for n, line in enumerate(lines) if _LOOKS_LIKE_A_HEADER.match(line) and n not in in_fences}
    assert sorted(written) == sorted(parsed), [lines[n] for n in sorted(written ^ set(parsed))]
    assert all(lines[line].strip() == container.header.strip() for line, container in parsed.items()), page


# -------------------------------------------------------------- front matter


@pytest.mark.parametrize("page", sorted(path.relative_to(pages.DOCS).as_posix() for path in pages.DOCS.rglob("*.md")))
def test_front_matter_is_read_as_mkdocs_reads_it(page):
    from mkdocs.utils.meta import get_data

    text = nav.read(page)
    markdown_text, settings = get_data(text)
    assert pages.split_front_matter(text, page) == (settings, markdown_text)


@pytest.mark.parametrize(
    ("text", "settings"),
    [
        ("# 1. No front matter\n", {}),
        ("---\nnotebook: false\n---\n# 1. T\n", {"notebook": False}),
        ("---  \nnotebook: no   # YAML 1.1: no is false\nreads:\n  - data\n...\n\n\n# 1. T\n",
         {"notebook": False, "reads": ["data"]}),
        ("---\n# a comment only\ntitle: 'A: title'\n---\n# 1. T\n", {"title": "A: title"}),
    ],
)
def test_front_matter_cases(text, settings):
    from mkdocs.utils.meta import get_data

    assert pages.front_matter(text) == settings
    assert (settings, pages.without_front_matter(text)) == get_data(text)[::-1]
    # Its lines are not Markdown: blank lines to the page model, which keeps the page's line numbers.
    blocks = pages.parse(text)
    assert len(blocks) == text.count("\n") + 1 and blocks[text[: text.index("# 1.")].count("\n")].startswith("# 1.")
    assert all(not block.strip() for block in blocks[: text[: text.index("# 1.")].count("\n")])


@pytest.mark.parametrize(
    ("front", "message"),
    [
        ("notebook: [false\n", "docs/bad.md: the front matter .* is not valid YAML, so MkDocs would show it as text"),
        ("- notebook\n", "docs/bad.md: the front matter .* is YAML but not a mapping of names to values"),
        ("notebook: 'false'\n", "docs/bad.md: notebook: in the front matter must be true or false, not 'false'"),
        ("reads: {data: 1}\n", "docs/bad.md: reads: in the front matter must be a list of paths"),
    ],
)
def test_a_front_matter_mkdocs_cannot_read_is_an_error_naming_the_page(project, front, message):
    (project / "docs" / "bad.md").write_text(f"---\n{front}---\n\n# 1. Bad\n")
    with pytest.raises(pages.FrontMatterError, match=message):
        nav.offers_notebook("bad.md", project / "docs")
        pages.data_files(nav.read("bad.md", project / "docs"), project, "docs/bad.md")


def test_the_front_matter_says_which_pages_offer_a_notebook_and_what_they_read(project):
    docs = project / "docs"
    (project / "data").mkdir()
    (project / "data" / "weights.txt").write_text("1\n")
    (docs / "off.md").write_text("---\nnotebook: no\nreads: data/weights.txt\n---\n# 1. Off\n")
    (docs / "on.md").write_text("---\ntitle: On\n---\n# 2. On\n")
    assert not nav.offers_notebook("off.md", docs) and nav.offers_notebook("on.md", docs)
    assert pages.data_files(nav.read("off.md", docs), project) == [project / "data" / "weights.txt"]
    assert nav.notebook_pages([{"1. Off": "off.md"}, {"2. On": "on.md"}], docs) == ["on.md"]


# ------------------------------------------------------------------ includes


@pytest.fixture
def project(tmp_path) -> Path:
    """A small repository: snippets/ with a module that imports another, docs/ with one page."""
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "__init__.py").write_text('"""The library."""\n')
    (tmp_path / "snippets" / "attention.py").write_text(
        "def softmax(x):\n    return x\n\n\n# --8<-- [start:shown]\ndef shown():\n    return 1\n# --8<-- [end:shown]\n"
    )
    (tmp_path / "snippets" / "lookup.py").write_text("from .attention import softmax\n\nLOOKUP = softmax\n")
    (tmp_path / "snippets" / "unused.py").write_text("UNUSED = 1\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: A site\nnav:\n  - 1. Soft keys: soft-keys.md\n")
    return tmp_path


def test_includes_expand_as_pymdownx_snippets_does(project):
    (project / "part.md").write_text('before\n    --8<-- "snippets/attention.py:shown"\nafter\n')
    text = 'top\n--8<-- "part.md"\n'
    assert pages.expand_includes(text, project) == "top\nbefore\n    def shown():\n        return 1\nafter\n"
    whole = pages.expand_includes('--8<-- "snippets/attention.py"', project)
    assert "def softmax" in whole and "--8<--" not in whole
    assert pages.included_files(text, project) == [project / "part.md", project / "snippets/attention.py"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('--8<-- "snippets/missing.py"', 'there is no file snippets/missing.py'),
        ('--8<-- "snippets/attention.py:absent"', "snippets/attention.py has no section 'absent'"),
        ('--8<-- "loop.md"', '--8<-- "loop.md" includes itself: loop.md -> loop.md'),
    ],
)
def test_a_missing_file_or_section_is_a_clear_error(project, line, message):
    (project / "loop.md").write_text('--8<-- "loop.md"\n')
    with pytest.raises(pages.IncludeError, match=message):
        pages.expand_includes(line, project)


# ------------------------------------------------------------------- imports


def test_imports_are_read_by_pythons_parser():
    assert keys.imported_modules(["import snippets.lookup as lk"]) == ["snippets", "snippets._checks", "snippets.lookup"]
    assert keys.imported_modules(['text = "from snippets import lookup"', "import numpy"]) == []
    assert keys.imported_modules(["from snippets import (\n    attention,\n)"]) == [
        "snippets", "snippets._checks", "snippets.attention"]
    assert keys.imported_modules(["this is not Python"]) == []


def test_import_as_library_is_a_dependency_of_the_page_and_ships_with_its_notebook(project):
    """``from snippets import attention as library``, alone on a page (docs/soft-keys.md has this line).

    The serve cache must re-render the page when snippets/attention.py changes,
    and the notebook must ship that module: both ask the page model, so they
    name the same modules (the serve cache used to find none here).
    """
    page = project / "docs" / "soft-keys.md"
    page.write_text(
        '# 1. Soft keys\n\n```pycon exec="on" session="soft-keys"\n>>> from snippets import attention as library\n'
        '>>> library.softmax(1)\n1\n```\n\n```python exec="on" session="soft-keys"\nfrom snippets.lookup import LOOKUP\n```\n'
    )
    modules = {project / "snippets" / name for name in ("__init__.py", "attention.py", "lookup.py")}
    in_key = {path for path in keys.dependencies(page, project) if path.parent == project / "snippets"}
    assert in_key == modules

    notebook = chapter_notebook("soft-keys.md", docs_dir=project / "docs", site_url="https://example.org/", base=project)
    setup = notebook.cells[1].source
    shipped = {project / name for name in ("snippets/__init__.py", "snippets/attention.py", "snippets/lookup.py")}
    assert {path for path in shipped if f"'{path.relative_to(project).as_posix()}'" in setup} == in_key
    assert "snippets/unused.py" not in setup


def test_the_page_key_follows_what_the_page_imports(project):
    page = project / "docs" / "soft-keys.md"
    page.write_text('# 1. Soft keys\n\n```python exec="on" session="soft-keys"\nfrom snippets import attention as library\n```\n')
    before = keys.page_key(page, project)
    (project / "snippets" / "unused.py").write_text("UNUSED = 2\n")
    assert keys.page_key(page, project) == before
    (project / "snippets" / "attention.py").write_text("def softmax(x):\n    return 2 * x\n")
    assert keys.page_key(page, project) != before


def test_what_imported_modules_finds_follows_the_files_as_they_are_now(project):
    """mkdocs serve asks at every rebuild: a module that appears, an import added or a module removed shows at once."""
    code = ["from snippets import lookup, later"]
    assert keys.imported_modules(code, project) == ["snippets", "snippets.attention", "snippets.lookup"]
    (project / "snippets" / "later.py").write_text("LATER = 1\n")  # a module that did not exist
    assert keys.imported_modules(code, project) == ["snippets", "snippets.attention", "snippets.later", "snippets.lookup"]
    (project / "snippets" / "later.py").write_text("from .unused import UNUSED\n")  # an edit that imports another
    assert "snippets.unused" in keys.imported_modules(code, project)
    (project / "snippets" / "later.py").unlink()
    assert keys.imported_modules(code, project) == ["snippets", "snippets.attention", "snippets.lookup"]


def test_the_code_key_ignores_prose_and_follows_code_modules_and_data(project):
    """What mkdocs serve replays a page's outputs by (sitekit/run.py): everything but the prose."""
    page = project / "docs" / "soft-keys.md"
    (project / "tools").mkdir()
    (project / "tools" / "run.py").write_text("from snippets.lookup import LOOKUP\n")
    (project / "data").mkdir()
    (project / "data" / "weights.txt").write_text("1\n")
    text = (
        "---\nreads: [data]\n---\n\n# 1. Soft keys\n\nProse.\n\n"
        '```python exec="on" session="soft-keys"\nfrom tools import run\n```\n'
    )
    page.write_text(text)
    assert {path.relative_to(project).as_posix() for path in keys.dependencies(page, project)} >= {
        "tools/run.py", "snippets/lookup.py", "snippets/attention.py", "data/weights.txt"}
    before, page_before = keys.code_key(page, project), keys.page_key(page, project)

    page.write_text(text.replace("Prose.", "Prose, edited."))
    assert keys.code_key(page, project) == before and keys.page_key(page, project) != page_before
    for edit in (
        lambda: page.write_text(text.replace("import run", "import run  # edited")),
        lambda: (project / "data" / "weights.txt").write_text("2\n"),
        lambda: (project / "snippets" / "attention.py").write_text("def softmax(x):\n    return 3 * x\n"),
        lambda: (project / "tools" / "run.py").write_text("RUN = 2\n"),
    ):
        page.write_text(text)
        key = keys.code_key(page, project)
        edit()
        assert keys.code_key(page, project) != key


def test_the_code_key_counts_every_module_the_code_reaches_whole(project):
    """An edit anywhere in a module the page's code imports, or in one that module imports, runs the page again.

    Nothing finer than a file (``sitekit.keys``): not the statements the code
    reaches, whose list could miss a module read at run time.
    """
    page = project / "docs" / "soft-keys.md"
    lookup = project / "snippets" / "lookup.py"
    page.write_text('# 1. Soft keys\n\n```python exec="on" session="soft-keys"\nfrom snippets.lookup import LOOKUP\n```\n')
    key = keys.code_key(page, project)

    def changed(path: Path, old: str, new: str) -> bool:
        nonlocal key
        path.write_text(path.read_text().replace(old, new))
        before, key = key, keys.code_key(page, project)
        return key != before

    assert changed(lookup, "LOOKUP = softmax", "LOOKUP = softmax\nOTHER = 5"), "a name the page does not use"
    assert changed(lookup, "OTHER = 5", "OTHER = 5  # a comment"), "a comment"
    assert changed(project / "snippets" / "attention.py", "return x", "return -x"), "a module it imports in turn"
    assert not changed(project / "snippets" / "unused.py", "UNUSED = 1", "UNUSED = 2"), "a module nothing imports"
    assert changed(lookup, "from .attention import softmax", "from .attention import softmax\nfrom .unused import UNUSED")
    assert changed(project / "snippets" / "unused.py", "UNUSED = 2", "UNUSED = 3"), "and now it is imported"


def test_data_a_page_says_it_reads_must_exist(project):
    page = project / "docs" / "soft-keys.md"
    page.write_text("---\nreads: [docs/training]\n---\n\n# 1. Soft keys\n")
    with pytest.raises(FileNotFoundError, match="the front matter says the page reads 'docs/training', which is not in"):
        keys.dependencies(page, project)


# ----------------------------------------------------------------------- nav

NAV = [
    {"Home": "index.md"},
    {"Part I": [{"1. Dictionaries": "dictionaries.md"}, {"Notebook: recap": "notebooks/recap.md"}]},
    {"Part II": [{"2. Writing": "kv-cache.md"}]},
    {"Reference": [{"Glossary": "glossary.md"}, "snippets.md"]},
]


def test_the_nav():
    assert nav.nav_sources(NAV) == [
        "index.md", "dictionaries.md", "notebooks/recap.md", "kv-cache.md", "glossary.md", "snippets.md",
    ]
    assert nav.chapters(NAV) == ["dictionaries.md", "kv-cache.md"]
    assert nav.notebook_pages(NAV) == ["dictionaries.md", "notebooks/recap.md", "kv-cache.md"]


@pytest.mark.parametrize(
    ("source", "url", "built"),
    [
        ("index.md", "", "index.html"),
        ("soft-keys.md", "soft-keys/", "soft-keys/index.html"),
        ("notebooks/dict-to-attention.md", "notebooks/dict-to-attention/", "notebooks/dict-to-attention/index.html"),
    ],
)
def test_page_addresses(source, url, built):
    assert nav.page_url(source) == url
    assert nav.built_page(source) == built


def test_the_real_nav_is_read_without_mkdocs(mkdocs_config):
    assert nav.load_nav() == mkdocs_config["nav"]
    assert session_name("notebooks/dict-to-attention.md") == "notebooks-dict-to-attention"


# ------------------------------------------------- the grammar and the build


def test_the_grammar_accepts_exactly_what_the_build_builds():
    """Every fence the page model calls executed is run and placed by the build, in every container it reads.

    The languages it executes are the ones markdown-exec is configured for in
    mkdocs.yml, each with sitekit.render's formatter; the containers it reads
    are the extensions mkdocs.yml loads. A page with a fence of each executed
    language at the top and in each container, converted as every engine
    converts it, shows each block's output, in page order, and no build error.
    """
    import markdown
    import markdown_exec
    from mkdocs.config import load_config

    from sitekit import render
    from sitekit.report import ERROR_MARKER

    config = load_config(str(pages.ROOT / "mkdocs.yml"))
    assert set(pages.EXECUTED_LANGUAGES) == set(config.plugins["markdown-exec"].config["languages"])
    assert set(pages.CONTAINER_EXTENSIONS.values()) <= set(config.markdown_extensions)
    config = config.plugins.on_config(config)  # markdown-exec's custom fences, as under every engine
    md = markdown.Markdown(extensions=config.markdown_extensions, extension_configs=config.mdx_configs)
    assert {language: markdown_exec.formatters[language] for language in pages.EXECUTED_LANGUAGES} == {
        "python": render.format_python, "pycon": render.format_console}

    fences = {"python": 'print("printed {n}")', "pycon": '>>> print("printed {n}")\nprinted {n}'}
    headers = [None, *(f"{mark} note" for mark in pages.CONTAINER_EXTENSIONS), "???+ note"]
    parts, n = ["# A page"], 0
    for header in headers:
        for language, code in fences.items():
            fence = f'```{language} exec="on" session="grammar"\n{code.format(n=n)}\n```'
            parts.append(fence if header is None else header + "\n\n" + textwrap.indent(fence, "    "))
            n += 1
    text = "\n\n".join(parts) + "\n"
    assert len(pages.executed_fences(text)) == n
    html = md.convert(text)
    assert ERROR_MARKER not in html, html
    shown = [int(found) for found in re.findall(r"printed (\d+)", html)]
    assert sorted(set(shown)) == list(range(n)) and shown == sorted(shown), shown


@pytest.mark.parametrize(
    "fence",
    [
        'py exec="on" session="grammar"',  # markdown-exec is not configured for py: it would not run
        'bash exec="on" session="grammar"',
    ],
)
def test_a_fence_the_build_would_not_run_is_not_executed(fence):
    text = f"# A page\n\n```{fence}\nprint(1)\n```\n"
    assert pages.executed_fences(text) == [] and len(pages.unexecuted_fences(text)) == 1
