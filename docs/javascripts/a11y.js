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

  function run() {
    unlandmark(document);
    sizes.disconnect();
    watchScrollers(document);
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
