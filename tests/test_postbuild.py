"""The post-build step (sitekit/postbuild.py): what every engine's build gets after it, and what fails it.

The whole site's run of the step is tested by every build (tests/test_site.py,
the failure tests, .ci/engines after Zensical); these tests take its parts
one at a time, on small HTML, and the command on a small folder.
"""

from __future__ import annotations

import subprocess
import sys

from sitekit import postbuild
from sitekit.pages import ROOT
from sitekit.report import ERROR_MARKER, build_error

ARTICLE = '<article class="md-content__inner md-typeset">\n<h1 id="t">T</h1>\n</article>'


def test_each_figure_gets_ids_of_its_own_and_its_references_follow():
    figure = '<svg><clipPath id="p1"/><g clip-path="url(#p1)"/><use xlink:href="#p1"/></svg>'
    page = postbuild.unique_svg_ids(f"{figure}<svg><path d=''/></svg>{figure}")
    assert page.count('id="svg1-p1"') == 1 and page.count('id="svg2-p1"') == 1, page
    assert 'url(#svg1-p1)' in page and 'xlink:href="#svg2-p1"' in page, page
    assert postbuild.unique_svg_ids(page) == page  # a second run changes nothing


def test_a_chapter_gets_its_download_button_and_paragraph():
    page = postbuild.with_download_links(ARTICLE, "soft-keys.ipynb", chapter=True)
    assert page.count('href="soft-keys.ipynb" download') == 2, page
    assert page.index("md-content__button") < page.index("<h1") < page.index("notebook-download")
    assert "Download this chapter as a notebook" in page


def test_a_build_error_in_a_page_is_a_problem(tmp_path):
    (tmp_path / "page").mkdir()
    marker = build_error("docs/page.md line 3", "the block raised ValueError: no")
    (tmp_path / "page" / "index.html").write_text(f"<p>x</p>{marker}")
    (tmp_path / "index.html").write_text("<p>home</p>")
    assert ERROR_MARKER in marker
    assert postbuild.build_errors(tmp_path) == [
        "page/index.html holds a build error: docs/page.md line 3: the block raised ValueError: no"
    ]
    assert postbuild.build_errors(tmp_path / "page") == [
        "index.html holds a build error: docs/page.md line 3: the block raised ValueError: no"
    ]


def test_the_command_fails_on_a_site_with_a_problem(tmp_path):
    """What runs after Zensical, whose build exits 0 on an error: the step must not."""
    (tmp_path / "index.html").write_text('<p><a href="nowhere/">a broken link</a></p>')
    result = subprocess.run([sys.executable, "-m", "sitekit.postbuild", str(tmp_path)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "index.html: <a> links to 'nowhere/'" in result.stderr, result.stderr
    empty = subprocess.run([sys.executable, "-m", "sitekit.postbuild", str(tmp_path / "none")], cwd=ROOT,
                           capture_output=True, text=True)
    assert empty.returncode == 2 and "holds no built site" in empty.stderr
