"""How long ``mkdocs serve`` (the README's command) takes to show an edit.

    python .ci/serve_latency.py [--edits N]

Works on a throw-away copy of the repository (the committed files plus the
working tree's changes), so the real one is never edited. It starts
``mkdocs serve`` there, waits for the first build, then makes edits the way an
author does and times each from the save until the served page shows it:

- a prose edit to a chapter;
- a code edit to a chapter (an executed block prints something new);
- an edit to a module of ``snippets/`` (a new constant a page then prints):
  the page that uses the module must show the new value, never the old one.

It also reports the serving process's memory after every rebuild, which must
stay flat. Used by .ci/benchmark.py; prints a small table on its own.
"""

from __future__ import annotations

import argparse
import os
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
PAGE = "dictionaries.md"


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


def measure(edits: int = 3) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        _copy_repository(project)
        port = _free_port()
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        server = subprocess.Popen(
            [sys.executable, "-m", "mkdocs", "serve", "-a", f"127.0.0.1:{port}"],
            cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}/attention-as-a-soft-dictionary/"
        url = base + PAGE.removesuffix(".md") + "/"
        results: dict[str, list[float]] = {"prose edit": [], "code edit": [], "snippets edit": [], "memory MiB": []}
        try:
            _wait_for(url, "</html>", timeout=300)
            page = project / "docs" / PAGE
            module = project / "snippets" / "lookup.py"
            for n in range(edits):
                time.sleep(1.0)  # let the watcher settle between edits
                marker = f"prose-marker-{n}"
                page.write_text(page.read_text() + f"\n{marker}\n")
                results["prose edit"].append(_wait_for(url, marker))
                time.sleep(1.0)
                marker = f"code-marker-{n}"
                page.write_text(
                    page.read_text()
                    + f'\n```python exec="on" session="{PAGE.removesuffix(".md")}"\nprint("{marker}")\n```\n'
                )
                results["code edit"].append(_wait_for(url, marker))
                time.sleep(1.0)
                marker = f"snippet-marker-{n}"
                module.write_text(module.read_text() + f'\nBENCHMARK_MARKER = "{marker}"\n')
                if n == 0:
                    page.write_text(
                        page.read_text()
                        + f'\n```python exec="on" session="{PAGE.removesuffix(".md")}"\n'
                        "from snippets.lookup import BENCHMARK_MARKER\nprint(BENCHMARK_MARKER)\n```\n"
                    )
                    _wait_for(url, marker)
                else:
                    results["snippets edit"].append(_wait_for(url, marker))
                results["memory MiB"].append(_rss_mib(server.pid))
            for n in range(edits, 20):  # more rebuilds: memory must stay flat
                time.sleep(0.5)
                marker = f"rebuild-{n}"
                page.write_text(page.read_text() + f"\n{marker}\n")
                _wait_for(url, marker)
                results["memory MiB"].append(_rss_mib(server.pid))
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edits", type=int, default=3)
    args = parser.parse_args()
    results = measure(args.edits)
    for name, values in results.items():
        if name == "memory MiB":
            print(f"{name:>15}: after rebuild 1 {values[0]:.0f}, after rebuild {len(values)} {values[-1]:.0f}")
        else:
            print(f"{name:>15}: median {statistics.median(values):.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
