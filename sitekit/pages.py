"""The page model: what a page of ``docs/`` is, read in one place.

A page is Markdown written for MkDocs, markdown-exec and pymdownx. Everything
that reads a page's source asks this module: the build hooks (fences that
should run, the serve cache, the chapter notebooks), pytest (``conftest.py``
turns executed fences into tests), the tests of the pages' conventions and
the ``.ci/`` scripts (the code floor, the page metrics). So they cannot
disagree on what a page holds:

- **front matter**: the YAML block a page may start with, read as MkDocs
  reads it (:func:`front_matter`); one that MkDocs could not read is a
  :class:`FrontMatterError` that names the page;
- **containers**: admonitions (``!!! note``), collapsible blocks
  (``??? success remember "Solution 1"``, ``???+ note``) and tabs
  (``=== "Title"``), with every class and the title the page shows, read
  with the header syntax of Python-Markdown's admonition, pymdownx.details
  and pymdownx.tabbed, each holding its own blocks (:class:`Container`);
- **fences**: every fenced code block, with its language, its markdown-exec
  options, its code and its line, found inside containers too; which of
  them the build executes;
- **includes**: ``--8<-- "file"`` and ``--8<-- "file:section"`` lines
  expanded as pymdownx.snippets expands them, recursively; a missing file or
  section is an :class:`IncludeError` that says which;
- **imports**: the modules of this repository (``snippets``, ``sitekit``,
  ``tools``) that a page's code imports, with the ones those import in turn,
  read with Python's own parser (``from snippets import attention as
  library`` included);
- **data**: the files a page's code reads, as its front matter declares them
  (``reads: [docs/training]``);
- **what code reaches**: the statements of those modules that a page's code
  can run (:func:`used_code`), so that an edit elsewhere in a module leaves
  the page's outputs be while serving;
- **dependencies**: every file whose change can change what a page shows,
  and what its code prints (:func:`page_key`, :func:`code_key`);
- **the nav**: the pages of mkdocs.yml's nav, its chapters, and each page's
  address in the built site.
"""

from __future__ import annotations

import ast
import doctest
import functools
import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# Languages the site executes: markdown-exec's python formatter and the console
# formatter (sitekit/fences.py); mkdocs.yml lists both under markdown-exec's languages.
EXECUTED_LANGUAGES = ("python", "py", "pycon")
# What markdown-exec reads as "on" in exec="…" and the other yes/no options.
TRUTHY = ("on", "true", "yes", "1")
# The packages of this repository a page's code may import, and what of them
# pages do import (the rest of sitekit is the build's own code). ``tools`` has
# no __init__.py: chapter 14 imports tools.train and tools.corpus.
LOCAL_PACKAGES = ("snippets", "sitekit", "tools")
PAGE_IMPORTS = ("snippets", "sitekit.figures", "sitekit.widgets", "tools")
# Files whose change can change any page: the build's settings, its code, its packages.
SITE_INPUTS = ("mkdocs.yml", "requirements.txt")
SITE_CODE = ("hooks", "sitekit")

HIDE_MARKER = re.compile(r"\s*#\s*markdown-exec:\s*hide\s*$")
CHAPTER_TITLE = re.compile(r"^(?P<number>\d+)\. ")

