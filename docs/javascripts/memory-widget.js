/* Fixed-size memory widget (chapter 9, "A dictionary of fixed size").
 *
 * sitekit/widgets/memory_widget.py prints <div class="memory-widget" data-...> with
 * the two values and the sliders' settings as JSON. This script turns each
 * such element into the widget. Two entries are written into a memory M of
 * shape (2, d_v): first (k_old, v_old) with k_old = [1, 0], then
 * (k_new, v_new) with k_new = [cos a, sin a] for the angle a of the slider.
 * Both keys are read back from two memories:
 *
 *   additive:    M = k_oldᵀ v_old + k_newᵀ v_new
 *   delta rule:  M = 0; for each entry: M = M + β kᵀ (v − k M)
 *   read of k:   k M, and its error ‖k M − v‖ against the value stored under k
 *
 * the same as snippets.linear_memory.linear_attention(K, K, V, causal=False)
 * and K @ delta_rule(K, V, beta) (tests/test_memory_widget_browser.py checks).
 *
 * It is loaded on every page and does nothing where there is no such element.
 * No library: plain DOM, native <input type="range"> (keyboard support comes
 * with them). Data is only ever written with textContent, never as HTML.
 */
(function () {
  "use strict";

  // readData, make, box, announcer, fixed, short, slider, start: docs/javascripts/widgets.js.
  const shared = window.softDictionaryWidgets;
  const readData = shared.readData, make = shared.make, fixed = shared.fixed, short = shared.short;
  const HALF_UNIT = shared.HALF_UNIT;
  const SVG_NS = "http://www.w3.org/2000/svg";
  let widgetCount = 0;

  function vectorText(v, format) {
    return "[" + v.map(format).join(", ") + "]";
  }

  function readModel(element) {
    const model = {
      oldValue: readData(element, "old-value"),
      newValue: readData(element, "new-value"),
      angle: readData(element, "angle"),
      angleStep: readData(element, "angle-step"),
      beta: readData(element, "beta"),
      betas: readData(element, "betas"),
    };
    if (!model.oldValue.length || model.oldValue.length !== model.newValue.length) {
      throw new Error("expected two values of one length, got lengths " +
        model.oldValue.length + " and " + model.newValue.length);
    }
    if (model.betas.indexOf(model.beta) < 0) {
      throw new Error("the beta " + model.beta + " is not one of data-betas");
    }
    return model;
  }

  // k M for a key k (length 2) and a memory M (2 rows of d_v).
  function readKey(M, k) {
    return M[0].map(function (_, j) { return k[0] * M[0][j] + k[1] * M[1][j]; });
  }

  // M + scale · kᵀ row, as a new matrix.
  function addOuter(M, k, row, scale) {
    return M.map(function (mRow, i) {
      return mRow.map(function (m, j) { return m + scale * k[i] * row[j]; });
    });
  }

  function distance(a, b) {
    let sum = 0;
    for (let j = 0; j < a.length; j++) sum += (a[j] - b[j]) * (a[j] - b[j]);
    return Math.sqrt(sum);
  }

  function compute(model, angle, beta) {
    const radians = angle * Math.PI / 180;
    const keys = [[1, 0], [Math.cos(radians), Math.sin(radians)]];
    const values = [model.oldValue, model.newValue];
    const zero = [model.oldValue.map(function () { return 0; }), model.oldValue.map(function () { return 0; })];
    let additive = zero;
    let delta = zero;
    for (let s = 0; s < 2; s++) {
      additive = addOuter(additive, keys[s], values[s], 1);
      const stored = readKey(delta, keys[s]);
      const difference = values[s].map(function (v, j) { return v - stored[j]; });
      delta = addOuter(delta, keys[s], difference, beta);
    }
    function reads(M) {
      return keys.map(function (k, s) {
        const read = readKey(M, k);
        return { read: read, error: distance(read, values[s]) };
      });
    }
    return { keys: keys, overlap: keys[0][0] * keys[1][0] + keys[0][1] * keys[1][1],
      additive: reads(additive), delta: reads(delta) };
  }

  // What the numbers amount to, in the words of the chapter.
  function describe(result, angle, beta) {
    const deltaExact = result.delta.every(function (r) { return r.error < HALF_UNIT; });
    if (Math.abs(result.overlap) < HALF_UNIT) {
      return "The keys are at right angles: the additive memory reads both entries exactly" +
        (deltaExact ? ", and so does the delta rule." : "; the delta rule with \u03b2 < 1 only moves part of the way.");
    }
    if (angle === 0) {
      return "One key written twice: the additive memory reads the sum of the two values" +
        (beta === 1 ? "; the delta rule overwrites and reads the newer value." : ".");
    }
    const newest = beta === 1 ? "; the delta rule reads the new key exactly." : ".";
    if (angle === 180) {
      return "Opposite keys: one is the other times \u22121, so both entries share one direction" + newest;
    }
    return "The keys overlap (k_old \u00b7 k_new = " + fixed(result.overlap) +
      "): the additive memory mixes the two entries in both reads" + newest;
  }

  function svg(tag, attributes) {
    const node = document.createElementNS(SVG_NS, tag);
    Object.keys(attributes).forEach(function (name) { node.setAttribute(name, attributes[name]); });
    return node;
  }

  // The two keys as arrows from one point: decoration, the numbers say it all.
  function drawing() {
    const picture = svg("svg", { viewBox: "-60 -56 120 64", class: "mw-picture", "aria-hidden": "true" });
    picture.append(svg("path", { d: "M -50 0 A 50 50 0 0 1 50 0", class: "mw-arc" }));
    picture.append(svg("line", { x1: -54, y1: 0, x2: 54, y2: 0, class: "mw-axis" }));
    const oldArrow = svg("line", { x1: 0, y1: 0, x2: 46, y2: 0, class: "mw-key mw-key-old" });
    const newArrow = svg("line", { x1: 0, y1: 0, x2: 46, y2: 0, class: "mw-key mw-key-new" });
    const oldHead = svg("circle", { cx: 46, cy: 0, r: 3.2, class: "mw-head mw-key-old" });
    const newHead = svg("circle", { cx: 46, cy: 0, r: 3.2, class: "mw-head mw-key-new" });
    picture.append(oldArrow, newArrow, oldHead, newHead);
    return {
      node: picture,
      update: function (key) {
        const x = 46 * key[0];
        const y = -46 * key[1];
        newArrow.setAttribute("x2", x.toFixed(2));
        newArrow.setAttribute("y2", y.toFixed(2));
        newHead.setAttribute("cx", x.toFixed(2));
        newHead.setAttribute("cy", y.toFixed(2));
      },
    };
  }

  function build(element) {
    const model = readModel(element);
    const id = "mw-" + (++widgetCount);

    const root = shared.box("mw", id, "Two writes, one memory");

    const intro = make("p", "widget-note mw-note",
      "Written first: the old key [1, 0] with the value " + vectorText(model.oldValue, short) +
      ". Then the new key, at the angle below, with the value " + vectorText(model.newValue, short) + ".");

    const angle = shared.slider("mw", id + "-angle", "Angle between the keys", {
      min: "0", max: "180", step: String(model.angleStep), value: String(model.angle),
    });
    const beta = shared.slider("mw", id + "-beta", "\u03b2 of the delta rule", {
      min: "0", max: String(model.betas.length - 1), step: "1",
      value: String(model.betas.indexOf(model.beta)),
    });

    const keysRow = make("div", "mw-keys");
    const picture = drawing();
    const keysText = make("p", "widget-note mw-note mw-keys-text");
    const newKey = make("span", "mw-new-key");
    const overlap = make("span", "mw-overlap");
    const newKeyLine = make("span", "mw-line");
    newKeyLine.append("k_new = ", newKey);
    const overlapLine = make("span", "mw-line");
    overlapLine.append("k_old \u00b7 k_new = ", overlap);
    keysText.append(newKeyLine, overlapLine);
    keysRow.append(picture.node, keysText);

    const table = make("table", "widget-table mw-reads");
    table.append(make("caption", "", "What each key reads back, and how far it is from its value"));
    const head = make("tr");
    ["memory", "read k M", "error"].forEach(function (name, i) {
      const th = make("th", "mw-col-" + i, name);
      th.scope = "col";
      head.append(th);
    });
    table.appendChild(make("thead")).append(head);
    const cells = {};
    [["old", "Old key, stored " + vectorText(model.oldValue, short)],
      ["new", "New key, stored " + vectorText(model.newValue, short)]].forEach(function (group, s) {
      const body = table.appendChild(make("tbody"));
      const groupRow = body.appendChild(make("tr", "mw-group"));
      const groupHead = groupRow.appendChild(make("th", "", group[1]));
      groupHead.colSpan = 3;
      groupHead.scope = "colgroup";
      [["additive", "additive"], ["delta", "delta rule"]].forEach(function (memory) {
        const tr = body.appendChild(make("tr", "mw-" + memory[0] + "-" + group[0]));
        const th = tr.appendChild(make("th", "mw-memory", memory[1]));
        th.scope = "row";
        cells[memory[0] + s] = {
          read: tr.appendChild(make("td", "mw-read")),
          error: tr.appendChild(make("td", "mw-error")),
        };
      });
    });

    const mode = make("p", "mw-mode");
    const live = shared.announcer("mw");

    root.append(intro, angle.row, beta.row, keysRow, table, mode, live.node);

    function update() {
      const a = Number(angle.input.value);
      const b = model.betas[Number(beta.input.value)];
      const result = compute(model, a, b);
      angle.shown.textContent = a + "\u00b0";
      angle.input.setAttribute("aria-valuetext", a + " degrees");
      beta.shown.textContent = short(b);
      beta.input.setAttribute("aria-valuetext", "\u03b2 = " + short(b));
      picture.update(result.keys[1]);
      newKey.textContent = vectorText(result.keys[1], fixed);
      overlap.textContent = fixed(result.overlap);
      ["additive", "delta"].forEach(function (memory) {
        result[memory].forEach(function (r, s) {
          cells[memory + s].read.textContent = vectorText(r.read, fixed);
          cells[memory + s].error.textContent = fixed(r.error);
        });
      });
      mode.textContent = describe(result, a, b);
      live.say("Angle " + a + " degrees, \u03b2 " + short(b) + ". Old key error: additive " +
        fixed(result.additive[0].error) + ", delta rule " + fixed(result.delta[0].error) +
        ". New key error: additive " + fixed(result.additive[1].error) + ", delta rule " +
        fixed(result.delta[1].error) + ".");
    }
    angle.input.addEventListener("input", update);
    beta.input.addEventListener("input", update);

    element.replaceChildren(root);
    update();
    element.setAttribute("data-ready", "true");
  }

  shared.start(".memory-widget", "memory widget", build);
})();
