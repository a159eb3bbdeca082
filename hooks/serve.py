"""The author loop: ``mkdocs serve`` shows an edit within about two seconds.

A save makes ``mkdocs serve`` rebuild every page, and every page runs its code
again: most of a rebuild is code whose result cannot have changed. While
serving (never in ``mkdocs build``, so CI and the published site always run
everything), this hook keeps each page's rendered content and reuses it when
nothing the page depends on has changed:

- the page's own source file;
- every file it includes with ``--8<--``;
- every module of ``snippets/`` it imports, and the ``snippets`` modules those
  import in turn;
- requirements.txt, mkdocs.yml and the hooks (a new version of a package, a
  setting or a build step can change any page).

A page whose key changed is rendered again, with its code run in a fresh
session and fresh ``snippets`` modules: every rebuild drops the imported
``snippets`` modules (so an edited module is imported anew, never kept from an
earlier build) and the per-block modules that markdown-exec registers, so the
serving process does not grow from one rebuild to the next.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS = ROOT / "snippets"
_GLOBAL_INPUTS = ("requirements.txt", "mkdocs.yml")

_INCLUDE = re.compile(r'^\s*-+8<-+\s+"(?P<path>[^":]+)(?::[\w-]+)?"\s*$', re.MULTILINE)
_SNIPPET_IMPORT = re.compile(r"\bsnippets\.(\w+)|\bfrom snippets import ([\w, ]+)")


# What Page.render sets on a page.
_RENDERED_ATTRIBUTES = ("content", "toc", "_title_from_render", "present_anchor_ids", "links_to_anchors", "title")
_serving = False
# page -> (key of what it depends on, what rendering set on the page)
_cache: dict[str, tuple[str, dict]] = {}


def _modules_named(text: str) -> set[str]:
    names = set()
    for dotted, listed in _SNIPPET_IMPORT.findall(text):
        names.update([dotted] if dotted else [name.strip() for name in listed.split(",")])
    return {name for name in names if (SNIPPETS / f"{name}.py").is_file()}


def _snippet_closure(text: str) -> list[Path]:
    """The ``snippets`` modules ``text`` imports, and the ones they import, in order."""
    todo, seen = sorted(_modules_named(text)), set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += sorted(_modules_named((SNIPPETS / f"{name}.py").read_text(encoding="utf-8")) - seen)
    return [SNIPPETS / f"{name}.py" for name in sorted(seen)]


def dependencies(source: Path) -> list[Path]:
    """Every file whose change can change what the page at ``source`` shows."""
    text = source.read_text(encoding="utf-8")
    included = [ROOT / match for match in _INCLUDE.findall(text)]
    readable = "\n".join([text, *(path.read_text(encoding="utf-8") for path in included if path.is_file())])
    hooks = sorted((ROOT / "hooks").glob("*.py"))
    # A page may read the tests at build time (the Snippets page checks that
    # every public function is tested).
    tests = sorted((ROOT / "tests").glob("test_*.py")) if '"tests"' in readable else []
    return [
        source, *included, *_snippet_closure(readable), *tests, *hooks,
        *(ROOT / name for name in _GLOBAL_INPUTS),
    ]


def page_key(source: Path) -> str:
    digest = hashlib.sha256()
    for path in dependencies(source):
        digest.update(str(path).encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"<missing>")
    return digest.hexdigest()


def on_startup(command, dirty):  # noqa: ARG001 (mkdocs hook signature)
    global _serving
    _serving = command == "serve"


def on_config(config):
    if _serving and str(SNIPPETS) not in config.watch:
        config.watch.append(str(SNIPPETS))
    return config


def on_pre_build(config):  # noqa: ARG001
    # Fresh modules every build: an edited snippets module is imported anew.
    for name in [name for name in sys.modules if name == "snippets" or name.startswith("snippets.")]:
        del sys.modules[name]
    # markdown-exec registers one module per executed block, under a name with a
    # counter it never resets: without this the serving process grows each build.
    from markdown_exec._internal.formatters import python as exec_python

    for name in [name for name in sys.modules if name.startswith("_code_block_")]:
        del sys.modules[name]
    exec_python._sessions_counter.clear()
    exec_python._code_blocks.clear()


def on_pre_page(page, config, files):  # noqa: ARG001
    if not _serving or page.file.abs_src_path is None:
        return page
    source = Path(page.file.abs_src_path)
    render = page.render

    def render_or_reuse(config, files):
        key = page_key(source)
        kept_key, kept_state = _cache.get(page.file.src_uri, (None, None))
        if kept_key == key:
            vars(page).update(kept_state)
            return
        render(config, files)
        state = {name: vars(page)[name] for name in _RENDERED_ATTRIBUTES if name in vars(page)}
        _cache[page.file.src_uri] = (key, state)

    page.render = render_or_reuse
    return page