_OPTION = re.compile(r'([\w-]+)="([^"]*)"')
_FENCE = re.compile(r"^(?P<indent> *)(?P<mark>`{3,}|~{3,})(?P<info>.*)$")
# A container's header, for one line, as the extensions mkdocs.yml lists read it
# (their patterns: markdown.extensions.admonition's RE, pymdownx.details' and
# pymdownx.tabbed's START): any number of classes, then an optional title in quotes.
_CLASSES = r"[\w\-]+(?: +[\w\-]+)*"
_ADMONITION = re.compile(rf'^(?P<mark>!!!) ?(?P<classes>{_CLASSES})(?: +"(?P<title>.*?)")? *$')
_DETAILS = re.compile(
    rf'^(?P<mark>\?{{3}}\+?) ?(?:(?P<classes>{_CLASSES}?)?(?: +"(?P<title>.*?)")|(?P<bare>{_CLASSES}?)) *$'
)
_TAB = re.compile(r'^(?P<mark>={3}(?:\+|\+!|!\+|!)?) +"(?P<title>.*?)" *$')
# MkDocs's front matter (mkdocs.utils.meta.YAML_RE): YAML between a "---" line
# that opens the file and the next "---" or "..." line.
_FRONT_MATTER = re.compile(r"^-{3}[ \t]*\n(.*?\n)(?:\.{3}|-{3})[ \t]*\n", re.DOTALL)
_INCLUDE = re.compile(r'^(?P<indent>[ \t]*)-+8<-+[ \t]+"(?P<target>[^"]+)"[ \t]*$')
_SECTION_MARKER = re.compile(r"-+8<-+[ \t]+\[[ \t]*(?P<kind>start|end)[ \t]*:[ \t]*(?P<name>[\w-]+)[ \t]*\]")
_ASSERT = re.compile(r"(>>> )?assert\b")


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


@functools.lru_cache(maxsize=4096)  # a serving process reads the same sessions at every rebuild
def _statements_of(console: str) -> str:
    return "".join(example.source for example in doctest.DocTestParser().get_examples(console))


@dataclass(frozen=True)
class Container:
    """An admonition (``!!! note``), a collapsible block (``??? success remember "Solution 1"``) or a tab (``=== "Title"``).

    Its body, the indented lines under it, is parsed like a page.
    """

    mark: str  # "!!!", "???" (collapsed), "???+" (collapsible, open), or a tab's "===" (with "+" or "!" flags)
    classes: tuple[str, ...]  # ("success", "remember"), lower case; () for a tab and for ``??? "Title"``
    title: str  # as the page shows it: the one written, else the first class capitalised; "" for none
    blocks: tuple  # of Block
    line: int
    header: str  # the container's first line, as written

    @property
    def kind(self) -> str:
        """The admonition's type, its first class ("success"); "tab" for a tab."""
        return "tab" if self.tab else (self.classes[0] if self.classes else "")

    @property
    def tab(self) -> bool:
        return self.mark.startswith("===")

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
    tab = _TAB.match(line)
    if tab:
        return tab["mark"], (), tab["title"]
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


def executes(path: Path) -> bool:
    """Whether the page at ``path`` has code the build runs (a Markdown page with an executed fence)."""
    return path.suffix == ".md" and path.is_file() and bool(executed_fences(path.read_text(encoding="utf-8")))


def unexecuted_fences(text: str) -> list[Fence]:
    """Fences marked ``exec="on"`` in a language the site does not execute: they would reach the page unrun."""
    return [fence for fence in fences(text) if fence.marked and not fence.executed]


def outside_fences(text: str) -> str:
    """The page with every fence's lines blank and containers' bodies dedented, line for line.

    What is left is Markdown: prose, headings, container headers, as
    CommonMark reads them (an admonition's body, indented, would be code).
    """

    def lines(blocks) -> Iterator[str]:
        for block in blocks:
            if isinstance(block, str):
                yield block
            elif isinstance(block, Fence):
                yield from [""] * (block.source.count("\n") + 1)
            else:
                yield block.header
                yield from lines(block.blocks)

    return "\n".join(lines(parse(text)))


def images_without_text(text: str) -> list[tuple[int, str]]:
    """``(line, source)`` of every Markdown image with no text alternative (``![](file.png)``)."""
    from markdown_it import MarkdownIt

    found = []
    for token in MarkdownIt("commonmark").parse(outside_fences(text)):
        for child in token.children or []:
            if child.type == "image" and not child.content.strip():
                found.append((token.map[0], child.attrGet("src")))
    return found


def visible_asserts(text: str) -> int:
    """``assert`` lines a reader sees in the page's fences (a hidden one ends in ``# markdown-exec: hide``)."""
    return sum(
        1
        for fence in fences(text)
        if fence.shows_code
        for line in fence.code.split("\n")
        if _ASSERT.match(line.strip()) and not HIDE_MARKER.search(line)
    )


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


