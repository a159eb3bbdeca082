"""Measure the project's budgets and print them as a table.

    python .ci/benchmark.py                   # everything (a few minutes)
    python .ci/benchmark.py --no-install      # skip the fresh pip install
    python .ci/benchmark.py --only build serve    # some of: install build serve pytest weight

Budgets (CONTRIBUTING.md): fresh ``pip install -r requirements.txt`` <= 120 s;
cold ``mkdocs build --strict`` <= 1.4 x the time the pages' code takes to run
in one plain process (.ci/code_floor.py); ``mkdocs serve`` shows a one-page
edit in <= 2 s and a ``snippets/`` edit in <= 2 s plus the run time of the
code of the pages that import the module (.ci/code_floor.py --importing), on
an idle 2-core machine (.ci/serve_latency.py); the README's test command
(``pytest``) <= 90 s, and its quick loop (``pytest --no-build``) <= 30 s;
every page <= 250 KB on a first visit (gzip, as GitHub Pages sends it).
.ci/run builds the site four times: ``mkdocs serve`` and ``mkdocs build
--strict`` as the README types them, pytest's build (reused by the
validators and as the first of the determinism check's two), and the
determinism check's second. Timings are measured here, never
asserted in tests: a loaded machine must not fail the suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from sitekit.nav import built_page, load_nav, nav_sources  # noqa: E402
from support.build import PAGE_BUDGET_BYTES, console_script  # noqa: E402
from support.build import page_weight as weigh  # noqa: E402

sys.path.insert(0, str(ROOT / ".ci"))
import serve_latency  # noqa: E402

PARTS = ("install", "build", "serve", "pytest", "weight")


def pages_code_time(module_file: str) -> tuple[float, int]:
    """Seconds the code of the pages that import ``module_file`` (snippets/lookup.py) takes, after imports, and how many pages."""
    module = module_file.removesuffix(".py").replace("/", ".")
    done = subprocess.run([sys.executable, ".ci/code_floor.py", "--importing", module], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    seconds, rest = done.stdout.split(" s for the code of the ", 1)
    return float(seconds), int(rest.split(" ", 1)[0])


def timed(command: list[str], **kwargs) -> float:
    """Seconds the command took; a failing command stops the benchmark with the end of its output."""
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        sys.exit(f"benchmark: {' '.join(command)} failed (exit {result.returncode}); its last lines:\n{tail}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-install", action="store_true", help="skip the fresh pip install")
    parser.add_argument("--only", nargs="+", choices=PARTS, help="measure only these")
    args = parser.parse_args()
    parts = set(args.only or PARTS) - ({"install"} if args.no_install else set())
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if "install" in parts:
            venv = Path(tmp) / "venv"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            seconds = timed(
                [str(venv / "bin" / "pip"), "install", "--no-cache-dir", "--quiet", "-r", "requirements.txt"],
                cwd=ROOT,
            )
            rows.append(("fresh pip install -r requirements.txt (no cache)", seconds, 120, "s"))

        # Three of each, alternating, and their medians: one run of either
        # varies by 5-10 % on a busy machine, as much as the ratio's margin.
        site = Path(tmp) / "site"
        if parts & {"build", "weight"}:
            floors, builds = [], []
            for _ in range(3 if "build" in parts else 1):
                if "build" in parts:
                    floors.append(timed([sys.executable, ".ci/code_floor.py"], cwd=ROOT, env=env))
                shutil.rmtree(site, ignore_errors=True)
                command = [console_script("mkdocs"), "build", "--strict", "-d", str(site)]
                builds.append(timed(command, cwd=ROOT, env=env))
            if "build" in parts:
                floor, seconds = statistics.median(floors), statistics.median(builds)
                rows.append(("the pages' code in one plain process (.ci/code_floor.py, median of 3)", floor, None, "s"))
                rows.append(("cold mkdocs build --strict (median of 3)", seconds, None, "s"))
                rows.append(("  build / code floor", seconds / floor, 1.4, "x"))

        if "serve" in parts:
            serve = serve_latency.measure(edits=3)
            for name, (page, how) in serve_latency.KINDS.items():
                what, budget = f"{name} ({page})", 2
                if how.startswith("module"):
                    # A module edit runs again every page whose code imports the module: its budget is 2 s
                    # plus the run time of those pages' code (.ci/code_floor.py --importing).
                    module_file, note = serve_latency.MODULE_EDITS[page]
                    code_seconds, count = pages_code_time(module_file)
                    what = f"{name} ({page}, {module_file}, imported by {count} pages{', ' + note if note else ''})"
                    budget += code_seconds
                rows.append((f"mkdocs serve: {what} (median)", statistics.median(serve[name]), budget, "s"))
            memory = serve["memory MiB"]
            rows.append((f"mkdocs serve: memory after {len(memory)} rebuilds (first: {memory[0]:.0f})", memory[-1], None, "MiB"))

        if "pytest" in parts:
            seconds = timed([console_script("pytest"), "-p", "no:cacheprovider"], cwd=ROOT, env=env)
            rows.append(("pytest (the README's test command)", seconds, 90, "s"))
            seconds = timed([console_script("pytest"), "-p", "no:cacheprovider", "--no-build"], cwd=ROOT, env=env)
            rows.append(("pytest --no-build (the README's quick loop)", seconds, 30, "s"))

        if "weight" in parts:
            for source in nav_sources(load_nav()):
                raw, compressed = weigh(site, built_page(source))
                rows.append((f"page {source} (gzip; raw {raw / 1000:.0f} KB)", compressed / 1000, PAGE_BUDGET_BYTES / 1000, "KB"))

    width = max(len(name) for name, *_ in rows)
    print(f"| {'measure'.ljust(width)} | {'value':>10} | {'budget':>8} | verdict |")
    print(f"|{'-' * (width + 2)}|{'-' * 12}:|{'-' * 10}:|---------|")
    failed = False
    for name, value, budget, unit in rows:
        ok = budget is None or value <= budget
        failed |= not ok
        shown = f"{value:.2f} {unit}" if unit == "x" else f"{value:.1f} {unit}"
        limit = "" if budget is None else (f"{budget:.1f} {unit}" if unit == "x" else f"{budget:.0f} {unit}")
        verdict = "" if budget is None else ("ok" if ok else "OVER")
        print(f"| {name.ljust(width)} | {shown:>10} | {limit:>8} | {verdict:<7} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
