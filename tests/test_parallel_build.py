"""``mkdocs build`` shares the pages' code with a helper process (sitekit/parallel_build.py).

A small project's pages log, to a file of the test's own, which process ran
their code. The first page waits until the last page's code has run, which
only a helper can make happen (the build renders the pages in order); page 2
waits until page 1 has started, so the helper cannot run ahead and take page
1: both processes take pages, whatever the machine's speed. Page 3 says its
code is slow (front matter): the helper runs it first.
"""

from __future__ import annotations

from support.build import run_mkdocs_build
from support.project import make_project

PAGE = """\
{front}# Page {n}

```python exec="on" session="page-{n}"
import os
import time
from pathlib import Path

log = Path({log!r})
with log.open("a") as out:
    out.write(f"{n} {{os.getpid()}}\\n")
{extra}
print("page {n} says", sum(range({n} * 10)))
```
"""
WAIT = """\
flag = Path({flag!r})
start = time.monotonic()
while not flag.exists() and time.monotonic() - start < 60:
    time.sleep(0.02)
assert flag.exists(), "the last page's code never ran while the first page waited: no helper"
"""


def _project(tmp_path, last_extra=""):
    log, flag, started = tmp_path / "runs.log", tmp_path / "last-page-ran", tmp_path / "first-page-started"
    pages = {}
    for n in range(1, 6):
        extra = ""
        if n == 1:
            extra = f"Path({str(started)!r}).touch()\n" + WAIT.format(flag=str(flag))
        if n == 2:  # so that the helper cannot run ahead and take page 1 (the build must be in it)
            extra = WAIT.format(flag=str(started)).replace("the last page's code never ran", "page 1 never started")
        if n == 5:
            extra = f"Path({str(flag)!r}).touch()\n{last_extra}"
        front = "---\nslow_code: true\n---\n\n" if n == 3 else ""
        pages[f"page-{n}.md"] = PAGE.format(n=n, log=str(log), extra=extra, front=front)
    return make_project(tmp_path, pages), log


def _runs(log):
    return [line.split() for line in log.read_text().splitlines()]


def test_two_processes_share_the_pages_and_build_the_same_site(tmp_path, monkeypatch):
    project, log = _project(tmp_path)
    result = run_mkdocs_build(project, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    runs = _runs(log)
    assert sorted(page for page, _ in runs) == ["1", "2", "3", "4", "5"], f"a page ran twice or never: {runs}"
    assert len({pid for _, pid in runs}) == 2, f"one process ran every page: {runs}"
    helper = dict(runs)["5"]  # the first page waited for the last: the helper ran it
    assert [page for page, pid in runs if pid == helper][0] == "3", f"the slow page was not the helper's first: {runs}"
    assert "parallel build: the code of" in result.stderr and "page-5.md" in result.stderr, result.stderr

    log.unlink()
    (tmp_path / "last-page-ran").unlink()
    monkeypatch.setenv("SITEKIT_ONE_PROCESS", "1")
    project.joinpath("docs", "page-1.md").write_text(
        project.joinpath("docs", "page-1.md").read_text().replace("while not flag.exists()", "while False")
        .replace("assert flag.exists()", "assert True")
    )
    alone = run_mkdocs_build(project, tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr
    assert len({pid for _, pid in _runs(log)}) == 1
    for n in range(2, 6):
        shared = (tmp_path / "site" / f"page-{n}" / "index.html").read_text()
        assert shared == (tmp_path / "alone" / f"page-{n}" / "index.html").read_text(), f"page-{n} differs"
        assert f"page {n} says {sum(range(n * 10))}" in shared


def test_a_page_that_fails_in_the_helper_fails_the_build_with_its_error(tmp_path):
    project, log = _project(tmp_path, last_extra='raise RuntimeError("page 5 is broken on purpose")\n')
    result = run_mkdocs_build(project, tmp_path / "site")
    assert result.returncode != 0
    assert "page 5 is broken on purpose" in result.stderr, result.stderr
    # The helper ran it first, failed, and left it to the build, which ran it again and reported it.
    assert [page for page, _ in _runs(log)].count("5") == 2, _runs(log)
