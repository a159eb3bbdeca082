#!/usr/bin/env python3
"""The commands README.md gives a newcomer, read from its own code blocks, for CI to run as written.

    python3 .ci/readme_commands.py set-up      # the set-up block's text (also: serve, build, test)
    python3 .ci/readme_commands.py --address   # the address the README says `mkdocs serve` answers at
    python3 .ci/readme_commands.py --check     # every command block of the README is one CI runs

Each command block of the README is a ```bash fence right below a line
``<!-- newcomer: ROLE -->`` (invisible on GitHub). ``.ci/run`` runs the four
roles in a fresh clone, in the order of :data:`ROLES`, in one shell, so that
the set-up's ``. .venv/bin/activate`` holds for the rest, as in a reader's
terminal. ``--check`` fails, naming the block, on a command block with no
role, a role CI does not know, or a role missing or given twice: then the
README and CI would no longer run the same commands. Only the standard
library: it runs before any environment exists.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
# The order .ci/run runs them in: the server is asked for two pages and
# stopped before the build and the tests run.
ROLES = ("set-up", "serve", "build", "test")
_MARKER = re.compile(r"^<!-- newcomer: (?P<role>[\w-]+) -->$")
_FENCE = re.compile(r"^(?P<mark>`{3,}|~{3,})(?P<info>.*)$")
_SHELLS = ("bash", "sh", "shell", "console")
_ADDRESS = re.compile(r"<(http://127\.0\.0\.1:\d+/[^>]*)>")


class ReadmeError(ValueError):
    """The README's command blocks are not the ones CI knows how to run."""


def command_blocks(text: str) -> list[tuple[str | None, int, str]]:
    """Every shell fence outside other fences: ``(role or None, line, text)``, in order."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        closing = re.compile(rf"^{fence['mark'][0]}{{{len(fence['mark'])},}}\s*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), len(lines))
        if fence["info"].strip().split(" ")[0] in _SHELLS:
            marker = _MARKER.match(lines[i - 1]) if i > 0 else None
            blocks.append((marker["role"] if marker else None, i + 1, "\n".join(lines[i + 1:end])))
        i = end + 1
    return blocks


def check(text: str) -> dict[str, str]:
    """The command of each role; a :class:`ReadmeError` naming the block when CI would not run it."""
    found: dict[str, str] = {}
    for role, line, body in command_blocks(text):
        shown = body.strip().splitlines()[0] if body.strip() else "(empty)"
        if role is None:
            raise ReadmeError(f"README.md line {line}: the command block `{shown}` has no <!-- newcomer: ROLE --> "
                              f"line above it, so CI would not run it; roles: {', '.join(ROLES)}")
        if role not in ROLES:
            raise ReadmeError(f"README.md line {line}: `{shown}` is marked {role!r}, a role .ci/run does not run "
                              f"(it runs {', '.join(ROLES)})")
        if role in found:
            raise ReadmeError(f"README.md line {line}: a second {role!r} block, `{shown}`: CI runs one of each")
        if not body.strip():
            raise ReadmeError(f"README.md line {line}: the {role!r} block is empty")
        found[role] = body.strip()
    missing = [role for role in ROLES if role not in found]
    if missing:
        raise ReadmeError(f"README.md has no {', '.join(missing)} block (<!-- newcomer: ROLE --> above a ```bash "
                          "fence): CI runs the README's own commands and would have none to run")
    return found


def address(text: str) -> str:
    """The first local address the README links, where it says `mkdocs serve` answers."""
    match = _ADDRESS.search(text)
    if match is None:
        raise ReadmeError("README.md links no http://127.0.0.1:PORT/... address for `mkdocs serve`")
    return match.group(1)


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    try:
        if argv == ["--check"]:
            print(f"README.md: {', '.join(check(text))}: each a block CI runs as written")
        elif argv == ["--address"]:
            print(address(text))
        elif len(argv) == 1 and argv[0] in ROLES:
            print(check(text)[argv[0]])
        else:
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
    except ReadmeError as error:
        print(f"readme_commands: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
