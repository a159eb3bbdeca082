/* The model writer: chapter 14's trained GPT, run in the reader's browser.
 * Loaded by model-writer.js when the reader presses its start button (never
 * on a page's first visit). Data from sitekit/widgets/model_writer.py: the
 * model's sizes, vocabulary and weights file (name, bytes, SHA-256); the
 * weights themselves come from that file, written by the post-build step.
 *
 * The model is snippets/transformer.py's gpt_forward, in float64, with a KV
 * cache per layer and head, as chapter 8 writes it and
 * snippets.transformer.generate runs it: the prompt is read at once (the
 * prefill), then one word a step; reading a word writes its key and value
 * into every head's cache, and its query reads the keys. The switches are
 * snippets/switches.py's: a switched-off head writes nothing into the
 * residual stream (snippets.heads.ablate_heads); without "scale" the scores
 * are not divided by sqrt(d_head); without "positions" no row of W_pos is
 * added; without "causal mask" each word of the prompt reads the whole
 * prompt; without "cache" the written words write no key and no value, and
 * read the prompt's. Each part's direct share of the chosen word's logit is
 * snippets.heads.logit_contributions'; the draws are snippets.sampling's
 * (temperature, top-k, top-p) with NumPy's own generator,
 * np.random.default_rng(seed), so a seed writes what chapter 14's generate
 * writes. tests/test_model_writer_browser.py checks all of it against the
 * NumPy functions with the stored weights. Plain DOM, textContent only. */
