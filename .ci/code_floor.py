"""Run the code of every page of the site in one plain process.

    python .ci/code_floor.py                             # every page
    python .ci/code_floor.py --importing snippets.lookup  # the pages whose code imports the module

This is the floor under a site build: the pages' executed fences and console
sessions (read exactly as pytest reads them: the page model through
conftest.py), run one after the other in one interpreter, with nothing else:
no Markdown, no theme. A cold ``mkdocs build --strict`` may take at most 1.4
times as long (the budget in CONTRIBUTING.md); .ci/benchmark.py times this
script and the build and prints the ratio. With ``--importing``, the code of
the pages an edit to that module runs again under ``mkdocs serve``
(``sitekit.keys.page_modules``): a module edit may show in 2 s plus that.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # support, which conftest.py imports
sys.path.insert(0, str(ROOT))  # the root conftest.py, and sitekit

# First: it sets NumPy's OpenBLAS to one thread before NumPy loads, as the build does.
import conftest  # noqa: E402, I001 (before matplotlib, which loads NumPy)
import matplotlib  # noqa: E402

matplotlib.use("Agg")

from sitekit import keys, nav, pages  # noqa: E402


def run_page(path: Path) -> None:
    namespace = {
        "print": lambda *args, **kwargs: print(*args, **{**kwargs, "file": io.StringIO()}),
        "__console__": conftest.run_console_fence,
        "__name__": "__page__",
    }
    conftest.numpy.set_printoptions(**conftest.NUMPY_PRINT_OPTIONS)
    for token in conftest.fence_tests(path.read_text(encoding="utf-8")):
        exec(compile(token.content, str(path), "exec"), namespace)  # noqa: S102


def main(argv: list[str]) -> int:
    sources = nav.nav_sources(nav.load_nav())
    what = "every page"
    if argv[:1] == ["--importing"] and len(argv) == 2:
        module = argv[1]
        sources = [source for source in sources if source.endswith(".md")
                   and module in keys.page_modules((pages.DOCS / source).read_text(encoding="utf-8"))]
        what = f"the {len(sources)} pages importing {module}"
    elif argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    start = time.perf_counter()
    for source in sources:
        if source.endswith(".md"):
            run_page(pages.DOCS / source)
    print(f"{time.perf_counter() - start:.2f} s for the code of {what} (after imports)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
