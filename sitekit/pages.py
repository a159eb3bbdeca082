"""The page model: the grammar of a page of ``docs/``, read in one place.

A page is Markdown written for MkDocs, markdown-exec and the extensions
mkdocs.yml loads. Everything that reads a page's source asks this module:
the page runner (``sitekit.run``), the site's Markdown extension, pytest
(``conftest.py`` turns executed fences into tests), the chapter notebooks,
the keys ``mkdocs serve`` keeps outputs by (``sitekit.keys``) and the tests of
the pages' conventions. So they cannot disagree on what a page holds, and it
accepts exactly what the build builds (``tests/test_page_model.py`` checks
both lists below against mkdocs.yml):

- **front matter**: the YAML block a page may start with, read as MkDocs
  reads it (:func:`front_matter`); one that MkDocs could not read is a
  :class:`FrontMatterError` that names the page;
- **containers**: admonitions (``!!! note``) and collapsible blocks
  (``??? success remember "Solution 1"``, ``???+ note``), with every class
  and the title the page shows, read with the header syntax of
  Python-Markdown's admonition and pymdownx.details
  (:data:`CONTAINER_EXTENSIONS`), each holding its own blocks (:class:`Container`);
- **fences**: every fenced code block, with its language, its markdown-exec
  options, its code and its line, found inside containers too; which of
  them the build executes (:data:`EXECUTED_LANGUAGES`);
- **includes**: ``--8<-- "file"`` and ``--8<-- "file:section"`` lines
  expanded as pymdownx.snippets expands them, recursively; a missing file or
  section is an :class:`IncludeError` that says which;
- **data**: the files a page's code reads, as its front matter declares them
  (``reads: [docs/training]``).
"""

from __future__ import annotations

import doctest
import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# Languages the site executes: the formatters sitekit.render registers with
# markdown-exec, which mkdocs.yml lists under markdown-exec's languages.
EXECUTED_LANGUAGES = ("python", "pycon")
# The Markdown extensions whose containers the grammar reads, by their header's mark.
CONTAINER_EXTENSIONS = {"!!!": "admonition", "???": "pymdownx.details"}
# What markdown-exec reads as "on" in exec="…" and the other yes/no options.
TRUTHY = ("on", "true", "yes", "1")

HIDE_MARKER = re.compile(r"\s*#\s*markdown-exec:\s*hide\s*$")

_OPTION = re.compile(r'([\w-]+)="([^"]*)"')
_FENCE = re.compile(r"^(?P<indent> *)(?P<mark>`{3,}|~{3,})(?P<info>.*)$")
# A container's header, for one line, as the extensions mkdocs.yml lists read it
# (their patterns: markdown.extensions.admonition's RE and pymdownx.details'
# START): any number of classes, then an optional title in quotes.
_CLASSES = r"[\w\-]+(?: +[\w\-]+)*"
_ADMONITION = re.compile(rf'^(?P<mark>!!!) ?(?P<classes>{_CLASSES})(?: +"(?P<title>.*?)")? *$')
_DETAILS = re.compile(
    rf'^(?P<mark>\?{{3}}\+?) ?(?:(?P<classes>{_CLASSES}?)?(?: +"(?P<title>.*?)")|(?P<bare>{_CLASSES}?)) *$'
)
# MkDocs's front matter (mkdocs.utils.meta.YAML_RE): YAML between a "---" line
# that opens the file and the next "---" or "..." line.
_FRONT_MATTER = re.compile(r"^-{3}[ \t]*\n(.*?\n)(?:\.{3}|-{3})[ \t]*\n", re.DOTALL)
_INCLUDE = re.compile(r'^(?P<indent>[ \t]*)-+8<-+[ \t]+"(?P<target>[^"]+)"[ \t]*$')
_SECTION_MARKER = re.compile(r"-+8<-+[ \t]+\[[ \t]*(?P<kind>start|end)[ \t]*:[ \t]*(?P<name>[\w-]+)[ \t]*\]")


