#!/usr/bin/env python3
"""Run the README's serve command as written, ask it for the home page and a chapter, then stop it.

    python3 .ci/serve_check.py "mkdocs serve" http://127.0.0.1:8000/attention-as-a-soft-dictionary/ [--within 180]

.ci/run's newcomer lane calls it with the command and the address read from
README.md (.ci/readme_commands.py), in the environment the README's set-up
made. The command runs in a shell of its own, in a process group of its own,
so that stopping it stops all it started. Both pages must answer with status
200 and their own title within ``--within`` seconds of the start (the server
builds the whole site first); the time to the first page is printed. The
server's output is printed when it fails.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

# What each page must be: the site's home page, and a chapter by its title.
PAGES = {"": "Attention as a Soft Dictionary", "dictionaries/": "1. Dictionaries"}


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (loopback only)
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError:
        return 0, ""


def title(html: str) -> str:
    match = re.search(r"<title>(.*?)</title>", html, re.DOTALL)
    return match.group(1).strip() if match else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", help="the README's serve command, run as written")
    parser.add_argument("address", help="where the README says the site is served")
    parser.add_argument("--within", type=float, default=180, help="seconds the pages may take to answer")
    args = parser.parse_args(argv)

    with tempfile.TemporaryFile(mode="w+") as log:
        start = time.monotonic()
        server = subprocess.Popen(["bash", "-c", args.command], stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        answered: dict[str, float] = {}
        try:
            while len(answered) < len(PAGES) and time.monotonic() - start < args.within and server.poll() is None:
                for path, expected in PAGES.items():
                    if path not in answered:
                        status, html = fetch(args.address + path)
                        if status == 200 and expected in title(html):
                            answered[path] = time.monotonic() - start
                time.sleep(0.5)
        finally:
            with_code = server.poll()
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        missing = [args.address + path for path in PAGES if path not in answered]
        if missing:
            log.seek(0)
            why = f"it exited with {with_code}" if with_code is not None else f"not within {args.within:.0f} s"
            print(f"serve_check: `{args.command}` did not answer {', '.join(missing)} ({why}); its output:\n"
                  + log.read()[-5000:], file=sys.stderr)
            return 1
    for path, seconds in answered.items():
        print(f"serve_check: `{args.command}` answered {args.address + path} ({PAGES[path]!r}) "
              f"{seconds:.1f} s after it started (bound {args.within:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