# ----------------------------------------------------------------- imports


def module_file(name: str, base: Path = ROOT) -> Path | None:
    """The file of the module ``name`` (dotted) if it is one of this repository's packages, else None."""
    if name.split(".")[0] not in LOCAL_PACKAGES:
        return None
    path = base.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(code: str, package: str) -> frozenset[str]:
    """Dotted names that ``code`` imports, and the submodules a ``from`` import may name."""
    # `from snippets import attention (as library)` imports a module, not a name.
    return frozenset(found for module, name in _imports_of(code, package)[0]
                     for found in (module, *([] if name is None else [f"{module}.{name}"])))


@functools.lru_cache(maxsize=4096)  # a serving process reads the same fences and modules at every rebuild
def _imports_of(code: str, package: str = "") -> tuple[tuple[tuple[str, str | None], ...], bool]:
    """(module, name) for every import in ``code`` (:func:`_imports_in`), and whether it may read a file."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        # The fence fails when it runs; once it is fixed the page's source has changed anyway.
        return (), False
    return tuple(_imports_in(tree, package)), _touches_files(list(ast.walk(tree)))


def _local(names: Iterable[str], base: Path) -> set[str]:
    """The names that are modules of this repository, with the packages they are in (those that are files)."""
    found = set()
    for name in names:
        if module_file(name, base) is not None:
            parts = name.split(".")
            prefixes = (".".join(parts[:n]) for n in range(1, len(parts) + 1))
            found.update(prefix for prefix in prefixes if module_file(prefix, base) is not None)
    return found


def imported_modules(codes: Iterable[str], base: Path = ROOT, *, follow: bool = True) -> list[str]:
    """This repository's modules that the Python in ``codes`` imports, with the ones they import, sorted.

    With ``follow=False``, only the ones the code itself imports (and the packages they are in).

    >>> imported_modules(["from snippets import attention as library"])
    ['snippets', 'snippets._checks', 'snippets.attention']
    """
    codes = tuple(codes)
    if not follow:
        return sorted(_local(set().union(*(_imported(code, "") for code in codes)), base))
    kept = _IMPORTS.get((codes, base))
    if kept is not None and _stamps(kept[1]) == kept[1]:
        return list(kept[0])
    todo = _local(set().union(*(_imported(code, "") for code in codes)), base)
    seen: set[str] = set()
    files = []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_file(name, base)
        files.append(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        todo |= _local(_imported(path.read_text(encoding="utf-8"), package), base) - seen
    # Kept while no module read changes and no folder a module could appear in changes.
    found = sorted(seen)
    if len(_IMPORTS) >= 1024:  # a long serving session: code edited many times
        _IMPORTS.clear()
    _IMPORTS[codes, base] = (found, _stamps([*_module_folders(base), *files]))
    return list(found)


# What imported_modules found, by the code it read: (modules, the stamps it holds while valid).
_IMPORTS: dict[tuple[tuple[str, ...], Path], tuple[list[str], dict[Path, tuple[int, int] | None]]] = {}


def _module_folders(base: Path) -> list[Path]:
    """The folders a module of this repository could appear in: a cached answer about imports holds while they are unchanged."""
    return [folder for name in LOCAL_PACKAGES for folder in (base / name, *(base / name).rglob("*/"))
            if folder.name != "__pycache__"]


def _stamps(paths: Iterable[Path]) -> dict[Path, tuple[int, int] | None]:
    """Each path's modification time and size (None if it is missing)."""
    found = {}
    for path in paths:
        try:
            status = path.stat()
        except FileNotFoundError:
            found[path] = None
        else:
            found[path] = (status.st_mtime_ns, status.st_size)
    return found


# ------------------------------------------------------- what code reaches


