"""The page runner: a page's executed fences, run in page order in one namespace, and one store of outputs.

The site's Markdown extension (``sitekit.render``) asks for a page's blocks
before the page is converted (:meth:`Runner.page`), and markdown-exec's
formatters then only place each block's output. The page's executed fences
(``sitekit.pages``) run one after the other in one namespace, the page's one
session:

- a ``python`` fence runs as markdown-exec's own runner would: only
  ``print`` reaches the page. A warning is an error, a traceback names the
  page and its line (the code is compiled under the page's path, at its
  lines), and so does a ``nan`` in what it printed (:func:`printed_nan`);
- a ``pycon`` fence is a console session (``sitekit.console``): run as a
  REPL and compared, statement by statement, with the output written under it.

When a block fails, its page stops there: the blocks after it are not run,
and say so. The page's code runs in a temporary working folder and may change
nothing in the clone (:class:`PageRun`); pytest runs the pages' fences under
the same guards (conftest.py). Each page starts with an empty namespace,
NumPy's default print options, and fresh modules of this repository when one
changed on disk since it was imported, so ``mkdocs serve`` never runs stale
code nor sees an earlier build's variables.

**One store of outputs.** While ``mkdocs serve`` builds again and again
(hooks/site.py says so once, through :meth:`Runner.keep_outputs`), each
page's blocks, and the HTML markdown-exec made of them, are kept with the
page's code key (``sitekit.keys.code_key``: its executed fences and every
file they depend on, whole, but not its prose). A page whose key has not
changed shows the kept blocks instead of running its code again.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import re
import shutil
import sys
import tempfile
import threading
import traceback
import types
import warnings
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

from sitekit import keys, pages
from sitekit.console import run_console
from sitekit.report import build_error


@dataclass
class Failure:
    """What a page shows in place of a block that failed, or that did not run because one before it failed."""

    shown: str
    language: str = "text"  # "python" for a traceback
    marker: str = ""  # the build error's marker (sitekit.report.build_error); none for a block not run


@dataclass
class Block:
    """One executed fence: what ran, what it printed, and the HTML markdown-exec made of it."""

    fence: pages.Fence
    code: str  # the fence's code, its includes expanded: what markdown-exec is handed
    output: str = ""
    failure: Failure | None = None
    html: str | None = None  # set by sitekit.render; None while not laid out, or if it holds a heading


@dataclass
class Page:
    where: str  # for messages: docs/<page>, or "the page" where the engine did not say which
    text: str  # the page's file (or, unnamed, the Markdown converted): its fences' lines count in it
    blocks: list[Block]


def session_problem(fences: list[pages.Fence]) -> tuple[pages.Fence, str] | None:
    """The first executed fence without a session, or with a second one on its page, and what is wrong with it."""
    first = None
    for fence in fences:
        if fence.session is None:
            return fence, 'an executed fence has no session: give every executed fence session="<page name>"'
        if first not in (None, fence.session):
            return fence, f"two sessions on one page: {first!r} and {fence.session!r}; use one session per page"
        first = fence.session
    return None


class Runner:
    """Runs a page's blocks, or replays them from the one store of outputs."""

    def __init__(self):
        self.kept: dict[Path, tuple[str, list[Block]]] = {}  # the page's file -> (its code key, its blocks)
        self.serving = False
        self.module_stamps: dict[str, int] = {}  # this repository's modules the pages import -> mtime
        self.numpy_options: dict | None = None

    def keep_outputs(self) -> None:
        """Keep each page's blocks for the next build of this process (``mkdocs serve``; a single build keeps none)."""
        self.serving = True

    def page(self, path: Path | None, text: str) -> Page:
        """The blocks of the page whose file is at ``path`` and holds ``text`` (None: a page the engine did not name)."""
        where = pages.where(path) if path else "the page"
        fences = pages.executed_fences(text)
        if not fences:
            return Page(where, text, [])
        key = None
        if self.serving and path is not None:
            with contextlib.suppress(FileNotFoundError, pages.FrontMatterError):  # the extension reports both
                key = keys.code_key(path)
        kept_key, blocks = self.kept.pop(path, (None, None))
        if key is None or kept_key != key:
            blocks = self._run(where, fences)
        if key is not None and all(block.failure is None for block in blocks):
            self.kept[path] = (key, blocks)
        return Page(where, text, blocks)

    def _run(self, where: str, fences: list[pages.Fence]) -> list[Block]:
        self._fresh_modules()
        self._default_numpy_options()
        blocks = [Block(fence, fence.expanded()) for fence in fences]
        problem = session_problem(fences)
        namespace: dict = {}
        failed = None
        with PageRun() as page_run:
            for block in blocks:
                at = f"{where} line {block.fence.line + 1}"
                if failed is not None:
                    block.failure = Failure(f"not run: an earlier block of this page failed ({failed})")
                elif problem is not None and problem[0] is block.fence:
                    block.failure = Failure(problem[1], marker=build_error(at, problem[1]))
                else:
                    block.output, block.failure = _execute(page_run, namespace, where, block)
                if block.failure is not None and failed is None:
                    failed = at
        return blocks

    def _default_numpy_options(self) -> None:
        # Pages run one after the other in one process: np.set_printoptions on one
        # page must not change what the next one prints (conftest.py does the same).
        import numpy

        if self.numpy_options is None:
            self.numpy_options = numpy.get_printoptions()
        numpy.set_printoptions(**self.numpy_options)

    def _fresh_modules(self) -> None:
        """Forget this repository's modules the pages import if one changed since it was imported."""
        loaded = {name: module for name, module in sys.modules.items() if _PAGE_MODULE.match(name)}
        stamps = {}
        for name, module in loaded.items():
            file = getattr(module, "__file__", None)
            stamps[name] = Path(file).stat().st_mtime_ns if file and Path(file).is_file() else 0
        if any(self.module_stamps.get(name, stamp) != stamp for name, stamp in stamps.items()):
            for name in loaded:
                del sys.modules[name]
            stamps = {}
        self.module_stamps = stamps


