"""The glossary's notation: one meaning per symbol, on every page.

The Notation table of docs/glossary.md gives each symbol of the site its one
meaning. Four ways a symbol can get a second one, each a test:

- the table lists it in two rows;
- a page (any page of docs/, or a Markdown cell of the training notebook)
  writes a symbol the table does not list: a meaning nobody recorded;
- a page *defines* a symbol by a formula, ``\\(G = \\partial\\,\\text{loss} /
  \\partial O\\)``, that the symbol's row does not record: every formula a
  symbol is defined by on any page is written in its row, so that two
  meanings stand side by side where a reader (and a reviewer) sees them; a
  symbol whose row gives a formula is held to it even where a page writes
  it as a product of other symbols (``\\(u = q\\, k_s^\\top\\)``);
- a page defines a size (a row that says "how many", or a length or width)
  by a formula: a size is a number, so ``\\(L = \\sum \\ldots\\)`` is another
  meaning whatever the row records.

A formula is an equation's right-hand side that is neither a value (numbers
and sizes with arithmetic: ``\\(d_\\text{ff} = 4\\, d_\\text{model}\\)``,
``\\(\\tau = \\sqrt{d_k}\\)``) nor another symbol (``\\(Q = K\\)``,
``\\(W_1 = K^\\top\\)``: an instance, not a definition).

Euler's number is written only as the base of a power, \\(e^{x}\\): a bare
\\(e\\) is the letter of the one-hot rows \\(e_i\\).

The names in the code a reader sees (every fence whose code the page shows,
the blocks to remember and the solutions to write among them; the library's
files it includes are the Snippets pages' business) are held to the table too.
A name that a row gives in code, or a row's letter, means what that row says,
as far as Python's parser can tell:

- an index or a size (\\(s\\), \\(t\\), \\(h\\), \\(T\\), \\(d_k\\)) is a whole
  number: ``c, s = np.cos(angle), np.sin(angle)`` gives the key index a
  sine;
- anything else is never a counter: ``for a in range(40)`` makes a score
  (\\(a_s\\)) a position, and ``b`` the bias;
- a letter the table writes otherwise in code is not a name: ``e =
  np.exp(a)`` makes \\(e_i\\), whose code is ``np.eye(n)[i]``, an
  exponential.
"""

from __future__ import annotations

import ast
import doctest
import json
import re
from collections.abc import Iterator
from pathlib import Path

from sitekit import pages, training_run
from sitekit.pages import ROOT
from support.page_queries import outside_fences

GLOSSARY = ROOT / "docs" / "glossary.md"
_MATH = re.compile(r"\\\((.+?)\\\)|\$\$(.+?)\$\$", re.DOTALL)
_SUBSCRIPT = r"(?:_(?:\{[^{}]+\}|[A-Za-z0-9]))"
# One symbol, not a formula (after normalise): a letter or a TeX name, maybe a bar or a hat, maybe a subscript.
_NAME = rf"(?:\\(?:bar|hat)\{{[A-Za-z]\}}|\\mathrm\{{[A-Za-z]+\}}|\\[A-Za-z]+|[A-Za-z]){_SUBSCRIPT}?"
_SYMBOL = re.compile(rf"^{_NAME}$")
_TOKEN = re.compile(rf"{_NAME}|\d+(?:\.\d+)?|\S")
# TeX names that are operators or constants, not symbols of the site.
_OPERATORS = {r"\exp", r"\log", r"\sin", r"\cos", r"\max", r"\min", r"\pi", r"\top", r"\infty", r"\dots", r"\ldots"}
# TeX that arithmetic on numbers, sizes and indices may use; any other command makes a formula.
_ARITHMETIC = {r"\times", r"\cdot", r"\sqrt", r"\ldots", r"\dots", r"\infty", r"\tfrac", r"\frac", r"\pi"}
# A row that names a size (a count, a length or a width) or an index: such a symbol is a number.
_SIZE = re.compile(r"^(how many|a count|the length of|the width of|a width|the hidden width)")
_INDEX = re.compile(r"^(the index of|other indices)")
_INDEX_LETTERS = re.compile(r"^[ijrst0-9,+\-]+$|^pos,2i$")
# A name in code, as a row's "in code `x`" part writes it.
_CODE_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


