/* Config reader (chapter 18, "Reading a model's configuration").
 *
 * sitekit/widgets/config_reader.py prints <div class="config-reader" data-...>
 * with the shipped configurations, the fields snippets/model_config.py knows
 * (FIELDS: symbol, chapter, the choice each sets) and the other publishers'
 * names for them (ALIASES). This script reads a picked or pasted config the
 * way snippets.model_config.read_config does (tests/test_config_reader_browser.py
 * compares them): every layer's kind, the cache for a context and a number
 * format, and the total and active parameters. The fields it knows are
 * explained, with a link to their chapter; the others are listed.
 *
 * Nothing leaves the page: a pasted config.json is parsed here, and every
 * value is written with textContent, never as HTML.
 */
(function () {
  "use strict";

  const shared = window.softDictionaryWidgets;
  const readData = shared.readData, make = shared.make;
  const SVG_NS = "http://www.w3.org/2000/svg";
  let widgetCount = 0;
  // What snippets.model_config checks fields for (data-checks): sizes, numbers, names, layer kinds.
  let CHECKS = null;

  function fieldError(name, got, wanted) {
    let shown = JSON.stringify(got);
    if (shown === undefined) shown = String(got);
    if (shown.length > 60) shown = shown.slice(0, 57) + "...";
    return new Error(name + " = " + shown + ": expected " + wanted);
  }

  // The fields under the hub's names (as snippets.model_config._canonical).
  function canonical(config, known, aliases) {
    if (config === null || typeof config !== "object" || Array.isArray(config)) {
      throw new Error("a config.json holds one JSON object {...}, got " + JSON.stringify(config).slice(0, 40));
    }
    const fields = {}, named = {}, unknown = [];
    Object.keys(config).forEach(function (name) {
      const value = config[name];
      const hub = Object.prototype.hasOwnProperty.call(aliases, name) ? aliases[name] : name;
      if (!Object.prototype.hasOwnProperty.call(known, hub)) {
        unknown.push(name);
        return;
      }
      if (Object.prototype.hasOwnProperty.call(fields, hub) && JSON.stringify(fields[hub]) !== JSON.stringify(value)) {
        throw new Error(named[hub] + " = " + JSON.stringify(fields[hub]) + " and " + name + " = " +
          JSON.stringify(value) + " name the same field (" + hub + ") with two values");
      }
      fields[hub] = value;
      named[hub] = name;
    });
    return { f: fields, named: named, unknown: unknown };
  }

  function reader(c) {
    const f = c.f, named = c.named;
    function size(name, fallback) {
      let value = Object.prototype.hasOwnProperty.call(f, name) ? f[name] : null;
      if (value === null) return fallback === undefined ? null : fallback;
      if (typeof value !== "number" || !Number.isInteger(value) || value < CHECKS.sizes[name]) {
        throw fieldError(named[name] || name, value, "a whole number >= " + CHECKS.sizes[name]);
      }
      return value;
    }
    function require(name) {
      const value = size(name);
      if (value === null) throw new Error(name + " is missing: a model config must give it");
      return value;
    }
    function flag(name) {
      const value = Object.prototype.hasOwnProperty.call(f, name) ? f[name] : false;
      if (typeof value !== "boolean") throw fieldError(named[name] || name, value, "true or false");
      return value;
    }
    return { f: f, named: named, size: size, require: require, flag: flag };
  }

  function layerKinds(r, L) {
    const types = r.f.layer_types;
    if (types !== undefined && types !== null) {
      if (!Array.isArray(types) || types.length !== L) {
        throw fieldError(r.named.layer_types, types, "a list of " + L + " layer kinds (num_hidden_layers)");
      }
      types.forEach(function (kind, i) {
        if (CHECKS.kinds.indexOf(kind) < 0) throw fieldError("layer_types[" + i + "]", kind, "one of " + CHECKS.kinds.join(", "));
      });
      return types.slice();
    }
    const kinds = [];
    const every = "kv_lora_rank" in r.f ? null : r.size("full_attention_interval");
    for (let i = 0; i < L; i++) {
      if ("kv_lora_rank" in r.f) kinds.push("latent");
      else if (every !== null) kinds.push((i + 1) % every === 0 ? "full_attention" : "linear_attention");
      else if (r.f.sliding_window !== undefined && r.f.sliding_window !== null) kinds.push("sliding_attention");
      else kinds.push("full_attention");
    }
    return kinds;
  }

  // [parameters, numbers cached per token, fixed state numbers, fixed conv numbers]
  function attention(r, kind) {
    const d = r.require("hidden_size"), H = r.require("num_attention_heads");
    if (kind === "latent") {
      const kv = r.require("kv_lora_rank"), q = r.size("q_lora_rank", 0);
      const nope = r.require("qk_nope_head_dim"), rope = r.size("qk_rope_head_dim", 0);
      const dV = r.require("v_head_dim");
      const qWidth = H * (nope + rope);
      let n = q ? d * q + q + q * qWidth : d * qWidth;
      n += d * (kv + rope) + kv;
      n += kv * H * (nope + dV) + H * dV * d;
      let cached = kv + rope;
      if ("index_topk" in r.f) {
        const heads = r.require("index_n_heads"), width = r.require("index_head_dim");
        if (!q) throw new Error("index_topk needs q_lora_rank: the indexer's queries read the query latent");
        n += q * heads * width + d * width + 2 * width + d * heads;
        cached += width;
      }
      return [n, cached, 0, 0];
    }
    if (kind === "linear_attention") {
      const kHeads = r.require("linear_num_key_heads"), vHeads = r.require("linear_num_value_heads");
      const dK = r.require("linear_key_head_dim"), dV = r.require("linear_value_head_dim");
      const kernel = r.size("linear_conv_kernel_dim", 1);
      if (vHeads % kHeads) {
        throw new Error("linear_num_value_heads = " + vHeads + " must be a multiple of linear_num_key_heads = " +
          kHeads + " (each key head serves v / k memories)");
      }
      const mixed = 2 * kHeads * dK + vHeads * dV;
      const n = d * (mixed + vHeads * dV + 2 * vHeads) + mixed * kernel + 2 * vHeads + dV + vHeads * dV * d;
      return [n, 0, vHeads * dK * dV, (kernel - 1) * mixed];
    }
    let tables = "num_key_value_heads";
    let G = r.size(tables, H);
    let dHead = r.size("head_dim");
    if (dHead === null) {
      if (d % H) {
        throw new Error("head_dim is missing and hidden_size = " + d +
          " is not a multiple of num_attention_heads = " + H);
      }
      dHead = d / H;
    }
    // A full layer's own key tables and head width, and one projection for keys and values (Gemma 4).
    let kv = 2;
    const oneProjection = r.flag("attention_k_eq_v");
    if (kind === "full_attention") {
      if (r.f.num_global_key_value_heads !== undefined && r.f.num_global_key_value_heads !== null) {
        tables = "num_global_key_value_heads";
        G = r.size(tables);
      }
      dHead = r.size("global_head_dim", dHead);
      kv = oneProjection ? 1 : 2;
    }
    if (H % G) {
      throw new Error((r.named[tables] || tables) + " = " + G + " must divide num_attention_heads = " + H +
        " (each key table serves H / G heads)");
    }
    // An output gate: W_Q is twice as wide, a query and the gate's scores per head (Qwen3-Next).
    const qOutputs = r.flag("attn_output_gate") ? 2 * H : H;
    let n = d * (qOutputs + kv * G) * dHead + H * dHead * d;
    if (r.flag("attention_bias")) n += (qOutputs + kv * G) * dHead + d;
    if (r.flag("use_qk_norm")) n += 2 * dHead;
    return [n, 2 * G * dHead, 0, 0];
  }

  // Per layer: [stored, read] feed-forward parameters.
  function ffn(r, L) {
    const d = r.f.hidden_size;
    const dFF = r.size("intermediate_size", 0);
    const dense = 3 * d * dFF;
    const experts = r.size("n_routed_experts");
    const layers = [];
    if (experts === null) {
      for (let i = 0; i < L; i++) layers.push([dense, dense]);
      return layers;
    }
    const k = r.require("num_experts_per_tok");
    if (k > experts) {
      throw new Error(r.named.num_experts_per_tok + " = " + k + " must be at most the " + experts +
        " experts (" + r.named.n_routed_experts + ")");
    }
    const groups = r.size("n_group", 1), chosen = r.size("topk_group", groups);
    if (experts % groups || chosen > groups) {
      throw new Error("n_group = " + groups + " must divide the " + experts + " experts, and topk_group = " +
        chosen + " be at most n_group");
    }
    const width = r.size("moe_intermediate_size", dFF || null);
    if (width === null) throw new Error("moe_intermediate_size is missing, and intermediate_size too: an expert's width");
    const shared = r.size("n_shared_experts", 0);
    const sharedWidth = r.size("shared_expert_intermediate_size", shared * width);
    let router = experts * d;
    if (r.f.scoring_func === "sigmoid") router += experts;
    const common = router + 3 * d * sharedWidth;
    const moe = [common + experts * 3 * d * width, common + k * 3 * d * width];
    const first = r.size("first_k_dense_replace", 0), every = r.size("moe_layer_freq", 1);
    if (first > L) throw new Error(r.named.first_k_dense_replace + " = " + first + " is more than the " + L + " layers");
    // Qwen's rule: experts where (i + 1) is a multiple of the step, but in the layers listed dense.
    const step = r.size("decoder_sparse_step", 1), denseOnly = listedLayers(r, L);
    for (let i = 0; i < L; i++) {
      const experts = i >= first && i % every === 0 && (i + 1) % step === 0 && denseOnly.indexOf(i) < 0;
      layers.push(experts ? moe : [dense, dense]);
    }
    return layers;
  }

  // mlp_only_layers, checked: numbers of layers, from 0 to L - 1.
  function listedLayers(r, L) {
    const listed = "mlp_only_layers" in r.f ? r.f.mlp_only_layers : [];
    if (listed === null) return [];
    if (!Array.isArray(listed) || listed.some(function (i) { return !Number.isInteger(i) || i < 0 || i >= L; })) {
      throw fieldError(r.named.mlp_only_layers, listed, "a list of layer numbers from 0 to " + (L - 1));
    }
    return listed;
  }

  function checkOther(r) {
    CHECKS.names.forEach(function (name) {
      if (name in r.f && typeof r.f[name] !== "string") throw fieldError(r.named[name], r.f[name], "a string");
    });
    const names = "architectures" in r.f ? r.f.architectures : [];
    if (!Array.isArray(names) || names.some(function (n) { return typeof n !== "string"; })) {
      throw fieldError(r.named.architectures, names, "a list of strings");
    }
    const eps = "rms_norm_eps" in r.f ? r.f.rms_norm_eps : 1e-6;
    if (typeof eps !== "number" || !(eps > 0 && eps < 1)) {
      throw fieldError(r.named.rms_norm_eps, eps, "a number between 0 and 1");
    }
    const turned = r.f.partial_rotary_factor;
    if (turned !== undefined && turned !== null && (typeof turned !== "number" || !(turned > 0 && turned <= 1))) {
      throw fieldError(r.named.partial_rotary_factor, turned, "a number in (0, 1]");
    }
    const scaling = r.f.rope_scaling;
    if (scaling !== undefined && scaling !== null && (typeof scaling !== "object" || Array.isArray(scaling))) {
      throw fieldError(r.named.rope_scaling, scaling, "a dict (or null)");
    }
    CHECKS.numbers.forEach(function (name) {
      const value = r.f[name];
      if (value !== undefined && value !== null && (typeof value !== "number" || !isFinite(value))) {
        throw fieldError(r.named[name], value, "a finite number");
      }
    });
  }

  // What snippets.model_config.read_config returns, for each of contexts.
  function readConfig(config, contexts, nBytes, stateBytes, known, aliases) {
    const c = canonical(config, known, aliases);
    const r = reader(c);
    checkOther(r);
    const d = r.require("hidden_size"), L = r.require("num_hidden_layers"), vocab = r.require("vocab_size");
    const window = r.size("sliding_window");
    const kinds = layerKinds(r, L);
    if (kinds.indexOf("sliding_attention") >= 0 && window === null) {
      throw new Error("layer_types has sliding layers but sliding_window is missing");
    }
    const caches = contexts.map(function () { return 0; });
    const attn = kinds.map(function (kind) {
      const a = attention(r, kind);
      contexts.forEach(function (context, j) {
        const held = kind === "sliding_attention" ? Math.min(context, window) : context;
        caches[j] += a[1] * held * nBytes + a[2] * stateBytes + a[3] * nBytes;
      });
      return a[0];
    });
    let stored = d, read = d;
    ffn(r, L).forEach(function (pair, i) {
      stored += attn[i] + 2 * d + pair[0];
      read += attn[i] + 2 * d + pair[1];
    });
    const table = vocab * d;
    let limit = r.size("max_position_embeddings");
    if (limit === null) {
      const base = r.size("original_max_position_embeddings");
      const factor = r.f.rope_scaling_factor;
      limit = base !== null && factor !== undefined && factor !== null ? Math.trunc(base * factor) : base;
    }
    return {
      layers: kinds, caches: caches, total: stored + table * (r.flag("tie_word_embeddings") ? 1 : 2),
      active: read + table, contextLimit: limit, unknown: c.unknown, fields: c.f, named: c.named,
    };
  }

  function billions(n) { return (n / 1e9).toFixed(2) + "B"; }

  function bytesText(n) {
    const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }

  function valueText(value) {
    const text = JSON.stringify(value);
    if (Array.isArray(value) && value.length > 4) {
      const counts = {};
      value.forEach(function (v) { counts[v] = (counts[v] || 0) + 1; });
      return "[" + value.length + " entries: " + Object.keys(counts).map(function (k) {
        return counts[k] + " × " + k;
      }).join(", ") + "]";
    }
    return text.length > 40 ? text.slice(0, 37) + "..." : text;
  }

  function plot(contexts, caches) {
    const width = 320, height = 180, left = 52, bottom = 30, top = 8, right = 8;
    const svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg.setAttribute("class", "cr-plot");
    svg.setAttribute("role", "img");
    const lo = Math.log10(Math.max(1, Math.min.apply(null, caches)));
    const hi = Math.log10(Math.max(2, Math.max.apply(null, caches)));
    const span = Math.max(hi - lo, 1);
    const x = function (i) { return left + (width - left - right) * i / (contexts.length - 1); };
    const y = function (v) { return height - bottom - (height - bottom - top) * (Math.log10(Math.max(v, 1)) - lo) / span; };
    const path = document.createElementNS(SVG_NS, "polyline");
    path.setAttribute("points", caches.map(function (v, i) { return x(i).toFixed(1) + "," + y(v).toFixed(1); }).join(" "));
    path.setAttribute("class", "cr-line");
    svg.append(path);
    [0, contexts.length - 1].forEach(function (i) {
      const label = document.createElementNS(SVG_NS, "text");
      label.setAttribute("x", x(i));
      label.setAttribute("y", height - 10);
      label.setAttribute("text-anchor", i ? "end" : "start");
      label.textContent = contexts[i].toLocaleString("en") + " tokens";
      svg.append(label);
    });
    [Math.min.apply(null, caches), Math.max.apply(null, caches)].forEach(function (v) {
      const label = document.createElementNS(SVG_NS, "text");
      label.setAttribute("x", 2);
      label.setAttribute("y", y(v) + 4);
      label.textContent = bytesText(v);
      svg.append(label);
    });
    svg.setAttribute("aria-label", "The cache against the context on log scales: " + bytesText(caches[0]) +
      " at " + contexts[0].toLocaleString("en") + " tokens, " + bytesText(caches[caches.length - 1]) + " at " +
      contexts[contexts.length - 1].toLocaleString("en") + " tokens.");
    return svg;
  }

  function build(element) {
    const configs = readData(element, "configs"), known = readData(element, "fields");
    const aliases = readData(element, "aliases"), contexts = readData(element, "contexts");
    const formats = readData(element, "formats");
    CHECKS = readData(element, "checks");
    const prefix = "cr";
    const id = "config-reader-" + (++widgetCount);
    const root = shared.box(prefix, id, "Read a model's configuration");
    const controls = root.appendChild(make("div", "cr-controls"));
    const pickLabel = controls.appendChild(make("label", "widget-label", "Configuration "));
    const pick = pickLabel.appendChild(make("select", "cr-pick"));
    configs.forEach(function (shipped, i) {
      const option = pick.appendChild(make("option", "", shipped.model));
      option.value = String(i);
    });
    pick.appendChild(make("option", "", "my own config.json (paste below)")).value = "pasted";
    const formatLabel = controls.appendChild(make("label", "widget-label", " Cache numbers "));
    const format = formatLabel.appendChild(make("select", "cr-format"));
    Object.keys(formats).forEach(function (name) { format.appendChild(make("option", "", name)).value = name; });
    const contextLabel = controls.appendChild(make("label", "widget-label", " Context "));
    const context = contextLabel.appendChild(make("select", "cr-context"));
    contexts.forEach(function (n) { context.appendChild(make("option", "", n.toLocaleString("en"))).value = String(n); });
    context.value = String(131072);
    const pasteLabel = root.appendChild(make("label", "widget-label cr-paste-label",
      "Paste a config.json (read here, in your browser; nothing is sent):"));
    const paste = root.appendChild(make("textarea", "cr-paste"));
    paste.id = id + "-paste";
    pasteLabel.htmlFor = paste.id;
    paste.rows = 4;
    paste.spellcheck = false;
    const readButton = root.appendChild(make("button", "md-button md-button--primary cr-read", "Read it"));
    readButton.type = "button";
    const out = root.appendChild(make("div", "cr-out"));
    out.setAttribute("aria-live", "polite");

    function show() {
      out.replaceChildren();
      let config, source = null;
      if (pick.value === "pasted") {
        try {
          config = JSON.parse(paste.value);
        } catch (error) {
          out.append(make("p", "cr-error", "This is not JSON: " + error.message));
          return;
        }
      } else {
        config = configs[Number(pick.value)].config;
        source = configs[Number(pick.value)].source;
      }
      let result;
      try {
        result = readConfig(config, contexts, formats[format.value], 4, known, aliases);
      } catch (error) {
        out.append(make("p", "cr-error", error.message));
        return;
      }
      const at = contexts.indexOf(Number(context.value));
      const facts = out.appendChild(make("dl", "cr-facts"));
      function fact(label, text, name, value) {
        facts.append(make("dt", "", label));
        const dd = facts.appendChild(make("dd", "cr-" + name, text));
        dd.setAttribute("data-value", JSON.stringify(value));
      }
      const counts = {};
      result.layers.forEach(function (k) { counts[k] = (counts[k] || 0) + 1; });
      fact("Layers", result.layers.length + ": " + Object.keys(counts).map(function (k) {
        return counts[k] + " " + k;
      }).join(", "), "layers", result.layers);
      fact("Cache at " + contexts[at].toLocaleString("en") + " tokens",
        bytesText(result.caches[at]) + " (" + Math.round(result.caches[at] / contexts[at]).toLocaleString("en") +
        " bytes per token)", "cache", result.caches[at]);
      fact("Total parameters", billions(result.total), "total", result.total);
      fact("Active parameters", billions(result.active), "active", result.active);
      fact("Longest context stated", result.contextLimit === null ? "not in the config" :
        result.contextLimit.toLocaleString("en") + " tokens", "limit", result.contextLimit);
      out.append(make("p", "widget-note", "One sequence's cache against its length, on log scales:"));
      out.append(plot(contexts, result.caches));
      // One entry per field: its name (and the hub's, where the file names it otherwise), its value and
      // symbol, then what it sets, linked to the chapter that teaches it.
      const list = out.appendChild(make("dl", "cr-fields"));
      Object.keys(result.fields).forEach(function (hub) {
        const name = result.named[hub];
        const term = list.appendChild(make("dt", "cr-field"));
        term.append(make("code", "", name === hub ? hub : name + " (" + hub + ")"));
        term.append(" = " + valueText(result.fields[hub]) + (known[hub][0] ? ", " + known[hub][0] : ""));
        const what = list.appendChild(make("dd"));
        if (known[hub][1]) {
          const link = what.appendChild(make("a", "", known[hub][2]));
          link.href = "../" + known[hub][1].replace(/\.md$/, "/");
        } else {
          what.textContent = known[hub][2];
        }
      });
      out.append(make("p", "cr-unknown", result.unknown.length ?
        "Fields this reader does not know (not counted): " + result.unknown.join(", ") :
        "Every field is one this reader knows."));
      if (source) {
        const cite = out.appendChild(make("p", "widget-note", "Source: "));
        const link = cite.appendChild(make("a", "", source));
        link.href = source;
      }
    }

    [pick, format, context].forEach(function (control) { control.addEventListener("change", show); });
    readButton.addEventListener("click", function () { pick.value = "pasted"; show(); });
    element.replaceChildren(root);
    show();
    element.setAttribute("data-ready", "true");
  }

  shared.start(".config-reader", "config reader", build);
})();