def truthy(value: str | None) -> bool:
    """Whether a markdown-exec option's value means yes (``exec="on"``, ``html="true"``)."""
    return (value or "").lower() in TRUTHY


# ------------------------------------------------------------------ fences


@dataclass(frozen=True)
class Fence:
    """A fenced code block as the page writes it."""

    info: str  # what follows the opening backticks: language and options
    code: str  # the lines between the fences, dedented to the fence; includes not expanded
    line: int  # the opening line's index in the page (0-based)
    source: str  # the fence as written, from its opening line to its closing one

    @property
    def language(self) -> str:
        words = self.info.strip().lstrip("{.").split()
        return words[0] if words else ""

    @property
    def options(self) -> dict[str, str]:
        return dict(_OPTION.findall(self.info))

    @property
    def marked(self) -> bool:
        """Marked ``exec="on"``: the author means it to run."""
        return truthy(self.options.get("exec"))

    @property
    def executed(self) -> bool:
        """Run at build time: marked, and in a language the site executes."""
        return self.marked and self.language in EXECUTED_LANGUAGES

    @property
    def console(self) -> bool:
        """A console session: ``>>>`` statements with their written output."""
        return self.language == "pycon"

    @property
    def session(self) -> str | None:
        return self.options.get("session")

    @property
    def shows_code(self) -> bool:
        """Whether a reader sees the code: markdown-exec shows an executed fence's code only with ``source=``."""
        return not self.marked or self.console or "source" in self.options

    def expanded(self, base: Path = ROOT) -> str:
        """The code with its ``--8<--`` includes expanded: what runs."""
        return expand_includes(self.code, base)

    def python(self, base: Path = ROOT) -> str:
        """The Python this fence runs: its code, or a console session's statements."""
        code = self.expanded(base)
        return _statements_of(code) if self.console else code


def _statements_of(console: str) -> str:
    return "".join(example.source for example in doctest.DocTestParser().get_examples(console))


@dataclass(frozen=True)
class Container:
    """An admonition (``!!! note``) or a collapsible block (``??? success remember "Solution 1"``).

    Its body, the indented lines under it, is parsed like a page.
    """

    mark: str  # "!!!", "???" (collapsed) or "???+" (collapsible, open)
    classes: tuple[str, ...]  # ("success", "remember"), lower case; () for ``??? "Title"``
    title: str  # as the page shows it: the one written, else the first class capitalised; "" for none
    blocks: tuple  # of Block
    line: int
    header: str  # the container's first line, as written

    @property
    def kind(self) -> str:
        """The admonition's type, its first class ("success")."""
        return self.classes[0] if self.classes else ""

    @property
    def collapsed(self) -> bool:
        """Closed until the reader opens it (``???``, not ``???+``)."""
        return self.mark == "???"


# A prose line (str), a fence, or a container.
Block = str | Fence | Container


def container_header(line: str) -> tuple[str, tuple[str, ...], str] | None:
    """``(mark, classes, title)`` if ``line`` opens a container, as Python-Markdown's extensions read it, else None.

    >>> container_header('??? success remember "Solution 5"')
    ('???', ('success', 'remember'), 'Solution 5')
    >>> container_header("!!! note")
    ('!!!', ('note',), 'Note')
    """
    header = _ADMONITION.match(line) or _DETAILS.match(line)
    if not header:
        return None
    classes = tuple((header["classes"] or header.groupdict().get("bare") or "").lower().split())
    title = header["title"]
    if title is None:  # no title written: the first class, capitalised (an explicit "" shows none)
        title = classes[0].capitalize() if classes else ""
    return header["mark"], classes, title


def parse(text: str) -> list[Block]:
    """A page's blocks in order: prose lines, fences, and containers holding their own blocks.

    The front matter's lines, if the page has one, are blank lines: it is not Markdown.
    """
    return list(_parsed(text))