def normalise(math: str) -> str:
    """TeX in one spelling: ``\\bar v`` and ``\\bar{v}``, ``d_\\text{ff}`` and ``d_{ff}``, with no spacing."""
    math = re.sub(r"\\(bar|hat)\s*\{?\s*([A-Za-z])\s*\}?", r"\\\1{\2}", math)
    math = re.sub(r"_\{?\\text\{([^{}]+)\}\}?", r"_{\1}", math)
    math = re.sub(r"\\[,;!]|\\quad|\\qquad", " ", math)
    math = re.sub(r"(\\[A-Za-z]+)\s+(?=[A-Za-z])", "\\1\0", math)     # \log S stays two tokens
    math = re.sub(r"\s+", "", math).replace("\0", " ")
    return re.sub(r"_\{([A-Za-z0-9])\}", r"_\1", math)


def notation_section(text: str) -> str:
    return text.split("\n## Notation\n", 1)[1].split("\n## ", 1)[0]


def code_names(line: str) -> list[str]:
    """The names a Notation row gives its symbols in code (after its "in code")."""
    return _CODE_NAME.findall(line.split("in code", 1)[1]) if "in code" in line else []


def notation_rows(text: str) -> list[tuple[list[str], str]]:
    """The Notation table's rows: the symbols of the first cell, and the whole row."""
    rows = []
    for line in notation_section(text).splitlines():
        if line.startswith("| \\("):
            first = line.split(" | ", 1)[0]
            rows.append(([normalise(m[1]) for m in _MATH.finditer(first) if m[1]], line))
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


def sources() -> dict[str, str]:
    """Every page's prose, fences blanked (the glossary's Notation section left out), and the notebook's Markdown."""
    found = {}
    for path in sorted((ROOT / "docs").rglob("*.md")):
        text = outside_fences(path.read_text(encoding="utf-8"))
        if path == GLOSSARY:
            text = text.replace(notation_section(text), "")
        found[path.relative_to(ROOT).as_posix()] = text
    notebook = ROOT / "docs" / training_run.TRAINING_RUN
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    markdown = "\n\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    found[notebook.relative_to(ROOT).as_posix()] = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    return found


def math_spans(text: str) -> list[tuple[int, str]]:
    """``(line, TeX)`` of every inline and display formula, inline code taken out first."""
    text = re.sub(r"`[^`\n]*`", lambda m: " " * len(m[0]), text)
    return [(text.count("\n", 0, m.start()) + 1, (m[1] or m[2]).strip()) for m in _MATH.finditer(text)]


def symbols_written(text: str) -> set[str]:
    symbols = {normalise(math) for _, math in math_spans(text)}
    return {symbol for symbol in symbols if _SYMBOL.match(symbol) and symbol not in _OPERATORS}


