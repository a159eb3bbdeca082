/* The model writer ("Write with the model"): its start button, loaded on every page.
 * Data from sitekit/widgets/model_writer.py (see its docstring). Only when the
 * reader presses the button does the browser fetch the widget itself
 * (model-writer-app.js and stylesheets/model-writer.css) and the model's
 * weights, so a page's first visit carries none of them. The app builds the
 * widget in place of this box (window.softDictionaryModelWriter.build).
 * Checked by tests/test_model_writer_browser.py. Plain DOM, textContent only. */
(function () {
  "use strict";

  const shared = window.softDictionaryWidgets;
  const make = shared.make;
  // Where this script was loaded from: the app and its styles sit beside it.
  const here = document.currentScript ? document.currentScript.src : document.baseURI;
  const APP = new URL("model-writer-app.js", here).href;
  const STYLES = new URL("../stylesheets/model-writer.css", here).href;
  let loading = null;
  let count = 0;

  function load(tag, attributes) {
    return new Promise(function (resolve, reject) {
      const node = document.createElement(tag);
      Object.keys(attributes).forEach(function (name) { node[name] = attributes[name]; });
      node.onload = resolve;
      node.onerror = function () { reject(new Error("could not load " + (attributes.src || attributes.href))); };
      document.head.append(node);
    });
  }

  // The app and its styles, once for every widget of every page the reader visits.
  function loadApp() {
    if (!loading) {
      loading = Promise.all([
        load("link", { rel: "stylesheet", href: STYLES }),
        load("script", { src: APP }),
      ]).catch(function (error) { loading = null; throw error; });
    }
    return loading;
  }

  function build(element) {
    const model = shared.readData(element, "model");
    shared.readData(element, "presets");
    const id = "gw-" + (++count);
    const root = shared.box("gw", id, "Write with the model");
    const nParams = model.arrays.reduce(function (sum, entry) {
      return sum + entry[1].reduce(function (a, b) { return a * b; }, 1);
    }, 0);
    root.append(make("p", "widget-note",
      "The trained model of chapter 14 (" + nParams.toLocaleString("en-US") + " weights, " + model.n_layers +
      " blocks of " + model.n_heads + " heads, " + model.vocab.length + " words) runs here, in your browser. " +
      "Starting it downloads its weights (" + Math.round(model.bytes / 1000) + " kB) from this site; " +
      "nothing you write leaves the page."));
    const button = root.appendChild(make("button", "gw-start md-button md-button--primary", "Start the model"));
    button.type = "button";
    const status = root.appendChild(make("p", "widget-note gw-status"));
    status.setAttribute("role", "status");
    button.addEventListener("click", function () {
      button.disabled = true;
      element.setAttribute("data-model-state", "loading");
      status.textContent = "Loading the model\u2026";
      loadApp()
        .then(function () { return window.softDictionaryModelWriter.build(element, model); })
        .catch(function (error) {
          element.setAttribute("data-model-state", "error");
          status.replaceChildren(make("span", "widget-failure", "The model could not start: " + error.message));
          button.disabled = false;
          button.textContent = "Try again";
          console.error("model writer:", error);
        });
    });
    element.replaceChildren(root);
    element.setAttribute("data-ready", "true");
  }

  shared.start(".model-writer", "model writer", build);
})();