@dataclass(frozen=True)
class _Statement:
    """A top-level statement of a module: where it stands, its text, and what it leads to."""

    where: str  # its first and last line: a traceback shows them
    text: str
    reads: frozenset[str]  # the module-level names it reads
    imports: tuple[tuple[str, str | None], ...]  # (dotted module, the name imported or None: the module)
    files: bool  # it may read a file (a module's source among them) or list a folder


@dataclass(frozen=True)
class _Module:
    text: str
    statements: tuple[_Statement, ...]
    binders: dict[str, tuple[int, ...]]  # a module-level name -> the statements that bind it
    always: tuple[int, ...]  # statements run for their effect on import, part of every use of the module
    dynamic: bool  # it reaches its own names at run time, or does not parse: it counts whole


# Names that reach a module's statements without naming them: such a module counts whole.
_DYNAMIC = frozenset({"globals", "vars", "locals", "eval", "exec", "__import__", "importlib", "__dict__", "modules"})
# File access: what such a statement reads cannot be told from its text (tools/train.py digests
# snippets/training.py), so code that reaches one counts every module it imports whole.
_FILE_NAMES = frozenset({"open", "__file__"})
_FILE_ATTRIBUTES = frozenset({"open", "read_text", "read_bytes", "load", "loadtxt", "genfromtxt", "fromfile", "memmap",
                              "glob", "rglob", "iterdir", "listdir", "scandir", "walk", "stat"})
_FILE_MODULES = frozenset({"pathlib", "glob", "shutil"})


def _touches_files(nodes: list[ast.AST]) -> bool:
    """Whether these nodes may read a file or list a folder (by the names they use and the modules they import)."""
    return any(isinstance(node, ast.Name) and node.id in _FILE_NAMES
               or isinstance(node, ast.Attribute) and node.attr in _FILE_ATTRIBUTES
               or isinstance(node, ast.Import) and any(alias.name.split(".")[0] in _FILE_MODULES for alias in node.names)
               or isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _FILE_MODULES
               for node in nodes)


def _imports_in(node: ast.AST, package: str) -> Iterator[tuple[str, str | None]]:
    """(module, name) for every import in ``node``: name None where a module is imported whole."""
    for found in ast.walk(node):
        if isinstance(found, ast.Import):
            yield from ((alias.name, None) for alias in found.names)
        elif isinstance(found, ast.ImportFrom):
            module = found.module or ""
            if found.level:  # relative: from the package of the module that imports, and up
                parts = package.split(".")[: len(package.split(".")) - found.level + 1]
                module = ".".join([*parts, module] if module else parts)
            yield from ((module, None if alias.name == "*" else alias.name) for alias in found.names)


@functools.lru_cache(maxsize=256)
def _module(path: Path, stamp: tuple[int, int], package: str) -> _Module:  # noqa: ARG001 (the stamp is the cache's key)
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    read: list[tuple[ast.stmt, set[str], bool, bool]] = []
    binders: dict[str, list[int]] = {}
    try:
        tree = ast.parse(text)
    except SyntaxError:  # saved halfway through an edit: the page that imports it fails when it runs
        return _Module(text, (), {}, (), True)
    dynamic = False
    for node in tree.body:
        if not read and not binders and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module's docstring: only `module.__doc__` reads it, and that imports the module whole
        inside = list(ast.walk(node))
        names = {found.id for found in inside if isinstance(found, ast.Name)}
        attributes = {found.attr for found in inside if isinstance(found, ast.Attribute)}
        dynamic = dynamic or bool(_DYNAMIC & (names | attributes))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            binds, always = {alias.asname or alias.name.split(".")[0] for alias in node.names}, False
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds, always = {node.name}, False
        else:
            binds = {found.id for found in inside if isinstance(found, ast.Name) and isinstance(found.ctx, ast.Store)}
            # An assignment to names only binds them; anything else (a call, an if, a store into
            # another object) runs for its effect.
            targets = getattr(node, "targets", None) or [getattr(node, "target", node)]
            always = not (isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and all(
                isinstance(found, (ast.Name, ast.Tuple, ast.List, ast.Starred, ast.Store, ast.Load))
                for target in targets for found in ast.walk(target)))
        for name in binds:
            binders.setdefault(name, []).append(len(read))
        read.append((node, names, always, _touches_files(inside)))
    statements = []
    for node, names, _, files in read:
        first = min([node.lineno, *(decorator.lineno for decorator in getattr(node, "decorator_list", []))])
        statements.append(_Statement(f"{first}-{node.end_lineno}", "\n".join(lines[first - 1 : node.end_lineno]),
                                     frozenset(names & binders.keys()), tuple(_imports_in(node, package)), files))
    return _Module(text, tuple(statements), {name: tuple(found) for name, found in binders.items()},
                   tuple(index for index, (_, _, always, _) in enumerate(read) if always), dynamic)


