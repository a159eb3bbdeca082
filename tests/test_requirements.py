"""Every package the project imports is named in a requirements file, not only pulled in by another.

A package that the code imports but requirements.in does not name is pinned
only because some other package needs it today: when that one drops it, the
import breaks. So every third-party module imported by the project's Python
files (sitekit/, snippets/, hooks/, tools/, tests/, .ci/, conftest.py) and by
the code the pages run must belong to a distribution named in requirements.in,
or, for what only .ci/ and the tests use, in a ``.ci/requirements-*.in``
(PyTorch: ``.ci/requirements-torch.in``). The site's own code (what the build
and the pages import) must have it in requirements.in.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
from pathlib import Path

from sitekit import pages

ROOT = pages.ROOT
# The folders whose modules import each other by their top-level names
# (pytest.ini's pythonpath, tests/ for `support`, .ci/'s scripts as siblings).
IMPORT_ROOTS = (ROOT, ROOT / "tests", ROOT / ".ci")
SITE_CODE = ("sitekit", "snippets", "hooks", "tools")


def python_files() -> list[Path]:
    files = [*ROOT.glob("*.py")]
    for folder in (*SITE_CODE, "tests", ".ci"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and (path.suffix == ".py" or (
                    not path.suffix and path.read_bytes()[:40].startswith(b"#!/usr/bin/env python"))):
                files.append(path)
    return files


@functools.cache
def page_code() -> dict[str, str]:
    """The code each page runs (executed fences and console sessions, includes expanded)."""
    code = {}
    for source in sorted(pages.DOCS.rglob("*.md")):
        text = source.read_text(encoding="utf-8")
        code[str(source.relative_to(ROOT))] = "\n".join(fence.python() for fence in pages.executed_fences(text))
    return code


@functools.cache  # each file is read by three tests
def imported(code: str) -> frozenset[str]:
    """Top-level names of the modules ``code`` imports (and asks ``pytest.importorskip`` for)."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip"
              and node.args and isinstance(node.args[0], ast.Constant)):
            names.add(str(node.args[0].value).partition(".")[0])
    return frozenset(names)


@functools.cache
def local_names() -> frozenset[str]:
    names = set()
    for folder in IMPORT_ROOTS:
        for path in folder.iterdir():
            if path.suffix == ".py":
                names.add(path.stem)
            elif path.is_dir() and not path.name.startswith(".") and any(path.glob("*.py")):
                names.add(path.name)
    return frozenset(names)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(path: Path) -> set[str]:
    """The distributions a ``.in`` file names (``name==version`` lines)."""
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*[=<>!~]", line)
        if match:
            names.add(normalize(match.group(1)))
    return names


@functools.cache
def installed() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distributions(module: str) -> set[str]:
    """The distributions that provide ``module``: installed ones by their metadata, else its own name."""
    found = installed().get(module)
    return {normalize(name) for name in found} if found else {normalize(module)}


def third_party(names: set[str]) -> set[str]:
    return {name for name in names if name not in sys.stdlib_module_names and name not in local_names()}


def undeclared(sources: dict[str, str], allowed: set[str]) -> dict[str, list[str]]:
    """Each third-party module none of whose distributions is in ``allowed``, with the files importing it."""
    missing: dict[str, list[str]] = {}
    for name, code in sources.items():
        for module in sorted(third_party(imported(code))):
            if not distributions(module) & allowed:
                missing.setdefault(module, []).append(name)
    return missing


def test_every_imported_package_is_named_in_a_requirements_file():
    sources = {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in python_files()}
    sources |= page_code()
    allowed = declared(ROOT / "requirements.in")
    for extra in sorted((ROOT / ".ci").glob("requirements-*.in")):
        allowed |= declared(extra)
    assert undeclared(sources, allowed) == {}


def test_the_sites_own_code_imports_only_what_requirements_in_names():
    sources = {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in python_files()
               if path.relative_to(ROOT).parts[0] in SITE_CODE or path.parent == ROOT}
    sources |= page_code()
    assert undeclared(sources, declared(ROOT / "requirements.in")) == {}


def test_the_check_sees_the_imports_it_is_about():
    everything = set()
    for path in python_files():
        everything |= third_party(imported(path.read_text(encoding="utf-8")))
    # The ones issue 28 found undeclared, and PyTorch (asked for by tests/support/pytorch.py).
    assert {"markdown_it", "markdown", "yaml", "markupsafe", "jinja2", "torch"} <= everything
    assert "markdown-it-py" in distributions("markdown_it")
    assert "pyyaml" in distributions("yaml")
    # A module no file declares is reported, with who imports it.
    assert undeclared({"x.py": "import markdown_it\nimport os\nfrom sitekit import pages\n"}, {"numpy"}) == {
        "markdown_it": ["x.py"]}


_PINNED = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)(?P<rest>(?:[^\n]*\\\n)*[^\n]*)", re.MULTILINE)


def locked(path: Path) -> dict[str, tuple[str, frozenset[str]]]:
    """A hash-pinned file's pins: ``{name: (version, hashes)}``."""
    return {normalize(match["name"]): (match["version"], frozenset(re.findall(r"--hash=(\S+)", match["rest"])))
            for match in _PINNED.finditer(path.read_text(encoding="utf-8"))}


def test_what_only_ci_installs_pins_what_requirements_txt_pins_the_same_way():
    """The .ci lock files carry requirements.txt's own pins and hashes: regenerated with it, by .ci/lock.

    A pull request that moves a pin in requirements.in (Dependabot's) and
    regenerates requirements.txt alone fails here, naming the command that
    regenerates the rest.
    """
    site = locked(ROOT / "requirements.txt")
    stale = []
    for path in sorted((ROOT / ".ci").glob("requirements-*.txt")):
        if "-c ../requirements.txt" not in path.with_suffix(".in").read_text(encoding="utf-8"):
            continue
        for name, (version, hashes) in locked(path).items():
            if name in site and site[name] != (version, hashes):
                theirs = "other hashes" if site[name][0] == version else f"{version}, requirements.txt {site[name][0]}"
                stale.append(f"{path.relative_to(ROOT)}: {name} ({theirs})")
    assert not stale, ("these files pin packages otherwise than requirements.txt; run `.ci/lock` "
                       "(`.ci/lock --torch` for requirements-torch.txt, where PyTorch's index is reachable):\n"
                       + "\n".join(stale))
