"""A broken page must break the build and the tests, never ship a traceback.

Each case copies the project's build and test set-up into a temporary folder
with a small docs/ holding one broken page, and checks that both
``mkdocs build --strict`` and ``pytest`` fail on it. The builds and test runs
are jobs (tests/support/background.py): they start after collection and run
on the second core while the suite goes on; the tests check what they logged.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sitekit.pages import ROOT, fences
from sitekit.render import WRITTEN_FOR
from support.background import job
from support.build import console_script, run_mkdocs_build
from support.project import make_project

RAISING_BLOCK = """\
# Broken

```python exec="on" session="broken"
x = 1
```

??? success "Solution"

    ```python exec="on" session="broken" result="text"
    raise RuntimeError("this block is broken on purpose")
    y = 2
    ```

```python exec="on" session="broken"
print(y)  # never defined: the block before failed
```
"""

UNKNOWN_TEX = """\
# Broken

Inline math with a command nobody defined: \\(\\notacommand{x}\\).
"""

MISSING_INCLUDE = """\
# Broken

```python
--8<-- "snippets/no_such_file.py"
```
"""

PRINTS_NAN = """\
# Not a number

```python exec="on" session="nan"
import numpy as np

print(np.full(2, np.nan))  # as a zero-by-zero division would leave it
```
"""

# A page's code may change nothing in the clone, wherever it writes: the
# root, tools/. The clone's root, found from a module of it.
WRITES_SOURCES = """\
# Writes

```python exec="on" session="writes"
from pathlib import Path

import snippets

root = Path(snippets.__file__).resolve().parents[1]
(root / "written-by-a-page.txt").write_text("a page's code wrote this")
```

```python exec="on" session="writes"
print("after the block that wrote")
```
"""

CHANGES_SOURCES = """\
# Changes

```python exec="on" session="changes"
from pathlib import Path

import snippets

(Path(snippets.__file__).resolve().parents[1] / "tools" / "corpus.py").write_text("# a page's code wrote this\\n")
```
"""

READS_NOTHING = """\
---
reads: [docs/no-such-data]
---

# Reads

```python exec="on" session="reads"
print("the front matter names data that is not there")
```
"""

UNEXECUTED_LANGUAGE = """\
# Broken

```bash exec="on" session="broken"
echo "this site runs no shell fences"
```

```py exec="on" session="broken"
print("markdown-exec is configured for python and pycon, not py")
```
"""


def run_pytest(project: Path, *targets: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [console_script("pytest"), "-p", "no:cacheprovider", *targets],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(project)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def build_and_test(project: Path, site: Path, *targets: str):
    """The strict build and the pytest run of a project, side by side (they share nothing)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        build = pool.submit(run_mkdocs_build, project, site)
        tests = pool.submit(run_pytest, project, *targets)
        return build.result(), tests.result()


@job
def good_copy(folder: Path):
    """The strict build and the pytest run of a copy with nothing broken."""
    project = make_project(folder, {})
    return build_and_test(project, folder / "site", "docs")


def test_a_good_copy_builds_and_passes(good_copy):
    """The set-up copied by these tests works when nothing is broken."""
    build, tests = good_copy
    assert build.returncode == 0, build.stdout + build.stderr
    assert tests.returncode == 0, tests.stdout
    assert "1 passed" in tests.stdout


@job
def plain_build(folder: Path):
    """A build without --strict of a page whose block raises: its status and the page it made."""
    project = make_project(folder, {"broken.md": RAISING_BLOCK})
    build = subprocess.run(
        [console_script("mkdocs"), "build", "-d", str(folder / "site")],
        cwd=project, env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(project)},
        capture_output=True, text=True,
    )
    return build, (folder / "site" / "broken" / "index.html").read_text()


def test_without_strict_the_same_page_would_ship_a_traceback(plain_build):
    """Why --strict matters: a plain build exits 0 and the page carries the traceback."""
    build, page = plain_build
    assert build.returncode == 0, build.stdout + build.stderr
    assert "RuntimeError" in page


@job
def missing_include(folder: Path):
    """The strict build of a page that includes a file that is not there."""
    project = make_project(folder, {"broken.md": MISSING_INCLUDE})
    return run_mkdocs_build(project, folder / "site")