def used_code(codes: Iterable[str], base: Path = ROOT) -> list[str] | None:
    """The statements of this repository's modules that the Python in ``codes`` can run, each with its lines.

    What code prints can change only with the module statements it reaches:
    those binding the names it imports, those binding the module-level names
    they read, across modules, and every statement a module runs for its
    effect when imported. A module imported whole (``import
    snippets.lookup``, ``from snippets import lookup``, ``*``), or that reaches
    its names at run time (``globals()``, ``sys.modules``, ``importlib``),
    counts whole. The lines are part of each statement: a traceback shows them.
    None if the code, or a statement it reaches, may read a file: what it
    reads is not in its text, so every module the code imports counts whole.

    >>> used = used_code(["from snippets.lookup import matrix_lookup"])
    >>> [part.splitlines()[0] for part in used if "def matrix_lookup(" in part]
    ['snippets/lookup.py 199-212']
    >>> any("def argmax_lookup(" in part for part in used)
    False
    """
    codes = tuple(codes)
    kept = _USED.get((codes, base))
    if kept is not None and _stamps(kept[1]) == kept[1]:
        return None if kept[0] is None else list(kept[0])
    files: dict[str, Path | None] = {}

    def file_of(module: str) -> Path | None:
        if module not in files:
            files[module] = module_file(module, base)
        return files[module]

    def wanted(module: str, name: str | None) -> tuple[str, str | None] | None:
        if name is not None and file_of(f"{module}.{name}") is not None:
            return f"{module}.{name}", None  # `from snippets import attention`: a module, whole
        return (module, name) if file_of(module) is not None else None

    if any(_imports_of(code)[1] for code in codes):
        return None  # what it reads could be a module
    todo = [hit for code in codes for imported in _imports_of(code)[0] if (hit := wanted(*imported))]
    modules: dict[str, _Module] = {}
    taken: dict[str, set[int] | None] = {}  # module -> the statements taken (None: the whole file)
    seen: set[tuple[str, str | None]] = set()
    while todo:
        module, name = todo.pop()
        if (module, name) in seen:
            continue
        seen.add((module, name))
        if module not in modules:
            path = file_of(module)
            status = path.stat()
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            modules[module] = _module(path, (status.st_mtime_ns, status.st_size), package)
            parts = module.split(".")  # importing it runs the packages it is in
            todo += [(parent, None) for n in range(1, len(parts)) if file_of(parent := ".".join(parts[:n]))]
        found = modules[module]
        if taken.get(module, set()) is None:
            continue
        if name is None or found.dynamic or name not in found.binders:
            chosen = set(range(len(found.statements))) - (taken.get(module) or set())
            taken[module] = None
        else:
            chosen = {*found.binders[name], *found.always} - taken.setdefault(module, set())
            taken[module] |= chosen
        for index in chosen:
            statement = found.statements[index]
            todo += [(module, read) for read in statement.reads]
            todo += [hit for imported in statement.imports if (hit := wanted(*imported))]
    used: list[str] | None = []
    for module, indexes in sorted(taken.items()):
        where = file_of(module).relative_to(base).as_posix()
        statements = modules[module].statements
        if indexes is None:
            used.append(f"{where} whole\n{modules[module].text}")
        else:
            used += [f"{where} {statements[index].where}\n{statements[index].text}" for index in sorted(indexes)]
        if any(statement.files for index, statement in enumerate(statements) if indexes is None or index in indexes):
            used = None
            break
    if len(_USED) >= 1024:  # a long serving session: code edited many times
        _USED.clear()
    _USED[codes, base] = (used, _stamps([*_module_folders(base), *(file_of(module) for module in modules)]))
    return None if used is None else list(used)