def top_level_split(math: str, separator: str) -> list[str]:
    """``math`` split at every ``separator`` outside braces and parentheses (not the = of ``\\sum_{j=1}``)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(math):
        depth += char in "{(" and 1 or char in "})" and -1 or 0
        if char == separator and depth == 0:
            parts.append(math[start:i])
            start = i + 1
    return [*parts, math[start:]]


def equations(text: str) -> list[tuple[int, str, str]]:
    """``(line, symbol, right-hand side)`` of every ``symbol = …`` in a formula; a chain a = b = c gives a = b, b = c."""
    found = []
    for line, math in math_spans(text):
        math = re.sub(r"\\(begin|end)\{aligned\}", "", math)
        # Equations side by side: a line break, a wide space, or a comma before the next "symbol =".
        for part in re.split(r"\\\\|\\quad|\\qquad|,\s*(?=[\\A-Za-z{}_]+\s*=)", math):
            sides = [normalise(side.replace("&", "")) for side in top_level_split(part, "=")]
            for left, right in zip(sides, sides[1:], strict=False):
                left = re.sub(r"\(.*\)$", "", left)           # L(t) = ...: the function L
                right = right.rstrip(".,;")
                if _SYMBOL.match(left) and left not in _OPERATORS and right:
                    found.append((line, left, right))
    return found


class Notation:
    """The Notation table of a glossary's text: which symbols it lists, which are sizes and indices."""

    def __init__(self, text: str):
        self.row = {symbol: line for symbols, line in notation_rows(text) for symbol in symbols}
        meaning = {symbol: line.split(" | ", 2)[1] for symbol, line in self.row.items()}
        self.numbers = {symbol for symbol, m in meaning.items() if _SIZE.match(m) or _INDEX.match(m)}
        self.sizes = {symbol for symbol, m in meaning.items() if _SIZE.match(m)}
        self.code: dict[str, str] = {}  # a name in code -> its row's first symbol
        for symbols, line in notation_rows(text):
            for name in code_names(line):
                self.code.setdefault(name, symbols[0])
        self.whole_names = {name for name, symbol in self.code.items() if symbol in self.numbers}

    def named(self, name: str) -> tuple[str, bool] | None:
        """The symbol a name in code stands for, and whether the glossary writes it so in code.

        A name a row gives in code is that row's (``d_head``, ``weights``); a
        single letter is the symbol of that letter, or of its family (``e`` is
        \\(e_i\\), which the glossary writes ``np.eye(n)[i]`` in code); any
        other name is no symbol.
        """
        if name in self.code:
            return self.code[name], True
        listed = self.listed_as(name) if len(name) == 1 else None
        return (listed, False) if listed else None

    def listed_as(self, symbol: str) -> str | None:
        """The row's symbol that lists ``symbol``: itself, or one of its family.

        ``k_r`` and ``k`` are ``k_s`` (a row listed with an index stands for
        every index, and for the letter alone); ``x_t`` is ``x`` (an index
        on a listed letter); ``e_\\text{dog}`` is ``e_i`` (a name in the
        index of a listed family).
        """
        if symbol in self.row:
            return symbol
        base, _, index = symbol.partition("_")
        index = index.strip("{}")
        family = [f"{base}_{i}" for i in "sijt"]
        candidates = family + [base] if not index or _INDEX_LETTERS.match(index) else family
        return next((candidate for candidate in candidates if candidate in self.row), None)

    def recorded(self, symbol: str) -> set[str]:
        """The formulas ``symbol``'s row writes for it, or for a symbol of its family."""
        meaning = self.row[symbol].split(" | ", 1)[1]
        return {right for _, left, right in equations(meaning) if self.listed_as(left) == symbol}

    def kind(self, right: str) -> str:
        """"value" (numbers, sizes, indices), "instance" (another symbol), "relation" (listed symbols only) or "formula"."""
        if self.listed_as(re.sub(r"\^\\top$", "", right).lstrip("-")):
            return "instance"
        tokens = _TOKEN.findall(right)
        commands = {t for t in tokens if re.fullmatch(r"\\[A-Za-z]+", t) and not self.listed_as(t)}
        names = [t for t in tokens if _SYMBOL.match(t) and t not in commands and t not in _OPERATORS]
        if commands <= _ARITHMETIC and all(self.listed_as(t) in self.numbers for t in names):
            return "value"
        if commands <= _ARITHMETIC | {r"\top"} and all(self.listed_as(t) for t in names) and "[" not in right:
            return "relation"
        return "formula"


