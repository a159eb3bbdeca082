"""``mkdocs serve`` shows an edit without running what did not change (sitekit/run.py).

A small project is served; its page counts, in a file of its own, how often
its python block and its console session ran. A prose edit must show on the
page with the blocks' outputs as they were and no block run again; a code
edit must run the page's blocks again; an edit to a module the page imports
must show its new value. A page whose code raises shows its error while the
rest is served; mended, it shows; an edit to sitekit/, and one to hooks/,
restarts the server, which then shows what the new code does. Timings are .ci/serve_latency.py's business: this
checks what is shown, and what ran. The serving and editing is a job
(tests/support/background.py): it runs beside the rest of the suite.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from support.background import job
from support.build import console_script
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


FAILING = """\
# Failing

```python exec="on" session="failing"
raise RuntimeError("broken on purpose")
```
"""

# The line of sitekit/run.py that writes what a block prints (the sitekit edit below changes it).
PRINT_WRITES = 'buffer.write(" ".join(str(text) for text in texts) + end)'
# The line of hooks/site.py that finishes every page (the hooks edit below changes it).
PAGE_FINISHED = "return _PLACEHOLDER.sub(lambda match: kept[int(match.group(1))], output)"


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
    # In the job's process group (support/background.py), which ends with the test session whatever ends it.
    server = subprocess.Popen(
        [console_script("mkdocs"), "serve", "-a", f"127.0.0.1:{port}"],
        cwd=project, env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(project)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        yield server, f"http://127.0.0.1:{port}/attention-as-a-soft-dictionary/"
    finally:
        server.terminate()
        server.wait(timeout=30)


@job
def served_edits(folder: Path) -> dict[str, tuple[str, str]]:
    """Serve the counted page and edit it three ways; after each step, the page shown and the runs counted.

    Each step waits until the page shows what the edit should show (or fails
    after a minute, saying what it shows instead).
    """
    counter = folder / "runs.txt"
    project = make_project(folder, {"counted.md": PAGE.format(counter=str(counter)).replace("{PRINTED}", "first"),
                                    "failing.md": FAILING})
    module = project / "snippets" / "served.py"
    module.write_text('VALUE = "one"\n')
    page = project / "docs" / "counted.md"
    steps = {}
    with _serving(project) as (_, base):
        url = base + "counted/"
        steps["served"] = _wait_for(url, "the module says one; first"), counter.read_text()
        steps["failing"] = _page(base + "failing/"), ""

        page.write_text(page.read_text().replace("Prose.", "Prose, edited."))
        steps["prose edited"] = _wait_for(url, "Prose, edited."), counter.read_text()

        page.write_text(page.read_text().replace('; first")', '; second")'))
        steps["code edited"] = _wait_for(url, "the module says one; second"), counter.read_text()

        module.write_text('VALUE = "two"\n')
        steps["module edited"] = _wait_for(url, "the module says two; second"), counter.read_text()

        failing = project / "docs" / "failing.md"
        failing.write_text(failing.read_text().replace('raise RuntimeError("broken on purpose")', 'print("mended")'))
        steps["failing page mended"] = _wait_for(base + "failing/", "mended"), ""

        # The site's own code (here, how a block's print writes): the server restarts to load it.
        runner = project / "sitekit" / "run.py"
        assert PRINT_WRITES in runner.read_text(), "sitekit/run.py writes a block's print another way now"
        runner.write_text(runner.read_text().replace(PRINT_WRITES, PRINT_WRITES.replace(") + end)", ").upper() + end)")))
        steps["sitekit edited"] = _wait_for(base + "failing/", "MENDED"), ""

        # The hook (here, how it finishes a page): mkdocs.yml watches hooks/, and the server restarts to load it.
        hook = project / "hooks" / "site.py"
        assert PAGE_FINISHED in hook.read_text(), "hooks/site.py finishes a page another way now"
        hook.write_text(hook.read_text().replace(PAGE_FINISHED, PAGE_FINISHED + '.replace("MENDED", "MENDED, HOOKED")'))
        steps["hooks edited"] = _wait_for(base + "failing/", "MENDED, HOOKED"), ""
    return steps


def test_a_failing_page_shows_its_error_and_the_rest_is_served(served_edits):
    """The server does not stop at a page whose code raises: that page shows the error, with its page and line."""
    page, _ = served_edits["failing"]
    assert "RuntimeError: broken on purpose" in page and "docs/failing.md (as run)" in page, page[-3000:]
    assert "line 4" in page, page[-3000:]
    assert "the module says one; first" in served_edits["served"][0]


def test_a_mended_page_and_an_edit_to_the_sites_own_code_are_served(served_edits):
    assert "mended" in served_edits["failing page mended"][0]
    assert "MENDED" in served_edits["sitekit edited"][0]
    assert "MENDED, HOOKED" in served_edits["hooks edited"][0]


def test_a_prose_edit_replays_the_outputs_and_a_code_or_module_edit_runs_the_code(served_edits):
    assert served_edits["served"][1] == "python console"

    shown, runs = served_edits["prose edited"]
    assert "the module says one; first" in shown and "42" in shown, shown[-3000:]
    assert runs == "python console", "a prose edit ran the page's code again"

    assert served_edits["code edited"][1] == "python console python console"
    assert served_edits["module edited"][1] == "python console python console python console"