RUNNER = Runner()
_PAGE_MODULE = re.compile("|".join(rf"{re.escape(module)}(?:\.|$)" for module in keys.PAGE_IMPORTS))


class _Failed(Exception):
    def __init__(self, failure: Failure):
        super().__init__(failure.shown)
        self.failure = failure


def _execute(page_run: PageRun, namespace: dict, where: str, block: Block) -> tuple[str, Failure | None]:
    """One block run in ``namespace``: its output, or its failure."""
    fence = block.fence
    at = f"{where} line {fence.line + 1}"
    try:
        with page_run.block(at):
            if not fence.console:
                return run_python(block.code, namespace, where, fence.line), None
            transcript, mismatches = run_console(block.code, namespace, name=fence.session, lineno=fence.line + 1)
            if mismatches:
                report = "\n\n".join(f"{where} {mismatch}" for mismatch in mismatches)
                shown = f"the page's written output differs from the real one:\n\n{report}"
                raise _Failed(Failure(shown, marker=build_error(at, "a console session's written output differs")))
            return transcript, None
    except WriteError as error:
        return "", Failure(error.problem, marker=build_error(at, error.problem))
    except _Failed as failed:
        return "", failed.failure


def _print_into(buffer: StringIO, *texts, end: str = "\n", **_) -> None:
    """markdown-exec's print for a block: the texts, space-separated, into the block's output."""
    buffer.write(" ".join(str(text) for text in texts) + end)


def run_python(code: str, namespace: dict, where: str, line: int) -> str:
    """Run a ``python`` fence's code in ``namespace``; return what it printed, or raise its failure.

    The code is compiled under the page's path with its first line at the
    page's line, so a traceback points into the page (``linecache`` is given
    the code, for the pages' included lines). A warning is an error.
    """
    module = "_page_" + re.sub(r"\W", "_", where)
    namespace["__name__"] = module  # functions defined here get a __module__, and dataclasses a module
    sys.modules[module] = types.ModuleType(module)
    buffer = StringIO()
    namespace["print"] = functools.partial(_print_into, buffer)
    lines = ["\n"] * (line + 1) + [text + "\n" for text in code.split("\n")]
    filename = f"{where} (as run)"
    linecache.cache[filename] = (len("".join(lines)), None, lines, filename)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exec(compile("".join(lines), filename, "exec"), namespace)  # noqa: S102 (running the page is the point)
    except Exception as error:  # noqa: BLE001 (any error of the page's code is reported)
        frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == filename]
        at = frames[-1].lineno if frames else line + 1
        # From the page's frame on: the one above it is this function's exec.
        trace = "".join(traceback.format_exception(type(error), error, error.__traceback__.tb_next))
        marker = build_error(f"{where} line {at}", f"the block raised {type(error).__name__}: {error}")
        raise _Failed(Failure(trace, "python", marker)) from error
    output = buffer.getvalue()
    problem = printed_nan(output)
    if problem is not None:
        raise _Failed(Failure(problem, marker=build_error(f"{where} line {line + 1}", problem)))
    return output


# "nan" as NumPy and Python print it, a word of its own (not np.nan, "nan" in quotes or nanmax(...)).
_NAN = re.compile(r"(?<![\w.'\"])nan(?![\w'\"(])")


def printed_nan(output: str) -> str | None:
    r"""What is wrong with a block's output that shows ``nan`` (naming its first such line), or None.

    A page shows a NaN only where a console session writes it out (chapter 3
    shows how the naive softmax makes one); a python block's output is not
    written by anyone, so a ``nan`` in it is a fault of the page's code. The
    build and pytest (conftest.py) both refuse it with this message.

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


# ------------------------------------------------------- what a page may write


class WriteError(Exception):
    """A block wrote, deleted or moved a file of the clone (it was put back as it was)."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}")
        self.problem = problem