def second_meanings(text: str, found: dict[str, str]) -> list[str]:
    """What the pages ``found`` (name → prose) write or define beyond the glossary ``text``'s Notation table."""
    notation = Notation(text)
    problems = []
    for name, prose in found.items():
        for symbol in sorted(s for s in symbols_written(prose) if not notation.listed_as(s)):
            problems.append(f"{name}: \\({symbol}\\) is not in the Notation table (a meaning nobody recorded)")
        for line, symbol, right in equations(prose):
            listed = notation.listed_as(symbol)
            kind = notation.kind(right)
            if listed is None:
                problems.append(f"{name}:{line}: \\({symbol} = {right}\\) defines a symbol the Notation table lacks")
            elif listed in notation.sizes and kind in ("relation", "formula"):
                problems.append(f"{name}:{line}: \\({symbol} = {right}\\) makes a size something else; "
                                f"the glossary: {notation.row[listed]}")
            elif right not in (recorded := notation.recorded(listed)) and (
                    kind == "formula" or (kind == "relation" and recorded)):
                # A formula must be recorded; so must a relation of symbols, for a symbol whose row defines it.
                problems.append(f"{name}:{line}: \\({symbol} = {right}\\) is not among the formulas the glossary's "
                                f"row records for \\({listed}\\): {notation.row[listed]}")
    for symbol in sorted(notation.sizes):
        kinds = {notation.kind(right) for right in notation.recorded(symbol)}
        if kinds & {"relation", "formula"}:
            problems.append(f"the glossary makes the size \\({symbol}\\) something else: {notation.row[symbol]}")
    return problems


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


def code_names_listed_twice(text: str) -> list[str]:
    """Each name in code (a row's ``in code `x` `` part) that a second row gives too, with both rows."""
    seen: dict[str, str] = {}
    twice = []
    for _, line in notation_rows(text):
        for name in code_names(line):
            if name in seen and seen[name] != line:
                twice.append(f"`{name}`:\n  {seen[name]}\n  {line}")
            seen.setdefault(name, line)
    return twice


def test_no_name_in_code_stands_for_two_symbols():
    """`d` is a width and `db` the dictionary; `weights` the attention weights, never a model's parameters."""
    text = GLOSSARY.read_text(encoding="utf-8")
    twice = code_names_listed_twice(text)
    assert not twice, "names in code with two meanings in the glossary:\n" + "\n".join(twice)
    planted = "\n## Notation\n\n| symbol | meaning |\n|---|---|\n| \\(d\\) | a width; in code `d` |\n"
    planted += "| \\(\\mathrm{DB}\\) | a dictionary; in code `d` |\n"
    assert len(code_names_listed_twice(planted)) == 1


def test_no_page_gives_a_symbol_a_second_meaning():
    text = GLOSSARY.read_text(encoding="utf-8")
    found = sources()
    assert len(found) > 20 and "docs/notebooks/training-run.ipynb" in found
    assert sum(len(equations(prose)) for prose in found.values()) > 100, "no equations found: is the parser broken?"
    problems = second_meanings(text, found)
    assert not problems, "symbols with a meaning the glossary does not give them:\n" + "\n".join(problems)


def test_a_second_meaning_on_a_page_is_found():
    table = (
        "\n## Notation\n\n| symbol | meaning |\n|---|---|\n"
        "| \\(G\\) | how many key–value tables the query heads share |\n"
        "| \\(O\\) | the outputs, \\(O = \\alpha V\\) |\n| \\(\\alpha\\) | the weights |\n| \\(V\\) | the values |\n"
        "| \\(d_k\\) | the length of a key |\n| \\(\\tau\\) | the temperature |\n"
    )
    fine = ("With \\(G = 2\\) tables, \\(\\tau = \\sqrt{d_k}\\) and \\(O = \\alpha V\\); "
            "\\(O = V\\) when \\(\\alpha\\) is one-hot.")
    assert second_meanings(table, {"fine.md": fine}) == []
    planted = {
        "sizes.md": "the slope \\(G = \\partial\\,\\text{loss} / \\partial O\\)",
        "formulas.md": "here \\(O = V \\alpha\\)",   # a product of listed symbols, but not O's formula
        "unlisted.md": "with \\(u\\) the slope",
    }
    problems = second_meanings(table, planted)
    assert len(problems) == 3, problems
    assert problems[0].startswith("sizes.md:1: \\(G = \\partial\\text{loss}/\\partial O\\) makes a size something else")
    assert "is not among the formulas" in problems[1] and "\\(u\\) is not in the Notation table" in problems[2]


