"""The site's own code, beside the library it teaches (snippets/).

What builds the site (the page model, console sessions, the chapter
notebooks) and what its pages use besides the library (the figures and their
palette, the interactive widgets); README.md's layout names each module. A
chapter's notebook ships the modules of this package its code imports (the
figures, a widget), and those import nothing else of it.
"""

from pathlib import Path

# Paths mkdocs.yml names through these values (``!!python/name:``), so that an
# engine's command works from any folder (``mkdocs build -f path/to/mkdocs.yml``):
# a relative path there would be read from the working folder, and Zensical's
# YAML loader has no ``!relative``.
_ROOT = Path(__file__).resolve().parent.parent
# pymdownx.snippets' base_path: an include names a file from the repository's root.
INCLUDE_BASE = [str(_ROOT)]
