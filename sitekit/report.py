"""Build errors: a warning that names the page and the line, and a marker left in the page's HTML.

``mkdocs build --strict`` fails on the warning; the post-build step
(``python -m sitekit.postbuild``) fails on the marker, after any engine,
since Zensical exits 0 on a warning.
"""

from __future__ import annotations

import html
import logging

log = logging.getLogger("mkdocs.sitekit")

# In a page's HTML wherever the build found an error: the post-build step fails on it.
ERROR_MARKER = "sitekit build error:"


def build_error(where: str, message: str) -> str:
    """Log a build error (``--strict`` fails on it); return the HTML comment that marks it in the page."""
    log.warning("%s: %s", where, message)
    return f"<!-- {ERROR_MARKER} {html.escape(where)}: {html.escape(message).replace('--', '- -')} -->"