def test_a_missing_include_fails_the_build(missing_include):
    """pymdownx.snippets stops the build at once: this one cannot share the broken project below."""
    log = missing_include.stdout + missing_include.stderr
    assert missing_include.returncode != 0, log
    assert "no_such_file.py" in log


def _with_one_written_output_changed(page: Path) -> tuple[str, str]:
    """The page's text with the first written output of a console session changed, and that line."""
    text = page.read_text(encoding="utf-8")
    lines = text.split("\n")
    for fence in fences(text):
        if not (fence.executed and fence.console):
            continue
        for number, line in enumerate(fence.code.split("\n"), start=fence.line + 1):
            stripped = line.strip()
            if stripped and not stripped.startswith((">>>", "...")):
                lines[number] += " (changed)"
                return "\n".join(lines), stripped
    raise AssertionError(f"{page} has no console session with a written output")


CHANGED_PAGE, CHANGED_LINE = _with_one_written_output_changed(ROOT / "docs" / "dictionaries.md")

# Every other fault lives in one broken project, built once and tested once:
# a strict build reports every warning before it aborts, and pytest runs every
# page. Each test below checks that its own fault was caught (by the build and
# by pytest where both apply). The faults in FAULTS used to build green: only
# the browser tests caught the links.
FAULTS = {
    "raw-html-link.md": ("# Raw HTML\n\n<p><a href=\"../no-such-page/\">a page that is not there</a></p>\n",
                         "raw-html-link/index.html: <a> links to '../no-such-page/'"),
    "printed-link.md": ("# Printed\n\n```python exec=\"on\" session=\"printed-link\" html=\"true\"\n"
                        "print('<a href=\"../printed-nowhere/\">printed by a block</a>')\n```\n",
                        "printed-link/index.html: <a> links to '../printed-nowhere/'"),
    "notebooks/linking.md": ("# Linking notebook\n\n[a missing page](../../notebook-nowhere/)\n",
                             "notebooks/linking/index.html: <a> links to '../../notebook-nowhere/'"),
    "anchor.md": ("# Anchor\n\n[into the notebook](notebooks/linking.md#no-such-anchor)\n",
                  "no-such-anchor"),
    # A relative link above the site's root: the old check read it as a link inside the site (browsers
    # stop at a host's root), and Zensical wrote such links into the glossary.
    "above-root.md": ("# Above\n\n<p><a href=\"../../above-root/\">above the site</a></p>\n",
                      "above-root/index.html: <a> links to '../../above-root/', and the site has no (above the site's root)"),
    "warning.md": ("# Warning\n\n```python exec=\"on\" session=\"warning\"\nimport warnings\n"
                   "warnings.warn(\"this block only warns\")\n```\n",
                   "UserWarning: this block only warns"),
    "image.md": ("# Image\n\nA figure with nothing to say to a screen reader:\n\n![](figure.png)\n",
                 'image/index.html: <img alt="" src="figure.png" /> has no text alternative'),
}


@job
def broken(folder: Path):
    """The broken project's strict build (status, log) and pytest run (status, output)."""
    pages = {
        "broken.md": RAISING_BLOCK,
        "tex.md": UNKNOWN_TEX,
        "dictionaries.md": CHANGED_PAGE,
        "unexecuted.md": UNEXECUTED_LANGUAGE,
        "nan.md": PRINTS_NAN,
        "writes.md": WRITES_SOURCES,
        "changes.md": CHANGES_SOURCES,
        "reads.md": READS_NOTHING,
        **{name: text for name, (text, _) in FAULTS.items()},
    }
    project = make_project(folder, pages)
    # The markdown-exec this copy's formatters say they were written for is not the one installed.
    formatters = project / "sitekit" / "render.py"
    formatters.write_text(formatters.read_text().replace(f'WRITTEN_FOR = "{WRITTEN_FOR}"', 'WRITTEN_FOR = "0.0.1"'))
    # One after the other: its pages write into the clone, which a run beside them would see happen.
    build = run_mkdocs_build(project, folder / "site")
    after_build = _clone_as_it_was(project)
    tests = run_pytest(project, "--continue-on-collection-errors", "docs")
    return build.returncode, build.stdout + build.stderr, tests.returncode, tests.stdout, (after_build,
                                                                                         _clone_as_it_was(project))


