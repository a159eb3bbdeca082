"""What the tests use besides fixtures, and .ci/'s scripts use too.

- ``build``: ``mkdocs build --strict`` run as the tests run it, the built
  site, and a page's weight on a first visit;
- ``server``: a built site served on 127.0.0.1 as GitHub Pages serves it;
- ``browser``: Debian's Chromium driven by playwright, and why it cannot run;
- ``visits``: one recorded run of Chromium over every page of the site, which
  the browser tests check;
- ``project``: a small copy of the project, with a docs/ of a few pages;
- ``page_measures``: what a phone shows of a page's code and figures,
  measured in the page.
"""