# What used_code found, by the code it read: kept while no module it read and no folder a module could appear in changes.
_USED: dict[tuple[tuple[str, ...], Path], tuple[list[str] | None, dict[Path, tuple[int, int] | None]]] = {}


def page_modules(text: str, base: Path = ROOT) -> list[str]:
    """This repository's modules that a page's executed fences import, with the ones they import."""
    return imported_modules((fence.python(base) for fence in executed_fences(text)), base)


def dependencies(source: Path, base: Path = ROOT) -> list[Path]:
    """Every file whose change can change what the page at ``source`` shows.

    The page; the files it includes; the modules of this repository it
    imports (and theirs); the data its front matter says its code reads
    (:func:`data_files`); the tests, for a page that reads them at build time
    (the Snippets page checks that every public function is tested); and what
    every page depends on: mkdocs.yml, requirements.txt, hooks/ and sitekit/.
    """
    text = source.read_text(encoding="utf-8")
    included = included_files(text, base)
    readable = "\n".join([text, *(path.read_text(encoding="utf-8") for path in included if path.is_file())])
    modules = [module_file(name, base) for name in page_modules(text, base)]
    data = data_files(text, base, source)
    tests = sorted((base / "tests").glob("test_*.py")) if '"tests"' in readable else []
    site = [path for folder in SITE_CODE for path in sorted((base / folder).rglob("*.py"))]
    found = [source, *included, *modules, *data, *tests, *site, *(base / name for name in SITE_INPUTS)]
    return list(dict.fromkeys(found))


@functools.lru_cache(maxsize=1024)
def _file_digest(path: Path, stamp: tuple[int, int]) -> bytes:  # noqa: ARG001 (the stamp is the cache's key)
    return hashlib.sha256(path.read_bytes()).digest()


def _digest(paths: Iterable[Path], *texts: str) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path).encode() + b"\0")
        if path.is_file():
            # Read again only when the file's time or size changed (mkdocs serve asks at every rebuild).
            status = path.stat()
            digest.update(_file_digest(path, (status.st_mtime_ns, status.st_size)))
        else:
            digest.update(b"<missing>")
    for text in texts:
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()


def page_key(source: Path, base: Path = ROOT) -> str:
    """A digest of every file the page at ``source`` depends on: while it stays the same, so does the page."""
    return _digest(dependencies(source, base))


def code_key(source: Path, base: Path = ROOT) -> str:
    """A digest of what the page's code can print: its executed fences, in order, and every other dependency.

    The page's prose is left out: while this stays the same, an edit to the
    prose around the fences leaves every block's output as it was (``mkdocs
    serve`` then shows the kept outputs instead of running the code again).
    """
    text = source.read_text(encoding="utf-8")
    fences = executed_fences(text)
    fenced = [f"{fence.info}\n{fence.code}" for fence in fences]
    # The modules it imports count by the statements its code reaches (used_code), unless the page
    # includes them or they are the site's own code: an edit elsewhere in a module leaves its outputs be.
    used = used_code((fence.python(base) for fence in fences), base)
    reached = set() if used is None else {module_file(name, base) for name in page_modules(text, base)
                                          if name.split(".")[0] not in SITE_CODE} - set(included_files(text, base))
    paths = [path for path in dependencies(source, base) if path != source and path not in reached]
    return _digest(paths, *fenced, *(used or ()))


# "nan" as NumPy and Python print it, a word of its own (not np.nan, "nan" in quotes or nanmax(...)).
_NAN = re.compile(r"(?<![\w.'\"])nan(?![\w'\"(])")


