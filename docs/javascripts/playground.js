/* Soft-lookup playground (chapter 3, "Soft keys").
 *
 * sitekit/widgets/playground.py prints <div class="soft-lookup-playground" data-...>
 * with the dictionary (keys, key vectors, values), the starting query mix and
 * temperature, and the sliders' settings, all as JSON. This script turns each
 * such element into the widget: one slider per key sets how much of that key
 * the query contains, a log-scale slider sets the temperature, and the
 * attention weights (bars) and the returned value follow live:
 *
 *   q       = sum_i mix_i k_i                  (the query vector, shape (d_k,))
 *   scores  = K q                              (one score per key)
 *   weights = softmax(scores / temperature)    (largest score subtracted first)
 *   output  = sum_i weights_i v_i
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
  // A weight within this of 1 (or of 1/S) shows as 1.000 (or as 1/S).
  const HALF_UNIT = shared.HALF_UNIT;
  let widgetCount = 0;

  function softmax(scores, temperature) {
    const top = Math.max.apply(null, scores);
    const exps = scores.map(function (score) {
      return Math.exp((score - top) / temperature);
    });
    const total = exps.reduce(function (a, b) { return a + b; }, 0);
    return exps.map(function (e) { return e / total; });
  }

  function dot(a, b) {
    let sum = 0;
    for (let i = 0; i < a.length; i++) {
      sum += a[i] * b[i];
    }
    return sum;
  }

  function vectorText(v, format) {
    return Array.isArray(v) ? "[" + v.map(format).join(", ") + "]" : format(v);
  }

  function temperatureText(t) {
    return String(Number(t.toPrecision(3)));
  }

  function readModel(element) {
    const model = {
      keys: readData(element, "keys"),
      keyVectors: readData(element, "key-vectors"),
      values: readData(element, "values"),
      mix: readData(element, "query"),
      temperature: readData(element, "temperature"),
      temperatures: readData(element, "temperatures"),
      mixStep: readData(element, "mix-step"),
    };
    const S = model.keys.length;
    if (S === 0 || model.keyVectors.length !== S || model.values.length !== S || model.mix.length !== S) {
      throw new Error(
        "expected one key vector, one value and one query amount per key (" + S + " keys), got " +
        model.keyVectors.length + ", " + model.values.length + " and " + model.mix.length
      );
    }
    if (model.temperatures.indexOf(model.temperature) < 0) {
      throw new Error("the temperature " + model.temperature + " is not one of data-temperatures");
    }
    return model;
  }

  function compute(model, mix, temperature) {
    const dK = model.keyVectors[0].length;
    const query = [];
    for (let j = 0; j < dK; j++) {
      query.push(model.keyVectors.reduce(function (sum, k, i) { return sum + mix[i] * k[j]; }, 0));
    }
    const scores = model.keyVectors.map(function (k) { return dot(k, query); });
    const weights = softmax(scores, temperature);
    const vectorValues = Array.isArray(model.values[0]);
    let output;
    if (vectorValues) {
      output = model.values[0].map(function (_, j) {
        return model.values.reduce(function (sum, v, i) { return sum + weights[i] * v[j]; }, 0);
      });
    } else {
      output = model.values.reduce(function (sum, v, i) { return sum + weights[i] * v; }, 0);
    }
    return { query: query, scores: scores, weights: weights, output: output };
  }

  // What the weights amount to, in the words of chapters 1 and 3.
  function describe(model, weights) {
    const S = weights.length;
    let best = 0;
    for (let i = 1; i < S; i++) {
      if (weights[i] > weights[best]) best = i;
    }
    if (weights[best] >= 1 - HALF_UNIT) {
      return "All the weight is on \u201c" + model.keys[best] + "\u201d: the exact dictionary lookup, " +
        "d[\u201c" + model.keys[best] + "\u201d] = " + vectorText(model.values[best], short) + ".";
    }
    if (weights.every(function (w) { return Math.abs(w - 1 / S) < HALF_UNIT; })) {
      return "Equal weights: the average of the values.";
    }
    // Keys whose weights show the same rounded number as the largest tie for it: name them all.
    const tied = model.keys.filter(function (_, i) { return fixed(weights[i]) === fixed(weights[best]); })
      .map(function (key) { return "\u201c" + key + "\u201d"; });
    if (tied.length > 1) {
      const names = tied.slice(0, -1).join(", ") + " and " + tied[tied.length - 1];
      return "A blend: " + names + " tie for the most weight (" + fixed(weights[best]) + " each).";
    }
    return "A blend: most weight on " + tied[0] + " (" + fixed(weights[best]) + ").";
  }

  function build(element) {
    const model = readModel(element);
    const id = "slp-" + (++widgetCount);

    const root = shared.box("slp", id, "Soft-lookup playground");

    const queryBox = make("fieldset", "slp-query");
    queryBox.append(make("legend", "", "Query: how much of each key it contains"));
    const mixSliders = model.keys.map(function (key, i) {
      const s = shared.slider("slp", id + "-mix-" + i, key, {
        min: "0", max: "1", step: String(model.mixStep), value: String(model.mix[i]),
      });
      queryBox.append(s.row);
      return s;
    });
    const queryVector = make("p", "widget-note slp-note");
    queryBox.append(queryVector);

    const temperature = shared.slider("slp", id + "-temperature", "Temperature", {
      min: "0", max: String(model.temperatures.length - 1), step: "1",
      value: String(model.temperatures.indexOf(model.temperature)),
    });
    temperature.row.classList.add("slp-temperature");
    const temperatureHint = make("p", "widget-note slp-note",
      "Low: all weight on the best-matching key. High: equal weights, the average.");
    temperatureHint.id = id + "-temperature-hint";
    temperature.input.setAttribute("aria-describedby", temperatureHint.id);

    const table = make("table", "widget-table slp-weights");
    table.append(make("caption", "", "Attention weights: softmax(scores / temperature)"));
    const head = make("tr");
    ["key", "value", "score", "weight"].forEach(function (name) {
      const th = make("th", "slp-col-" + name, name);
      th.scope = "col";
      head.append(th);
    });
    table.appendChild(make("thead")).append(head);
    const body = table.appendChild(make("tbody"));
    const rows = model.keys.map(function (key, i) {
      const tr = body.appendChild(make("tr"));
      const th = tr.appendChild(make("th", "slp-key", key));
      th.scope = "row";
      tr.append(make("td", "slp-value-cell", vectorText(model.values[i], short)));
      const score = tr.appendChild(make("td", "slp-score"));
      const cell = tr.appendChild(make("td", "slp-weight-cell"));
      const track = cell.appendChild(make("span", "slp-bar"));
      track.setAttribute("aria-hidden", "true");
      const bar = track.appendChild(make("span", "slp-bar-fill"));
      const weight = cell.appendChild(make("span", "slp-weight"));
      return { tr: tr, score: score, bar: bar, weight: weight };
    });

    const result = make("p", "slp-result");
    result.append("Returned value \u03a3 w\u1d62 v\u1d62 = ");
    // Not an <output>: that is a live region, and would speak at every slider step.
    const output = result.appendChild(make("span", "slp-output"));
    const mode = make("p", "slp-mode");
    const live = shared.announcer("slp");

    root.append(queryBox, temperature.row, temperatureHint, table, result, mode, live.node);

    function update() {
      const mix = mixSliders.map(function (s) { return Number(s.input.value); });
      const t = model.temperatures[Number(temperature.input.value)];
      const r = compute(model, mix, t);
      mixSliders.forEach(function (s, i) { s.shown.textContent = mix[i].toFixed(2); });
      queryVector.textContent = "Query vector q = \u03a3 amount \u00d7 key vector = " + vectorText(r.query, fixed);
      temperature.shown.textContent = "τ = " + temperatureText(t);
      temperature.input.setAttribute("aria-valuetext", temperatureText(t));
      rows.forEach(function (row, i) {
        row.score.textContent = fixed(r.scores[i]);
        row.weight.textContent = fixed(r.weights[i]);
        row.bar.style.width = (100 * r.weights[i]).toFixed(1) + "%";
      });
      const outputText = vectorText(r.output, fixed);
      output.textContent = outputText;
      const sentence = describe(model, r.weights);
      mode.textContent = sentence;
      live.say("Returned value " + outputText + ". " + sentence);
    }

    root.addEventListener("input", update);
    element.replaceChildren(root);
    element.setAttribute("data-ready", "true");
    update();
  }

  shared.start(".soft-lookup-playground", "soft-lookup playground", build);
})();
