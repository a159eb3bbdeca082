"""How long ``mkdocs serve`` (the README's command) takes to show an edit.

    python .ci/serve_latency.py [--edits N]

Works on a throw-away copy of the repository (the committed files plus the
working tree's changes), so the real one is never edited. It starts
``mkdocs serve`` there, waits for the first build, then makes edits the way an
author does and times each from the save until the served page shows it:

- a prose edit to a short chapter, and to the chapter whose code takes
  longest (chapter 14): neither runs its page's code again
  (sitekit/run.py replays what the blocks printed);
- a code edit to a chapter (an executed block prints something new);
- an edit to a module of ``snippets/`` (a new value of a constant a page
  prints): the page must show the new value, never the old one. Every page
  whose code imports the module runs again (``sitekit.keys.code_key`` counts
  files whole): the honest cost of a module edit is the run time of the code
  it reaches. Measured for ``snippets/lookup.py``, for
  ``snippets/training.py`` and for ``snippets/attention.py``;
- the same edit to ``snippets/lookup.py`` with a line added at its top: the
  same pages run again as for any edit to that module.

It also reports the serving process's memory (RSS) after every rebuild, up
to 100 rebuilds, every fifth of them an edit to ``snippets/lookup.py`` (its
pages' code runs again): it must stay flat. Used by .ci/benchmark.py; prints a small table on its own.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support.build import console_script  # noqa: E402

PAGE = "dictionaries.md"                # a short chapter
HEAVY_PAGE = "learned-lookups.md"       # the chapter whose code takes longest (about 3 s)
ATTENTION_PAGE = "matrix-lookup.md"     # a chapter that imports snippets.attention, as most pages do
# The page that prints a constant of the module, the module, and what its pages are (the
# benchmark counts them: .ci/code_floor.py --importing).
MODULE_EDITS = {
    PAGE: ("snippets/lookup.py", ""),
    HEAVY_PAGE: ("snippets/training.py", "chapter 14's code"),
    ATTENTION_PAGE: ("snippets/attention.py", ""),
}
# Each kind of edit: (the page that must show it, what is edited).
KINDS = {
    "prose edit": (PAGE, "prose"),
    "prose edit, heaviest page": (HEAVY_PAGE, "prose"),
    "code edit": (PAGE, "code"),
    "snippets edit": (PAGE, "module"),
    "snippets edit, lines moved": (PAGE, "module, lines moved"),
    "snippets edit, heaviest page": (HEAVY_PAGE, "module"),
    "snippets edit, attention.py": (ATTENTION_PAGE, "module"),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _copy_repository(target: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    for name in files:
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _fetch(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback only)
            return response.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _wait_for(url: str, text: str, timeout: float = 120.0) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if text in _fetch(url):
            return time.perf_counter() - start
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not show {text!r} within {timeout} s")


def _fence(page: str, code: str) -> str:
    return f'\n```python exec="on" session="{page.removesuffix(".md")}"\n{code}\n```\n'


def measure(edits: int = 3, rebuilds: int = 100) -> dict[str, list[float]]:
    """Seconds from each save to the served page showing it, by kind of edit; and the server's memory."""
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        _copy_repository(project)
        port = _free_port()
        # The copy's own modules first on the path: the editable install names the clone's.
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(project)}
        server = subprocess.Popen(
            [console_script("mkdocs"), "serve", "-a", f"127.0.0.1:{port}"],
            cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}/attention-as-a-soft-dictionary/"

        def url(page: str) -> str:
            return base + page.removesuffix(".md") + "/"

        def append(path: Path, text: str) -> None:
            path.write_text(path.read_text() + text)

        results: dict[str, list[float]] = {name: [] for name in (*KINDS, "memory MiB")}
        try:
            _wait_for(url(PAGE), "</html>", timeout=300)
            docs = project / "docs"
            # Once: each page prints a constant of the module edited below.
            for page, (module, _) in MODULE_EDITS.items():
                name = module.removesuffix(".py").replace("/", ".")
                append(docs / page, _fence(page, f"from {name} import BENCHMARK_MARKER\nprint(BENCHMARK_MARKER)"))
                append(project / module, '\nBENCHMARK_MARKER = "benchmark-start"\n')
            for page in MODULE_EDITS:
                _wait_for(url(page), "benchmark-start", timeout=300)
            for n in range(edits):
                for kind, (page, how) in KINDS.items():
                    time.sleep(1.0)  # let the watcher settle between edits
                    marker = f"{kind.replace(' ', '-')}-{n}"
                    if how == "prose":
                        append(docs / page, f"\n{marker}\n")
                    elif how == "code":
                        append(docs / page, _fence(page, f'print("{marker}")'))
                    else:  # a module: the page prints its new constant
                        module = project / MODULE_EDITS[page][0]
                        text = re.sub(r'BENCHMARK_MARKER = ".*"', f'BENCHMARK_MARKER = "{marker}"', module.read_text())
                        module.write_text(f"# {marker}\n{text}" if how == "module, lines moved" else text)
                    results[kind].append(_wait_for(url(page), marker))
                    results["memory MiB"].append(_rss_mib(server.pid))
            module = project / MODULE_EDITS[PAGE][0]
            for n in range(len(results["memory MiB"]), rebuilds):  # more rebuilds: memory must stay flat
                time.sleep(0.5)
                marker = f"rebuild-{n}"
                if n % 5:
                    append(docs / PAGE, f"\n{marker}\n")
                else:  # the page's code runs again
                    module.write_text(re.sub(r'BENCHMARK_MARKER = ".*"', f'BENCHMARK_MARKER = "{marker}"',
                                             module.read_text()))
                _wait_for(url(PAGE), marker)
                results["memory MiB"].append(_rss_mib(server.pid))
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edits", type=int, default=3)
    parser.add_argument("--rebuilds", type=int, default=100, help="rebuilds over which memory is followed")
    args = parser.parse_args()
    results = measure(args.edits, args.rebuilds)
    for name, values in results.items():
        if name == "memory MiB":
            marks = sorted({1, min(20, len(values)), len(values)})
            print(f"{name:>28}: " + ", ".join(f"after rebuild {n} {values[n - 1]:.0f}" for n in marks))
        else:
            print(f"{name:>28}: median {statistics.median(values):.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