def test_every_page_is_read():
    found = sources()
    for path in (ROOT / "docs").rglob("*.md"):
        assert path.relative_to(ROOT).as_posix() in found
    assert all(Path(ROOT / name).is_file() for name in found)


# ------------------------------------------------------------ Euler's number


def bare_e(text: str) -> list[tuple[int, str]]:
    """``(line, TeX)`` of every formula that writes \\(e\\) neither with an index (a one-hot row) nor a power (Euler's)."""
    found = []
    for line, math in math_spans(text):
        # \text{one-hot}, e_\text{dog} and softmax(\ldots)_\text{next} hold no bare e
        words = re.sub(r"\\(?:text|operatorname|mathrm|begin|end)\{[^{}]*\}", " ", normalise(math))
        tokens = _TOKEN.findall(re.sub(r"(?<![A-Za-z])_\{[^{}]*\}", " ", words))
        if any(token == "e" and tokens[i + 1 : i + 2] != ["^"] for i, token in enumerate(tokens)):
            found.append((line, math))
    return found


def test_eulers_number_is_written_as_a_power():
    problems = [f"{name}:{line}: \\({math}\\)" for name, prose in sources().items() for line, math in bare_e(prose)]
    assert not problems, ("a bare \\(e\\) reads as the one-hot row \\(e_i\\); write Euler's number as a power, "
                          "\\(e^{1}\\), or \\(\\exp(1)\\):\n" + "\n".join(problems))
    planted = "puts \\(e / (e + 3)\\) on dog; \\(e^{a_s}\\), \\(e_\\text{dog}\\) and \\(\\text{the}\\) are fine"
    assert bare_e(planted) == [(1, "e / (e + 3)")]


# ------------------------------------------------ names in the code a reader sees


# NumPy's functions that make floats (np.nonzero, np.arange and their kind may make indices).
_FLOATS = re.compile(r"(exp|log|sqrt|sin|cos|tan|sinh|cosh|tanh|linspace|logspace|zeros|ones|full|eye|identity|mean"
                     r"|average|median|var|std|nan_to_num)(_like)?$")


def _whole(node: ast.expr, number: set[str]) -> bool | None:
    """Whether an expression is a whole number (True), surely is not (False), or the parser cannot tell (None).

    ``number`` holds the names that are whole numbers (sizes and indices).
    """
    match node:
        case ast.Constant(value=bool() | float() | complex() | str() | bytes() | None):
            return False
        case ast.Constant(value=int()):
            return True
        case ast.Name(id=name):
            return True if name in number else None
        case ast.Call(func=ast.Name(id="len" | "int")) | ast.Subscript(value=ast.Attribute(attr="shape")):
            return True
        case ast.Call(func=ast.Attribute(value=ast.Name(id="np"), attr=attr)) if _FLOATS.match(attr):
            return False
        case ast.BinOp(op=ast.Div()):
            return False
        case ast.BinOp(left=left, right=right):
            sides = {_whole(left, number), _whole(right, number)}
            return False if False in sides else (True if sides == {True} else None)
        case ast.UnaryOp(operand=operand):
            return _whole(operand, number)
        case ast.Tuple(elts=items) if False not in {_whole(item, number) for item in items}:
            return None                                                 # an index may be a tuple: (t, s)
        case (ast.List() | ast.Tuple() | ast.Dict() | ast.Set() | ast.JoinedStr() | ast.Lambda() | ast.Compare()
              | ast.ListComp() | ast.DictComp() | ast.SetComp() | ast.GeneratorExp() | ast.BoolOp()):
            return False
    return None


