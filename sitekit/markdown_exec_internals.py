"""The private parts of markdown-exec the build relies on, all in this one module.

markdown-exec's public names (``markdown_exec.formatters``, ``base_format``,
``code_block``, ``ExecutionError``, ``HeadingReportingTreeprocessor``) are
imported from ``markdown_exec`` where they are used. The other things the
build needs have no public form, and live in ``markdown_exec._internal``:

- the globals of each session (``_sessions_globals``): a console session runs
  in its page's namespace, and every build starts with empty sessions;
- the per-block bookkeeping (``_sessions_counter``, ``_code_blocks`` and one
  ``_code_block_*`` module per block in ``sys.modules``), which grows with
  every rebuild of ``mkdocs serve`` unless it is dropped;
- the function that runs a block (``exec_python``), wrapped so that a
  warning is an error, and the one around it that returns what the block
  printed (``_run_python``), wrapped so that ``mkdocs serve`` can keep a
  page's outputs and give them back (``sitekit.block_outputs``);
- the factory of the inner Markdown converters (``rendering._mimic``),
  wrapped so that a page reuses its converters.

They were written against :data:`WRITTEN_FOR`, the version requirements.txt
pins; :func:`version_problem` says when another one is installed (the build
then fails under ``--strict``), and tests/test_markdown_exec_internals.py
checks the pin and that every name below still resolves.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import metadata

WRITTEN_FOR = "1.12.6"


def _python_formatter():
    from markdown_exec._internal.formatters import python

    return python


def _rendering():
    from markdown_exec._internal import rendering

    return rendering


# Every private name used below, as (module, attribute): the test resolves each.
PRIVATE_NAMES = (
    ("markdown_exec._internal.formatters.python", "_sessions_globals"),
    ("markdown_exec._internal.formatters.python", "_sessions_counter"),
    ("markdown_exec._internal.formatters.python", "_code_blocks"),
    ("markdown_exec._internal.formatters.python", "exec_python"),
    ("markdown_exec._internal.formatters.python", "_run_python"),
    ("markdown_exec._internal.rendering", "_mimic"),
)


def version_problem() -> str | None:
    """Why the installed markdown-exec may not fit this module, or None."""
    installed = metadata.version("markdown-exec")
    if installed == WRITTEN_FOR:
        return None
    return (
        f"markdown-exec {installed} is installed, but sitekit/markdown_exec_internals.py was written for "
        f"{WRITTEN_FOR} (the version requirements.txt pins): install the pinned requirements, or check "
        "that module's private names against the new version and update WRITTEN_FOR"
    )


def session_globals(session: str) -> dict:
    """The namespace of a markdown-exec session (created empty on first use, as markdown-exec does)."""
    return _python_formatter()._sessions_globals[session]


def clear_sessions() -> None:
    """Forget every session's globals: a build starts with none."""
    _python_formatter()._sessions_globals.clear()


def forget_code_blocks() -> None:
    """Drop what markdown-exec keeps for every block it ran, so a serving process does not grow."""
    python = _python_formatter()
    for name in [name for name in sys.modules if name.startswith("_code_block_")]:
        del sys.modules[name]
    python._sessions_counter.clear()
    python._code_blocks.clear()


def _wrap(module, attribute: str, wrapper: Callable) -> None:
    """Replace ``module.attribute`` with ``wrapper(it)``, once.

    Once by name: a serving process starts many builds, and MkDocs may load
    the hooks (and so ``wrapper``) afresh for one.
    """
    current = getattr(module, attribute)
    if getattr(current, "wrapped_by", None) != wrapper.__name__:
        wrapped = wrapper(current)
        wrapped.wrapped_by = wrapper.__name__
        setattr(module, attribute, wrapped)


def wrap_block_execution(wrapper: Callable) -> None:
    """Run every python block through ``wrapper(exec_python)`` (markdown-exec calls it by this module-level name)."""
    _wrap(_python_formatter(), "exec_python", wrapper)


def wrap_python_runner(wrapper: Callable) -> None:
    """Run every python block through ``wrapper(_run_python)``: ``_run_python(code, **options) -> output``.

    markdown-exec's python formatter looks the name up in its module at every block.
    """
    _wrap(_python_formatter(), "_run_python", wrapper)


def wrap_converter_factory(wrapper: Callable) -> None:
    """Make inner Markdown converters through ``wrapper(_mimic)``: ``_mimic(md, headings, *, update_toc)``."""
    _wrap(_rendering(), "_mimic", wrapper)
