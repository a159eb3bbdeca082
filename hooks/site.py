"""What only MkDocs (and ProperDocs, which runs its hooks) needs from the site's code, event by event.

Rendering is a Markdown extension (``sitekit.render``) and the finished
site's steps are a function over the built folder (``sitekit.postbuild``), so
that every engine runs them; this file only calls in where an engine must:

- ``on_startup``: whether MkDocs serves. Only then does the page runner keep
  each page's blocks for the next rebuild (``sitekit.run``, told once: a
  single build would find what every page depends on for nothing), and the
  post-build step each page's notebook (its ``serving`` argument). And the
  build date is the last commit's, so that two builds of one commit are
  byte-identical (MkDocs stamps the sitemap with ``SOURCE_DATE_EPOCH``).
- ``on_config``: while serving, an edit to sitekit/ or hooks/ (mkdocs.yml
  watches both) restarts the server, since MkDocs keeps them imported.
- ``on_page_markdown``: which file the page is, for the site's extension
  (``sitekit.render.named``): no engine tells a Markdown extension.
- ``on_files``: the modules of snippets/ join MkDocs's files, so that a
  page's link to ``snippets/lookup.py`` is rewritten as Zensical rewrites it.
- ``on_page_content`` and ``on_post_page``: speed only. Code blocks and
  figures, already out of the search index (``data-search-exclude``), are
  set aside while Material's search plugin parses each page: about a second
  of a cold build.
- ``on_env``: the templates that override Material for MkDocs' own
  (overrides/material/: Material 9.8's search partial with an accessible
  name, and search on demand) come first in the theme's templates. They are
  Material's, not Zensical's, whose header they break, and Zensical reads
  mkdocs.yml's ``custom_dir`` (overrides/, the templates of every engine)
  but runs no hook. And for speed: the theme's compiled templates are kept
  between the rebuilds of ``mkdocs serve`` (0.3 s of a prose edit's rebuild).
- ``on_post_build``: the post-build steps over ``site_dir``, each problem a
  warning, so that ``mkdocs build --strict`` fails on it and ``mkdocs serve``
  shows it.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import jinja2
from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("mkdocs.hooks.site")
_serving = False  # this process is mkdocs serve's (on_startup)


def on_startup(*, command: str, dirty: bool) -> None:  # noqa: ARG001
    from sitekit import run

    global _serving
    _serving = command == "serve"
    if _serving:
        run.RUNNER.keep_outputs()
    if "SOURCE_DATE_EPOCH" not in os.environ:
        last_commit = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, capture_output=True, text=True)
        if last_commit.returncode == 0 and last_commit.stdout.strip():
            os.environ["SOURCE_DATE_EPOCH"] = last_commit.stdout.strip()


_MACHINERY = ("sitekit", "hooks")
_machinery_loaded: dict[str, int] | None = None  # its files as this serving process imported them


def _machinery_files() -> dict[str, int]:
    return {str(path.relative_to(ROOT)): path.stat().st_mtime_ns
            for folder in _MACHINERY for path in sorted((ROOT / folder).rglob("*.py"))}


def on_config(config):
    """While serving: start the server afresh when the site's own code changed.

    MkDocs keeps this hook and the Markdown extension imported between
    rebuilds, so an edit to sitekit/ or hooks/ would be served with the old
    code. The process replaces itself (``os.execv``, the same command line): a
    cold build, and the browser's live reload reconnects to the new server.
    """
    global _machinery_loaded
    if not _serving:
        return config
    now = _machinery_files()
    if _machinery_loaded is None:
        _machinery_loaded = now
    elif now != _machinery_loaded:
        changed = sorted(name for name in now.keys() | _machinery_loaded.keys()
                         if now.get(name) != _machinery_loaded.get(name))
        log.info("%s changed: restarting mkdocs serve to load the new code", ", ".join(changed))
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    return config


def on_files(files, /, *, config):
    from mkdocs.structure.files import File

    for module in sorted((ROOT / "snippets").glob("*.py")):
        if module.name != "__init__.py":
            files.append(File.generated(config, f"snippets/{module.name}", abs_src_path=str(module)))
    return files


@event_priority(-100)  # last: the Markdown as it will be converted
def on_page_markdown(markdown: str, /, *, page, config, files) -> str:  # noqa: ARG001
    from sitekit import render

    path = page.file.abs_src_path  # None for a page a plugin generates: no file to name
    return markdown if path is None else render.named(markdown, path)


_UNSEARCHED = re.compile(r"<pre\b.*?</pre>|<svg\b.*?</svg>", re.DOTALL)
_PLACEHOLDER = re.compile(r"<!--set aside (\d+)-->")
_set_aside: dict[str, list[str]] = {}  # page -> its code blocks and figures, between the two events


@event_priority(-100)  # last: the page's final HTML
def on_page_content(html: str, /, *, page, config, files) -> str:  # noqa: ARG001
    kept = _set_aside[page.file.src_uri] = []

    def set_aside(match: re.Match) -> str:
        kept.append(match.group(0))
        return f"<!--set aside {len(kept) - 1}-->"

    return _UNSEARCHED.sub(set_aside, html)


@event_priority(-100)  # last: into the finished page
def on_post_page(output: str, /, *, page, config) -> str:  # noqa: ARG001
    kept = _set_aside.pop(page.file.src_uri, [])
    return _PLACEHOLDER.sub(lambda match: kept[int(match.group(1))], output)


class _KeptTemplates(jinja2.BytecodeCache):
    """The theme's compiled templates, kept from one build to the next in this process."""

    def __init__(self):
        self.kept: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self.kept:
            bucket.bytecode_from_string(self.kept[bucket.key])

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.kept[bucket.key] = bucket.bytecode_to_string()


_templates = _KeptTemplates()


MATERIAL_OVERRIDES = ROOT / "overrides" / "material"


def on_env(env: jinja2.Environment, /, *, config, files) -> jinja2.Environment:  # noqa: ARG001
    env.loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(MATERIAL_OVERRIDES), env.loader])
    env.bytecode_cache = _templates
    return env


def on_post_build(*, config) -> None:
    from sitekit import postbuild

    for problem in postbuild.run(Path(config["site_dir"]), serving=_serving):
        log.warning("%s", problem)
