"""Two builds of the site, under two different BLAS kernels, must be byte-identical.

NumPy's OpenBLAS picks its kernel from the CPU when it starts (``SkylakeX`` on
AVX-512 machines, ``Haswell`` on AVX2 ones), and the kernels round differently
in the last bits. A page that prints a raw float can therefore build on the
machine it was written on and fail, or print something else, on a reader's.
A second build on the same machine would never see that, so the second build
runs under another kernel this CPU can run:

- one build has ``OPENBLAS_CORETYPE`` unset, so the CPU chooses (some machines
  set the variable in their environment: it is taken out);
- the other forces a kernel from the CPU's flags: ``Haswell`` where
  ``avx512f`` is present, ``Prescott`` (SSE3, on every x86-64 CPU) otherwise.
  A kernel the CPU lacks is never forced.

When the environment already forces a kernel, the first build keeps it and the
second is the pair's other member. The page tests (``--tests``) also run under
the second kernel. A console session whose written output holds on one kernel
only fails the second build, and the message names the page, the line, and
both outputs (the page's, which the first build printed, and the second's).

Every other byte must match, except the regions a page declares between
``<!-- measured ... -->`` and ``<!-- /measured -->``: wall-clock timings and
tracemalloc's memory peaks that the page measures while it is built (chapter
7). Those are cut out of both builds before comparing, and counted.

Usage (inside the project's virtual environment, from anywhere):

    python .ci/check_determinism.py [FIRST_SITE] [--tests PATH ...]

FIRST_SITE is a site already built from this commit in the current
environment (``artifacts/site`` from pytest): then only the second build is
made. On a machine that is not x86-64 (macOS's Accelerate, ARM) there is no
second kernel to force: the check says so and compares two builds under the
one kernel.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURED = re.compile(rb"<!-- measured\b.*?<!-- /measured -->", re.DOTALL)
# The kernels OpenBLAS itself chooses on AVX-512 and on AVX2 CPUs: forcing one
# of these is the same as letting the CPU choose.
CPU_CHOICES = {"avx512f": {"SkylakeX", "Cooperlake", "SapphireRapids"}, "avx2": {"Haswell", "Zen"}}
UNSET = None  # the value of OPENBLAS_CORETYPE that lets the CPU choose


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    match = re.search(r"^flags\s*:(.*)$", text, re.MULTILINE)
    return set(match.group(1).split()) if match else set()


def kernel_pair(current: str | None, flags: set[str]) -> tuple[str | None, str | None] | None:
    """The values of OPENBLAS_CORETYPE for the two builds, or None with no second kernel.

    ``current`` is the environment's value (None when unset). One of the two
    lets the CPU choose, or forces the kernel it would choose; the other forces
    an older one that the CPU can run.
    """
    if "sse2" not in flags:  # not x86-64, or no /proc/cpuinfo to read
        return None
    level = "avx512f" if "avx512f" in flags else "avx2"
    forced = "Haswell" if "avx512f" in flags else "Prescott"
    chosen_by_cpu = current is UNSET or current in CPU_CHOICES[level]
    return (current, forced) if chosen_by_cpu else (current, UNSET)


def environment(coretype: str | None) -> dict[str, str]:
    # One OpenBLAS thread in the build and the page tests run side by side:
    # sitekit/render.py and conftest.py set it, before NumPy loads.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype is not UNSET:
        env["OPENBLAS_CORETYPE"] = coretype
    return env


def kernel_name(coretype: str | None) -> str:
    """The kernel OpenBLAS really uses under ``coretype``, as it names it itself."""
    probe = (
        "import ctypes, glob, os, numpy\n"
        "libs = glob.glob(os.path.join(os.path.dirname(numpy.__file__), '..', 'numpy.libs', '*openblas*'))\n"
        "name = 'unknown'\n"
        "for lib in libs:\n"
        "    for symbol in ('scipy_openblas_get_corename64_', 'openblas_get_corename64_', 'openblas_get_corename'):\n"
        "        function = getattr(ctypes.CDLL(lib), symbol, None)\n"
        "        if function is not None:\n"
        "            function.restype = ctypes.c_char_p\n"
        "            name = function().decode()\n"
        "print(name)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], env=environment(coretype), capture_output=True, text=True)
    name = result.stdout.strip() or "unknown"
    how = "the CPU's choice" if coretype is UNSET else f"OPENBLAS_CORETYPE={coretype}"
    return f"{name} ({how})"


def command(name: str) -> str:
    """The environment's own ``mkdocs`` or ``pytest`` command, as the README types it (never ``python -m``)."""
    return str(Path(sys.executable).parent / name)


def build(site: Path, coretype: str | None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [command("mkdocs"), "build", "--strict", "-d", str(site)],
        cwd=ROOT, env=environment(coretype), capture_output=True, text=True,
    )


def run_tests(paths: list[str], coretype: str | None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [command("pytest"), "-p", "no:cacheprovider", "--no-header", *paths],
        cwd=ROOT, env=environment(coretype), capture_output=True, text=True,
    )


