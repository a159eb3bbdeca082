"""The author loop: ``mkdocs serve`` shows an edit within about two seconds.

A save makes ``mkdocs serve`` rebuild every page, and every page runs its code
again: most of a rebuild is code whose result cannot have changed. While
serving (never in ``mkdocs build``, so CI and the published site always run
everything), this hook keeps each page's rendered content and reuses it when
nothing the page depends on has changed (``sitekit.pages.dependencies``: the
page, the files it includes, the modules of this repository it imports and
theirs, and what every page depends on: mkdocs.yml, requirements.txt, hooks/
and sitekit/).

The key is kept on the page as ``page.serve_key`` for the rest of the
rebuild (hooks/chapter_notebooks.py makes a page's notebook again only when
it changed). A page whose key changed is rendered again. If only its prose
changed (``sitekit.pages.code_key``: its executed fences and every other
dependency are as they were), its blocks are not run: each shows what it
printed when it last ran (``sitekit.block_outputs``), so a prose edit to a
chapter whose code takes seconds shows in well under a second. Otherwise its
code runs in a fresh session and fresh modules: every rebuild drops the modules pages import
(``snippets``, ``sitekit``'s figures and widgets), so an edited module is
imported anew, never kept from an earlier build, and what markdown-exec keeps for every block it ran, so the
serving process does not grow from one rebuild to the next.

When two or more pages must run their code (an edit to a module many pages
import, or the first build), the second core takes a share, as in ``mkdocs
build``: a helper forked from the serving process runs them from the end
(``sitekit.parallel_build.ForkedHelper``, Linux only) while this process
renders the pages in order and shows what the helper's blocks printed.
``SITEKIT_ONE_PROCESS=1`` turns it off.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import _repository  # noqa: F401 (the repository's root on sys.path, for sitekit)
import jinja2
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import Files
from mkdocs.structure.nav import Navigation
from mkdocs.structure.pages import Page

from sitekit import block_outputs, markdown_exec_internals, pages, parallel_build

# What Page.render sets on a page.
_RENDERED_ATTRIBUTES = ("content", "toc", "_title_from_render", "present_anchor_ids", "links_to_anchors", "title")
_serving = False
# page -> (key of what it depends on, what rendering set on the page)
_cache: dict[str, tuple[str, dict]] = {}
# page -> (key of what its code depends on, the (code, output) of its blocks)
_outputs: dict[str, tuple[str, list[tuple[str, str]]]] = {}
# This rebuild: page -> its key and its code's key (computed once, in on_nav); the helper, if any.
_keys: dict[str, str] = {}
_code_keys: dict[str, str] = {}
_helper: dict = {}
_in_helper = False  # True in the forked helper: it renders pages as a plain build does
# How long a page waits for the helper to finish it before running it itself.
HELPER_TIMEOUT = 120.0


def on_startup(*, command: str, dirty: bool) -> None:  # noqa: ARG001
    global _serving
    _serving = command == "serve"


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    if _serving:
        watched = [str(pages.ROOT / package) for package in pages.LOCAL_PACKAGES if (pages.ROOT / package).is_dir()]
        config.watch.extend(folder for folder in watched if folder not in config.watch)
    return config


def _imported_by_pages(name: str) -> bool:
    return any(name == module or name.startswith(module + ".") for module in pages.PAGE_IMPORTS)


def on_pre_build(*, config: MkDocsConfig) -> None:  # noqa: ARG001
    # Fresh modules every build: an edited module is imported anew.
    for name in [name for name in sys.modules if _imported_by_pages(name)]:
        del sys.modules[name]
    markdown_exec_internals.forget_code_blocks()


class _KeptTemplates(jinja2.BytecodeCache):
    """The theme's compiled templates, kept from one rebuild to the next (jinja2 checks each source's checksum)."""

    def __init__(self):
        self.kept: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self.kept:
            bucket.bytecode_from_string(self.kept[bucket.key])

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.kept[bucket.key] = bucket.bytecode_to_string()


_templates = _KeptTemplates()


def on_env(env: jinja2.Environment, /, *, config: MkDocsConfig, files: Files) -> jinja2.Environment:  # noqa: ARG001
    # Every rebuild loads the config and the theme afresh: without this, every
    # template of the theme is compiled again at every save.
    if _serving:
        env.bytecode_cache = _templates
    return env


@event_priority(-100)  # last: the pages as every other hook left them
def on_nav(nav: Navigation, /, *, config: MkDocsConfig, files: Files) -> Navigation:
    """Find the pages whose code must run in this rebuild; with two or more, fork a helper to share them."""
    _stop_helper()  # none should be left from the last rebuild: on_post_build or on_build_error stopped it
    _keys.clear()
    _code_keys.clear()
    if not _serving or _in_helper:
        return nav
    due = []
    for file in files.documentation_pages():
        if file.abs_src_path is None:
            continue
        uri, source = file.src_uri, Path(file.abs_src_path)
        key = _keys[uri] = pages.page_key(source)
        if _cache.get(uri, (None,))[0] == key or not pages.executes(source):
            continue
        code_key = _code_keys[uri] = pages.code_key(source)
        if _outputs.get(uri, (None,))[0] != code_key:
            due.append(uri)
    if len(due) >= 2 and parallel_build.CAN_FORK and os.environ.get(parallel_build.ONE_PROCESS) != "1":
        _start_helper(due, config, files)
    return nav


def _start_helper(due: list[str], config: MkDocsConfig, files: Files) -> None:
    """A forked helper runs the code of ``due`` pages from the end (slow ones first) while this process renders from the start.

    The same exchange as ``mkdocs build``'s helper (``sitekit.parallel_build``):
    each page is claimed by one of the two; this process shows what the
    helper's blocks printed (a replay, checked block by block) and renders
    every page's Markdown itself.
    """
    folder = Path(tempfile.mkdtemp(prefix="sitekit-serve-"))
    exchange = parallel_build.Exchange(folder, due)
    by_uri = {file.src_uri: file for file in files.documentation_pages()}
    slow = [uri for uri in due if pages.slow_code(Path(by_uri[uri].abs_src_path).read_text(encoding="utf-8"))]

    def work() -> None:
        global _in_helper
        _in_helper = True
        warned = parallel_build.count_warnings()

        def render(uri: str):
            file = by_uri[uri]
            page = file.page if file.page is not None else Page(None, file, config)
            return parallel_build.record_page(page, config, files, warned)

        parallel_build.take_pages(exchange, due, slow, render)

    _helper.update(folder=folder, exchange=exchange, process=parallel_build.ForkedHelper(work))


def _stop_helper() -> None:
    parallel_build.stop(_helper.get("process"), _helper.get("folder"))
    _helper.clear()


def on_post_build(*, config: MkDocsConfig) -> None:  # noqa: ARG001
    _stop_helper()


def on_build_error(*, error: Exception) -> None:  # noqa: ARG001
    _stop_helper()


def on_pre_page(page: Page, /, *, config: MkDocsConfig, files: Files) -> Page:  # noqa: ARG001
    if not _serving or _in_helper or page.file.abs_src_path is None:
        return page
    source = Path(page.file.abs_src_path)
    render = page.render

    def render_or_reuse(config, files):
        uri = page.file.src_uri
        key = page.serve_key = _keys.get(uri) or pages.page_key(source)
        kept_key, kept_state = _cache.get(uri, (None, None))
        if kept_key == key:
            vars(page).update(kept_state)
            return
        code_key = _code_keys.get(uri) or pages.code_key(source)
        kept_code_key, kept_blocks = _outputs.pop(uri, (None, None))
        if kept_code_key != code_key:  # the code must run: perhaps the helper ran it
            exchange = _helper.get("exchange")
            kept_blocks = exchange.helpers_blocks(uri, _helper["process"], HELPER_TIMEOUT) if exchange else None
        replayed = False
        if kept_blocks is not None:
            with block_outputs.replaying(kept_blocks) as replay:
                render(config, files)
            replayed = replay.complete
            if replayed:
                _outputs[uri] = (code_key, kept_blocks)
        if not replayed:
            with block_outputs.recording() as record:
                render(config, files)
            if not record.failed:
                _outputs[uri] = (code_key, record.blocks)
        state = {name: vars(page)[name] for name in _RENDERED_ATTRIBUTES if name in vars(page)}
        _cache[uri] = (key, state)

    page.render = render_or_reuse
    return page
