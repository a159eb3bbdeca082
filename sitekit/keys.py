"""What a page depends on, file by file: the keys ``mkdocs serve`` keeps a page's outputs and notebook by.

A page shows what it shows because of whole files: the page, the files it
includes (``--8<--``), the modules of this repository its code imports and
the ones those import in turn (read with Python's own parser, ``from
snippets import attention as library`` included), the data its front matter
says its code reads (``reads: [docs/training]``), and the site's own code and
settings. :func:`page_key` is a digest of all of them; :func:`code_key` of
all but the page's prose, so that a prose edit keeps the outputs of its code.
Nothing keys finer than a file: an edit anywhere in a module runs again every
page whose code imports it (as jupyter-cache, Quarto's freeze and d2l-book do).
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from sitekit.pages import ROOT, data_files, executed_fences, included_files

# The packages of this repository a page's code may import, and what of them
# pages do import (the rest of sitekit is the build's own code). ``tools`` has
# no __init__.py: chapter 14 imports tools.train and tools.corpus.
LOCAL_PACKAGES = ("snippets", "sitekit", "tools")
PAGE_IMPORTS = ("snippets", "sitekit.figures", "sitekit.widgets", "tools")
# Files whose change can change any page: the build's settings, its code, its packages.
SITE_INPUTS = ("mkdocs.yml", "requirements.txt")
SITE_CODE = ("hooks", "sitekit")


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
    return frozenset(found for module, name in _imports_of(code, package)
                     for found in (module, *([] if name is None else [f"{module}.{name}"])))


@functools.lru_cache(maxsize=4096)  # a serving process reads the same fences and modules at every rebuild
def _imports_of(code: str, package: str = "") -> tuple[tuple[str, str | None], ...]:
    """(module, name) for every import in ``code``: name None where a module is imported whole."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        # The fence fails when it runs; once it is fixed the page's source has changed anyway.
        return ()
    return tuple(_imports_in(tree, package))


def _imports_in(node: ast.AST, package: str) -> Iterator[tuple[str, str | None]]:
    for found in ast.walk(node):
        if isinstance(found, ast.Import):
            yield from ((alias.name, None) for alias in found.names)
        elif isinstance(found, ast.ImportFrom):
            module = found.module or ""
            if found.level:  # relative: from the package of the module that imports, and up
                parts = package.split(".")[: len(package.split(".")) - found.level + 1]
                module = ".".join([*parts, module] if module else parts)
            yield from ((module, None if alias.name == "*" else alias.name) for alias in found.names)


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
    todo = _local(set().union(*(_imported(code, "") for code in codes)), base)
    if not follow:
        return sorted(todo)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        seen.add(name)
        path = module_file(name, base)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        todo |= _local(_imported(path.read_text(encoding="utf-8"), package), base) - seen
    return sorted(seen)


def page_modules(text: str, base: Path = ROOT) -> list[str]:
    """This repository's modules that a page's executed fences import, with the ones they import."""
    return imported_modules((fence.python(base) for fence in executed_fences(text)), base)


def dependencies(source: Path, base: Path = ROOT) -> list[Path]:
    """Every file whose change can change what the page at ``source`` shows.

    The page; the files it includes; the modules of this repository it
    imports (and theirs); the data its front matter says its code reads
    (:func:`sitekit.pages.data_files`); the tests, for a page that reads them
    at build time (the Snippets page checks that every public function is
    tested); and what every page depends on: mkdocs.yml, requirements.txt,
    hooks/ and sitekit/.
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
    Every other dependency counts whole: an edit anywhere in a module the
    page's code imports runs the page's code again.
    """
    fenced = [f"{fence.info}\n{fence.code}" for fence in executed_fences(source.read_text(encoding="utf-8"))]
    return _digest([path for path in dependencies(source, base) if path != source], *fenced)
