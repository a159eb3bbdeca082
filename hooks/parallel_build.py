"""``mkdocs build`` on two cores: a helper process runs pages' code from the end (``sitekit.parallel_build``).

The helper starts as soon as the build has its config; the build then
renders every page in its own order and, for a page whose code the helper
has run, shows what the helper's blocks printed instead of running the code
again (the page's Markdown is rendered here either way). Never while
serving (hooks/serve.py keeps outputs there), never in the helper itself,
not for a site with fewer than ``MIN_PAGES`` pages of code (the failure
tests' small projects), and not with ``SITEKIT_ONE_PROCESS=1``.
"""

from __future__ import annotations

import atexit
import logging
import os
import tempfile
from pathlib import Path

import _repository  # noqa: F401 (the repository's root on sys.path, for sitekit)
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

from sitekit import block_outputs, pages
from sitekit.parallel_build import HELPER, ONE_PROCESS, Exchange, shared_pages, start_helper, stop

log = logging.getLogger("mkdocs.hooks.parallel_build")
_state: dict = {}


def on_startup(*, command: str, dirty: bool) -> None:  # noqa: ARG001
    _state.clear()
    _state["building"] = command == "build" and not os.environ.get(HELPER) and os.environ.get(ONE_PROCESS) != "1"


# A helper takes a second or so to start: with fewer pages of code than this, it would only cost.
MIN_PAGES = 4


def _pages_with_code(config: MkDocsConfig) -> int:
    docs = Path(config["docs_dir"])
    return sum(pages.executes(docs / source) for source in pages.nav_sources(config["nav"] or []))


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    if (_state.get("building") and config.config_file_path and "helper" not in _state
            and _pages_with_code(config) >= MIN_PAGES):
        _state["folder"] = Path(tempfile.mkdtemp(prefix="sitekit-build-"))
        _state["helper"] = start_helper(config.config_file_path, _state["folder"])
        atexit.register(_stop)  # an interrupted build leaves no helper and no folder behind
    return config


@event_priority(-100)  # last: the documentation pages as every other hook left them
def on_files(files: Files, /, *, config: MkDocsConfig) -> Files:
    if "helper" in _state:
        docs = Path(config["docs_dir"])
        _state["exchange"] = Exchange(_state["folder"], shared_pages(files, lambda uri: pages.executes(docs / uri)))
        _state["replayed"] = []
    return files


def on_pre_page(page: Page, /, *, config: MkDocsConfig, files: Files) -> Page:  # noqa: ARG001
    exchange: Exchange | None = _state.get("exchange")
    uri = page.file.src_uri
    if exchange is None or uri not in exchange.number:
        return page
    render = page.render

    def render_shared(config, files):
        blocks = exchange.helpers_blocks(uri, _state["helper"])
        if blocks is not None:
            with block_outputs.replaying(blocks) as replay:
                render(config, files)
            if replay.complete:
                _state["replayed"].append(uri)
                return
        render(config, files)  # our own run: as if there were no helper

    page.render = render_shared
    return page


def _stop() -> None:
    stop(_state.pop("helper", None), _state.pop("folder", None))


def on_post_build(*, config: MkDocsConfig) -> None:  # noqa: ARG001
    if "exchange" in _state:
        replayed = _state["replayed"]
        log.info(f"parallel build: the code of {len(replayed)} of {len(_state['exchange'].number)} pages "
                 f"ran in the helper process ({', '.join(replayed) or 'none'})")
    _stop()


def on_build_error(*, error: Exception) -> None:  # noqa: ARG001
    _stop()
