"""What a phone shows of a page, measured in the browser: code lines and figure text.

Two functions run in the page (playwright's ``evaluate``) after every block
and figure has been drawn (``SHOW_ALL``) and every collapsed box opened
(``OPEN_ALL``): a reader can open them, and a box's code is on the phone too.
tests/test_browser.py checks what they return on every page (support/visits.py
records it); .ci/page_metrics.py reports it.

- ``CODE_LINES``: every non-empty line of every code block, code or printed
  output (markdown-exec's results, a console session's output lines),
  whether the line fits the code box or is *cut* (its end lies beyond the
  box's visible width: the reader must scroll sideways), and whether it fits
  only by *wrapping* onto more than one row (extra.css wraps code on a
  phone). Lines inside a ``.remember`` element (the code a chapter asks the
  reader to remember or to write) are counted apart.
- ``FIGURE_TEXT``: the rendered size, in CSS pixels, of every ``<text>`` of
  every inline SVG figure: its font size times the scale at which the figure
  is drawn (matplotlib's SVG keeps text as text, ``svg.fonttype: none``).
"""

from __future__ import annotations

# extra.css lets the browser skip code blocks and figures far from the screen
# (content-visibility: auto), so they have no layout until they are drawn.
SHOW_ALL = "* { content-visibility: visible !important; }"

OPEN_ALL = "() => { for (const box of document.querySelectorAll('details')) box.open = true; }"

CODE_LINES = r"""() => {
  const blocks = [];
  for (const code of document.querySelectorAll(".md-typeset pre > code")) {
    if (!code.checkVisibility()) continue;  // e.g. an inactive tab
    const box = code.getBoundingClientRect();
    const right = box.left + code.clientLeft + code.clientWidth;  // the visible edge, scrolled to the start
    // Text nodes and where each starts in the code's text.
    const nodes = [];
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let offset = 0;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest("[aria-hidden='true']")) continue;
      nodes.push([node, offset]);
      offset += node.data.length;
    }
    const text = nodes.map(([node]) => node.data).join("");
    const at = (position) => {  // the text node and offset of a position in text
      let i = nodes.length - 1;
      while (i > 0 && nodes[i][1] > position) i--;
      return [nodes[i][0], position - nodes[i][1]];
    };
    // Material's copy button (its .md-code__nav, mounted as the block nears the
    // screen, content.lazy): .25em from the top right of the <pre>, 1.5em
    // square plus .2rem of padding each side. Computed, so that a block not yet
    // mounted is measured too.
    const pre = code.parentElement;
    const em = parseFloat(getComputedStyle(pre).fontSize);
    const rem = parseFloat(getComputedStyle(document.documentElement).fontSize);
    const frame = pre.getBoundingClientRect();
    const side = 1.5 * em + 0.4 * rem;
    const button = { right: frame.right - 0.25 * em, top: frame.top + 0.25 * em };
    button.left = button.right - side;
    button.bottom = button.top + side;
    const result = Boolean(code.closest(".result"));  // markdown-exec's printed output
    const console = Boolean(code.querySelector(".gp"));  // a console session: its output lines
    const lines = [];
    let start = 0;
    for (const line of text.split("\n")) {
      if (line.trim()) {
        // Each run of visible characters on its own: spaces at the end of a
        // wrapped row hang past the box, invisibly, and are no cut text.
        const tops = new Set();
        let reach = -Infinity;
        let under = false;
        for (const run of line.matchAll(/\S+/g)) {
          const range = document.createRange();
          range.setStart(...at(start + run.index));
          range.setEnd(...at(start + run.index + run[0].length));
          for (const rect of range.getClientRects()) {
            if (rect.width === 0) continue;
            tops.add(Math.round(rect.top));
            reach = Math.max(reach, rect.right);
            under ||= rect.right > button.left && rect.left < button.right
              && rect.bottom > button.top && rect.top < button.bottom;
          }
        }
        const output = result || (console && !/^(>>>|\.\.\.)( |$)/.test(line));
        lines.push({ text: line, output, cut: reach > right + 0.5, wrapped: tops.size > 1, under });
      }
      start += line.length + 1;
    }
    blocks.push({ remember: Boolean(code.closest(".remember")), lines });
  }
  return blocks;
}"""

FIGURE_TEXT = """() => {
  const found = [];
  for (const svg of document.querySelectorAll(".mpl-figure svg")) {
    const figure = svg.closest("figure");
    const name = (figure.querySelector("figcaption") || svg).textContent.trim().slice(0, 50);
    for (const text of svg.querySelectorAll("text")) {
      if (!text.textContent.trim()) continue;
      const matrix = text.getScreenCTM();
      const scale = Math.sqrt(matrix.a * matrix.a + matrix.b * matrix.b);
      const px = parseFloat(getComputedStyle(text).fontSize) * scale;
      found.push({ figure: name, text: text.textContent.trim().slice(0, 30), px });
    }
  }
  return found;
}"""


def code_summary(blocks: list[dict]) -> dict:
    """Counts over what ``CODE_LINES`` returned: lines, cut, wrapped (code and output, and code alone),
    under the copy button (with their text); the lines of remembered blocks, and those of them cut or wrapped."""
    lines = [line for block in blocks for line in block["lines"]]
    # what a reader remembers or writes is the code, not what it prints
    remembered = [line for block in blocks if block["remember"] for line in block["lines"] if not line["output"]]
    return {
        "lines": len(lines),
        "cut": sum(line["cut"] for line in lines),
        "wrapped": sum(line["wrapped"] for line in lines),
        "code lines wrapped": sum(line["wrapped"] and not line["output"] for line in lines),
        "under": [line["text"] for line in lines if line.get("under")],
        "remember lines": len(remembered),
        "remember cut": [line["text"] for line in remembered if line["cut"]],
        "remember wrapped": [line["text"] for line in remembered if line["wrapped"]],
    }
