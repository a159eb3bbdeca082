"""Two cores for one build: a second process runs pages' code from the end while the build runs it from the start.

``mkdocs build`` renders the pages one after the other, in one process, and
most of a build is the pages' code. hooks/parallel_build.py starts this
module as a second process (the *helper*) as soon as the build has its
config. The helper loads the same config and renders the pages whose front
matter says ``slow_code: true`` first (chapter 14: the build reaches it after
nine other pages), then the others in the reverse of the build's order,
recording what every executed block printed (``sitekit.block_outputs``); the
build renders them in its own order. They share a folder:

- before a page's code runs, its runner *claims* it by creating
  ``<n>.claim`` (``O_EXCL``: only one of the two can);
- the helper writes what the page's blocks printed to ``<n>.done`` when it
  is finished (atomically: written aside, then renamed), or nothing if a
  block failed or anything was logged at WARNING level while the page was
  rendered;
- the build, reaching a page: if the helper finished it, the build renders
  the page with those outputs (a replay, which checks that every block is the
  one recorded); if the helper holds the claim, it waits for it; otherwise it
  claims the page and runs its code itself. A page the helper could not
  finish, or whose replay did not match, is rendered by the build as if
  there were no helper, with its errors reported there;
- the helper stops at the first page, from the end, that the build has
  claimed.

The Markdown of every page is still rendered by the build, and only the
build writes the site. Only pages with executed fences are shared. The
helper's outputs are those of the same code, hooks and versions in a process
of the same environment, so the site is the same byte for byte: .ci/run's
determinism check compares the test session's build, made in one process
(``SITEKIT_ONE_PROCESS=1``, which turns the helper off), with one made with a
helper.

``mkdocs serve`` shares the same way the pages whose code a rebuild must run
again (hooks/serve.py), with a helper forked from the serving process
(:class:`ForkedHelper`) rather than started anew.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

HELPER = "SITEKIT_BUILD_HELPER"      # set in the helper's environment: its own build starts no helper
ONE_PROCESS = "SITEKIT_ONE_PROCESS"  # "1": the build (and mkdocs serve) runs every page's code itself
# mkdocs serve forks its helper (ForkedHelper): only on Linux. macOS's system
# libraries are not safe to use in a forked child, and Windows cannot fork;
# there, mkdocs serve runs every page's code in its own process.
CAN_FORK = sys.platform == "linux" and hasattr(os, "fork")


class Exchange:
    """The folder the build and its helper share: one claim and one result per page."""

    def __init__(self, folder: Path, order: list[str]):
        self.folder = folder
        self.number = {uri: n for n, uri in enumerate(order)}

    def _path(self, uri: str, kind: str) -> Path:
        return self.folder / f"{self.number[uri]}.{kind}"

    def claim(self, uri: str) -> bool:
        """Take the page: True for the one of the two processes that asks first."""
        try:
            os.close(os.open(self._path(uri, "claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def publish(self, uri: str, blocks: list[tuple[str, str]] | None) -> None:
        """The page's ``(code, output)`` blocks, or None when the helper could not render it."""
        aside = self._path(uri, "writing")
        aside.write_bytes(pickle.dumps(blocks))
        os.replace(aside, self._path(uri, "done"))

    def result(self, uri: str, helper, timeout: float = 900.0):
        """The helper's blocks for a page it claimed, waiting while it runs them; None if it could not.

        ``helper`` is the process (a ``Popen`` or a :class:`ForkedHelper`): the wait ends if it stops.
        """
        done = self._path(uri, "done")
        end = time.monotonic() + timeout
        while not done.exists():
            if helper is None or helper.poll() is not None or time.monotonic() > end:
                break  # it died or hangs: the build runs the page itself
            time.sleep(0.005)
        if not done.exists():
            return None
        return pickle.loads(done.read_bytes())  # noqa: S301 (written by the helper this build started)

    def helpers_blocks(self, uri: str, helper, timeout: float = 900.0):
        """What the build asks on reaching a page: the helper's blocks for it, or None if the build is to run it.

        None for a page that is not shared, one the build claims now, or one
        the helper claimed but could not finish (:meth:`result`).
        """
        if uri not in self.number or self.claim(uri):
            return None
        return self.result(uri, helper, timeout)


def shared_pages(files, executed) -> list[str]:
    """The build's order of the documentation pages whose code runs (``executed(uri)``)."""
    return [file.src_uri for file in files.documentation_pages() if executed(file.src_uri)]


def start_helper(config_file: str, folder: Path) -> subprocess.Popen:
    """The helper process, its output discarded (the build reports every page it could not take)."""
    env = {**os.environ, HELPER: "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "sitekit.parallel_build", config_file, str(folder)],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd=Path(config_file).parent,
    )