def _clone_as_it_was(project: Path) -> bool:
    """Whether what the broken pages wrote was put back: no new file at the root, tools/corpus.py as it was."""
    return (not (project / "written-by-a-page.txt").exists()
            and (project / "tools" / "corpus.py").read_bytes() == (ROOT / "tools" / "corpus.py").read_bytes())


def test_the_broken_project_fails_the_build_and_pytest(broken):
    build_status, log, test_status, output, _ = broken
    assert build_status != 0, log
    assert test_status == 1, output


def test_a_raising_block_fails_the_build_and_pytest(broken):
    _, log, _, output, _ = broken
    assert "docs/broken.md line 10: the block raised RuntimeError: this block is broken on purpose" in log, log
    assert "RuntimeError: this block is broken on purpose" in output
    # the fence inside the collapsed admonition was found, and it is the one that failed
    assert re.search(r"FAILED docs/broken.md::\[CodeFence#2\]", output), output
    assert not re.search(r"FAILED docs/broken.md::\[CodeFence#1\]", output), output


def test_the_blocks_after_a_failing_one_say_they_were_not_run(broken):
    """The page stops at the block that raised: the next one says why it did not run, not a NameError for y."""
    _, log, _, output, _ = broken
    assert "not run: an earlier block of this page failed (docs/broken.md line 9)" in log, log
    assert re.search(r"SKIPPED \[1\] .*: not run: an earlier block of this page failed \(docs/broken.md line 9\)",
                     output), output
    assert "NameError" not in log and "NameError" not in output


def test_bad_math_fails_the_build_naming_the_page_and_line(broken):
    assert re.search(r"docs/tex\.md line 3: cannot render TeX .*notacommand", broken[1]), broken[1]


def test_another_markdown_exec_than_the_formatters_were_written_for_fails_the_build(broken):
    assert "but sitekit/render.py was written for 0.0.1" in broken[1], broken[1]


def test_a_changed_written_output_fails_the_build_and_pytest(broken):
    """A copy of chapter 1 with one expected output changed: the build and the doctest both fail."""
    _, log, _, output, _ = broken
    assert "differs from the real one" in log and f"{CHANGED_LINE} (changed)" in log
    assert re.search(r"FAILED docs/dictionaries.md::", output), output
    assert re.search(r"Expected:\n.*\(changed\)", output), output


def test_an_executed_fence_the_site_cannot_run_fails_the_build_and_pytest(broken):
    """A fence marked exec="on" in another language (py among them) would reach the page as raw text."""
    _, log, _, output, _ = broken
    assert "unexecuted.md line 3" in log and "unexecuted.md line 7: ```py exec" in log, log
    assert "executes only python, pycon fences" in log
    assert "ERROR docs/unexecuted.md" in output and "executes only python, pycon fences" in output


def test_a_block_that_prints_nan_fails_the_build_and_pytest(broken):
    """A NaN shows on a page only where a console session writes it out; a python block's nan is a fault."""
    _, log, _, output, _ = broken
    assert "docs/nan.md line 3: the block printed nan ('[nan nan]')" in log, log
    assert re.search(r"FAILED docs/nan.md::\[CodeFence#1\]", output) and "the block printed nan" in output, output


def test_a_block_that_changes_the_clone_fails_the_build_and_pytest_and_the_clone_is_put_back(broken):
    """Anywhere in the clone (its root, tools/), naming the page, the line and the file; the build and pytest both put it back."""
    _, log, _, output, put_back = broken
    for message in ("docs/writes.md line 3: the block wrote written-by-a-page.txt",
                    "docs/changes.md line 3: the block wrote tools/corpus.py"):
        assert message in log, log
        assert message in output, output
    assert re.search(r"FAILED docs/writes.md::\[CodeFence#1\]", output), output
    assert re.search(r"FAILED docs/changes.md::\[CodeFence#1\]", output), output
    assert put_back == (True, True), "after the build, after pytest"


