/* The model writer: chapter 14's trained GPT, run in the reader's browser.
 * Loaded by model-writer.js when the reader presses its start button (never
 * on a page's first visit). Data from sitekit/widgets/model_writer.py: the
 * model's sizes, vocabulary and weights file (name, bytes, SHA-256); the
 * weights themselves come from that file, written by the post-build step.
 *
 * The model is snippets/transformer.py's gpt_forward, in float64, computed
 * one position at a time with a KV cache per layer and head, as chapter 8
 * writes it and snippets.transformer.generate runs it: reading a word writes
 * its key and value into every head's cache, and its query reads all the
 * keys so far. A switched-off head writes nothing into the residual stream
 * (snippets.heads.ablate_heads: its rows of W_O are zero); it still
 * reads and caches. tests/test_model_writer_browser.py checks the logits,
 * the words and the caches against the NumPy model with the stored weights.
 * Plain DOM, textContent only. */
(function () {
  "use strict";

  const shared = window.softDictionaryWidgets;
  const make = shared.make;
  const LN_EPS = 1e-5;                      // snippets.transformer.LAYER_NORM_EPS
  const GELU_C = Math.sqrt(2 / Math.PI);
  const TOP = 5;                            // next-word probabilities shown
  const RUN_DELAY_MS = 150;                 // between words when the model runs
  const SPOKEN = { ".": "full stop", ",": "comma", ":": "colon", "?": "question mark" };

  // ------------------------------------------------------------- SHA-256

  // The constants are the first 32 bits of the fractional parts of the
  // square and cube roots of the first primes (FIPS 180-4), computed here.
  const HASH_INIT = [], ROUND = [];
  (function () {
    for (let candidate = 2; ROUND.length < 64; candidate++) {
      let prime = true;
      for (let d = 2; d * d <= candidate; d++) if (candidate % d === 0) { prime = false; break; }
      if (!prime) continue;
      if (HASH_INIT.length < 8) HASH_INIT.push((Math.pow(candidate, 1 / 2) * 4294967296) | 0);
      ROUND.push((Math.pow(candidate, 1 / 3) * 4294967296) | 0);
    }
  })();

  function sha256(bytes) {
    const n = bytes.length;
    const padded = new Uint8Array(((n + 9 + 63) >> 6) << 6);
    padded.set(bytes);
    padded[n] = 0x80;
    const view = new DataView(padded.buffer);
    view.setUint32(padded.length - 8, Math.floor(n / 0x20000000));
    view.setUint32(padded.length - 4, (n * 8) >>> 0);
    const hash = HASH_INIT.slice();
    const w = new Int32Array(64);
    const rotr = function (x, k) { return (x >>> k) | (x << (32 - k)); };
    for (let offset = 0; offset < padded.length; offset += 64) {
      for (let i = 0; i < 16; i++) w[i] = view.getUint32(offset + 4 * i);
      for (let i = 16; i < 64; i++) {
        const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
        const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
      }
      let [a, b, c, d, e, f, g, h] = hash;
      for (let i = 0; i < 64; i++) {
        const t1 = (h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + ROUND[i] + w[i]) | 0;
        const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      [a, b, c, d, e, f, g, h].forEach(function (x, i) { hash[i] = (hash[i] + x) | 0; });
    }
    return hash.map(function (x) { return (x >>> 0).toString(16).padStart(8, "0"); }).join("");
  }

  // ------------------------------------------------------ the weights file

  async function loadWeights(model) {
    const url = new URL(model.file, document.baseURI).href;
    let response;
    try {
      // Revalidated, so that a page never runs on a file another build left in a cache.
      response = await fetch(url, { cache: "no-cache" });
    } catch (error) {
      throw new Error("its weights (" + model.file + ") could not be fetched: " + error.message);
    }
    if (!response.ok) {
      throw new Error("its weights (" + model.file + ") could not be fetched: the server answered " +
        response.status + ". Build the site again: the build writes them next to this page.");
    }
    const bytes = new Uint8Array(await response.arrayBuffer());
    const digest = sha256(bytes);
    if (bytes.length !== model.bytes || digest !== model.sha256) {
      throw new Error("its weights file (" + model.file + ") is not the one this page was built with: " +
        bytes.length.toLocaleString("en-US") + " bytes with SHA-256 " + digest.slice(0, 12) + "\u2026, expected " +
        model.bytes.toLocaleString("en-US") + " bytes with SHA-256 " + model.sha256.slice(0, 12) +
        "\u2026. The file is stale or damaged: reload the page, and if this stays, build the site again.");
    }
    // Little-endian float32 in the file, float64 here: every number exactly as stored.
    const view = new DataView(bytes.buffer);
    const numbers = new Float64Array(bytes.length / 4);
    for (let i = 0; i < numbers.length; i++) numbers[i] = view.getFloat32(4 * i, true);
    const arrays = {};
    let offset = 0;
    model.arrays.forEach(function (entry) {
      const size = entry[1].reduce(function (x, y) { return x * y; }, 1);
      arrays[entry[0]] = numbers.subarray(offset, offset + size);
      offset += size;
    });
    return arrays;
  }

  // ------------------------------------------------------------ the model

  function Engine(model, arrays) {
    this.d = model.d_model;
    this.nLayers = model.n_layers;
    this.nHeads = model.n_heads;
    this.dHead = model.d_model / model.n_heads;
    this.dFF = model.d_ff;
    this.maxLen = model.max_len;
    this.nVocab = model.vocab.length;
    this.W_E = arrays.W_E;
    this.W_pos = arrays.W_pos;
    this.lnF = [arrays.ln_f_weight, arrays.ln_f_bias];
    this.blocks = [];
    for (let l = 0; l < this.nLayers; l++) {
      const block = {};
      ["W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_1", "b_1", "W_2", "b_2",
        "ln_1_weight", "ln_1_bias", "ln_2_weight", "ln_2_bias"].forEach(function (name) {
        block[name] = arrays["blocks." + l + "." + name];
      });
      this.blocks.push(block);
    }
  }

  // out = bias + x W, with W (rows of x.length, n columns), row-major.
  function project(x, W, bias, n) {
    const out = Float64Array.from(bias);
    for (let i = 0; i < x.length; i++) {
      const xi = x[i], row = i * n;
      for (let j = 0; j < n; j++) out[j] += xi * W[row + j];
    }
    return out;
  }

  function layerNorm(x, weight, bias) {
    const d = x.length;
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[i];
    mean /= d;
    const centred = new Float64Array(d);
    let variance = 0;
    for (let i = 0; i < d; i++) { centred[i] = x[i] - mean; variance += centred[i] * centred[i]; }
    const scale = 1 / Math.sqrt(variance / d + LN_EPS);
    for (let i = 0; i < d; i++) centred[i] = centred[i] * scale * weight[i] + bias[i];
    return centred;
  }

  // A run of the model: the words read so far, every head's keys and values
  // (the KV cache), the weights each query put on them, and the logits after each word.
  Engine.prototype.newRun = function () {
    const run = { ids: [], logits: [], alpha: [], K: [], V: [] };
    for (let l = 0; l < this.nLayers; l++) {
      run.K.push([]); run.V.push([]); run.alpha.push([]);
      for (let h = 0; h < this.nHeads; h++) {
        run.K[l].push(new Float64Array(this.maxLen * this.dHead));
        run.V[l].push(new Float64Array(this.maxLen * this.dHead));
        run.alpha[l].push([]);
      }
    }
    return run;
  };

  // Forget every word after the first n (their cache entries are written again).
  Engine.prototype.truncate = function (run, n) {
    run.ids.length = n;
    run.logits.length = n;
    run.alpha.forEach(function (heads) { heads.forEach(function (rows) { rows.length = n; }); });
  };

  // Read one more word: write its key and value in every head, read every key
  // so far, and keep the logits of the word after it. off[l * nHeads + h]: head switched off.
  Engine.prototype.read = function (run, id, off) {
    const t = run.ids.length;
    if (t >= this.maxLen) throw new Error("the model reads at most " + this.maxLen + " words");
    if (!(id >= 0 && id < this.nVocab)) throw new Error("no word has the id " + id);
    const d = this.d, dHead = this.dHead, scale = 1 / Math.sqrt(dHead);
    let x = new Float64Array(d);
    for (let i = 0; i < d; i++) x[i] = this.W_E[id * d + i] + this.W_pos[t * d + i];
    for (let l = 0; l < this.nLayers; l++) {
      const p = this.blocks[l];
      const h1 = layerNorm(x, p.ln_1_weight, p.ln_1_bias);
      const q = project(h1, p.W_Q, p.b_Q, d);
      const k = project(h1, p.W_K, p.b_K, d);
      const v = project(h1, p.W_V, p.b_V, d);
      const attended = Float64Array.from(p.b_O);
      for (let h = 0; h < this.nHeads; h++) {
        const K = run.K[l][h], V = run.V[l][h], base = h * dHead;
        for (let j = 0; j < dHead; j++) {              // write: d[k_t] = v_t
          K[t * dHead + j] = k[base + j];
          V[t * dHead + j] = v[base + j];
        }
        const weights = new Float64Array(t + 1);       // read: softmax(q K^T / sqrt(d_head))
        let largest = -Infinity;
        for (let s = 0; s <= t; s++) {
          let score = 0;
          for (let j = 0; j < dHead; j++) score += q[base + j] * K[s * dHead + j];
          weights[s] = score * scale;
          if (weights[s] > largest) largest = weights[s];
        }
        let total = 0;
        for (let s = 0; s <= t; s++) { weights[s] = Math.exp(weights[s] - largest); total += weights[s]; }
        for (let s = 0; s <= t; s++) weights[s] /= total;
        run.alpha[l][h][t] = weights;
        if (off && off[l * this.nHeads + h]) continue;   // switched off: writes nothing to the stream
        const read = new Float64Array(dHead);
        for (let s = 0; s <= t; s++) {
          for (let j = 0; j < dHead; j++) read[j] += weights[s] * V[s * dHead + j];
        }
        for (let j = 0; j < dHead; j++) {
          const rj = read[j], row = (base + j) * d;
          for (let i = 0; i < d; i++) attended[i] += rj * p.W_O[row + i];
        }
      }
      for (let i = 0; i < d; i++) x[i] += attended[i];
      const h2 = layerNorm(x, p.ln_2_weight, p.ln_2_bias);
      const z = project(h2, p.W_1, p.b_1, this.dFF);
      for (let i = 0; i < z.length; i++) {
        const zi = z[i];
        z[i] = 0.5 * zi * (1 + Math.tanh(GELU_C * (zi + 0.044715 * zi * zi * zi)));
      }
      const f = project(z, p.W_2, p.b_2, d);
      for (let i = 0; i < d; i++) x[i] += f[i];
    }
    x = layerNorm(x, this.lnF[0], this.lnF[1]);
    const logits = new Float64Array(this.nVocab);
    for (let w = 0; w < this.nVocab; w++) {
      let sum = 0;
      for (let i = 0; i < d; i++) sum += x[i] * this.W_E[w * d + i];
      logits[w] = sum;
    }
    run.ids.push(id);
    run.logits.push(logits);
  };

  // Every position's logits for a list of ids: gpt_forward's answer.
  Engine.prototype.forward = function (ids, off) {
    const run = this.newRun();
    const self = this;
    ids.forEach(function (id) { self.read(run, id, off); });
    return run;
  };

  // The chosen word's probabilities: softmax(logits / temperature), or of the logits at temperature 0.
  function probabilities(logits, temperature) {
    const tau = temperature > 0 ? temperature : 1;
    let largest = -Infinity;
    for (let i = 0; i < logits.length; i++) largest = Math.max(largest, logits[i]);
    const p = new Float64Array(logits.length);
    let total = 0;
    for (let i = 0; i < logits.length; i++) { p[i] = Math.exp((logits[i] - largest) / tau); total += p[i]; }
    for (let i = 0; i < p.length; i++) p[i] /= total;
    return p;
  }

  function argmax(values) {
    let best = 0;
    for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
    return best;
  }

  // The seeded generator of the draws (mulberry32): a uniform number in [0, 1) per call.
  function generator(seed) {
    let state = seed >>> 0;
    return function () {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  // Greedy (temperature 0): the most likely word. Sampled: the first word whose
  // running sum of exp((logit - max) / temperature) passes u times their total.
  function choose(logits, temperature, uniform) {
    if (!(temperature > 0)) return argmax(logits);
    let largest = -Infinity;
    for (let i = 0; i < logits.length; i++) largest = Math.max(largest, logits[i]);
    const cumulative = new Float64Array(logits.length);
    let total = 0;
    for (let i = 0; i < logits.length; i++) {
      total += Math.exp((logits[i] - largest) / temperature);
      cumulative[i] = total;
    }
    const target = uniform() * total;
    for (let i = 0; i < cumulative.length; i++) if (cumulative[i] > target) return i;
    return cumulative.length - 1;
  }

  // ---------------------------------------------------------------- the widget

  let count = 0;

  function build(element, model) {
    return loadWeights(model).then(function (arrays) {
      const engine = new Engine(model, arrays);
      const presets = shared.readData(element, "presets");
      const shownHead = shared.readData(element, "head");
      draw(element, model, engine, presets, shownHead);
    });
  }

  function button(className, text, label) {
    const node = make("button", className, text);
    node.type = "button";
    if (label) node.setAttribute("aria-label", label);
    return node;
  }

  // An input in a row, after its label; attributes set as written.
  function labelledInput(row, labelText, className, inputId, attributes) {
    const label = row.appendChild(make("label", "gw-label", labelText));
    const input = row.appendChild(make("input", className));
    input.id = inputId;
    Object.keys(attributes).forEach(function (name) { input.setAttribute(name, attributes[name]); });
    label.htmlFor = inputId;
    return input;
  }

  function wordLabel(word) {
    return SPOKEN[word] || word;
  }

  function draw(element, model, engine, presets, shownHead) {
    const vocab = model.vocab;
    const index = new Map(vocab.map(function (word, i) { return [word, i]; }));
    const nHeads = model.n_heads, nLayers = model.n_layers;
    const id = "gw-app-" + (++count);
    const state = {
      prompt: [], chosen: [], off: new Array(nLayers * nHeads).fill(false),
      temperature: 0, lastTemperature: 0.7, seed: 14,
      head: shownHead[0] * nHeads + shownHead[1], selected: null, timer: null,
    };
    let run = engine.newRun();

    const root = shared.box("gw", id, "Write with the model");
    root.classList.add("av", "gw-app");   // the attention viewer's shading (widgets.css)

    // --- the prompt
    const promptBox = root.appendChild(make("div", "gw-section gw-prompt"));
    const presetRow = promptBox.appendChild(make("div", "gw-line"));
    const presetLabel = presetRow.appendChild(make("label", "gw-label", "Prompt"));
    const presetSelect = presetRow.appendChild(make("select", "gw-select"));
    presetSelect.id = id + "-preset";
    presetLabel.htmlFor = presetSelect.id;
    presets.forEach(function (preset, i) {
      const option = presetSelect.appendChild(make("option", "", preset.label));
      option.value = String(i);
    });
    presetSelect.appendChild(make("option", "", "Your own (empty)")).value = "empty";

    const typeRow = promptBox.appendChild(make("div", "gw-line"));
    const typed = labelledInput(typeRow, "Add words", "gw-input", id + "-type", {
      type: "text", autocomplete: "off", spellcheck: "false", autocapitalize: "none",
      placeholder: "type, e.g. the cat" });
    const addButton = typeRow.appendChild(button("gw-button", "Add"));
    const suggestions = promptBox.appendChild(make("div", "gw-suggestions"));
    suggestions.setAttribute("role", "group");
    suggestions.setAttribute("aria-label", "Words that complete what you typed");
    const message = promptBox.appendChild(make("p", "widget-note gw-message"));
    message.setAttribute("role", "status");

    const allWords = promptBox.appendChild(make("details", "gw-vocab"));
    allWords.appendChild(make("summary", "", "All " + vocab.length + " words"));
    const vocabButtons = allWords.appendChild(make("div", "gw-vocab-words"));
    vocab.forEach(function (word, i) {
      const b = vocabButtons.appendChild(button("gw-word", word, "add " + wordLabel(word)));
      b.addEventListener("click", function () { addWords([i]); });
    });

    const editRow = promptBox.appendChild(make("div", "gw-line gw-buttons"));
    const removeButton = editRow.appendChild(button("gw-button", "Remove last word"));
    const clearButton = editRow.appendChild(button("gw-button", "Clear"));

    // --- writing
    const writeBox = root.appendChild(make("div", "gw-section gw-write"));
    const writeRow = writeBox.appendChild(make("div", "gw-line gw-buttons"));
    const stepButton = writeRow.appendChild(button("gw-button gw-primary", "Step"));
    const runButton = writeRow.appendChild(button("gw-button", "Run"));
    const backButton = writeRow.appendChild(button("gw-button", "Back to the prompt"));
    const modeRow = writeBox.appendChild(make("fieldset", "gw-mode"));
    modeRow.appendChild(make("legend", "gw-label", "Choose the next word"));
    const modes = ["greedy", "sampled"].map(function (mode) {
      const label = modeRow.appendChild(make("label", "gw-radio"));
      const input = label.appendChild(make("input"));
      input.type = "radio";
      input.name = id + "-mode";
      input.value = mode;
      label.append(mode === "greedy" ? "the most likely (greedy)" : "sampled");
      return input;
    });
    const temperature = shared.slider("gw", id + "-temperature", "Temperature",
      { min: "0.1", max: "2", step: "0.1", value: String(state.lastTemperature) });
    writeBox.appendChild(temperature.row);
    const seedRow = writeBox.appendChild(make("div", "gw-line"));
    const seedInput = labelledInput(seedRow, "Seed", "gw-input gw-seed", id + "-seed", {
      type: "number", min: "0", max: "9999", step: "1", value: String(state.seed) });
    const newSeed = seedRow.appendChild(button("gw-button", "New seed"));

    // --- the text, its words pointable
    const strip = shared.wordStrip(root,
      "Point at a word, tap it, or Tab to the words and use the arrow keys: the shading shows where the " +
      "chosen head looked, over the words in its cache, at the step that chose that word.",
      "The text; the pressed word is the step shown",
      { help: "gw-help", words: "gw-words", summary: "gw-summary" });
    const words = strip.words, summary = strip.summary;

    // --- the next word's probabilities
    const table = root.appendChild(make("table", "widget-table gw-probabilities"));
    const caption = table.appendChild(make("caption"));
    const head = table.appendChild(make("thead")).appendChild(make("tr"));
    ["word", "probability"].forEach(function (text) {
      const th = head.appendChild(make("th", "", text));
      th.scope = "col";
    });
    const body = table.appendChild(make("tbody"));

    // --- the heads
    const headsBox = root.appendChild(make("fieldset", "gw-section gw-heads"));
    headsBox.appendChild(make("legend", "gw-label", "Heads switched on"));
    const switches = [];
    for (let l = 0; l < nLayers; l++) {
      const row = headsBox.appendChild(make("div", "gw-head-row"));
      row.appendChild(make("span", "gw-head-layer", "layer " + l));
      for (let h = 0; h < nHeads; h++) {
        const label = row.appendChild(make("label", "gw-switch"));
        const input = label.appendChild(make("input"));
        input.type = "checkbox";
        input.checked = true;
        input.setAttribute("data-head", l + "," + h);
        label.append(" head " + h);
        input.setAttribute("aria-label", "layer " + l + ", head " + h);
        switches.push(input);
      }
    }
    const showRow = headsBox.appendChild(make("div", "gw-line"));
    const showLabel = showRow.appendChild(make("label", "gw-label", "Shade by"));
    const showSelect = showRow.appendChild(make("select", "gw-select"));
    showSelect.id = id + "-show";
    showLabel.htmlFor = showSelect.id;
    for (let l = 0; l < nLayers; l++) {
      for (let h = 0; h < nHeads; h++) {
        showSelect.appendChild(make("option", "", "layer " + l + ", head " + h)).value = String(l * nHeads + h);
      }
    }
    showSelect.value = String(state.head);

    // --- the KV cache: a panel per layer and head
    const cacheBox = root.appendChild(make("div", "gw-section gw-cache"));
    const cacheTitle = cacheBox.appendChild(make("p", "gw-label gw-cache-title"));
    cacheBox.appendChild(make("p", "widget-note",
      "Each panel (titled layer\u00b7head) is one head's cache, as in chapter 8: a row per word read, its key (16 numbers) and " +
      "its value (16 numbers), blue above 0 and orange below. The strip on the left is the weight the " +
      "shown step's query put on each key; rows written after that step are faint."));
    const panels = [];
    const grid = cacheBox.appendChild(make("div", "gw-cache-grid"));
    for (let l = 0; l < nLayers; l++) {
      for (let h = 0; h < nHeads; h++) {
        const figure = grid.appendChild(make("figure", "gw-panel"));
        const canvas = figure.appendChild(make("canvas", "gw-canvas"));
        canvas.setAttribute("role", "img");
        const name = figure.appendChild(make("figcaption", "gw-panel-name", l + "\u00b7" + h));
        name.setAttribute("aria-hidden", "true");
        panels.push({ layer: l, head: h, figure: figure, canvas: canvas });
      }
    }

    // ------------------------------------------------------------ behaviour

    function ids() { return state.prompt.concat(state.chosen); }

    function say(text) { message.textContent = text; }

    // Read the prompt and write the chosen words again: every change (a head
    // switched, a temperature, a seed) takes the same number of steps at once.
    function regenerate() {
      const steps = state.chosen.length;
      run = engine.newRun();
      state.chosen = [];
      state.prompt.forEach(function (word) { engine.read(run, word, state.off); });
      state.uniform = generator(state.seed);
      for (let i = 0; i < steps && run.ids.length < engine.maxLen; i++) writeOne();
    }

    function writeOne() {
      const next = choose(run.logits[run.ids.length - 1], state.temperature, state.uniform);
      state.chosen.push(next);
      engine.read(run, next, state.off);
    }

    function step() {
      if (!run.ids.length) { say("Add a word first: the model needs at least one word to read."); return false; }
      if (run.ids.length >= engine.maxLen) {
        say("The model reads at most " + engine.maxLen + " words (the rows of W_pos): the text is full.");
        return false;
      }
      writeOne();
      state.selected = run.ids.length - 1;
      render();
      return true;
    }

    function stop() {
      clearTimeout(state.timer);
      state.timer = null;
      runButton.textContent = "Run";
      runButton.setAttribute("aria-pressed", "false");
    }

    function runOn() {
      if (!step()) { stop(); return; }
      state.timer = setTimeout(runOn, RUN_DELAY_MS);
    }

    function setPrompt(wordIds, off) {
      stop();
      state.prompt = wordIds.slice(0, engine.maxLen);
      state.chosen = [];
      if (off) {
        state.off.fill(false);
        off.forEach(function (pair) { state.off[pair[0] * nHeads + pair[1]] = true; });
        switches.forEach(function (input, i) { input.checked = !state.off[i]; });
      }
      state.selected = null;
      regenerate();
      render();
    }

    // Words typed: lower case, punctuation apart ("sang:" is "sang" and ":").
    function tokens(text) {
      return text.toLowerCase().replace(/([.,:?])/g, " $1 ").split(/\s+/).filter(Boolean);
    }

    function addWords(wordIds) {
      const all = ids().concat(wordIds);
      if (all.length > engine.maxLen) {
        say("The model reads at most " + engine.maxLen + " words: there is room for " +
          (engine.maxLen - ids().length) + " more.");
        return false;
      }
      setPrompt(all);
      say("");
      return true;
    }

    function addTyped() {
      const found = tokens(typed.value);
      if (!found.length) { say("Type a word first."); return; }
      const unknown = found.filter(function (word) { return !index.has(word); });
      if (unknown.length) {
        const close = vocab.filter(function (word) { return word.startsWith(unknown[0].slice(0, 2)); });
        say("\u201c" + unknown.join("\u201d, \u201c") + "\u201d " + (unknown.length > 1 ? "are" : "is") +
          " not among the model's " + vocab.length + " words (it has no row of W_E to read " +
          (unknown.length > 1 ? "them" : "it") + " with), so nothing was added." +
          (close.length ? " Words it knows that begin alike: " + close.slice(0, 6).join(", ") + "." : ""));
        return;
      }
      if (addWords(found.map(function (word) { return index.get(word); }))) {
        typed.value = "";
        suggest();
      }
    }

    function suggest() {
      const parts = typed.value.toLowerCase().split(/\s+/);
      const last = parts[parts.length - 1];
      const matches = last ? vocab.filter(function (word) { return word.startsWith(last); }).slice(0, 8) : [];
      suggestions.replaceChildren.apply(suggestions, matches.map(function (word) {
        const b = button("gw-word", word, "add " + wordLabel(word));
        b.addEventListener("click", function () {
          parts[parts.length - 1] = word;
          typed.value = parts.join(" ");
          addTyped();
          typed.focus();
        });
        return b;
      }));
    }

    // The step that chose word t read word t - 1: its query looked at entries 0 .. t - 1.
    function selected() {
      const n = run.ids.length;
      return state.selected === null || state.selected > n ? n : state.selected;
    }

    function quote(word) { return "\u201c" + vocab[word] + "\u201d"; }

    let drawnText = null;

    function token(s, text, className) {
      const b = make("button", "av-token gw-token" + className);
      b.type = "button";
      b.setAttribute("data-position", String(s));
      const bar = make("span", "av-bar");
      bar.setAttribute("aria-hidden", "true");
      b.append(make("span", "av-word", text), make("span", "av-weight"), bar);
      // A mouse shows a word by pointing; a finger by tapping (the click), never by the
      // mouse events a browser makes up after a tap or under a scrolled page.
      b.addEventListener("pointerenter", function (event) { if (event.pointerType === "mouse") pick(s); });
      b.addEventListener("focus", function () { pick(s); });
      b.addEventListener("click", function () { pick(s); });
      b.addEventListener("keydown", function (event) {
        const last = run.ids.length;
        const moves = { ArrowRight: s + 1, ArrowDown: s + 1, ArrowLeft: s - 1, ArrowUp: s - 1, Home: 0, End: last };
        if (!(event.key in moves)) return;
        event.preventDefault();
        const to = Math.max(0, Math.min(last, moves[event.key]));
        const target = words.querySelector('[data-position="' + to + '"]');
        if (target) target.focus();
      });
      return b;
    }

    function makeWords(all) {
      const made = all.map(function (word, s) {
        return token(s, vocab[word], s >= state.prompt.length ? " gw-chosen" : "");
      });
      if (all.length) {
        const next = token(all.length, "?", " gw-next");
        next.setAttribute("aria-label", "the next word");
        made.push(next);
      }
      return made;
    }

    function render() {
      const all = run.ids;
      const n = all.length;
      const t = selected();
      const layer = Math.floor(state.head / nHeads), headNo = state.head % nHeads;
      const weights = t >= 1 ? run.alpha[layer][headNo][t - 1] : null;

      // the words, and a last button for the word to come: made again only when the text changed,
      // so that the word under a finger or the pointer stays the one it is
      const key = all.join(",") + "|" + state.prompt.length;
      if (key !== drawnText) {
        drawnText = key;
        const focused = words.contains(document.activeElement);
        words.replaceChildren.apply(words, makeWords(all));
        const pressed = words.querySelector('[data-position="' + t + '"]');
        if (focused && pressed) pressed.focus({ preventScroll: true });
      }
      words.querySelectorAll(".gw-token").forEach(function (b) {
        const s = Number(b.getAttribute("data-position"));
        const seen = weights && s < t;
        const weight = seen ? weights[s] : 0;
        b.classList.toggle("av-future", !seen && s !== t);
        b.setAttribute("aria-pressed", s === t ? "true" : "false");
        b.tabIndex = s === t ? 0 : -1;
        b.style.setProperty("--av-weight", String(weight));
        b.querySelector(".av-weight").textContent = seen ? weight.toFixed(2) : "\u2013";
      });

      // what the step did
      const headName = "layer " + layer + ", head " + headNo;
      const mode = state.temperature > 0 ? "sampled at temperature " + state.temperature : "greedy";
      if (!n) {
        summary.textContent = "No words yet: choose a prompt, add words, or type them.";
      } else if (t === 0) {
        summary.textContent = "Word 1, " + quote(all[0]) + ", is the first word of the prompt: no step chose it.";
      } else {
        const best = argmax(weights);
        const what = t < n
          ? "Word " + (t + 1) + ", " + quote(all[t]) + (t >= state.prompt.length ? ", was written (" + mode + ")" :
            ", was given in the prompt") + " after " + quote(all[t - 1]) + ". "
          : "The next word, after " + quote(all[n - 1]) + " (" + mode + "). ";
        summary.textContent = what + "Reading " + quote(all[t - 1]) + ", " + headName +
          (state.off[state.head] ? " (switched off)" : "") + " looked most at " + quote(all[best]) +
          ", word " + (best + 1) + ", weight " + weights[best].toFixed(2) + ".";
      }

      // the probabilities of the step
      body.replaceChildren();
      if (t >= 1) {
        const p = probabilities(run.logits[t - 1], state.temperature);
        const order = Array.from(p.keys()).sort(function (a, b) { return p[b] - p[a] || a - b; }).slice(0, TOP);
        caption.textContent = (t < n ? "The step that chose word " + (t + 1) : "The next word") +
          ": the " + TOP + " most likely words" + (state.temperature > 0 ? " at temperature " +
          state.temperature : "");
        order.forEach(function (word) {
          const row = body.appendChild(make("tr", t < n && word === all[t] ? "gw-picked" : ""));
          const th = row.appendChild(make("th", "", vocab[word] + (t < n && word === all[t] ? " \u2190 chosen" : "")));
          th.scope = "row";
          const cell = row.appendChild(make("td", "gw-probability"));
          // the playground's bars (widgets.css), high-contrast mode included
          const bar = cell.appendChild(make("span", "slp-bar"));
          bar.setAttribute("aria-hidden", "true");
          bar.appendChild(make("span", "slp-bar-fill")).style.width = (100 * p[word]).toFixed(1) + "%";
          cell.appendChild(make("span", "gw-number", p[word].toFixed(3)));
        });
      } else {
        caption.textContent = n ? "The first word: no step chose it" : "No step yet";
      }

      // the cache
      cacheTitle.textContent = "The KV cache: " + n + (n === 1 ? " key and value" : " keys and values") +
        " in each of the " + nLayers * nHeads + " heads (" + n + " of " + engine.maxLen + " positions)";
      panels.forEach(function (panel, i) {
        panel.figure.classList.toggle("gw-panel-shown", i === state.head);
        panel.figure.classList.toggle("gw-panel-off", state.off[i]);
        drawPanel(panel, t);
      });

      stepButton.disabled = !n || n >= engine.maxLen;
      runButton.disabled = !n || n >= engine.maxLen;
      backButton.disabled = !state.chosen.length;
      removeButton.disabled = !n;
      element.setAttribute("data-words", String(n));
    }

    function pick(s) {
      if (state.selected === s) return;
      state.selected = s;
      render();
    }

    function colours() {
      const style = getComputedStyle(root);
      return {
        up: style.getPropertyValue("--gw-up").trim() || "40, 53, 147",
        down: style.getPropertyValue("--gw-down").trim() || "230, 81, 0",
        weight: style.getPropertyValue("--av-shade").trim() || "40, 53, 147",
        rule: style.getPropertyValue("--md-default-fg-color--lighter").trim() || "rgba(0,0,0,.32)",
      };
    }

    function drawPanel(panel, t) {
      const canvas = panel.canvas, l = panel.layer, h = panel.head, n = run.ids.length;
      const dHead = engine.dHead;
      const width = Math.max(60, Math.round(canvas.clientWidth || 80));
      // a row per entry: the panel grows as the cache does (chapter 8's append)
      const row = width > 120 ? 4 : 3, height = Math.max(1, n) * row;
      canvas.style.height = height + "px";
      const ratio = window.devicePixelRatio || 1;
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
      const g = canvas.getContext("2d");
      g.setTransform(ratio, 0, 0, ratio, 0, 0);
      g.clearRect(0, 0, width, height);
      const c = colours();
      const strip = Math.max(5, Math.round(width * 0.08)), gap = 3;
      const cell = (width - strip - 2 * gap) / (2 * dHead);
      const K = run.K[l][h], V = run.V[l][h];
      let largest = 1e-12;
      for (let i = 0; i < n * dHead; i++) largest = Math.max(largest, Math.abs(K[i]), Math.abs(V[i]));
      const weights = t >= 1 ? run.alpha[l][h][t - 1] : null;
      for (let s = 0; s < n; s++) {
        const faint = t >= 1 && s >= t ? 0.25 : 1;
        if (weights && s < t) {
          g.fillStyle = "rgba(" + c.weight + "," + weights[s].toFixed(3) + ")";
          g.fillRect(0, s * row, strip, row);
        }
        [K, V].forEach(function (table, side) {
          const left = strip + gap + side * (gap + dHead * cell);
          for (let j = 0; j < dHead; j++) {
            const value = table[s * dHead + j] / largest;
            g.fillStyle = "rgba(" + (value >= 0 ? c.up : c.down) + "," + (Math.abs(value) * faint).toFixed(3) + ")";
            g.fillRect(left + j * cell, s * row, Math.ceil(cell), row);
          }
        });
      }
      g.fillStyle = c.rule;
      g.fillRect(strip + gap + dHead * cell + gap / 2 - 0.5, 0, 1, n * row);
      let text = "Layer " + l + ", head " + h + (state.off[l * nHeads + h] ? ", switched off" : "") +
        ": " + n + (n === 1 ? " key and 1 value" : " keys and " + n + " values") + " of " + dHead + " numbers";
      if (weights) {
        const best = argmax(weights);
        text += "; the shown step's query put most weight, " + weights[best].toFixed(2) + ", on entry " +
          (best + 1) + ", \u201c" + vocab[run.ids[best]] + "\u201d";
      }
      canvas.setAttribute("aria-label", text + ".");
    }

    // ------------------------------------------------------------ events

    presetSelect.addEventListener("change", function () {
      if (presetSelect.value === "empty") { setPrompt([], []); say(""); return; }
      const preset = presets[Number(presetSelect.value)];
      setPrompt(preset.words.map(function (word) { return index.get(word); }), preset.off);
      say("");
    });
    typed.addEventListener("input", suggest);
    typed.addEventListener("keydown", function (event) {
      if (event.key === "Enter") { event.preventDefault(); addTyped(); }
      if (event.key === "ArrowDown" && suggestions.firstChild) { event.preventDefault(); suggestions.firstChild.focus(); }
    });
    addButton.addEventListener("click", addTyped);
    removeButton.addEventListener("click", function () { setPrompt(ids().slice(0, -1)); });
    clearButton.addEventListener("click", function () { setPrompt([]); });
    stepButton.addEventListener("click", function () { stop(); step(); });
    runButton.addEventListener("click", function () {
      if (state.timer) { stop(); return; }
      runButton.textContent = "Stop";
      runButton.setAttribute("aria-pressed", "true");
      runOn();
    });
    backButton.addEventListener("click", function () { stop(); state.chosen = []; state.selected = null; regenerate(); render(); });
    modes.forEach(function (input) {
      input.addEventListener("change", function () {
        state.temperature = input.value === "greedy" ? 0 : state.lastTemperature;
        temperature.input.disabled = state.temperature === 0;
        regenerate();
        render();
      });
    });
    temperature.input.addEventListener("input", function () {
      state.lastTemperature = Number(temperature.input.value);
      temperature.shown.textContent = "\u03c4 = " + state.lastTemperature.toFixed(1);
      if (state.temperature > 0) { state.temperature = state.lastTemperature; regenerate(); render(); }
    });
    function setSeed(seed) {
      state.seed = seed;
      seedInput.value = String(seed);
      regenerate();
      render();
    }
    seedInput.addEventListener("change", function () {
      const seed = Number(seedInput.value);
      if (!Number.isInteger(seed) || seed < 0 || seed > 9999) {
        say("The seed must be a whole number from 0 to 9999; it stays " + state.seed + ".");
        seedInput.value = String(state.seed);
        return;
      }
      say("");
      setSeed(seed);
    });
    newSeed.addEventListener("click", function () { setSeed((state.seed * 7919 + 17) % 10000); });
    switches.forEach(function (input, i) {
      input.addEventListener("change", function () {
        state.off[i] = !input.checked;
        regenerate();
        render();
      });
    });
    showSelect.addEventListener("change", function () { state.head = Number(showSelect.value); render(); });
    window.addEventListener("resize", function () { if (root.isConnected) render(); });

    modes[0].checked = true;
    temperature.input.disabled = true;
    temperature.shown.textContent = "\u03c4 = " + state.lastTemperature.toFixed(1);
    element.replaceChildren(root);

    // For the tests and the benchmark (tests/test_model_writer_browser.py, .ci/bench_model_writer.py).
    element.modelWriter = {
      engine: engine,
      run: function () { return run; },
      state: state,
      forward: function (wordIds, off) {
        const r = engine.forward(wordIds, off);
        return r.logits.map(function (row) { return Array.from(row); });
      },
      cache: function () {
        const n = run.ids.length;
        return run.K.map(function (heads, l) {
          return heads.map(function (K, h) {
            return [Array.from(K.subarray(0, n * engine.dHead)), Array.from(run.V[l][h].subarray(0, n * engine.dHead))];
          });
        });
      },
    };
    const first = presets[0];
    setPrompt(first.words.map(function (word) { return index.get(word); }), first.off);
    element.setAttribute("data-model-state", "ready");
  }

  window.softDictionaryModelWriter = { build: build, sha256: sha256 };
})();