_CLONE = os.path.realpath(pages.ROOT) + os.sep
_BYTECODE = os.sep + "__pycache__" + os.sep  # the folder the import system makes beside a module, and its files
# Python's audit events (PEP 578) that change a file or a folder, and where their paths are.
_CHANGES = {"open": (0,), "os.remove": (0,), "os.rmdir": (0,), "os.truncate": (0,), "os.mkdir": (0,),
            "shutil.rmtree": (0,), "os.rename": (0, 1), "os.link": (1,), "os.symlink": (1,)}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_FOLDER = object()  # what a folder was before a block changed it
_watching: tuple[int, PageRun] | None = None  # (the thread running a block, its page's run)


def _audit(event: str, args: tuple) -> None:
    """The process's audit hook: hands the paths a running block is about to change to its page's run."""
    watching = _watching
    if watching is None or event not in _CHANGES or watching[0] != threading.get_ident():
        return
    if event == "open" and not (any(c in args[1] for c in "wax+") if args[1] else args[2] & _WRITE_FLAGS):
        return
    watching[1].save([args[i] for i in _CHANGES[event]])


class PageRun:
    """A page's code at work: its temporary working folder, and the files of the clone it is about to change.

    Python tells an audit hook (``sys.addaudithook``) before any of its code
    opens a file for writing, deletes, moves or truncates one, or makes or
    removes a folder. While a block runs, each file or folder of the clone it
    is about to change (the byte code the import system writes aside) is saved
    as it is; after the block, whatever changed is put back, and the block
    fails naming it. A program the page's code starts is not watched.
    """

    _hooked = False

    def __init__(self):
        if not PageRun._hooked:
            sys.addaudithook(_audit)
            PageRun._hooked = True
        self._folder = tempfile.TemporaryDirectory(prefix="sitekit-page-", ignore_cleanup_errors=True)
        self.folder = self._folder.name
        self._own = os.path.realpath(self.folder) + os.sep
        self.saved: dict[str, object] = {}  # path -> its bytes and time, _FOLDER, or None (it was not there)

    def __enter__(self) -> PageRun:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def close(self) -> None:
        self._folder.cleanup()

    @contextlib.contextmanager
    def block(self, where: str):
        """Run a block in the page's working folder; a change to the clone is put back and raised as :class:`WriteError`."""
        global _watching
        _watching = (threading.get_ident(), self)
        try:
            with contextlib.chdir(self.folder):
                yield
        finally:
            _watching = None
            changes = self._put_back()
            if changes:
                raise WriteError(where, f"the block {'; '.join(changes)}: a page's code may write only into "
                                        "a temporary folder (CONTRIBUTING.md); put back as it was")

    def save(self, paths: list) -> None:
        for name in paths:
            if isinstance(name, int):  # an open file's number: opened before, and seen then
                continue
            path = os.path.realpath(os.fsdecode(name))  # a relative one from the block's working folder
            if not path.startswith(_CLONE) or path.startswith(self._own) or _BYTECODE in path + os.sep:
                continue
            if os.path.isdir(path):
                found = [os.path.join(folder, name) for folder, _, names in os.walk(path) for name in names]
                self.saved.setdefault(path, _FOLDER)
                for file in found:
                    self.saved.setdefault(file, (Path(file).read_bytes(), os.stat(file).st_mtime_ns))
            else:
                self.saved.setdefault(path, (Path(path).read_bytes(), os.stat(path).st_mtime_ns)
                                      if os.path.isfile(path) else None)

    def _put_back(self) -> list[str]:
        """Put every saved path back as it was; what changed, for the message."""
        saved, self.saved = self.saved, {}
        changes = []
        for path in sorted(saved, key=len, reverse=True):  # what the block made, deepest first
            if saved[path] is None and os.path.lexists(path):
                if os.path.isdir(path) and not os.path.islink(path):
                    changes.append(f"made {path[len(_CLONE):]}/")
                    shutil.rmtree(path)
                else:
                    changes.append(f"wrote {path[len(_CLONE):]}")
                    os.remove(path)
        for path in sorted(saved, key=len):  # then what was there, folders first
            before = saved[path]
            if before is _FOLDER and not os.path.isdir(path):
                changes.append(f"deleted {path[len(_CLONE):]}/")
                os.makedirs(path)
            elif isinstance(before, tuple) and not (os.path.isfile(path) and Path(path).read_bytes() == before[0]):
                changes.append(f"{'wrote' if os.path.lexists(path) else 'deleted'} {path[len(_CLONE):]}")
                os.makedirs(os.path.dirname(path), exist_ok=True)
                Path(path).write_bytes(before[0])
                os.utime(path, ns=(before[1], before[1]))
        return sorted(changes, key=lambda change: change.split(" ", 1)[1])
