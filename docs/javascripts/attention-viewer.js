/* Attention viewer of chapter 14: where each head of the trained model looks.
 * Data from sitekit/widgets/attention_viewer.py (see its docstring); checked by
 * tests/test_attention_viewer_browser.py. Plain DOM, textContent only. */
(function () {
  "use strict";

  // readData, make, start: docs/javascripts/widgets.js.
  const shared = window.softDictionaryWidgets;
  const readData = shared.readData, make = shared.make;
  // The weights come rounded to two places (sitekit/widgets/attention_viewer.py, DECIMALS).
  function fixed(x) {
    return x.toFixed(2);
  }
  // What a screen reader says for a punctuation token, which it would skip or read as nothing.
  const SPOKEN = { ".": "full stop", ",": "comma", ":": "colon", ";": "semicolon", "?": "question mark",
    "!": "exclamation mark" };
  function spoken(token) {
    return SPOKEN[token] || token;
  }
  let viewerCount = 0;

  function readModel(element) {
    const model = {
      sentences: readData(element, "sentences"),
      weights: readData(element, "weights"),
      layer: readData(element, "layer"),
      head: readData(element, "head"),
      query: readData(element, "query"),
    };
    if (!model.sentences.length || model.sentences.length !== model.weights.length) {
      throw new Error("expected one weight table per sentence, got " + model.sentences.length +
        " sentences and " + model.weights.length + " tables");
    }
    model.sentences.forEach(function (tokens, i) {
      const rows = model.weights[i][0][0];
      if (rows.length !== tokens.length) {
        throw new Error("sentence " + i + " has " + tokens.length + " tokens and " + rows.length + " rows of weights");
      }
    });
    return model;
  }

  function select(prefix, id, labelText, options, value) {
    const wrapper = make("div", prefix + "-control");
    const label = make("label", prefix + "-label", labelText);
    label.htmlFor = id;
    const input = make("select", prefix + "-select");
    input.id = id;
    options.forEach(function (text, i) {
      const option = make("option", "", text);
      option.value = String(i);
      input.append(option);
    });
    input.value = String(value);
    wrapper.append(label, input);
    return { wrapper: wrapper, input: input };
  }

  function preview(tokens) {
    const words = tokens.slice(0, 5).join(" ");
    return tokens.length > 5 ? words + " \u2026" : words;
  }

  function range(n) {
    return Array.from({ length: n }, function (_, i) { return i; });
  }

  function build(element) {
    const model = readModel(element);
    const id = "av-" + (++viewerCount);
    const nLayers = model.weights[0].length;
    const nHeads = model.weights[0][0].length;

    const root = shared.box("av", id, "Where each head looks");

    const controls = root.appendChild(make("div", "av-controls"));
    const sentence = select("av", id + "-sentence", "Sentence",
      model.sentences.map(function (tokens, i) { return (i + 1) + ". " + preview(tokens); }), 0);
    const layer = select("av", id + "-layer", "Layer", range(nLayers).map(String), model.layer);
    const head = select("av", id + "-head", "Head", range(nHeads).map(String), model.head);
    sentence.wrapper.classList.add("av-control-sentence");
    controls.append(sentence.wrapper, layer.wrapper, head.wrapper);

    const strip = shared.wordStrip(root,
      "Press a word, or Tab to the words and use the arrow keys: the bars show how much " +
      "weight the chosen head puts on each word it can see from there.",
      "Words of the sentence; the pressed one is the query",
      { help: "av-help", words: "", summary: "" });
    const words = strip.words, summary = strip.summary;

    let buttons = [];
    let query = 0;

    function tokens() { return model.sentences[Number(sentence.input.value)]; }

    function rows() {
      return model.weights[Number(sentence.input.value)][Number(layer.input.value)][Number(head.input.value)];
    }

    function show(t) {
      query = t;
      const row = rows()[t];
      const tokenList = tokens();
      let best = 0;
      buttons.forEach(function (button, s) {
        const seen = s <= t;
        const weight = seen ? row[s] : 0;
        if (seen && weight > row[best]) best = s;
        button.classList.toggle("av-future", !seen);
        button.setAttribute("aria-pressed", s === t ? "true" : "false");
        button.tabIndex = s === t ? 0 : -1;
        button.style.setProperty("--av-weight", String(weight));
        button.querySelector(".av-weight").textContent = seen ? fixed(weight) : "\u2013";
        // The name begins with what the button shows (the word, then its weight), as a
        // voice command names it: "the 0.12, word 3"; a mark is said by its name.
        button.setAttribute("aria-label", spoken(tokenList[s]) + (seen ? " " + fixed(weight) : "") +
          ", word " + (s + 1) + (seen ? "" : ", after the pressed word, no weight"));
      });
      summary.textContent = "\u201c" + tokenList[t] + "\u201d (word " + (t + 1) + " of " + tokenList.length +
        ") looks most at \u201c" + tokenList[best] + "\u201d (word " + (best + 1) + "), weight " +
        fixed(row[best]) + ", in layer " + layer.input.value + ", head " + head.input.value + ".";
    }

    function drawSentence(start) {
      const tokenList = tokens();
      buttons = tokenList.map(function (token, s) {
        const button = make("button", "av-token");
        button.type = "button";
        button.setAttribute("data-position", String(s));
        const bar = make("span", "av-bar");
        bar.setAttribute("aria-hidden", "true");
        // the space keeps word and weight apart in the text a screen reader reads
        button.append(make("span", "av-word", token), " ", make("span", "av-weight"), bar);
        button.addEventListener("focus", function () { show(s); });
        button.addEventListener("click", function () { show(s); });
        button.addEventListener("keydown", function (event) {
          const moves = { ArrowRight: s + 1, ArrowDown: s + 1, ArrowLeft: s - 1, ArrowUp: s - 1,
            Home: 0, End: tokenList.length - 1 };
          if (!(event.key in moves)) return;
          event.preventDefault();
          const next = Math.max(0, Math.min(tokenList.length - 1, moves[event.key]));
          buttons[next].focus();
        });
        return button;
      });
      words.replaceChildren.apply(words, buttons);
      show(start === undefined ? tokenList.length - 1 : start);
    }

    sentence.input.addEventListener("change", function () { drawSentence(); });
    layer.input.addEventListener("change", function () { show(query); });
    head.input.addEventListener("change", function () { show(query); });

    element.replaceChildren(root);
    drawSentence(model.query);
    element.setAttribute("data-ready", "true");
  }

  shared.start(".attention-viewer", "attention viewer", build);
})();
