#@title Set-up: run this cell first (NumPy 2.0 or newer, this chapter's modules) { display-mode: "form" }
# Set-up, written when the site was built. Run it first.
# 0. This notebook needs NumPy 2.0 or newer: under an older one, this cell
#    stops with a message that says what to do.
# 1. %%printed_as html|markdown: run a cell and show what it prints as HTML or
#    Markdown, as the page does (its figures are printed <figure> elements).
#    %%printed_as widget <address>: an interactive widget needs the site's
#    JavaScript, so the cell runs and shows a link to the page instead.
# 2. The modules of the site (snippets/, sitekit/, tools/) this notebook imports,
#    written to a folder of their own next to the notebook, named for this
#    version of the code (a hash of the files), and imported from there. A
#    snippets/ folder of yours is never read or changed; a copy in this folder
#    that was edited stops the cell with an error that names it.
#    Every line of a file is written after a "|": IPython would strip the
#    ">>>" of the docstrings' examples, even inside a string.


def _require_numpy():
    """Stop here, saying what to do, without NumPy 2.0 or newer (the site's code uses ndarray.mT, new in 2.0)."""
    try:
        import numpy
    except ImportError:
        found, recent = "no NumPy", False
    else:
        found, recent = f"NumPy {numpy.__version__}", int(numpy.__version__.split(".")[0]) >= 2
    if not recent:
        raise RuntimeError(
            f"This notebook needs NumPy 2.0 or newer, and this kernel has {found}. Install a newer one "
            '(%pip install --upgrade "numpy>=2" in a cell, or conda install "numpy>=2"), '
            "restart the kernel and run this cell again."
        )


def _define_printed_as():
    from IPython.core.magic import register_cell_magic

    @register_cell_magic
    def printed_as(line, cell):
        """Run the cell; display what it printed as HTML or Markdown."""
        import contextlib
        import io
        import re

        from IPython.display import HTML, Markdown, display

        kind, _, page = line.strip().partition(" ")
        shell = get_ipython()
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                exec(compile(cell, shell.compile.cache(cell), "exec"), shell.user_ns)
        finally:
            text = printed.getvalue()
            if kind == "widget":
                display(Markdown(f"*Here the page shows an interactive widget: try it on [the page]({page}).*"))
            elif text and kind == "markdown":
                display(Markdown(re.sub(r"\\\((.+?)\\\)", r"$\1$", text, flags=re.DOTALL)))
            elif text:
                display(HTML(text))


def _use_snippets(prefix, files):
    import hashlib
    import importlib
    import os
    import sys
    from pathlib import Path

    if not files:
        return
    # Each line of a file is written after a "|" (see the note above).
    files = {name: "\n".join(line[1:] for line in text.split("\n")[1:]) for name, text in files.items()}
    version = hashlib.sha256()
    for name, text in sorted(files.items()):
        version.update(name.encode() + b"\0" + text.encode() + b"\0")
    folder = Path(f"{prefix}-{version.hexdigest()[:12]}").resolve()
    for name, text in files.items():
        path = folder / name
        if path.exists():
            if path.read_text(encoding="utf-8") != text:
                raise RuntimeError(
                    f"{path} differs from the copy this notebook was built with (was it edited?). "
                    f"Keep your changes elsewhere, delete the folder {folder}, and run this cell again."
                )
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)  # whole or not at all, for a notebook running beside this one
    # This folder first on the path, and no module of its packages imported from elsewhere.
    packages = {name.split("/")[0] for name in files}
    loaded = [name for name in sys.modules if name.split(".")[0] in packages]
    foreign = [name for name in loaded if not Path(getattr(sys.modules[name], "__file__", None) or "/")
               .resolve().is_relative_to(folder)]
    if foreign:
        print(f"Unloaded {', '.join(sorted(foreign))}, imported before this cell: "
              f"this notebook uses its own copy, in {folder}.")
        for name in foreign:
            del sys.modules[name]
    if str(folder) in sys.path:
        sys.path.remove(str(folder))
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
