"""The glossary's notation: every symbol listed once, and every symbol the glossary uses listed.

The Notation table of docs/glossary.md gives each symbol of the site its one
meaning. A symbol listed in two rows has two meanings, which the site
promises never to allow; a symbol the glossary writes elsewhere (in its
word table or its entries) but does not list is a meaning nobody recorded.
"""

from __future__ import annotations

import re

from sitekit.pages import ROOT

GLOSSARY = ROOT / "docs" / "glossary.md"
_MATH = re.compile(r"\\\((.+?)\\\)")
# One symbol, not a formula: a letter or a TeX name, maybe a bar, and maybe one subscript.
_SYMBOL = re.compile(r"^(\\bar\{?)?(\\?[A-Za-z]+|\\mathrm\{[A-Za-z]+\})\}?(_(\{[^{}]+\}|\\text\{[^{}]+\}|[A-Za-z0-9]))?$")


def normalise(symbol: str) -> str:
    return re.sub(r"\s+", "", symbol)


def notation_rows(text: str) -> list[tuple[list[str], str]]:
    """The Notation table's rows: the symbols of the first cell, and the whole row."""
    section = text.split("\n## Notation\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("| \\("):
            first = line.split(" | ", 1)[0]
            rows.append(([normalise(symbol) for symbol in _MATH.findall(first)], line))
    return rows


def listed_twice(text: str) -> list[str]:
    """Each symbol of the Notation table that a second row lists again, with both rows."""
    seen: dict[str, str] = {}
    twice = []
    for symbols, line in notation_rows(text):
        for symbol in symbols:
            if symbol in seen:
                twice.append(f"{symbol}:\n  {seen[symbol]}\n  {line}")
            seen[symbol] = line
    return twice


def test_no_symbol_is_listed_twice():
    text = GLOSSARY.read_text(encoding="utf-8")
    assert len(notation_rows(text)) > 50, "the Notation table was not found"
    twice = listed_twice(text)
    assert not twice, "symbols with two meanings in the glossary:\n" + "\n".join(twice)


def test_a_symbol_listed_twice_is_found():
    table = "\n## Notation\n\n| symbol | in code | meaning |\n|---|---|---|\n"
    table += "| \\(W\\) | `window` | a window |\n| \\(W_Q\\), \\( W \\) | `W` | weights |\n"
    twice = listed_twice(table)
    assert len(twice) == 1 and twice[0].startswith("W:"), twice


def test_every_symbol_the_glossary_writes_is_listed():
    text = GLOSSARY.read_text(encoding="utf-8")
    listed = {symbol for symbols, _ in notation_rows(text) for symbol in symbols}
    outside = text.split("\n## Notation\n", 1)[0] + text.split("\n## Notation\n", 1)[1].split("\n## ", 1)[1]
    used = {math.strip() for math in _MATH.findall(outside.replace("\\\\", "\\"))}
    symbols = {normalise(math) for math in used if _SYMBOL.match(math)}
    assert len(symbols) > 10
    missing = sorted(symbols - listed)
    assert not missing, f"the glossary writes symbols its Notation table does not list: {missing}"