def test_a_front_matter_that_reads_a_missing_path_fails_the_build_and_pytest(broken):
    _, log, _, output, _ = broken
    assert "docs/reads.md front matter: the front matter says the page reads 'docs/no-such-data'" in log, log
    assert "ERROR docs/reads.md" in output and "no-such-data" in output, output


def test_an_image_without_a_text_alternative_fails_the_build_and_pytest(broken):
    """An image with empty brackets used to pass both: the build checks every <img>, pytest every Markdown image."""
    _, log, _, output, _ = broken
    assert "has no text alternative" in log, log
    assert "ERROR docs/image.md" in output and "an image without a text alternative (line 5)" in output, output


@pytest.mark.parametrize("fault", list(FAULTS), ids=[name.split(".")[0].replace("/", "-") for name in FAULTS])
def test_a_fault_that_used_to_build_green_fails_the_strict_build(broken, fault):
    assert FAULTS[fault][1] in broken[1], broken[1]


# --- a printed number whose last bits depend on the CPU's BLAS kernel ---------

def _determinism_check():
    spec = importlib.util.spec_from_file_location("check_determinism", ROOT / ".ci" / "check_determinism.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


KERNEL_SUM = """\
import numpy as np
for seed in range(40):
    rng = np.random.default_rng(seed)
    A, B = rng.normal(size=(3, 64)), rng.normal(size=(64, 3))
    print(repr(float((A @ B).sum())))
"""

KERNEL_PAGE = """\
# Kernel

A sum of matrix products, printed raw: its last digits depend on the kernel.

```pycon exec="on" session="kernel"
>>> import numpy as np
>>> rng = np.random.default_rng({seed})
>>> A, B = rng.normal(size=(3, 64)), rng.normal(size=(64, 3))
>>> float((A @ B).sum())
{value}
```
"""


@job
def kernel_check(folder: Path):
    """A page whose written output is what this machine's kernel prints, put through .ci/check_determinism.py.

    None on a machine with no second kernel to force; else the two printed
    sums and the check's status and report.
    """
    check = _determinism_check()
    current = os.environ.get("OPENBLAS_CORETYPE") or None
    pair = check.kernel_pair(current, check.cpu_flags())
    if pair is None:
        return None
    printed = [
        subprocess.run([sys.executable, "-c", KERNEL_SUM], env=check.environment(coretype),
                       capture_output=True, text=True, check=True).stdout.split()
        for coretype in pair
    ]
    seed = next((n for n, (first, second) in enumerate(zip(*printed, strict=True)) if first != second), None)
    if seed is None:
        return pair, None, None, None, ""
    first, second = printed[0][seed], printed[1][seed]

    project = make_project(folder, {"kernel.md": KERNEL_PAGE.format(seed=seed, value=first)})
    (project / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "check_determinism.py", project / ".ci")
    result = subprocess.run(
        [sys.executable, ".ci/check_determinism.py", "--tests", "docs"],
        cwd=project, env={**os.environ, "PYTHONPATH": str(project)}, capture_output=True, text=True, timeout=300,
    )
    return pair, first, second, result.returncode, result.stdout + result.stderr


def test_a_console_output_that_holds_on_one_kernel_only_fails_the_check(kernel_check):
    """Issue 18: a page written on one machine printed other last bits on another.

    The page is built here under the environment's BLAS kernel, and
    .ci/check_determinism.py builds it again, and runs its tests, under the
    other kernel of the pair it picks from the CPU's flags. The page's written
    output is what the first kernel prints, so the first build passes; the
    check must fail, naming the page, the line, and both outputs.
    """
    if kernel_check is None:
        pytest.skip("not an x86-64 machine: OpenBLAS has no second kernel to force here")
    pair, first, second, status, report = kernel_check
    assert first is not None, f"no sum of 40 differs between the kernels {pair}: construct another page"
    assert status == 1, report
    # the first build (the page's own kernel) passed; the second fails on line 9 of the page
    assert "the strict build under" in report and report.count("fails") >= 2, report
    assert "docs/kernel.md line 9: float((A @ B).sum())" in report, report
    assert re.search(rf"Expected:\s+{re.escape(first)}\s+Got:\s+{re.escape(second)}", report), report
    assert "FAILED docs/kernel.md" in report, report