def printed_nan(output: str) -> str | None:
    r"""What is wrong with a block's output that shows ``nan`` (naming its first such line), or None.

    A page shows a NaN only where a console session writes it out (chapter 3
    shows how the naive softmax makes one); a python block's output is not
    written by anyone, so a ``nan`` in it is a fault of the page's code. The
    build (sitekit/fences.py) and pytest (conftest.py) both refuse it with this message.

    >>> printed_nan("[0.5 0.5]\nloss nan")
    "the block printed nan ('loss nan'): a page shows a NaN only where a console session writes it out"
    >>> printed_nan("np.nan is a float; nanmax skips 'nan'") is None
    True
    """
    found = _NAN.search(output)
    if found is None:
        return None
    start = output.rfind("\n", 0, found.start()) + 1
    end = output.find("\n", found.end())
    line = output[start : end if end >= 0 else len(output)].strip()[:200]
    return f"the block printed nan ({line!r}): a page shows a NaN only where a console session writes it out"


# The folders a build reads its pages and their code from: a page's code must
# not write into them (it would change the sources while they are built).
SOURCE_FOLDERS = ("docs", "snippets")


def source_snapshot(base: Path = ROOT) -> dict[str, tuple[int, int]]:
    """Every file of :data:`SOURCE_FOLDERS` (Python's byte-code caches aside): its (mtime, size).

    The build and pytest take one before and after every block (about 0.2 ms
    here, so plain strings, not ``Path`` objects, per file).

    >>> snapshot = source_snapshot()
    >>> snapshot["snippets/attention.py"][1] > 0
    True
    """
    found = {}
    prefix = len(str(base)) + 1
    folders = [os.path.join(base, name) for name in SOURCE_FOLDERS]
    while folders:
        folder = folders.pop()
        try:
            entries = os.scandir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append(entry.path)
                else:
                    stat = entry.stat(follow_symlinks=False)
                    found[entry.path[prefix:].replace(os.sep, "/")] = (stat.st_mtime_ns, stat.st_size)
    return found


def source_writes(before: dict, after: dict) -> str | None:
    """What is wrong with a block that changed the sources between two snapshots (:func:`source_snapshot`), or None.

    The build (sitekit/fences.py) and pytest (conftest.py) both refuse it with this message.

    >>> source_writes({"docs/a.md": (1, 2)}, {"docs/a.md": (1, 2), "docs/out.csv": (3, 4)})
    "the block wrote docs/out.csv: a page's code may write only into a temporary folder (CONTRIBUTING.md)"
    """
    changes = [f"wrote {name}" for name in sorted(after) if before.get(name) != after[name]]
    changes += [f"deleted {name}" for name in sorted(set(before) - set(after))]
    if not changes:
        return None
    return f"the block {'; '.join(changes)}: a page's code may write only into a temporary folder (CONTRIBUTING.md)"


# --------------------------------------------------------------------- nav


def read_config(base: Path = ROOT, name: str = "mkdocs.yml") -> dict:
    """mkdocs.yml as written, read without MkDocs (for scripts; a hook has MkDocs' own ``config``).

    ``INHERIT: parent.yml`` is honoured as MkDocs does: the parent's settings,
    with this file's merged into them (mappings key by key, anything else replaced).
    """
    import yaml

    loader = type("Loader", (yaml.SafeLoader,), {})
    loader.add_multi_constructor("!", lambda *_: None)  # tags such as !relative and !ENV
    loader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda _loader, suffix, _node: suffix)
    path = base / name
    config = yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {}  # noqa: S506 (a safe loader)
    parent = config.pop("INHERIT", None)
    if parent is None:
        return config
    return _merged(read_config(path.parent, parent), config)


def _merged(parent: dict, child: dict) -> dict:
    merged = dict(parent)
    for key, value in child.items():
        both = isinstance(value, dict) and isinstance(parent.get(key), dict)
        merged[key] = _merged(parent[key], value) if both else value
    return merged


def load_nav(base: Path = ROOT) -> list:
    """mkdocs.yml's nav, read without MkDocs."""
    return read_config(base).get("nav") or []