@functools.lru_cache(maxsize=256)  # blocks are immutable; mkdocs serve and the post-build step read the same pages
def _parsed(text: str) -> tuple[Block, ...]:
    lines = text.split("\n")
    front = _FRONT_MATTER.match(text)
    if front:
        count = front.group(0).count("\n")
        lines[:count] = [""] * count
    return tuple(_blocks(lines, 0))


def _blocks(lines: list[str], offset: int) -> Iterator[Block]:
    i = 0
    while i < len(lines):
        line = lines[i]
        opening = _FENCE.match(line)
        if opening and not (opening["mark"][0] == "`" and "`" in opening["info"]):
            indent, mark = len(opening["indent"]), opening["mark"]
            closing = re.compile(rf"^ {{0,{indent + 3}}}{re.escape(mark[0])}{{{len(mark)},}}\s*$")
            end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), len(lines))
            body = [text[indent:] if not text[:indent].strip() else text.lstrip() for text in lines[i + 1 : end]]
            yield Fence(opening["info"], "\n".join(body), offset + i, "\n".join(lines[i : end + 1]))
            i = end + 1
            continue
        header = container_header(line)
        if header:
            end = i + 1
            while end < len(lines) and (not lines[end].strip() or lines[end].startswith("    ")):
                end += 1
            while end > i + 1 and not lines[end - 1].strip():
                end -= 1
            body = [text[4:] if text.strip() else "" for text in lines[i + 1 : end]]
            mark, classes, title = header
            yield Container(mark, classes, title, tuple(_blocks(body, offset + i + 1)), offset + i, line)
            i = end
            continue
        yield line
        i += 1


def fences(text_or_blocks: str | Iterable[Block]) -> Iterator[Fence]:
    """Every fence of a page, in page order, inside containers too."""
    blocks = parse(text_or_blocks) if isinstance(text_or_blocks, str) else text_or_blocks
    for block in blocks:
        if isinstance(block, Fence):
            yield block
        elif isinstance(block, Container):
            yield from fences(block.blocks)


def executed_fences(text: str) -> list[Fence]:
    """The fences the build runs, in page order."""
    return [fence for fence in fences(text) if fence.executed]


def unexecuted_fences(text: str) -> list[Fence]:
    """Fences marked ``exec="on"`` in a language the site does not execute: they would reach the page unrun."""
    return [fence for fence in fences(text) if fence.marked and not fence.executed]



# ---------------------------------------------------------------- includes


class IncludeError(ValueError):
    """A ``--8<--`` line names a file or a section that is not there."""


def _section(target: str, base: Path) -> list[str]:
    path, _, section = target.partition(":")
    file = base / path
    if not file.is_file():
        raise IncludeError(f'--8<-- "{target}": there is no file {path} (paths are relative to the repository root)')
    lines = file.read_text(encoding="utf-8").rstrip("\n").split("\n")
    if section:
        markers = [(i, m["kind"]) for i, line in enumerate(lines) for m in _SECTION_MARKER.finditer(line) if m["name"] == section]
        start = next((i for i, kind in markers if kind == "start"), None)
        end = next((i for i, kind in markers if kind == "end" and start is not None and i > start), None)
        if start is None or end is None:
            raise IncludeError(
                f'--8<-- "{target}": {path} has no section {section!r} '
                f"(a line with --8<-- [start:{section}] and a later one with --8<-- [end:{section}])"
            )
        lines = lines[start + 1 : end]
    return [line for line in lines if not _SECTION_MARKER.search(line)]


def _expand(lines: Iterable[str], base: Path, chain: tuple[str, ...]) -> Iterator[str]:
    for line in lines:
        include = _INCLUDE.match(line)
        if not include:
            yield line
            continue
        target, indent = include["target"], include["indent"]
        if target in chain:
            raise IncludeError(f'--8<-- "{target}" includes itself: {" -> ".join([*chain, target])}')
        for included in _expand(_section(target, base), base, (*chain, target)):
            yield indent + included if included else included