def stop(helper, folder: Path | None) -> None:
    """Kill ``helper`` (a ``Popen`` or a :class:`ForkedHelper`, or None) if it still runs, and remove ``folder``."""
    if helper is not None:
        helper.kill()
        helper.wait()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


class _Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record):  # noqa: ARG002
        self.count += 1


def count_warnings() -> _Warnings:
    """A handler on MkDocs's logger that counts what is logged at WARNING level or above."""
    warned = _Warnings()
    logging.getLogger("mkdocs").addHandler(warned)
    return warned


def record_page(page, config, files, warned: _Warnings) -> list[tuple[str, str]] | None:
    """Render ``page`` as ``mkdocs build`` does, and return what its blocks printed.

    None if a block failed or anything was logged at WARNING level: the build
    then renders the page itself and reports it. The page is rendered with
    MkDocs's own ``_populate_page`` (a private name: requirements.txt pins
    MkDocs, and tests/test_parallel_build.py and tests/test_serve.py fail if
    a helper stops taking pages; the build itself would only be slower).
    """
    from mkdocs.commands.build import _populate_page

    from sitekit import block_outputs

    before = warned.count
    with block_outputs.recording() as record:
        try:
            _populate_page(page, config, files)
        except Exception:  # noqa: BLE001 (the build renders the page itself, and reports the error)
            record.failed = True
    return record.blocks if not record.failed and warned.count == before else None


def take_pages(exchange: Exchange, order: list[str], slow: list[str], render) -> None:
    """The helper's part: claim and run ``slow`` pages first, then from the last, until the build has claimed one.

    ``render(uri)`` returns the page's blocks (:func:`record_page`), published for the build.
    """
    taken = set()
    for uri in [*slow, *reversed(order)]:
        if uri in taken:
            continue
        taken.add(uri)
        if not exchange.claim(uri):
            if uri in slow:
                continue  # the build got there first
            return  # the build has come this far
        exchange.publish(uri, render(uri))


def _help(config_file: str, folder: Path) -> None:
    """The helper of ``mkdocs build``: prepare the pages as the build does, then :func:`take_pages`."""
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files, set_exclusions
    from mkdocs.structure.nav import get_navigation
    from mkdocs.structure.pages import Page

    from sitekit import pages

    config = load_config(config_file=config_file)
    config.plugins.on_startup(command="build", dirty=False)
    config = config.plugins.on_config(config)
    config.plugins.on_pre_build(config=config)
    files = get_files(config)
    files.add_files_from_theme(config.theme.get_env(), config)
    files = config.plugins.on_files(files, config=config)
    set_exclusions(files, config)
    nav = get_navigation(files, config)
    config.plugins.on_nav(nav, config=config, files=files)
    docs = Path(config["docs_dir"])
    order = shared_pages(files, lambda uri: pages.executes(docs / uri))
    # Pages whose code is slow first (while the build renders the pages before them), then from the last.
    slow = [uri for uri in order if pages.slow_code((docs / uri).read_text(encoding="utf-8"))]
    warned = count_warnings()
    by_uri = {file.src_uri: file for file in files.documentation_pages()}

    def render(uri: str):
        file = by_uri[uri]
        return record_page(file.page if file.page is not None else Page(None, file, config), config, files, warned)

    take_pages(Exchange(folder, order), order, slow, render)


class ForkedHelper:
    """A helper forked from this process to run ``work()``; ``poll``, ``kill`` and ``wait`` as a ``Popen``'s.

    ``mkdocs serve`` uses it (hooks/serve.py): the child starts in a
    millisecond with every module, the config and the pages the rebuild has
    already loaded, where a new process would take a second to import them.
    The serving process has threads (the HTTP server, the file watcher), and
    a fork copies only the one that forks: a lock another thread held stays
    held in the child. So the child writes nothing to the streams those
    threads share: its standard output and error go to /dev/null, through new
    file objects, and its loggers lose their handlers (the logging module's
    own locks are renewed in a forked child). It leaves by ``os._exit``,
    whatever happens, so it never runs the parent's exit handlers or returns
    into the server.
    """

    def __init__(self, work):
        self.returncode: int | None = None
        with warnings.catch_warnings():
            # Python 3.12+ warns that forking a process with threads may deadlock
            # the child: this child touches nothing the other threads hold (above).
            warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
            self.pid = os.fork()
        if self.pid == 0:  # the child
            code = 1
            try:
                _detach_output()
                work()
                code = 0
            finally:
                os._exit(code)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _detach_output() -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (until os._exit)
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        if isinstance(logger, logging.Logger):
            for handler in list(logger.handlers):
                logger.removeHandler(handler)


if __name__ == "__main__":
    _help(sys.argv[1], Path(sys.argv[2]))
