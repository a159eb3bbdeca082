"""Two builds of the site by two engines (MkDocs, ProperDocs) must be the same bytes.

    python .ci/compare_engines.py SITE_A SITE_B

Same files, and the same bytes in each, except for what the engine cannot
help writing differently:

- the ``<meta name="generator" content="...">`` tag of the HTML pages, where
  each engine names itself;
- the regions a page measures while it is built, between ``<!-- measured``
  and ``<!-- /measured -->`` (chapter 7's timings and memory peaks), cut out
  as .ci/check_determinism.py does.

``sitemap.xml.gz`` is compared as it is: the time in its gzip header is the
build's date, as are sitemap.xml's ``<lastmod>``, and the project's hooks set
that date to the last commit's (SOURCE_DATE_EPOCH) under either engine.

Prints the files that differ and the first difference of the first few, and
exits 1 if any differ, 0 if none do.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_determinism import MEASURED  # noqa: E402

GENERATOR = re.compile(rb'<meta name="generator" content="[^"]*">')


def normalized(path: Path) -> bytes:
    """The file's bytes with the allowed differences taken out."""
    data = path.read_bytes()
    if path.suffix == ".html":
        return MEASURED.sub(b"<!-- measured -->", GENERATOR.sub(b'<meta name="generator">', data))
    return data


def files(site: Path) -> set[str]:
    return {path.relative_to(site).as_posix() for path in site.rglob("*") if path.is_file()}


def differences(a: Path, b: Path) -> list[str]:
    """The files that differ, as paths relative to the sites (``... (only in A)`` for a missing one)."""
    in_a, in_b = files(a), files(b)
    found = [f"{name} (only in {a})" for name in sorted(in_a - in_b)]
    found += [f"{name} (only in {b})" for name in sorted(in_b - in_a)]
    found += [name for name in sorted(in_a & in_b)
              if (a / name).read_bytes() != (b / name).read_bytes() and normalized(a / name) != normalized(b / name)]
    return found


def first_difference(a: Path, b: Path, name: str, lines: int = 12, width: int = 300) -> list[str]:
    """The first hunk of a unified diff of the two files (allowed differences taken out), long lines
    cut to ``width`` characters around the first changed one (minified CSS and JavaScript are one line)."""
    data = [normalized(site / name) for site in (a, b)]
    if any(b"\0" in side for side in data):
        return [f"Binary files {a}/{name} and {b}/{name} differ"]
    old, new = (side.decode(errors="replace").splitlines() for side in data)
    diff = list(difflib.unified_diff(old, new, f"{a}/{name}", f"{b}/{name}", lineterm="", n=1))
    end = next((i for i, line in enumerate(diff) if i > 2 and line.startswith("@@")), len(diff))
    hunk = diff[:min(end, lines + 3)]
    removed = next((line for line in hunk[3:] if line.startswith("-")), "")
    added = next((line for line in hunk[3:] if line.startswith("+")), "")
    start = max(1, 1 + len(os.path.commonprefix([removed[1:], added[1:]])) - width // 3)

    def cut(line: str) -> str:
        if len(line) <= width:
            return line
        return line[0] + ("..." if start > 1 else "") + line[start:start + width] + ("..." if start + width < len(line) else "")

    return hunk[:3] + [cut(line) for line in hunk[3:]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sites", nargs=2, type=Path, metavar="SITE", help="a built site folder")
    a, b = parser.parse_args().sites
    for site in (a, b):
        if not (site / "index.html").is_file():
            sys.exit(f"compare_engines: no built site in {site}")
    found = differences(a, b)
    count = len(files(a) | files(b))
    if not found:
        print(f"compare_engines: {a} and {b} are the same, {count} files "
              "(apart from the generator tag and the measured regions)")
        return 0
    for name in [name for name in found if " (only in " not in name][:3]:
        print("\n".join(first_difference(a, b, name)))
    print(f"compare_engines: {len(found)} of {count} files differ between {a} and {b}:")
    for name in found:
        print(f"  {name}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