def expand_includes(text: str, base: Path = ROOT) -> str:
    """``text`` with every ``--8<-- "file"`` or ``"file:section"`` line replaced by what it includes.

    As pymdownx.snippets does at build time: paths are relative to ``base``
    (mkdocs.yml's ``base_path``: the repository root), the include line's
    indentation is kept, section markers are dropped, and included text is
    expanded in turn.
    """
    return "\n".join(_expand(text.split("\n"), base, ()))


def included_files(text: str, base: Path = ROOT) -> list[Path]:
    """Every file ``text`` includes, and the files those include, in order (a missing one too)."""
    found: list[Path] = []
    todo = [text]
    while todo:
        for line in todo.pop().split("\n"):
            include = _INCLUDE.match(line)
            if include:
                path = base / include["target"].partition(":")[0]
                if path not in found:
                    found.append(path)
                    if path.is_file():
                        todo.append(path.read_text(encoding="utf-8"))
    return found



# ------------------------------------------------------------ front matter


class FrontMatterError(ValueError):
    """A page's front matter that MkDocs cannot read, or a setting in it that is not what the site expects."""


def where(page: Path | str | None) -> str:
    """A page as an error names it: docs/<page>, relative to the repository where it is inside it."""
    if page is None:
        return "the page"
    path = Path(page)
    return path.relative_to(ROOT).as_posix() if path.is_absolute() and path.is_relative_to(ROOT) else str(page)


def split_front_matter(text: str, page: Path | str | None = None) -> tuple[dict, str]:
    """The page's front matter, as MkDocs reads it, and its Markdown after it.

    As ``mkdocs.utils.meta.get_data`` does: a YAML block between a ``---``
    line that opens the file and the next ``---`` or ``...`` line, read with
    a safe loader; the Markdown after it has its leading blank lines removed.
    Where MkDocs would quietly show the block as text (YAML it cannot read,
    or YAML that is not a mapping), this is a :class:`FrontMatterError` that
    names ``page``. A page without front matter gives ``{}`` and its text.

    >>> split_front_matter("---\\nnotebook: no  # chapter 14\\n---\\n\\n# 14. Title\\n")
    ({'notebook': False}, '# 14. Title\\n')
    """
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    import yaml

    said = f"{where(page)}: the front matter (the block between the --- lines that open the page)"
    try:
        data = yaml.safe_load(match[1])
    except yaml.YAMLError as error:
        raise FrontMatterError(f"{said} is not valid YAML, so MkDocs would show it as text:\n{error}") from None
    if not isinstance(data, dict):
        raise FrontMatterError(
            f"{said} is YAML but not a mapping of names to values (notebook: false), "
            f"so MkDocs would show it as text: {data!r}"
        )
    return data, text[match.end() :].lstrip("\n")


def front_matter(text: str, page: Path | str | None = None) -> dict:
    """The settings a page's front matter gives, as MkDocs reads them (:func:`split_front_matter`), or ``{}``."""
    return split_front_matter(text, page)[0]


def without_front_matter(text: str, page: Path | str | None = None) -> str:
    """The page's Markdown after its front matter, as MkDocs passes it to Markdown (:func:`split_front_matter`)."""
    return split_front_matter(text, page)[1]


def data_files(text: str, base: Path = ROOT, page: Path | str | None = None) -> list[Path]:
    """The files a page's code reads, from its front matter: ``reads: [docs/training]``, files or folders.

    Paths are relative to the repository; a folder stands for every file in
    it; one path may be written without the list. A path that does not exist
    is a :class:`FileNotFoundError`: the page would fail anyway, and a
    dependency left out would leave ``mkdocs serve`` showing the page as it
    was before the data changed.
    """
    names = front_matter(text, page).get("reads") or []
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise FrontMatterError(f"{where(page)}: reads: in the front matter must be a list of paths, not {names!r}")
    found: list[Path] = []
    for name in names:
        path = base / name
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"the front matter says the page reads {name!r}, which is not in {base}")
    return found