def _elements(iterable: ast.expr, number: set[str]) -> list[bool | None] | bool | None:
    """What a ``for`` over ``iterable`` yields: whole numbers or not (one answer), or a tuple's answers (a list)."""
    match iterable:
        case ast.Call(func=ast.Name(id="range")):
            return True
        case ast.Call(func=ast.Name(id="enumerate"), args=[inner, *_]):
            return [True, _elements(inner, number)]
        case ast.Call(func=ast.Name(id="zip"), args=args):
            return [_elements(arg, number) for arg in args]
        case ast.Constant(value=str()):
            return False
        case ast.Tuple(elts=items) | ast.List(elts=items) | ast.Set(elts=items):
            rows = [item.elts for item in items if isinstance(item, ast.Tuple)]
            if rows and len(rows) == len(items) and len({len(row) for row in rows}) == 1:
                return [_all(_whole(row[i], number) for row in rows) for i in range(len(rows[0]))]
            return _all(_whole(item, number) for item in items)
    return None


def _all(answers) -> bool | None:
    """Whether all of some values are whole numbers (True), not all are (False), or the parser cannot tell."""
    kinds = set(answers)
    return False if False in kinds else (True if kinds == {True} else None)


def _targets(target: ast.expr, whole) -> Iterator[tuple[str, int, bool | None]]:
    """``(name, line, whole)`` of each name a target binds; ``whole`` an answer, or a list for a tuple."""
    if isinstance(target, ast.Name):
        yield target.id, target.lineno, None if isinstance(whole, list) else whole
    elif isinstance(target, ast.Tuple | ast.List):
        if not (isinstance(whole, list) and len(whole) == len(target.elts)):
            whole = [None if isinstance(whole, list) else whole] * len(target.elts)
        for element, part in zip(target.elts, whole, strict=True):
            yield from _targets(element, part)
    elif isinstance(target, ast.Starred):
        yield from _targets(target.value, None)


def bindings(tree: ast.AST, number: set[str]) -> Iterator[tuple[str, int, bool | None]]:
    """``(name, line, whole)`` of every name the code binds: assigned, looped over, defined, or a parameter.

    ``whole`` says whether the value is a whole number (None: a parameter, or
    the parser cannot tell); a function is not.
    """
    for node in ast.walk(tree):
        match node:
            case ast.Assign(targets=targets, value=value):
                if isinstance(value, ast.Attribute) and value.attr == "shape":
                    kind = True                                         # T, d_k = X.shape
                elif isinstance(value, ast.Tuple):
                    kind = [_whole(item, number) for item in value.elts]
                else:
                    kind = _whole(value, number)
                for target in targets:
                    yield from _targets(target, kind)
            case ast.AnnAssign(target=target, value=value) | ast.NamedExpr(target=target, value=value):
                yield from _targets(target, _whole(value, number) if value is not None else None)
            case ast.AugAssign(target=target):
                yield from _targets(target, None)
            case ast.For(target=target, iter=iterable) | ast.comprehension(target=target, iter=iterable):
                yield from _targets(target, _elements(iterable, number))
            case ast.FunctionDef(name=name, args=args):
                yield name, node.lineno, False
                for argument in args.posonlyargs + args.args + args.kwonlyargs:
                    yield argument.arg, argument.lineno, None
            case ast.Lambda(args=args):
                for argument in args.posonlyargs + args.args + args.kwonlyargs:
                    yield argument.arg, node.lineno, None


