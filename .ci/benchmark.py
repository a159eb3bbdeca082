"""Measure the project's budgets and print them as a table.

    python .ci/benchmark.py              # everything (about 2 minutes)
    python .ci/benchmark.py --no-install # skip the fresh pip install

Budgets (issue 2): fresh ``pip install -r requirements.txt`` < 120 s; cold
``mkdocs build --strict`` < 10 s; the README's test command (``pytest``) < 60 s;
every page < 500 KB transferred (gzip, as GitHub Pages sends it). Timings are measured here, never asserted in
tests: a loaded machine must not fail the suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from sitebuild import PAGE_BUDGET_BYTES, built_page, nav_sources  # noqa: E402
from sitebuild import page_weight as weigh  # noqa: E402


def timed(command: list[str], **kwargs) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, **kwargs)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-install", action="store_true", help="skip the fresh pip install")
    args = parser.parse_args()
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_install:
            venv = Path(tmp) / "venv"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            seconds = timed(
                [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--quiet", "-r", "requirements.txt"],
                cwd=ROOT,
            )
            rows.append(("fresh pip install -r requirements.txt (no cache)", seconds, 120, "s"))

        shutil.rmtree(ROOT / ".cache", ignore_errors=True)
        site = Path(tmp) / "site"
        seconds = timed([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=ROOT, env=env)
        rows.append(("cold mkdocs build --strict", seconds, 10, "s"))

        seconds = timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=env)
        rows.append(("pytest (the README's test command)", seconds, 60, "s"))

        from mkdocs.config import load_config

        for source in nav_sources(load_config(str(ROOT / "mkdocs.yml"))["nav"]):
            raw, compressed = weigh(site, built_page(source))
            rows.append((f"page {source} (gzip; raw {raw / 1000:.0f} KB)", compressed / 1000, PAGE_BUDGET_BYTES / 1000, "KB"))

    width = max(len(name) for name, *_ in rows)
    print(f"{'measure'.ljust(width)}  {'value':>9}  {'budget':>9}  verdict")
    failed = False
    for name, value, budget, unit in rows:
        ok = value < budget
        failed |= not ok
        print(f"{name.ljust(width)}  {value:>7.1f} {unit:<2} {budget:>6.0f} {unit:<2}  {'ok' if ok else 'OVER'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
