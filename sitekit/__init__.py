"""The site's own code, beside the library it teaches (snippets/).

What builds the site (the page model, console sessions, the chapter
notebooks) and what its pages use besides the library (the figures and their
palette, the interactive widgets); README.md's layout names each module. A
chapter's notebook ships the modules of this package its code imports (the
figures, a widget), and those import nothing else of it.
"""
