"""A small copy of the project: its build and test set-up, with a docs/ of a few pages.

Used by the tests that must see a build or a server fail or behave on a page
written for the purpose (tests/test_failures.py, tests/test_serve.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sitekit.pages import ROOT

GOOD_PAGE = """\
# Fine

```python exec="on" session="fine"
print(1 + 1)
```
"""


def make_project(tmp_path: Path, pages: dict[str, str]) -> Path:
    """A copy of the project's set-up whose docs/ holds only ``pages``."""
    project = tmp_path / "project"
    for folder in ("hooks", "overrides", "snippets", "sitekit", "tools", "tests/support"):
        shutil.copytree(ROOT / folder, project / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("conftest.py", "pytest.ini"):
        shutil.copy(ROOT / name, project / name)
    shutil.copy(ROOT / "mkdocs.yml", project / "base.yml")
    for folder in ("stylesheets", "javascripts"):
        shutil.copytree(ROOT / "docs" / folder, project / "docs" / folder)
    shutil.copy(ROOT / "tests" / "conftest.py", project / "tests" / "conftest.py")
    for name, text in {"index.md": GOOD_PAGE, **pages}.items():
        (project / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (project / "docs" / name).write_text(text)
    nav = "\n".join(f"  - {name}" for name in ["index.md", *pages])
    (project / "mkdocs.yml").write_text(f"INHERIT: base.yml\nnav:\n{nav}\n")
    return project