def nav_entries(nav: list) -> list[tuple[str | None, str]]:
    """``(title, source)`` for every page of the nav, in order; the title is None where the nav gives none."""
    found: list[tuple[str | None, str]] = []
    for item in nav or []:
        title, value = next(iter(item.items())) if isinstance(item, dict) else (None, item)
        if isinstance(value, list):
            found += nav_entries(value)
        else:
            found.append((None if title is None else str(title), value))
    return found


def nav_sources(nav: list) -> list[str]:
    """The source files of the nav's pages, in order (relative to docs/)."""
    return [source for _, source in nav_entries(nav)]


def chapters(nav: list) -> list[str]:
    """The chapters: pages whose nav title is numbered ("3. Soft keys"), in nav order."""
    return [source for title, source in nav_entries(nav) if title and CHAPTER_TITLE.match(title)]


class FrontMatterError(ValueError):
    """A page's front matter that MkDocs cannot read, or a setting in it that is not what the site expects."""


def _where(page: Path | str | None) -> str:
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

    where = f"{_where(page)}: the front matter (the block between the --- lines that open the page)"
    try:
        data = yaml.safe_load(match[1])
    except yaml.YAMLError as error:
        raise FrontMatterError(f"{where} is not valid YAML, so MkDocs would show it as text:\n{error}") from None
    if not isinstance(data, dict):
        raise FrontMatterError(
            f"{where} is YAML but not a mapping of names to values (notebook: false), "
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
        raise FrontMatterError(f"{_where(page)}: reads: in the front matter must be a list of paths, not {names!r}")
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


def offers_notebook(source: str, docs: Path = DOCS) -> bool:
    """False for a page whose front matter says ``notebook: false``.

    Chapter 14 says so: its code reads the stored training run of this
    repository (docs/training/), and its notebook is that run itself,
    docs/notebooks/training-run.ipynb, shown by its own page.
    """
    path = docs / source
    if not path.is_file():
        return True
    offered = front_matter(path.read_text(encoding="utf-8"), path).get("notebook", True)
    if not isinstance(offered, bool):
        raise FrontMatterError(f"{_where(path)}: notebook: in the front matter must be true or false, not {offered!r}")
    return offered


def notebook_pages(nav: list, docs: Path = DOCS) -> list[str]:
    """The pages offered as Jupyter notebooks, in nav order: the chapters and the pages of docs/notebooks/.

    A page whose front matter says ``notebook: false`` is left out (:func:`offers_notebook`).
    """
    return [
        source
        for title, source in nav_entries(nav)
        if source.endswith(".md") and ((title and CHAPTER_TITLE.match(title)) or source.startswith("notebooks/"))
        and offers_notebook(source, docs)
    ]


def widget_pages(nav: list, base: Path = ROOT) -> dict[str, list]:
    """The nav's pages that show a widget, each with its widgets (the ``sitekit.widgets`` modules it imports)."""
    from sitekit.widgets import widgets

    by_module = {widget.module: widget for widget in widgets()}
    found = {}
    for source in nav_sources(nav):
        shown = [by_module[name] for name in page_modules(read(source, base / "docs"), base) if name in by_module]
        if shown:
            found[source] = shown
    return found


def session_name(source: str) -> str:
    """The markdown-exec session every executed fence of a page uses: the page's name."""
    return source.removesuffix(".md").replace("/", "-")


def page_url(source: str) -> str:
    """The page's address relative to the site's root (directory URLs, as mkdocs.yml uses)."""
    stem = source.rsplit(".", 1)[0]
    if stem == "index":
        return ""
    return (stem.removesuffix("/index") if stem.endswith("/index") else stem) + "/"


def built_page(source: str) -> str:
    """The HTML file MkDocs writes for the page, relative to the site's folder."""
    return page_url(source) + "index.html"


def read(source: str, docs: Path = DOCS) -> str:
    """The Markdown of the page ``source`` (relative to docs/)."""
    return (docs / source).read_text(encoding="utf-8")