def code_bindings(text: str, number: set[str]) -> Iterator[tuple[int, str, bool | None]]:
    """``(line, name, whole)`` of the names bound in every Python fence whose code the page shows.

    Lines a reader does not see are left out: hidden ones (``# markdown-exec:
    hide``) and ``--8<--`` includes of the library's files.
    """
    for fence in pages.fences(text):
        if fence.language not in ("python", "py", "pycon") or not fence.shows_code:
            continue
        lines = fence.code.split("\n")
        if fence.console:
            pieces = [(example.lineno, example.source) for example in doctest.DocTestParser().get_examples(fence.code)]
        else:
            pieces = [(0, "\n".join("" if "--8<--" in line else line for line in lines))]
        for first, code in pieces:
            for name, line, whole in bindings(ast.parse(code), number):
                if not pages.HIDE_MARKER.search(lines[first + line - 1]):
                    yield fence.line + 1 + first + line, name, whole


def code_clashes(glossary: str, found: dict[str, str]) -> list[tuple[str, str, str]]:
    """``(page, name, problem)`` for every name in the shown code of the pages ``found`` that means what its row does not."""
    notation = Notation(glossary)
    clashes = []
    for page, text in found.items():
        for line, name, whole in code_bindings(text, notation.whole_names):
            named = notation.named(name)
            if named is None:
                continue
            symbol, in_code = named
            row = notation.row[symbol]
            if not in_code:
                problem = f"`{name}` is the glossary's \\({symbol}\\), which it writes otherwise in code"
            elif symbol in notation.numbers and whole is False:
                problem = f"`{name}` holds what is no whole number, but the glossary's \\({symbol}\\) is one"
            elif symbol not in notation.numbers and whole is True:
                problem = f"`{name}` counts, but the glossary's \\({symbol}\\) is no index or size"
            else:
                continue
            clashes.append((page, name, f"{page}:{line}: {problem}: {row}"))
    return clashes


def pages_in_markdown() -> dict[str, str]:
    """Every Markdown page of docs/, whole: its fences are what the names in code are read from."""
    return {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted((ROOT / "docs").rglob("*.md"))}


def test_no_code_a_reader_sees_gives_a_name_a_second_meaning():
    glossary = GLOSSARY.read_text(encoding="utf-8")
    found = pages_in_markdown()
    whole_names = Notation(glossary).whole_names
    assert sum(1 for text in found.values() for _ in code_bindings(text, whole_names)) > 2000, "no bindings found"
    problems = [problem for _, _, problem in code_clashes(glossary, found)]
    assert not problems, "names in code with a meaning the glossary does not give them:\n" + "\n".join(problems)


def test_a_name_in_code_with_a_second_meaning_is_found():
    table = (
        "\n## Notation\n\n| symbol | meaning |\n|---|---|\n"
        "| \\(s\\) | the index of a key; in code `s` |\n| \\(T\\) | how many queries; in code `T` |\n"
        "| \\(a_s\\) | the score of key \\(s\\); in code `scores`, `a` |\n| \\(e_i\\) | the one-hot row of token "
        "\\(i\\); in code `np.eye(n)[i]` |\n| \\(b\\) | a bias; in code `b` |\n"
    )
    fine = (
        "```python\nT, d = X.shape\nfor s in range(T):\n    a = scores[s] / 2\n"
        "def f(s, a, T):\n    return s\ns = np.sin(1)  # markdown-exec: hide\n```\n\n"
        "```pycon\n>>> for s, key in enumerate(keys):\n...     pass\n```\n"
    )
    assert code_clashes(table, {"fine.md": fine}) == []
    planted = (                                     # the clashes chapters 3, 5 and 6 once had
        "```python\ndef rotation(angle):\n    c, s = np.cos(angle), np.sin(angle)\n```\n\n"
        "```pycon\n>>> same = all(gram[a, b] == 0\n...     for a in range(40) for b in range(40))\n"
        ">>> e = np.exp(a)\n```\n"
    )
    clashes = code_clashes(table, {"planted.md": planted})
    assert [(name, problem.split(": ", 1)[0]) for _, name, problem in clashes] == [
        ("s", "planted.md:3"), ("a", "planted.md:8"), ("b", "planted.md:8"), ("e", "planted.md:9")], clashes
