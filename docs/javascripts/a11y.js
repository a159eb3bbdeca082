/* Accessibility repairs of what Material's JavaScript builds at run time
   (axe-core and Lighthouse run on the live page; .ci/validate.py checks both).

   1. Material 9.8 puts each code block's buttons (copy, line selection) in a
      <nav class="md-code__nav">: a navigation landmark per code block, all
      with the same (empty) name, so a screen reader's list of landmarks fills
      with dozens of identical "navigation" entries (axe: landmark-unique).
      The buttons do not navigate; the element keeps its place and style but
      is no landmark (role="none", which HTML allows on <nav>).
   2. A region that scrolls sideways must be reachable by keyboard, or a reader
      without a mouse cannot see its end (axe: scrollable-region-focusable).
      Material does this for its code blocks; here the same is done for the
      other things that can scroll on a narrow screen: Material's wrapper of
      wide tables, and display math (a fallback: formulas are written to fit
      390 px). They take part in the tab order only while they actually
      scroll (checked again whenever their width changes). Notebook outputs
      scroll in a box that is focusable already (docs/stylesheets/extra.css).

   3. The same for code blocks that Material has not mounted yet (below).
   4. Code blocks off screen get a placeholder height equal to their real one
      (below), so nothing moves as the reader scrolls.

   Material swaps the page's content on instant navigation, so the work is
   done on every document$ emission; a MutationObserver catches the code
   navs, which Material builds when it mounts each code block. */
