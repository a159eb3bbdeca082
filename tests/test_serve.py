"""``mkdocs serve`` shows an edit without running what did not change (sitekit/fences.py).

A small project is served; its page counts, in a file of its own, how often
its python block and its console session ran. A prose edit must show on the
page with the blocks' outputs as they were and no block run again; a code
edit must run the page's blocks again; an edit to a module the page imports
must show its new value. Timings are .ci/serve_latency.py's business: this
checks what is shown, and what ran. The serving and editing is a job
(tests/support/background.py): it runs beside the rest of the suite.
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
from pathlib import Path

from support.background import job
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


@job
def served_edits(folder: Path) -> dict[str, tuple[str, str]]:
    """Serve the counted page and edit it three ways; after each step, the page shown and the runs counted.

    Each step waits until the page shows what the edit should show (or fails
    after a minute, saying what it shows instead).
    """
    counter = folder / "runs.txt"
    project = make_project(folder, {"counted.md": PAGE.format(counter=str(counter)).replace("{PRINTED}", "first")})
    module = project / "snippets" / "served.py"
    module.write_text('VALUE = "one"\n')
    page = project / "docs" / "counted.md"
    steps = {}
    with _serving(project) as (_, base):
        url = base + "counted/"
        steps["served"] = _wait_for(url, "the module says one; first"), counter.read_text()

        page.write_text(page.read_text().replace("Prose.", "Prose, edited."))
        steps["prose edited"] = _wait_for(url, "Prose, edited."), counter.read_text()

        page.write_text(page.read_text().replace('; first")', '; second")'))
        steps["code edited"] = _wait_for(url, "the module says one; second"), counter.read_text()

        module.write_text('VALUE = "two"\n')
        steps["module edited"] = _wait_for(url, "the module says two; second"), counter.read_text()
    return steps


def test_a_prose_edit_replays_the_outputs_and_a_code_or_module_edit_runs_the_code(served_edits):
    assert served_edits["served"][1] == "python console"

    shown, runs = served_edits["prose edited"]
    assert "the module says one; first" in shown and "42" in shown, shown[-3000:]
    assert runs == "python console", "a prose edit ran the page's code again"

    assert served_edits["code edited"][1] == "python console python console"
    assert served_edits["module edited"][1] == "python console python console python console"
