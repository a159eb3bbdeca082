"""Run the code of every page of the site in one plain process.

    python .ci/code_floor.py

This is the floor under a site build: the pages' executed fences and console
sessions (read exactly as pytest reads them, through conftest.py), run one
after the other in one interpreter, with nothing else: no Markdown, no theme. A cold ``mkdocs build
--strict`` may take at most 1.3 times as long (the budget in DEVELOPERS.md);
.ci/benchmark.py times this script and the build and prints the ratio.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))  # first: the root conftest.py, not tests/conftest.py

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from mkdocs.config import load_config  # noqa: E402

import conftest  # noqa: E402
from sitebuild import nav_sources  # noqa: E402


def run_page(path: Path) -> None:
    namespace = {
        "print": lambda *args, **kwargs: print(*args, **{**kwargs, "file": io.StringIO()}),
        "__console__": conftest.run_console_fence,
        "__name__": "__page__",
    }
    conftest.numpy.set_printoptions(**conftest.NUMPY_PRINT_OPTIONS)
    tokens = conftest.ExecutedFenceParser("commonmark").parse(path.read_text(encoding="utf-8"))
    for token in tokens:
        if token.type == "fence" and token.info.startswith("python runner:"):
            exec(compile(token.content, str(path), "exec"), namespace)  # noqa: S102


def main() -> int:
    start = time.perf_counter()
    for source in nav_sources(load_config(str(ROOT / "mkdocs.yml"))["nav"]):
        run_page(ROOT / "docs" / source)
    print(f"{time.perf_counter() - start:.2f} s for the code of every page (after imports)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