def build_failure(log: str) -> str:
    """The warnings of a failed strict build, without MkDocs's INFO lines."""
    keep = [line for line in log.splitlines() if not line.startswith(("INFO", "DEBUG"))]
    return "\n".join(keep).strip()


def first_failure(output: str) -> str:
    """pytest's report of its first failing test and its short summary (the rest repeats it)."""
    sections = re.split(r"^(?=_{3,} .* _{3,}$)", output, flags=re.MULTILINE)
    summary = output[output.find("= short test summary info ="):] if "short test summary info" in output else ""
    first = sections[1] if len(sections) > 1 else output[-4000:]
    return first.rstrip() + "\n" + summary.strip()


def source_of(html: Path) -> str:
    """The page source a built file comes from, for the message (``docs/x.md`` for ``x/index.html``)."""
    parts = html.with_suffix("").parts
    stem = "/".join(parts[:-1]) if parts[-1] == "index" else "/".join(parts)
    return f"docs/{stem or 'index'}.md (built as {html.as_posix()})" if html.suffix == ".html" else html.as_posix()


def compare(first: Path, second: Path) -> tuple[int, list[Path], int]:
    """Measured regions set aside, the files that differ, and how many files there are."""
    names = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    others = sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    if names != others:
        sys.exit(f"determinism: the two builds have different files: {sorted(map(str, set(names) ^ set(others)))}")
    masked, differ = 0, []
    for name in names:
        a, b = (first / name).read_bytes(), (second / name).read_bytes()
        if a == b:
            continue
        if name.suffix == ".html":
            masked += len(MEASURED.findall(a))
            a, b = MEASURED.sub(b"", a), MEASURED.sub(b"", b)
        if a != b:
            differ.append(name)
    return masked, differ, len(names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first_site", nargs="?", type=Path, help="a site already built from this commit here")
    parser.add_argument("--tests", nargs="+", default=[], metavar="PATH",
                        help="pytest paths to run under the second kernel too (the pages: docs)")
    args = parser.parse_args()

    current = os.environ.get("OPENBLAS_CORETYPE") or UNSET
    pair = kernel_pair(current, cpu_flags())
    first_kernel, second_kernel = pair if pair else (current, current)
    names = kernel_name(first_kernel), kernel_name(second_kernel)
    if pair is None:
        print("determinism: this machine offers no second BLAS kernel to force (not x86-64): "
              f"both builds use {names[0]}")
    print(f"determinism: first build under {names[0]}, second under {names[1]}", flush=True)

    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        first = args.first_site
        if first is not None and not (first / "index.html").is_file():
            sys.exit(f"determinism: no built site in {first}")
        with ThreadPoolExecutor(max_workers=3) as pool:
            builds = {}
            if first is None:
                first = out / "first"
                builds[names[0]] = pool.submit(build, first, first_kernel)
            builds[names[1]] = pool.submit(build, out / "second", second_kernel)
            tests = pool.submit(run_tests, args.tests, second_kernel) if args.tests else None
            failed = False
            for name, future in builds.items():
                result = future.result()
                if result.returncode != 0:
                    failed = True
                    print(f"determinism: the strict build under {name} fails:\n"
                          f"{build_failure(result.stderr + result.stdout)}", file=sys.stderr)
            if tests is not None:
                result = tests.result()
                if result.returncode != 0:
                    failed = True
                    print(first_failure(result.stdout), file=sys.stderr)
                    print(f"determinism: pytest {' '.join(args.tests)} fails under {names[1]} "
                          f"(exit {result.returncode})", file=sys.stderr)
                else:
                    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
                    print(f"determinism: pytest {' '.join(args.tests)} under {names[1]}: {summary.strip('= ')}")
        if failed:
            print(f"determinism: a page prints numbers whose last bits depend on the BLAS kernel (the CPU); "
                  f"print them rounded, or as a bound (CONTRIBUTING.md, 'A page's anatomy'). "
                  f"Kernels: {names[0]} and {names[1]}", file=sys.stderr)
            return 1

        masked, differ, count = compare(first, out / "second")
        if differ:
            for name in differ[:3]:  # where they differ, to find the cause
                a = MEASURED.sub(b"", (first / name).read_bytes()).decode(errors="replace").splitlines()
                b = MEASURED.sub(b"", (out / "second" / name).read_bytes()).decode(errors="replace").splitlines()
                print(f"--- {source_of(name)} under {names[0]}\n+++ the same under {names[1]}", file=sys.stderr)
                for line in list(difflib.unified_diff(a, b, lineterm="", n=0))[2:14]:
                    print(line[:400], file=sys.stderr)
            print(f"determinism: the two builds differ in {[source_of(name) for name in differ]}", file=sys.stderr)
            return 1
    print(f"determinism: two builds under {names[0]} and {names[1]} are byte-identical ({count} files; "
          f"{masked} measured region(s) (timings, memory peaks) set aside)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
