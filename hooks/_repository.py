"""Make ``sitekit`` importable from a hook, however MkDocs was started.

MkDocs loads each hook from its file with hooks/ on ``sys.path``, and puts
``sys.path`` back as it was afterwards; started as the ``mkdocs`` command (not
``python -m mkdocs``), it does not have the repository's root there. This
module imports the ``sitekit`` package with the root on ``sys.path``: from
then on its modules import from its own folder. Every hook that uses
``sitekit`` imports this module first. (``hooks/build.py`` puts the root on
``sys.path`` for the build itself, where the pages import ``snippets``.)
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

sys.path.insert(0, str(ROOT))
try:
    import sitekit  # noqa: F401
finally:
    sys.path.remove(str(ROOT))
