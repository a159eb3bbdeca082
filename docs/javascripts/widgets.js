/* What the site's widgets share (playground.js, chapter 3; memory-widget.js,
 * chapter 9; ...): reading the JSON a module of sitekit/widgets/ printed into
 * the element's data- attributes, making the widget's box, elements and
 * sliders, writing numbers, and starting every widget of a page, again after
 * each of Material's instant navigations. Loaded on every page (mkdocs.yml),
 * as window.softDictionaryWidgets. A widget's own script is not: its element
 * names it (data-widget-script, the module's SCRIPT), and this file loads it
 * on the pages that show the widget, so that a page pays only for its own
 * widgets on a first visit. No library: plain DOM.
 * Shared parts get the widget- classes that docs/stylesheets/widgets.css
 * styles, and the widget's own prefix ("slp", "mw") for its own rules.
 */
(function () {
  "use strict";

  const DECIMALS = 3;
  // The site's root, from where this script was loaded (javascripts/widgets.js).
  const ROOT = new URL("..", document.currentScript ? document.currentScript.src : document.baseURI);
  const requested = new Set();
  // Screen readers hear a widget's summary once the reader pauses.
  const ANNOUNCE_DELAY_MS = 400;

  function readData(element, name) {
    const raw = element.getAttribute("data-" + name);
    if (raw === null) {
      throw new Error("the element has no data-" + name + " attribute");
    }
    return JSON.parse(raw);
  }

  function make(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // Rounded to DECIMALS, without the "-0.000" that toFixed gives tiny negatives.
  function fixed(x) {
    const text = x.toFixed(DECIMALS);
    return /^-0\.0*$/.test(text) ? text.slice(1) : text;
  }

  // A value as given (at most DECIMALS decimals, no trailing zeros).
  function short(x) {
    return String(Number(x.toFixed(DECIMALS)));
  }

  // The widget's box: a group named by its title.
  function box(prefix, id, titleText) {
    const root = make("div", "widget " + prefix);
    root.setAttribute("role", "group");
    root.setAttribute("aria-labelledby", id + "-title");
    const title = root.appendChild(make("p", "widget-title " + prefix + "-title", titleText));
    title.id = id + "-title";
    return root;
  }

  // A live region that screen readers read once the reader pauses, so that
  // dragging a slider does not queue an announcement per step.
  function announcer(prefix) {
    const node = make("p", prefix + "-live widget-visually-hidden");
    node.setAttribute("aria-live", "polite");
    node.setAttribute("aria-atomic", "true");
    let timer = null;
    function say(text) {
      clearTimeout(timer);
      timer = setTimeout(function () { node.textContent = text; }, ANNOUNCE_DELAY_MS);
    }
    return { node: node, say: say };
  }

  // A native range input with its label and a visual copy of its value.
  function slider(prefix, id, labelText, attributes) {
    const row = make("div", "widget-row " + prefix + "-row");
    const label = make("label", "widget-label " + prefix + "-label", labelText);
    label.htmlFor = id;
    const input = make("input", "widget-slider " + prefix + "-slider");
    input.type = "range";
    input.id = id;
    Object.keys(attributes).forEach(function (name) { input.setAttribute(name, attributes[name]); });
    // Screen readers hear the slider itself, not this copy.
    const shown = make("span", "widget-reading " + prefix + "-reading");
    shown.setAttribute("aria-hidden", "true");
    row.append(label, input, shown);
    return { row: row, input: input, shown: shown };
  }

  // Words a reader points at (the attention viewer's and the model writer's):
  // a note on how, the group of word buttons, and a live summary of the
  // pointed-at word. classes: { help, words, summary } added to the shared ones.
  function wordStrip(root, helpText, groupLabel, classes) {
    root.append(make("p", "widget-note " + classes.help, helpText));
    const words = root.appendChild(make("div", ("av-words " + classes.words).trim()));
    words.setAttribute("role", "group");
    words.setAttribute("aria-label", groupLabel);
    const summary = root.appendChild(make("p", ("av-summary " + classes.summary).trim()));
    summary.setAttribute("aria-live", "polite");
    return { words: words, summary: summary };
  }

  // Build every element matching selector that is not built yet; one that
  // fails says so in the page (data-ready="error") and in the console.
  function start(selector, name, build) {
    function buildAll() {
      document.querySelectorAll(selector + ":not([data-ready])").forEach(function (element) {
        try {
          build(element);
        } catch (error) {
          element.setAttribute("data-ready", "error");
          element.append(make("p", "widget-failure", "The " + name + " could not start: " + error.message));
          console.error(name + ":", error);
        }
      });
    }
    // Material's instant navigation swaps page content without reloading
    // scripts and announces each new page on document$; without it, run
    // once. Built widgets are skipped, so running again is harmless.
    whenPageReady(buildAll);
    // A widget's script loads after the page (loadScripts): build what is there now too.
    if (document.readyState !== "loading") buildAll();
  }

  function whenPageReady(run) {
    if (window.document$ && typeof window.document$.subscribe === "function") {
      window.document$.subscribe(run);
    } else if (document.readyState === "loading") {
      document.addEventListener("DOMContentLoaded", run);
    } else {
      run();
    }
  }

  // Load the script of every widget of the page, once per script (after each
  // instant navigation too); the script then builds its widgets (start).
  function loadScripts() {
    document.querySelectorAll("[data-widget-script]:not([data-ready])").forEach(function (element) {
      let src;
      try {
        src = new URL(readData(element, "widget-script"), ROOT).href;
      } catch (error) {
        element.setAttribute("data-ready", "error");
        element.append(make("p", "widget-failure", "The widget could not start: " + error.message));
        return;
      }
      if (requested.has(src)) return;
      requested.add(src);
      const script = document.createElement("script");
      script.src = src;
      script.onerror = function () {
        requested.delete(src);
        element.setAttribute("data-ready", "error");
        element.append(make("p", "widget-failure", "The widget could not start: its script did not load."));
      };
      document.head.append(script);
    });
  }

  window.softDictionaryWidgets = {
    DECIMALS: DECIMALS,
    HALF_UNIT: 0.5 * Math.pow(10, -DECIMALS),
    readData: readData,
    make: make,
    box: box,
    announcer: announcer,
    fixed: fixed,
    short: short,
    slider: slider,
    wordStrip: wordStrip,
    start: start,
  };
  whenPageReady(loadScripts);
})();
