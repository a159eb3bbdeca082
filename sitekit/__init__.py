"""What builds the site, beside the library it teaches (``snippets/``).

- ``pages``: the page model. What a page of ``docs/`` is: its fences and
  their markdown-exec options, its ``--8<--`` includes, the modules its code
  imports, the chapters of the nav and the pages' addresses. The hooks, the
  serve cache, the notebook writer, pytest (``conftest.py``), the tests and
  the ``.ci/`` scripts all read pages through it.
- ``console``: console sessions (``pycon`` fences) run as a REPL and checked
  as doctests, the same way at build time and under pytest.
- ``notebooks``: every chapter as a Jupyter notebook, made from its page.
- ``markdown_exec_internals``: the few private parts of markdown-exec the
  build relies on, in one place, checked against the pinned version.
- ``figures``: how every figure is drawn, and the figures' palette.
- ``widgets``: the interactive widgets' data, one module per widget.

A chapter's notebook ships the modules of this package its code imports
(``figures``, a widget), so they import nothing from the rest of it.
"""
