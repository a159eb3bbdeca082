"""Publish the modules of snippets/ with the site, so readers can download them.

The Snippets reference page links to ``snippets/<module>.py``; this hook adds
each module to the site's files under that path. The files are copied as they
are in the repository: what a reader downloads is what the tests ran.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent


def on_files(files: Files, /, *, config: MkDocsConfig) -> Files:
    for module in sorted((ROOT / "snippets").glob("*.py")):
        if module.name == "__init__.py":
            continue
        files.append(File.generated(config, f"snippets/{module.name}", abs_src_path=str(module)))
    return files
