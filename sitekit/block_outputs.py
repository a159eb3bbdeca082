"""What a page's executed blocks printed, kept so that ``mkdocs serve`` can show it again without running them.

markdown-exec runs each block through a *run* function, ``run(code, **options)
-> output``: its own for ``python`` fences, hooks/console.py's for ``pycon``
ones. Both are wrapped by :func:`runner`. In a plain build the wrapper only
calls ``run``. While serving, hooks/serve.py renders a page inside
:func:`recording` (every block's code and output are kept, in page order) or,
when nothing the page's code depends on has changed since (only its prose
did: ``sitekit.pages.code_key``), inside :func:`replaying`, where each block
gets the output it printed last time instead of running. Rendering the
Markdown around the outputs is done again either way.

A replay that meets a block it did not keep (which the code key should make
impossible) runs nothing from there on, since the block would run without
the session the earlier blocks built: ``Replay.complete`` is then False, and
hooks/serve.py renders the page again, recording.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@dataclass
class Recording:
    """The blocks of one rendering, in order: ``(code, output)``; ``failed`` if one raised."""

    blocks: list[tuple[str, str]] = field(default_factory=list)
    failed: bool = False


@dataclass
class Replay:
    """Outputs to give back, in order; ``complete`` while every block asked for was the one kept."""

    blocks: list[tuple[str, str]]
    complete: bool = True
    given: int = 0


_active: Recording | Replay | None = None


@contextlib.contextmanager
def recording() -> Iterator[Recording]:
    """Keep the code and output of every block run inside the ``with``."""
    global _active
    record = _active = Recording()
    try:
        yield record
    finally:
        _active = None


@contextlib.contextmanager
def replaying(blocks: list[tuple[str, str]]) -> Iterator[Replay]:
    """Inside the ``with``, blocks are not run: each gets the output kept for it.

    After the ``with``, ``complete`` says whether the page asked for exactly
    the blocks kept, in their order.
    """
    global _active
    replay = _active = Replay(list(blocks))
    try:
        yield replay
    finally:
        _active = None
        if replay.given != len(replay.blocks):
            replay.complete = False


def runner(run: Callable[..., str]) -> Callable[..., str]:
    """``run`` (markdown-exec's ``run(code, **options) -> output``), recording or replaying when asked."""

    @functools.wraps(run)
    def run_or_replay(code: str, *args, **kwargs) -> str:
        active = _active
        if isinstance(active, Replay):
            if active.complete and active.given < len(active.blocks) and active.blocks[active.given][0] == code:
                active.given += 1
                return active.blocks[active.given - 1][1]
            active.complete = False  # the page is rendered again; nothing runs out of its session
            return ""
        try:
            output = run(code, *args, **kwargs)
        except BaseException:
            if isinstance(active, Recording):
                active.failed = True
            raise
        if isinstance(active, Recording):
            active.blocks.append((code, output))
        return output

    return run_or_replay