(function () {
  "use strict";

  var SCROLLERS = [
    ".md-typeset__scrollwrap",
    'math[display="block"]',
  ].join(",");

  function unlandmark(root) {
    var navs = root.querySelectorAll("nav.md-code__nav:not([role])");
    for (var i = 0; i < navs.length; i++) navs[i].setAttribute("role", "none");
  }

  // A ResizeObserver reports each region after the browser has laid it out
  // for painting (on load, and again whenever its width changes), so reading
  // its widths there costs no extra layout of the page while it loads
  // (Lighthouse's total blocking time).
  function update(node) {
    var scrolls = node.scrollWidth > node.clientWidth + 1;
    if (scrolls && !node.hasAttribute("tabindex")) {
      node.setAttribute("tabindex", "0");
      node.setAttribute("data-a11y-scroll", "");
    } else if (!scrolls && node.hasAttribute("data-a11y-scroll")) {
      node.removeAttribute("tabindex");
      node.removeAttribute("data-a11y-scroll");
    }
  }

  var sizes = new ResizeObserver(function (entries) {
    for (var i = 0; i < entries.length; i++) {
      var scroller = entries[i].target.closest(SCROLLERS);
      if (scroller) update(scroller);
    }
  });

  // The region itself, and the table in Material's wrapper (whose width
  // changes without the wrapper's, e.g. when a font arrives).
  function watchScrollers(root) {
    var nodes = root.querySelectorAll(SCROLLERS);
    for (var i = 0; i < nodes.length; i++) {
      sizes.observe(nodes[i]);
      if (nodes[i].firstElementChild && nodes[i].tagName !== "math") sizes.observe(nodes[i].firstElementChild);
    }
  }

  new MutationObserver(function (records) {
    for (var i = 0; i < records.length; i++) {
      var added = records[i].addedNodes;
      for (var j = 0; j < added.length; j++) {
        var node = added[j];
        if (node.nodeType !== 1) continue;
        if (node.matches("nav.md-code__nav")) node.setAttribute("role", "none");
        else unlandmark(node);
      }
    }
  }).observe(document.body, { childList: true, subtree: true });

  // 3. Code blocks that scroll: Material makes one focusable when it mounts
  //    it, and with its "content.lazy" feature it mounts a block only when
  //    the block comes into view, so a keyboard reader could tab past a wide
  //    block below. Code does not wrap (on a phone it does, and never
  //    scrolls: see PHONE below) and its font is monospaced: a block
  //    is wide when its longest line, at the widest advance of the usual
  //    monospaced fonts (0.6 em; 0.62 to be safe), does not fit the column. That needs
  //    one width, the column's, and no layout of the blocks themselves
  //    (which content-visibility skips while they are off screen). A block
  //    that only just fits may be made focusable too: harmless.
  var CODE = ".md-typeset pre > code";
  var NESTING = ".admonition, details, .tabbed-block";

  // The size of a block's code, read from the block's wrapper. The code of a
  // block that content-visibility skips has no computed style, and asking
  // for it makes the browser style the whole block first (10 ms a block on
  // the Snippets page, in Lighthouse's blocking time); the wrapper is styled
  // already. Material sizes code in em, so the code's size is a fixed ratio
  // of its wrapper's, measured once. Line heights are unitless: a ratio too.
  var sizeRatio = 0;
  var lineRatio = 0;
  function codeEm(code) {
    var outer = parseFloat(getComputedStyle(code.parentElement.parentElement).fontSize);
    if (!sizeRatio) {
      var style = getComputedStyle(code);
      sizeRatio = parseFloat(style.fontSize) / outer || 0.85;
      lineRatio = parseFloat(style.lineHeight) / parseFloat(style.fontSize) || 1.4;
    }
    return outer * sizeRatio;
  }

  // Below Material's phone width code wraps instead of scrolling (extra.css,
  // "Code on a phone"): no block scrolls, and a block is as tall as its
  // wrapped rows.
  var PHONE = "screen and (max-width: 44.984375em)";

  function focusWideCode() {
    // Everything is read before anything is written: a write between two
    // reads makes the browser style and lay out the page again for the
    // second read.
    var wraps = !!(window.matchMedia && window.matchMedia(PHONE).matches);
    var column = document.querySelector(".md-content__inner");
    var width = column ? column.clientWidth : 0;
    var rem = parseFloat(getComputedStyle(document.documentElement).fontSize);
    var all = document.querySelectorAll("div.highlight:not([data-a11y-height]) > pre > code");
    var heights = [];
    for (var a = 0; a < all.length; a++) {
      var em = codeEm(all[a]);
      var columns = wraps && width ? Math.max(10, Math.floor((width - 2.4 * em) / (0.6 * em))) : Infinity;
      heights.push([all[a], rows(all[a].textContent.split("\n"), columns), em]);
    }
    var blocks = document.querySelectorAll(CODE + ":not([tabindex])," + CODE + "[data-a11y-scroll]");
    var changes = [];
    if (column && blocks.length) {
      for (var i = 0; i < blocks.length; i++) {
        var lines = blocks[i].textContent.split("\n");
        var longest = 0;
        for (var j = 0; j < lines.length; j++) longest = Math.max(longest, lines[j].length);
        var depth = 0;
        for (var box = blocks[i].parentElement.closest(NESTING); box; box = box.parentElement.closest(NESTING)) depth++;
        var size = codeEm(blocks[i]);
        var room = width - depth * 1.6 * rem - 2.4 * size; // less nested boxes' and the code's padding
        changes.push([blocks[i], !wraps && longest * 0.62 * size > room]);
      }
    }
    for (var h = 0; h < heights.length; h++) placeholder(heights[h][0], heights[h][1], heights[h][2]);
    for (var k = 0; k < changes.length; k++) {
      var node = changes[k][0];
      if (changes[k][1] && !node.hasAttribute("tabindex")) {
        node.setAttribute("tabindex", "0");
        node.setAttribute("data-a11y-scroll", "");
      } else if (!changes[k][1] && node.hasAttribute("data-a11y-scroll")) {
        node.removeAttribute("tabindex");
        node.removeAttribute("data-a11y-scroll");
      }
    }
  }

  // How many rows lines of code take in a column of the given number of
  // characters (Infinity: they do not wrap).
  function rows(lines, columns) {
    if (columns === Infinity) return lines.length;
    var count = 0;
    for (var i = 0; i < lines.length; i++) count += Math.max(1, Math.ceil(lines[i].length / columns));
    return count;
  }

  // 4. extra.css skips the layout of code blocks off screen and gives each a
  //    placeholder height of 12em until it is first shown; a long block
  //    then grows by hundreds of pixels as the reader (or a checker) nears
  //    it, and what was below it moves. Its real height is known without
  //    layout (rows times line height: its lines, or on a phone the rows
  //    they wrap into, from the column's width in characters): the placeholder
  //    gets it, so the scrollbar and positions are right from the start
  //    (and axe's colour-contrast check in Lighthouse, which scrolls to each
  //    element, no longer reads the colour of a block that slid under it).
  function placeholder(code, lines, em) {  // lines: rows, wrapped ones counted
    var block = code.closest("div.highlight");
    if (!block || block.hasAttribute("data-a11y-height")) return;
    block.setAttribute("data-a11y-height", "");
    var height = Math.max(1, lines - 1) * lineRatio * em + 1.6 * em;
    block.style.containIntrinsicBlockSize = "auto " + Math.round(height) + "px";
  }

  // When the browser is idle, after it has drawn the page: the sizes read
  // are then known already (no layout is forced while the page loads), and
  // the work is no part of what a reader waits for.
  var later = window.requestIdleCallback
    ? function (task) { requestIdleCallback(task, { timeout: 500 }); }
    : function (task) { setTimeout(task, 50); };
  var pending = false;
  function soon() {
    if (pending) return;
    pending = true;
    later(function () {
      pending = false;
      focusWideCode();
      // For checkers (.ci/validate.py): the code blocks have their tab stops.
      document.documentElement.setAttribute("data-a11y-code", "done");
    });
  }
  window.addEventListener("resize", soon);

  function run() {
    unlandmark(document);
    sizes.disconnect();
    watchScrollers(document);
    soon();
  }

  if (typeof document$ !== "undefined") document$.subscribe(run);
  else run();
  // Formulas change width when the math font arrives, their boxes do not.
  if (document.fonts) {
    document.fonts.ready.then(function () {
      requestAnimationFrame(function () {
        var nodes = document.querySelectorAll(SCROLLERS);
        for (var i = 0; i < nodes.length; i++) update(nodes[i]);
      });
    });
  }
})();