(function () {
  "use strict";

  const shared = window.softDictionaryWidgets;
  const make = shared.make;
  const LN_EPS = 1e-5;                      // snippets.transformer.LAYER_NORM_EPS
  const GELU_C = Math.sqrt(2 / Math.PI);
  const TOP = 6;                            // next-word probabilities shown
  const RUN_DELAY_MS = 150;                 // between words when the model runs
  const ROW = 14;                           // px: a row of the cache, one word
  const SPOKEN = { ".": "full stop", ",": "comma", ":": "colon", "?": "question mark" };
  // The parts a reader can switch off (snippets.switches.SWITCHES), and the chapter that built each.
  const PARTS = [
    { name: "scale", label: "the 1/\u221ad_head scale", chapter: 3 },
    { name: "positions", label: "the positions (W_pos)", chapter: 5 },
    { name: "causal mask", label: "the causal mask in the prefill", chapter: 6 },
    { name: "cache", label: "cache writes after the prompt", chapter: 8 },
  ];

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

  // ------------------------------------------- NumPy's np.random.default_rng(seed)

  // SeedSequence(seed).generate_state(4, uint64) for a seed below 2**32 (NumPy's
  // numpy/random/bit_generator.pyx), then PCG64 (XSL-RR output) seeded with it,
  // and Generator.random(): the 53 high bits of the next 64. One seed draws the
  // numbers NumPy draws; tests/test_model_writer_browser.py compares them.
  const INIT_A = 0x43b0d7e5, MULT_A = 0x931e8875, INIT_B = 0x8b51f9dd, MULT_B = 0x58f38ded;
  const MIX_L = 0xca01f9dd, MIX_R = 0x4973f715;
  const M64 = (1n << 64n) - 1n, M128 = (1n << 128n) - 1n;
  const PCG_MULT = (2549297995355413924n << 64n) + 4865540595714422341n;

  function seedWords(seed) {
    let hashConst = INIT_A;
    function hashmix(value) {
      value = (value ^ hashConst) >>> 0;
      hashConst = Math.imul(hashConst, MULT_A) >>> 0;
      value = Math.imul(value, hashConst) >>> 0;
      return (value ^ (value >>> 16)) >>> 0;
    }
    function mix(x, y) {
      const result = (Math.imul(MIX_L, x) - Math.imul(MIX_R, y)) >>> 0;
      return (result ^ (result >>> 16)) >>> 0;
    }
    const pool = [seed >>> 0, 0, 0, 0].map(hashmix);
    for (let src = 0; src < 4; src++) {
      for (let dst = 0; dst < 4; dst++) if (src !== dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
    }
    hashConst = INIT_B;
    const words = [];
    for (let i = 0; i < 8; i++) {
      let value = (pool[i % 4] ^ hashConst) >>> 0;
      hashConst = Math.imul(hashConst, MULT_B) >>> 0;
      value = Math.imul(value, hashConst) >>> 0;
      words.push((value ^ (value >>> 16)) >>> 0);
    }
    return words;
  }

  // A uniform number in [0, 1) per call, as np.random.default_rng(seed).random() gives them.
  function numpyRandom(seed) {
    const w = seedWords(seed);
    const word64 = function (i) { return BigInt(w[2 * i]) | (BigInt(w[2 * i + 1]) << 32n); };
    const initState = (word64(0) << 64n) | word64(1);
    const increment = (((word64(2) << 64n) | word64(3)) << 1n | 1n) & M128;
    let state = 0n;
    const advance = function () { state = (state * PCG_MULT + increment) & M128; };
    advance();
    state = (state + initState) & M128;
    advance();
    return function () {
      advance();
      const x = ((state >> 64n) ^ state) & M64, turn = state >> 122n;
      const out = ((x >> turn) | (x << ((64n - turn) & 63n))) & M64;
      return Number(out >> 11n) / 9007199254740992;
    };
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

  // 1 / sqrt(var(x) + eps), the layer norm's divisor, and the normalised x times weight plus bias.
  function inverseStd(x) {
    const d = x.length;
    let mean = 0, variance = 0;
    for (let i = 0; i < d; i++) mean += x[i];
    mean /= d;
    for (let i = 0; i < d; i++) variance += (x[i] - mean) * (x[i] - mean);
    return 1 / Math.sqrt(variance / d + LN_EPS);
  }

  function layerNorm(x, weight, bias, scale) {
    const d = x.length;
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[i];
    mean /= d;
    const out = new Float64Array(d);
    for (let i = 0; i < d; i++) out[i] = (x[i] - mean) * scale * weight[i] + bias[i];
    return out;
  }

  // A run of the model: the words read so far (the first nPrompt of them the
  // prompt), every head's keys and values (the KV cache: `cached` entries),
  // the weights each query put on them, the logits after each word, and what
  // each part wrote into each word's residual stream (its logit shares).
  // switches: { off: [l * nHeads + h] true for a head switched off, removed: names of PARTS switched off }.
  Engine.prototype.newRun = function (switches) {
    const run = { ids: [], logits: [], alpha: [], K: [], V: [], parts: [], cached: 0, nPrompt: 0,
      off: (switches && switches.off) || [], removed: new Set((switches && switches.removed) || []) };
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
    run.parts.length = n;
    run.cached = Math.min(run.cached, n);
    run.alpha.forEach(function (heads) { heads.forEach(function (rows) { rows.length = n; }); });
  };

  // Read more words: the first call reads the prompt at once (the prefill), each
  // later call the words written after it. In every layer, every word first writes
  // its key and value in every head (unless the cache takes no more writes), then
  // its query reads the keys it may: the ones before it and its own, the whole
  // prompt without the causal mask, the prompt's only once the cache is frozen.
  Engine.prototype.read = function (run, ids) {
    const t0 = run.ids.length, m = ids.length, d = this.d, dHead = this.dHead, nHeads = this.nHeads;
    if (t0 + m > this.maxLen) throw new Error("the model reads at most " + this.maxLen + " words");
    ids.forEach(function (id) { if (!(id >= 0 && id < this.nVocab)) throw new Error("no word has the id " + id); }, this);
    if (t0 === 0) run.nPrompt = m;
    const P = run.nPrompt, removed = run.removed;
    const scale = removed.has("scale") ? 1 : 1 / Math.sqrt(dHead);
    const lifted = removed.has("causal mask"), frozen = removed.has("cache");
    const rows = [];
    for (let r = 0; r < m; r++) {
      const t = t0 + r, x = new Float64Array(d);
      for (let i = 0; i < d; i++) {
        x[i] = this.W_E[ids[r] * d + i] + (removed.has("positions") ? 0 : this.W_pos[t * d + i]);
      }
      const writes = !(frozen && t >= P);
      const reads = (lifted && t < P) || !writes ? P : t + 1;   // the keys 0 .. reads - 1
      rows.push({ t: t, x: x, writes: writes, reads: reads, parts: {
        embedding: Float64Array.from(x), heads: new Float64Array(this.nLayers * nHeads * d),
        feedForward: new Float64Array(this.nLayers * d), scale: 0 } });
    }
    for (let l = 0; l < this.nLayers; l++) {
      const p = this.blocks[l];
      const qs = rows.map(function (row) {
        const h1 = layerNorm(row.x, p.ln_1_weight, p.ln_1_bias, inverseStd(row.x));
        if (row.writes) {                             // write: d[k_t] = v_t, in every head
          const k = project(h1, p.W_K, p.b_K, d), v = project(h1, p.W_V, p.b_V, d);
          for (let h = 0; h < nHeads; h++) {
            const K = run.K[l][h], V = run.V[l][h];
            for (let j = 0; j < dHead; j++) {
              K[row.t * dHead + j] = k[h * dHead + j];
              V[row.t * dHead + j] = v[h * dHead + j];
            }
          }
        }
        return project(h1, p.W_Q, p.b_Q, d);
      });
      rows.forEach(function (row, r) {
        const q = qs[r], attended = Float64Array.from(p.b_O);
        for (let h = 0; h < nHeads; h++) {
          const K = run.K[l][h], V = run.V[l][h], base = h * dHead;
          const weights = new Float64Array(row.reads);  // read: softmax(q K^T / sqrt(d_head))
          let largest = -Infinity;
          for (let s = 0; s < row.reads; s++) {
            let score = 0;
            for (let j = 0; j < dHead; j++) score += q[base + j] * K[s * dHead + j];
            weights[s] = score * scale;
            if (weights[s] > largest) largest = weights[s];
          }
          let total = 0;
          for (let s = 0; s < row.reads; s++) { weights[s] = Math.exp(weights[s] - largest); total += weights[s]; }
          for (let s = 0; s < row.reads; s++) weights[s] /= total;
          run.alpha[l][h][row.t] = weights;
          if (run.off[l * nHeads + h]) continue;       // switched off: writes nothing to the stream
          const read = new Float64Array(dHead);
          for (let s = 0; s < row.reads; s++) {
            for (let j = 0; j < dHead; j++) read[j] += weights[s] * V[s * dHead + j];
          }
          const out = row.parts.heads.subarray((l * nHeads + h) * d, (l * nHeads + h + 1) * d);
          for (let j = 0; j < dHead; j++) {
            const rj = read[j], w = (base + j) * d;
            for (let i = 0; i < d; i++) out[i] += rj * p.W_O[w + i];
          }
          for (let i = 0; i < d; i++) attended[i] += out[i];
        }
        const x = row.x;
        for (let i = 0; i < d; i++) x[i] += attended[i];
        const h2 = layerNorm(x, p.ln_2_weight, p.ln_2_bias, inverseStd(x));
        const z = project(h2, p.W_1, p.b_1, this.dFF);
        for (let i = 0; i < z.length; i++) {
          const zi = z[i];
          z[i] = 0.5 * zi * (1 + Math.tanh(GELU_C * (zi + 0.044715 * zi * zi * zi)));
        }
        const f = project(z, p.W_2, p.b_2, d);
        row.parts.feedForward.set(f, l * d);
        for (let i = 0; i < d; i++) x[i] += f[i];
      }, this);
      if (l === 0) run.cached = rows.reduce(function (n, row) { return row.writes ? row.t + 1 : n; }, run.cached);
    }
    rows.forEach(function (row, r) {
      row.parts.scale = inverseStd(row.x);
      const y = layerNorm(row.x, this.lnF[0], this.lnF[1], row.parts.scale);
      const logits = new Float64Array(this.nVocab);
      for (let w = 0; w < this.nVocab; w++) {
        let sum = 0;
        for (let i = 0; i < d; i++) sum += y[i] * this.W_E[w * d + i];
        logits[w] = sum;
      }
      run.ids.push(ids[r]);
      run.logits.push(logits);
      run.parts.push(row.parts);
    }, this);
  };

  // Each part's direct share of the logit of `word` after word t (snippets.heads.logit_contributions):
  // ((part - its mean) / sigma * ln_f_weight) . W_E[word], sigma the final norm's; with the norm's bias they add up to the logit.
  Engine.prototype.shares = function (run, t, word) {
    const d = this.d, nHeads = this.nHeads, parts = run.parts[t];
    const reads = new Float64Array(d);
    let readsSum = 0, bias = 0;
    for (let i = 0; i < d; i++) {
      reads[i] = this.lnF[0][i] * this.W_E[word * d + i];
      readsSum += reads[i];
      bias += this.lnF[1][i] * this.W_E[word * d + i];
    }
    function share(vector, offset) {
      let dot = 0, mean = 0;
      for (let i = 0; i < d; i++) { dot += vector[offset + i] * reads[i]; mean += vector[offset + i]; }
      return parts.scale * (dot - mean / d * readsSum);
    }
    const result = { heads: [], feedForward: [], embedding: share(parts.embedding, 0), biases: bias };
    for (let l = 0; l < this.nLayers; l++) {
      result.heads.push([]);
      for (let h = 0; h < nHeads; h++) result.heads[l].push(share(parts.heads, (l * nHeads + h) * d));
      result.feedForward.push(share(parts.feedForward, l * d));
      result.biases += share(this.blocks[l].b_O, 0);
    }
    return result;
  };

  // Every word's logits for ids read as a prompt of nPrompt words, then one word at a time: gpt_forward's answer
  // (snippets.switches.switched_logits with the run's switches).
  Engine.prototype.forward = function (ids, switches, nPrompt) {
    const run = this.newRun(switches), n = nPrompt || ids.length;
    this.read(run, ids.slice(0, n));
    for (let t = n; t < ids.length; t++) this.read(run, [ids[t]]);
    return run;
  };

  // ------------------------------------------------------------ sampling

  // softmax(logits / temperature) as snippets.attention.softmax computes it.
  function softmax(logits, temperature) {
    let largest = -Infinity;
    for (let i = 0; i < logits.length; i++) largest = Math.max(largest, logits[i]);
    const p = new Float64Array(logits.length);
    let total = 0;
    for (let i = 0; i < logits.length; i++) {
      p[i] = Math.exp(temperature === 1 ? logits[i] - largest : (logits[i] - largest) / temperature);
      total += p[i];
    }
    for (let i = 0; i < p.length; i++) p[i] /= total;
    return p;
  }

  // Most likely first, ties by id.
  function ranking(p) {
    return Array.from(p.keys()).sort(function (a, b) { return p[b] - p[a] || a - b; });
  }

  // snippets.sampling.sampling_probabilities: softmax(logits / temperature), then the kTop
  // likeliest, then the likeliest of those until they hold pTop of what is left; 0 for the rest.
  function samplingProbabilities(logits, temperature, kTop, pTop) {
    const p = softmax(logits, temperature), n = p.length;
    if (kTop >= n && pTop >= 1) return p;
    const order = ranking(p), kept = new Float64Array(n);
    let total = 0;
    order.forEach(function (word, r) { if (r < kTop) { kept[word] = p[word]; total += p[word]; } });
    if (pTop < 1) {
      let ahead = 0;
      order.forEach(function (word) {
        const mass = kept[word];
        if (ahead >= pTop * total) kept[word] = 0;
        ahead += mass;
      });
    }
    let sum = 0;
    for (let i = 0; i < n; i++) sum += kept[i];
    for (let i = 0; i < n; i++) kept[i] /= sum;
    return kept;
  }

  function argmax(values) {
    let best = 0;
    for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
    return best;
  }

  // rng.choice(n, p=p), as NumPy's Generator draws it: the first word whose cumulative
  // probability, divided by the last, passes a uniform number.
  function draw(p, uniform) {
    const cdf = new Float64Array(p.length);
    let total = 0;
    for (let i = 0; i < p.length; i++) { total += p[i]; cdf[i] = total; }
    const u = uniform(), last = cdf[cdf.length - 1];
    for (let i = 0; i < cdf.length; i++) if (cdf[i] / last > u) return i;
    return cdf.length - 1;
  }

  // snippets.sampling.next_token: greedy at temperature 0, else a draw.
  function nextWord(logits, sampling, uniform) {
    if (!(sampling.temperature > 0)) return argmax(logits);
    return draw(samplingProbabilities(logits, sampling.temperature, sampling.kTop, sampling.pTop), uniform);
  }

  // ---------------------------------------------------------------- the widget

  let count = 0;

  function build(element, model) {
    return loadWeights(model).then(function (arrays) {
      const engine = new Engine(model, arrays);
      const presets = shared.readData(element, "presets");
      const shownHead = shared.readData(element, "head");
      drawWidget(element, model, engine, presets, shownHead);
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

  // A checkbox inside its label: the label is the touch target.
  function checkbox(parent, text, attributes) {
    const label = parent.appendChild(make("label", "gw-switch"));
    const input = label.appendChild(make("input"));
    input.type = "checkbox";
    input.checked = true;
    Object.keys(attributes).forEach(function (name) { input.setAttribute(name, attributes[name]); });
    if (text) label.append(" " + text);
    return input;
  }

  function wordLabel(word) {
    return SPOKEN[word] || word;
  }

  // A signed share to two places, "+0.87" or "\u22120.50" (0.00 has no sign).
  function signed(x) {
    const rounded = Number(x.toFixed(2));
    if (rounded === 0) return "0.00";
    return (rounded > 0 ? "+" : "\u2212") + Math.abs(rounded).toFixed(2);
  }

  // A bar from the middle: right for a positive share, left for a negative one, `scale` the largest size.
  function shareBar(value, scale) {
    const bar = make("span", "gw-share-bar");
    bar.setAttribute("aria-hidden", "true");
    const fill = bar.appendChild(make("span", "gw-share-fill " + (value >= 0 ? "gw-up" : "gw-down")));
    const width = scale > 0 ? 50 * Math.min(1, Math.abs(value) / scale) : 0;
    fill.style.width = width.toFixed(1) + "%";
    fill.style.left = (value >= 0 ? 50 : 50 - width).toFixed(1) + "%";
    return bar;
  }

  function drawWidget(element, model, engine, presets, shownHead) {
    const vocab = model.vocab, nVocab = vocab.length;
    const index = new Map(vocab.map(function (word, i) { return [word, i]; }));
    const nHeads = model.n_heads, nLayers = model.n_layers;
    const id = "gw-app-" + (++count);
    const state = {
      prompt: [], chosen: [], off: new Array(nLayers * nHeads).fill(false), removed: [],
      temperature: 0, lastTemperature: 0.7, kTop: nVocab, pTop: 1, seed: 14,
      head: shownHead[0] * nHeads + shownHead[1], selected: null, timer: null, uniform: null,
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
    allWords.appendChild(make("summary", "", "All " + nVocab + " words"));
    const vocabButtons = allWords.appendChild(make("div", "gw-vocab-words"));
    vocab.forEach(function (word, i) {
      const b = vocabButtons.appendChild(button("gw-word", word, "add " + wordLabel(word)));
      b.addEventListener("click", function () { addWords([i]); });
    });

    const editRow = promptBox.appendChild(make("div", "gw-line gw-buttons"));
    const removeButton = editRow.appendChild(button("gw-button", "Remove last word"));
    const clearButton = editRow.appendChild(button("gw-button", "Clear"));

    // --- writing: the buttons stay in view while the reader scrolls through what a step did
    const bar = root.appendChild(make("div", "gw-bar gw-buttons"));
    const stepButton = bar.appendChild(button("gw-button gw-primary", "Step"));
    const runButton = bar.appendChild(button("gw-button", "Run"));
    const backButton = bar.appendChild(button("gw-button", "Back to the prompt"));

    // --- the text, its words pressable
    const strip = shared.wordStrip(root,
      "Press a word (or Tab to the words and use the arrow keys) for the step that chose it: the shading " +
      "shows where the chosen head looked, among the words in its cache.",
      "The text; the pressed word is the step shown",
      { help: "gw-help", words: "gw-words", summary: "gw-summary" });
    const words = strip.words, summary = strip.summary;

    // --- the step's probabilities, and which words the draw keeps
    const table = root.appendChild(make("table", "widget-table gw-probabilities"));
    const caption = table.appendChild(make("caption"));
    const head = table.appendChild(make("thead")).appendChild(make("tr"));
    ["word", "probability", "drawn with"].forEach(function (text, i) {
      const th = head.appendChild(make("th", i === 2 ? "gw-drawn" : "", text));
      th.scope = "col";
    });
    const body = table.appendChild(make("tbody"));
    const keptNote = root.appendChild(make("p", "widget-note gw-kept"));

    // --- how the next word is chosen
    const modeBox = root.appendChild(make("fieldset", "gw-section gw-sampling"));
    modeBox.appendChild(make("legend", "gw-label", "Choose the next word"));
    const modeRow = modeBox.appendChild(make("div", "gw-mode"));
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
    const topK = shared.slider("gw", id + "-top-k", "Top-k",
      { min: "1", max: String(nVocab), step: "1", value: String(nVocab) });
    const topP = shared.slider("gw", id + "-top-p", "Top-p",
      { min: "0.05", max: "1", step: "0.05", value: "1" });
    [temperature, topK, topP].forEach(function (slider) { modeBox.appendChild(slider.row); });
    const seedRow = modeBox.appendChild(make("div", "gw-line"));
    const seedInput = labelledInput(seedRow, "Seed", "gw-input gw-seed", id + "-seed", {
      type: "number", min: "0", max: "9999", step: "1", value: String(state.seed) });
    const newSeed = seedRow.appendChild(button("gw-button", "New seed"));
    const sliders = [temperature, topK, topP];

    // --- who raised the word: each part's share of its logit, and the heads' switches
    const sharesBox = root.appendChild(make("div", "gw-section gw-shares"));
    const sharesTitle = sharesBox.appendChild(make("p", "gw-label gw-shares-title"));
    sharesTitle.id = id + "-shares";
    sharesBox.appendChild(make("p", "widget-note",
      "Each part's direct share of that logit: what it wrote into the residual stream, read by the final norm " +
      "and W_E\u1d40. The shares add up to the logit; each table's bars are drawn to its largest. A head's box " +
      "switches it on and off."));
    const headTable = sharesBox.appendChild(make("table", "widget-table gw-share-table"));
    headTable.setAttribute("aria-labelledby", sharesTitle.id);
    const headRow = headTable.appendChild(make("thead")).appendChild(make("tr"));
    headRow.appendChild(make("td"));
    for (let h = 0; h < nHeads; h++) headRow.appendChild(make("th", "", "head " + h)).scope = "col";
    const headBody = headTable.appendChild(make("tbody"));
    const switches = [], headCells = [];
    for (let l = 0; l < nLayers; l++) {
      const row = headBody.appendChild(make("tr"));
      row.appendChild(make("th", "", "layer " + l)).scope = "row";
      for (let h = 0; h < nHeads; h++) {
        const cell = row.appendChild(make("td", "gw-share"));
        const input = checkbox(cell, "", { "data-head": l + "," + h, "aria-label": "layer " + l + ", head " + h });
        const number = input.parentNode.appendChild(make("span", "gw-share-number"));
        switches.push(input);
        headCells.push({ cell: cell, number: number });
      }
    }
    const restTable = sharesBox.appendChild(make("table", "widget-table gw-share-table gw-rest"));
    restTable.setAttribute("aria-label", "the rest of the residual stream's shares");
    const restNames = ["word and position"];
    for (let l = 0; l < nLayers; l++) restNames.push("feed-forward " + l);
    restNames.push("biases");
    const restHead = restTable.appendChild(make("thead")).appendChild(make("tr"));
    restNames.forEach(function (name) { restHead.appendChild(make("th", "", name)).scope = "col"; });
    const restRow = restTable.appendChild(make("tbody")).appendChild(make("tr"));
    const restCells = restNames.map(function () {
      const cell = restRow.appendChild(make("td", "gw-share"));
      return { cell: cell, number: cell.appendChild(make("span", "gw-share-number")) };
    });
    const sharesTotal = sharesBox.appendChild(make("p", "widget-note gw-shares-total"));

    // --- the parts the chapters built, each a switch
    const partsBox = root.appendChild(make("fieldset", "gw-section gw-parts"));
    partsBox.appendChild(make("legend", "gw-label", "Parts switched on"));
    const partSwitches = PARTS.map(function (part) {
      const line = partsBox.appendChild(make("div", "gw-part"));
      return checkbox(line, part.label + " (chapter " + part.chapter + ")", { "data-part": part.name });
    });

    const showRow = root.appendChild(make("div", "gw-line gw-section"));
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

    // --- the KV cache: per layer, a row per word, labelled, and a panel per head
    const cacheBox = root.appendChild(make("div", "gw-section gw-cache"));
    const cacheTitle = cacheBox.appendChild(make("p", "gw-label gw-cache-title"));
    cacheBox.appendChild(make("p", "widget-note",
      "Each panel is one head's cache, as in chapter 8: a row per word read, labelled by its word, holding its key " +
      "(16 numbers) and its value (16 numbers), blue above 0 and orange below. The strip on the left is the " +
      "weight the shown step's query put on each key; rows it did not read are faint, and the pressed word's " +
      "row is outlined."));
    const panels = [], wordLists = [];
    for (let l = 0; l < nLayers; l++) {
      // a grid of 1 + nHeads columns: the layer and its heads' names, then the words and the panels
      const grid = cacheBox.appendChild(make("div", "gw-cache-grid"));
      grid.appendChild(make("span", "gw-layer-name", "layer " + l));
      const names = [];
      for (let h = 0; h < nHeads; h++) {
        const name = grid.appendChild(make("span", "gw-panel-name", "head " + h));
        name.setAttribute("aria-hidden", "true");
        names.push(name);
      }
      const list = grid.appendChild(make("ol", "gw-cache-words"));
      list.setAttribute("aria-hidden", "true");   // the text above names the words; each panel's label too
      list.addEventListener("click", function (event) {
        const item = event.target.closest("li");
        if (item) pick(Number(item.getAttribute("data-position")));
      });
      wordLists.push(list);
      for (let h = 0; h < nHeads; h++) {
        const canvas = grid.appendChild(make("canvas", "gw-canvas"));
        canvas.setAttribute("role", "img");
        canvas.addEventListener("click", function (event) {
          const s = Math.floor((event.clientY - canvas.getBoundingClientRect().top) / ROW);
          if (s >= 0 && s < run.cached) pick(s);
        });
        panels.push({ layer: l, head: h, name: names[h], canvas: canvas });
      }
    }

    // ------------------------------------------------------------ behaviour

    function ids() { return state.prompt.concat(state.chosen); }

    function say(text) { message.textContent = text; }

    function sampling() {
      return { temperature: state.temperature, kTop: state.kTop, pTop: state.pTop };
    }

    // Read the prompt and write the chosen words again: every change (a switch,
    // a temperature, a filter, a seed) takes the same number of steps at once.
    function regenerate() {
      const steps = state.chosen.length;
      run = engine.newRun({ off: state.off.slice(), removed: state.removed.slice() });
      state.chosen = [];
      if (state.prompt.length) engine.read(run, state.prompt);
      state.uniform = numpyRandom(state.seed);
      for (let i = 0; i < steps && run.ids.length < engine.maxLen; i++) writeOne();
    }

    function writeOne() {
      const next = nextWord(run.logits[run.ids.length - 1], sampling(), state.uniform);
      state.chosen.push(next);
      engine.read(run, [next]);
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
          " not among the model's " + nVocab + " words (it has no row of W_E to read " +
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

    // The step that chose word t read word t - 1: its query looked at the keys its weights cover.
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
      // the space keeps word and weight apart in the button's name (its text)
      b.append(make("span", "av-word", text), " ", make("span", "av-weight"), bar);
      // A mouse shows a word by moving over it; a finger by tapping (the click). A word that
      // comes to lie under a still pointer (a new word, a scroll, the place a tap left the
      // pointer) gets boundary events from the browser, but no move: it is not pointed at.
      b.addEventListener("pointermove", function (event) { if (event.pointerType === "mouse") pick(s); });
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

    function modeText() {
      if (!(state.temperature > 0)) return "greedy";
      const filters = [];
      if (state.kTop < nVocab) filters.push("top-k " + state.kTop);
      if (state.pTop < 1) filters.push("top-p " + state.pTop.toFixed(2));
      return "sampled at temperature " + state.temperature + (filters.length ? ", " + filters.join(", ") : "");
    }

    function render() {
      const all = run.ids, n = all.length, t = selected();
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
        const seen = weights && s < weights.length;
        const weight = seen ? weights[s] : 0;
        b.classList.toggle("av-future", !seen && s !== t);
        b.setAttribute("aria-pressed", s === t ? "true" : "false");
        b.tabIndex = s === t ? 0 : -1;
        b.style.setProperty("--av-weight", String(weight));
        b.querySelector(".av-weight").textContent = seen ? weight.toFixed(2) : "\u2013";
      });

      // what the step did
      const headName = "layer " + layer + ", head " + headNo;
      if (!n) {
        summary.textContent = "No words yet: choose a prompt, add words, or type them.";
      } else if (t === 0) {
        summary.textContent = "Word 1, " + quote(all[0]) + ", is the first word of the prompt: no step chose it.";
      } else {
        const best = argmax(weights);
        const what = t < n
          ? "Word " + (t + 1) + ", " + quote(all[t]) + (t >= state.prompt.length ? ", was written (" + modeText() + ")" :
            ", was given in the prompt") + " after " + quote(all[t - 1]) + ". "
          : "The next word, after " + quote(all[n - 1]) + " (" + modeText() + "). ";
        summary.textContent = what + "Reading " + quote(all[t - 1]) + ", " + headName +
          (state.off[state.head] ? " (switched off)" : "") + " looked most at " + quote(all[best]) +
          ", word " + (best + 1) + ", weight " + weights[best].toFixed(2) + ".";
      }

      renderProbabilities(t, n);
      renderShares(t, n);

      // the cache
      const frozen = state.removed.indexOf("cache") >= 0;
      cacheTitle.textContent = "The KV cache: " + run.cached + (run.cached === 1 ? " key and value" : " keys and values") +
        " in each of the " + nLayers * nHeads + " heads (" + run.cached + " of " + engine.maxLen + " positions)" +
        (frozen && n > run.cached ? "; frozen: the " + (n - run.cached) + " words written after the prompt wrote none" : "");
      wordLists.forEach(function (list) {
        if (list.childElementCount !== run.cached || list.getAttribute("data-text") !== key) {
          list.setAttribute("data-text", key);
          list.replaceChildren.apply(list, all.slice(0, run.cached).map(function (word, s) {
            const item = make("li", "", vocab[word]);
            item.setAttribute("data-position", String(s));
            return item;
          }));
        }
        list.querySelectorAll("li").forEach(function (item, s) { item.classList.toggle("gw-row-pressed", s === t); });
      });
      panels.forEach(function (panel, i) {
        [panel.name, panel.canvas].forEach(function (node) {
          node.classList.toggle("gw-panel-shown", i === state.head);
          node.classList.toggle("gw-panel-off", state.off[i]);
        });
        drawPanel(panel, t);
      });

      stepButton.disabled = !n || n >= engine.maxLen;
      runButton.disabled = !n || n >= engine.maxLen;
      backButton.disabled = !state.chosen.length;
      removeButton.disabled = !n;
      element.setAttribute("data-words", String(n));
    }

    // The step's next-word probabilities: at the temperature, and, when sampling, what the draw keeps.
    function renderProbabilities(t, n) {
      body.replaceChildren();
      const sampled = state.temperature > 0;
      table.classList.toggle("gw-greedy", !sampled);
      if (t < 1) {
        caption.textContent = n ? "The first word: no step chose it" : "No step yet";
        keptNote.textContent = "";
        return;
      }
      const logits = run.logits[t - 1];
      const p = softmax(logits, sampled ? state.temperature : 1);
      const drawn = sampled ? samplingProbabilities(logits, state.temperature, state.kTop, state.pTop) : p;
      const order = ranking(p);
      caption.textContent = (t < n ? "The step that chose word " + (t + 1) : "The next word") + ": the " + TOP +
        " most likely words" + (sampled ? " at temperature " + state.temperature : "");
      order.slice(0, TOP).forEach(function (word) {
        const picked = t < n && word === run.ids[t];
        const row = body.appendChild(make("tr", (picked ? "gw-picked" : "") + (drawn[word] > 0 ? "" : " gw-dropped")));
        const th = row.appendChild(make("th", "", vocab[word] + (picked ? " \u2190 chosen" : "")));
        th.scope = "row";
        const cell = row.appendChild(make("td", "gw-probability"));
        // the playground's bars (widgets.css), high-contrast mode included
        const bar = cell.appendChild(make("span", "slp-bar"));
        bar.setAttribute("aria-hidden", "true");
        bar.appendChild(make("span", "slp-bar-fill")).style.width = (100 * p[word]).toFixed(1) + "%";
        cell.appendChild(make("span", "gw-number", p[word].toFixed(3)));
        row.appendChild(make("td", "gw-drawn gw-number", drawn[word] > 0 ? drawn[word].toFixed(3) : "dropped"));
      });
      if (!sampled) {
        keptNote.textContent = "Greedy: the most likely word is written. Sampled, a word is drawn with these " +
          "probabilities, at a temperature, after top-k and top-p keep the likeliest.";
        return;
      }
      let kept = 0, mass = 0;
      for (let i = 0; i < drawn.length; i++) if (drawn[i] > 0) { kept++; mass += p[i]; }
      keptNote.textContent = "The draw keeps " + kept + " of the " + nVocab + " words (" +
        (kept < nVocab ? "top-k " + (state.kTop < nVocab ? state.kTop : "off") + ", top-p " +
          (state.pTop < 1 ? state.pTop.toFixed(2) : "off") : "no filter") + "), holding " + mass.toFixed(3) +
        " of the probability; each kept word is drawn with its probability divided by that.";
    }

    // Each part's direct share of the chosen word's logit (the likeliest word's, for the word to come).
    function renderShares(t, n) {
      if (t < 1) {
        sharesTitle.textContent = "Who raised the chosen word: press a word that a step chose.";
        headCells.concat(restCells).forEach(function (cell) {
          cell.number.textContent = "\u2013";
          const old = cell.cell.querySelector(".gw-share-bar");
          if (old) old.remove();
        });
        sharesTotal.textContent = "";
        return;
      }
      const word = t < n ? run.ids[t] : argmax(run.logits[t - 1]);
      const shares = engine.shares(run, t - 1, word);
      const rest = [shares.embedding].concat(shares.feedForward, [shares.biases]);
      const values = [].concat.apply([], shares.heads).concat(rest);
      const nHeadCells = nLayers * nHeads;
      function largest(list) { return list.reduce(function (m, x) { return Math.max(m, Math.abs(x)); }, 0); }
      const scales = [largest(values.slice(0, nHeadCells)), largest(rest)];
      sharesTitle.textContent = "Who raised " + quote(word) + (t < n ? ", the chosen word" : ", the likeliest next word") +
        ": its logit, " + run.logits[t - 1][word].toFixed(2) + ", in parts";
      headCells.concat(restCells).forEach(function (cell, i) {
        cell.number.textContent = signed(values[i]);
        const old = cell.cell.querySelector(".gw-share-bar");
        if (old) old.remove();
        cell.cell.appendChild(shareBar(values[i], scales[i < nHeadCells ? 0 : 1]));
        cell.cell.classList.toggle("gw-share-off", i < nHeadCells && state.off[i]);
      });
      const heads = values.slice(0, nHeadCells).reduce(function (a, b) { return a + b; }, 0);
      sharesTotal.textContent = "The heads together: " + signed(heads) + "; the rest of the stream: " +
        signed(rest.reduce(function (a, b) { return a + b; }, 0)) + "; the logit: " +
        run.logits[t - 1][word].toFixed(2) + ".";
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
        mark: style.getPropertyValue("--md-typeset-a-color").trim() || "#283593",
      };
    }

    function drawPanel(panel, t) {
      const canvas = panel.canvas, l = panel.layer, h = panel.head, rows = run.cached;
      const dHead = engine.dHead;
      const width = Math.max(40, Math.round(canvas.clientWidth || 80));
      // a row per entry: the panel grows as the cache does (chapter 8's append)
      const height = Math.max(1, rows) * ROW;
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
      for (let i = 0; i < rows * dHead; i++) largest = Math.max(largest, Math.abs(K[i]), Math.abs(V[i]));
      const weights = t >= 1 ? run.alpha[l][h][t - 1] : null;
      for (let s = 0; s < rows; s++) {
        const faint = weights && s >= weights.length ? 0.25 : 1;
        if (weights && s < weights.length) {
          g.fillStyle = "rgba(" + c.weight + "," + weights[s].toFixed(3) + ")";
          g.fillRect(0, s * ROW, strip, ROW - 1);
        }
        [K, V].forEach(function (table, side) {
          const left = strip + gap + side * (gap + dHead * cell);
          for (let j = 0; j < dHead; j++) {
            const value = table[s * dHead + j] / largest;
            g.fillStyle = "rgba(" + (value >= 0 ? c.up : c.down) + "," + (Math.abs(value) * faint).toFixed(3) + ")";
            g.fillRect(left + j * cell, s * ROW, Math.ceil(cell), ROW - 1);
          }
        });
      }
      g.fillStyle = c.rule;
      g.fillRect(strip + gap + dHead * cell + gap / 2 - 0.5, 0, 1, rows * ROW);
      if (t < rows) {                                  // the pressed word's own row
        g.strokeStyle = c.mark;
        g.lineWidth = 2;
        g.strokeRect(1, t * ROW + 1, width - 2, ROW - 2);
      }
      let text = "Layer " + l + ", head " + h + (state.off[l * nHeads + h] ? ", switched off" : "") +
        ": " + rows + (rows === 1 ? " key and 1 value" : " keys and " + rows + " values") + " of " + dHead + " numbers";
      if (weights) {
        const best = argmax(weights);
        text += "; the shown step's query put most weight, " + weights[best].toFixed(2) + ", on entry " +
          (best + 1) + ", \u201c" + vocab[run.ids[best]] + "\u201d";
      }
      if (t < rows) text += "; the pressed word, \u201c" + vocab[run.ids[t]] + "\u201d, is entry " + (t + 1);
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

    function showSampling() {
      temperature.shown.textContent = "\u03c4 = " + state.lastTemperature.toFixed(1);
      topK.shown.textContent = state.kTop < nVocab ? "k = " + state.kTop : "all";
      topP.shown.textContent = state.pTop < 1 ? "p = " + state.pTop.toFixed(2) : "all";
      sliders.forEach(function (slider) { slider.input.disabled = !(state.temperature > 0); });
    }

    function resample() {
      showSampling();
      if (state.temperature > 0) { regenerate(); render(); }
    }

    modes.forEach(function (input) {
      input.addEventListener("change", function () {
        state.temperature = input.value === "greedy" ? 0 : state.lastTemperature;
        showSampling();
        regenerate();
        render();
      });
    });
    temperature.input.addEventListener("input", function () {
      state.lastTemperature = Number(temperature.input.value);
      if (state.temperature > 0) state.temperature = state.lastTemperature;
      resample();
    });
    topK.input.addEventListener("input", function () { state.kTop = Number(topK.input.value); resample(); });
    topP.input.addEventListener("input", function () { state.pTop = Number(topP.input.value); resample(); });
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
    partSwitches.forEach(function (input) {
      input.addEventListener("change", function () {
        state.removed = PARTS.filter(function (part, i) { return !partSwitches[i].checked; })
          .map(function (part) { return part.name; });
        regenerate();
        render();
      });
    });
    showSelect.addEventListener("change", function () { state.head = Number(showSelect.value); render(); });
    window.addEventListener("resize", function () { if (root.isConnected) render(); });

    modes[0].checked = true;
    showSampling();
    element.replaceChildren(root);

    // For the tests and the benchmark (tests/test_model_writer_browser.py, .ci/bench_model_writer.py).
    // switches: { off: [flag per head], removed: [names of PARTS] }; nPrompt: how many of ids are the prompt.
    element.modelWriter = {
      engine: engine,
      run: function () { return run; },
      state: state,
      forward: function (wordIds, switches, nPrompt) {
        return engine.forward(wordIds, switches, nPrompt).logits.map(function (row) { return Array.from(row); });
      },
      shares: function (wordIds, switches, nPrompt) {
        const r = engine.forward(wordIds, switches, nPrompt);
        return wordIds.slice(1).map(function (word, t) { return engine.shares(r, t, word); });
      },
      cache: function () {
        const n = run.cached;
        return run.K.map(function (heads, l) {
          return heads.map(function (K, h) {
            return [Array.from(K.subarray(0, n * engine.dHead)), Array.from(run.V[l][h].subarray(0, n * engine.dHead))];
          });
        });
      },
      uniforms: function (seed, n) {
        const uniform = numpyRandom(seed);
        return Array.from({ length: n }, uniform);
      },
      samplingProbabilities: function (logits, temperature, kTop, pTop) {
        return Array.from(samplingProbabilities(Float64Array.from(logits), temperature, kTop, pTop));
      },
    };
    const first = presets[0];
    setPrompt(first.words.map(function (word) { return index.get(word); }), first.off);
    element.setAttribute("data-model-state", "ready");
  }

  window.softDictionaryModelWriter = { build: build, sha256: sha256 };
})();
