"""``mkdocs serve`` shows an edit without running what did not change (hooks/serve.py).

A small project is served; its page counts, in a file of its own, how often
its python block and its console session ran. A prose edit must show on the
page with the blocks' outputs as they were and no block run again; a code
edit must run the page's blocks again; an edit to a module the page imports
must show its new value. When several pages must run their code, a helper
forked from the serving process takes a share (the second test). Timings are
.ci/serve_latency.py's business: this checks what is shown, and what ran.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from support.project import make_project

PAGE = """\
# Counted

```python exec="on" session="counted"
from pathlib import Path

from snippets.served import VALUE

counter = Path({counter!r})


def bump(block):
    runs = counter.read_text().split() if counter.exists() else []
    counter.write_text(" ".join([*runs, block]))


bump("python")
print(f"the module says {{VALUE}}; {{PRINTED}}")
```

```pycon exec="on" session="counted"
>>> bump("console")
>>> 6 * 7
42
```

Prose.
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _page(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (loopback only)
            return response.read().decode()
    except OSError:
        return ""


def _wait_for(url: str, text: str, timeout: float = 60) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        page = _page(url)
        if text in page:
            return page
        time.sleep(0.1)
    raise AssertionError(f"{url} did not show {text!r} within {timeout} s; it shows:\n{_page(url)[-3000:]}")


@contextlib.contextmanager
def _serving(project):
    """``mkdocs serve`` in ``project``: yields the server process and its pages' address."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mkdocs", "serve", "-a", f"127.0.0.1:{port}"],
        cwd=project, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        yield server, f"http://127.0.0.1:{port}/attention-as-a-soft-dictionary/"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_a_prose_edit_replays_the_outputs_and_a_code_or_module_edit_runs_the_code(tmp_path):
    counter = tmp_path / "runs.txt"
    project = make_project(tmp_path, {"counted.md": PAGE.format(counter=str(counter)).replace("{PRINTED}", "first")})
    module = project / "snippets" / "served.py"
    module.write_text('VALUE = "one"\n')
    page = project / "docs" / "counted.md"
    with _serving(project) as (_, base):
        url = base + "counted/"
        _wait_for(url, "the module says one; first")
        assert counter.read_text() == "python console"

        page.write_text(page.read_text().replace("Prose.", "Prose, edited."))
        shown = _wait_for(url, "Prose, edited.")
        assert "the module says one; first" in shown and "42" in shown, shown[-3000:]
        assert counter.read_text() == "python console", "a prose edit ran the page's code again"

        page.write_text(page.read_text().replace('; first")', '; second")'))
        _wait_for(url, "the module says one; second")
        assert counter.read_text() == "python console python console"

        module.write_text('VALUE = "two"\n')
        _wait_for(url, "the module says two; second")
        assert counter.read_text() == "python console python console python console"



SHARED_PAGE = """\
# Page {n}

```python exec="on" session="page-{n}"
import os
import time
from pathlib import Path

from snippets.served import VALUE

with Path({log!r}).open("a") as out:
    out.write(f"{n} {{VALUE}} {{os.getpid()}}\\n")


def wait_for(name):
    flag = Path({folder!r}) / f"{{name}}-{{VALUE}}"
    start = time.monotonic()
    while not flag.exists() and time.monotonic() - start < 30:
        time.sleep(0.02)
    assert flag.exists(), f"{{flag.name}} never appeared: no helper"


{extra}
print(f"page {n} shows {{VALUE}}")
```
"""
TOUCH = 'Path({folder!r}, f"{name}-{{VALUE}}").touch()'


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mkdocs serve forks its helper on Linux only")
def test_pages_whose_code_must_run_are_shared_with_a_forked_helper(tmp_path):
    # The serving process renders the pages in order, the helper from the last.
    # Page 1 waits until page 3 has run, which only the helper can make happen
    # while the serving process is in page 1; page 2 waits until page 1 has
    # started, so the helper cannot run ahead and take page 1 (the helper
    # starts in a millisecond, and these pages' code takes as long).
    log = tmp_path / "runs.log"
    extra = {
        1: TOUCH.format(folder=str(tmp_path), name="page-1-started") + '\nwait_for("page-3-ran")',
        2: 'wait_for("page-1-started")',
        3: TOUCH.format(folder=str(tmp_path), name="page-3-ran"),
    }
    pages = {f"page-{n}.md": SHARED_PAGE.format(n=n, log=str(log), folder=str(tmp_path), extra=extra[n])
             for n in (1, 2, 3)}
    project = make_project(tmp_path, pages)
    module = project / "snippets" / "served.py"
    module.write_text('VALUE = "one"\n')
    with _serving(project) as (server, base):
        for value in ("one", "two"):
            if value == "two":  # every page imports the module: all three run again
                module.write_text('VALUE = "two"\n')
            for n in (1, 2, 3):
                _wait_for(base + f"page-{n}/", f"page {n} shows {value}", timeout=90)
            runs = [line.split() for line in log.read_text().splitlines() if line.split()[1] == value]
            assert sorted(page for page, _, _ in runs) == ["1", "2", "3"], f"a page ran twice or never: {runs}"
            pid = {page: int(process) for page, _, process in runs}
            assert pid["1"] == server.pid, f"the serving process did not render the first page: {runs}"
            assert pid["3"] != server.pid, f"the serving process ran the last page itself: {runs}"
