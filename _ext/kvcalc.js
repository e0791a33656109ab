/* The book's calculator: user interface only.
 *
 * The page evaluates with the command line's own logic: the modules of kvmath/logic/ printed as
 * JavaScript (kvcalc-logic.js, by kvmath.codegen.pyjs) over its runtime (kvcalc-runtime.js),
 * every formula from kvcalc-formulas.js (printed from the SymPy expressions) and every number
 * from kvcalc-data.js (the bundled tables, written at build time by kvmath.present.calculator).
 * This file reads the state from the form or the query string (parameter names = the CLI's flag
 * names, symbol names for a reader's own values), builds the scenario record every command
 * builds (kvmath.scenario.record: each form field sets the record field its option declares),
 * passes it to the logic, and shows each result
 * in an element whose id is its `compare --json` key, with the full-precision value in
 * data-value.
 */
(function () {
  "use strict";
  const F = window.KVCALC_FORMULAS, D = window.KVCALC_DATA, R = window.KVCALC_RUNTIME,
        LOGIC = window.KVCALC_LOGIC;
  if (!F || !D || !R || !LOGIC) return;

  // ------------------------------------------------------------------ the form's state
  // the form's fields and their bounds: kvmath.scenario.options (the command line's own declarations)
  const O = D.options, NAMES = Object.keys(O);
  const FLAGS = NAMES.filter(k => O[k].flag);
  const CHOICES = NAMES.filter(k => O[k].text || O[k].choices.length);
  const NUMBERS = NAMES.filter(k => !FLAGS.includes(k) && !CHOICES.includes(k));
  const SYMBOLS = F.inputs.map(i => i.symbol);
  const ROWS = D.rows;
  //: the fields that name the rows and the prompt, not compare's options
  const SCENARIO = ["model", "gpu", "tier", "tokens", "node"];

  function fin(x) { return x === null ? Infinity : x; }

  /** A number of the query string, or the text itself where it is not a finite number (1e309,
   *  NaN, a word): check() then refuses it in words, never shows NaN or Infinity. */
  function numberFrom(text) {
    const x = Number(text);
    return Number.isFinite(x) && text.trim() !== "" ? x : text;
  }

  function stateFrom(search) {
    const q = new URLSearchParams(search), s = Object.assign({}, D.defaults);
    for (const k of CHOICES) if (q.has(k) && q.get(k) !== "") s[k] = q.get(k);
    for (const k of NUMBERS.concat(SYMBOLS)) {
      if (q.has(k) && q.get(k) !== "") s[k] = numberFrom(q.get(k));
    }
    for (const k of FLAGS) if (q.has(k) && q.get(k) !== "false") s[k] = true;
    // a node sets the GPU (as compare --node): its own, unless the link names another
    if (has(ROWS.nodes, s.node) && !q.has("gpu")) s.gpu = ROWS.nodes[s.node].gpu;
    return s;
  }

  /** What a value that is not a finite number is, in words (a permalink's 1e309 or NaN). */
  function got(x) {
    if (typeof x === "number" && Number.isFinite(x)) return String(x);
    const n = Number(x);
    if (typeof x === "string" && (n === Infinity || n === -Infinity)) {
      return `'${x}', a number too large for a double (it reads as infinity)`;
    }
    if (typeof x === "number") return `a value that is not a finite number`;
    return `'${x}', which is not a number`;
  }

  /** value within a field's bounds (kvmath.scenario.options.Kind.ok): finite, whole where integer. */
  function within(b, x) {
    if (typeof x !== "number" || !Number.isFinite(x)) return false;
    if (b.integer && !Number.isInteger(x)) return false;
    if (b.minimum !== null && (b.exclusive_min ? x <= b.minimum : x < b.minimum)) return false;
    if (b.maximum !== null && (b.below_max ? x >= b.maximum : x > b.maximum)) return false;
    return true;
  }

  // a name is one of the table's own rows: "constructor" or "__proto__" in a permalink is not
  const has = (table, name) => typeof name === "string" && Object.prototype.hasOwnProperty.call(table, name);

  /** The state's names and numbers against the form's declarations (the command line's). */
  function check(state) {
    if (!has(ROWS.models, state.model)) return `unknown model ${state.model}`;
    if (!has(ROWS.gpus, state.gpu)) return `unknown GPU ${state.gpu}`;
    if (!has(ROWS.tiers, state.tier)) return `unknown tier ${state.tier}`;
    if (state.node !== undefined && !has(ROWS.nodes, state.node)) return `unknown node ${state.node}`;
    if (state.engine !== undefined && !has(D.logic.engines, state.engine)) return `unknown engine ${state.engine}`;
    if (state.pause !== undefined && !has(ROWS.pauses, state.pause)) return `unknown pause ${state.pause}`;
    for (const k of ["kv-dtype", "compute-dtype"]) {
      if (state[k] !== undefined && !has(D.logic.dtype_bytes, state[k])) return `unknown ${k} ${state[k]}`;
    }
    for (const k of NUMBERS) {
      if (k in state && !within(O[k], state[k])) return `${O[k].label} must be ${O[k].words}, got ${got(state[k])}`;
    }
    for (const k of SYMBOLS) {
      if (k in state && !within(D.own[k], state[k])) {
        return `your own ${k} must be ${D.own[k].words}, got ${got(state[k])}`;
      }
    }
    for (const k of CHOICES) {
      if (O[k].choices.length && state[k] !== undefined && !O[k].choices.includes(state[k])) {
        return `${O[k].label} must be ${O[k].words}, got '${state[k]}'`;
      }
    }
    return null;
  }

  /** The scenario record of a state (kvmath.scenario.record.Scenario): the declared defaults,
   *  each form field in the record field its option declares (a bandwidth in B/s), the rows it
   *  names (the model as served under its RoPE scaling, the engine's row, a node's GPU and its
   *  drives for nvme) and the reader's own values. */
  function record(state) {
    const rec = Object.assign({}, D.scenario_defaults);
    for (const k of NAMES) {
      if (!(k in state) || O[k].field === null || O[k].row !== null) continue;
      rec[O[k].field] = O[k].scale !== 1 ? state[k] * O[k].scale : state[k];
    }
    rec.engine = D.logic.engines[state.engine || D.default_engine];
    for (const s of SYMBOLS) if (s in state) { rec.own = rec.own || {}; rec.own[s] = state[s]; }
    let gpu = ROWS.gpus[state.gpu], tier = ROWS.tiers[state.tier];
    if (state.node !== undefined) {  // the node's GPU and count, its drives for nvme (logic)
      const node = ROWS.nodes[state.node];
      gpu = LOGIC.node_gpu(node, ROWS.gpus[node.gpu], gpu);
      tier = LOGIC.node_tier(node, tier);
    }
    return Object.assign(rec, {model: LOGIC.served_model(ROWS.models[state.model], rec.rope_scaling),
                               gpu: gpu, tier: tier});
  }

  /** reuse --json's answer for the state (logic.reuse_answer), its keys prefixed reuse_: the
   *  pause (default the command line's), the prices (a pool's by its medium) and a node's drive. A
   *  scenario reuse refuses (a GPU with no listed price) says so in the verdict's row only. */
  function reuseOf(state) {
    const pause = ROWS.pauses[state.pause || D.default_pause];
    const lifetime = state.node !== undefined && state.tier === "nvme" ? D.node_drive_lifetime[state.node] : null;
    // what the form holds that reuse does not take: said beside its answer, not dropped
    const left = NAMES.filter(k => k in state && !SCENARIO.includes(k) &&
                              (!O[k].commands.includes("reuse") || D.reuse_not_run.includes(k)));
    const out = {reuse_left_out: left.map(k => O[k].label)};
    try {
      const a = LOGIC.reuse_answer(record(state), state.tokens, pause, D.logic.prices,
                                   {lifetime_drive_writes: lifetime})[1];
      for (const k of Object.keys(a)) out[`reuse_${k}`] = a[k];
    } catch (e) {
      if (!(e instanceof R.ScenarioError)) throw e;
      out.reuse_error = e.message;
    }
    return out;
  }

  /** compare --json with its bands, as the command line prints them (logic.band). */
  function compute(state) {
    const err = check(state);
    if (err) return {error: err};
    try {
      const b = LOGIC.band(record(state), state.tokens, D.bands);
      const r = Object.assign({}, b.nominal, {
        recompute_s_band: b.recompute_s, reload_s_band: b.reload_s,
        ttft_recompute_s_band: b.ttft_recompute_s, ttft_reload_s_band: b.ttft_reload_s,
        reload_bandwidth_Bps_band: b.reload_bandwidth_Bps[0] === null ? null : b.reload_bandwidth_Bps,
        verdict_flips_in_band: b.flips, prefill_fit_own: b.prefill_fit_own,
        binding_hop: b.binding_hop, known_limits: b.known_limits});
      Object.assign(r, reuseOf(state));
      // an answer is finite and positive, or it is not an answer (your own values can make
      // a model with no layers, or a GPU so slow a time overflows)
      for (const k of ["reload_s", "recompute_s", "ttft_reload_s", "ttft_recompute_s"]) {
        if (!(Number.isFinite(r[k]) && r[k] > 0)) {
          return {error: `no finite answer: ${k} is ${r[k]} for these values (check your own values)`};
        }
      }
      return r;
    } catch (e) {
      if (e instanceof R.ScenarioError) return {error: e.message};
      throw e;
    }
  }

  // ------------------------------------------------------------------ formatting
  function sig3(x) {
    return x < 100 ? String(Number(x.toPrecision(3))) : Math.round(x).toLocaleString("en-US");
  }
  function fmtTime(s) {
    if (!Number.isFinite(s)) return "none";
    if (s === 0) return "0 s";
    for (const [unit, scale, upto] of D.time_units) {
      const x = Number((s / scale).toPrecision(3));
      if (x < fin(upto)) return `${sig3(s / scale)} ${unit}`;
      if (x === upto) s = x * scale;
    }
  }
  function fmtBytes(n) {
    for (const [unit, scale] of D.byte_units) if (n >= scale) return `${sig3(n / scale)} ${unit}`;
    return `${Math.round(n)} B`;
  }
  function fmtTokens(ts) {
    if (!ts.length) return `none: the same winner at every length from ${D.t_min} tokens`;
    const w = ts.map(t => Math.round(t).toLocaleString("en-US"));
    const joined = w.length <= 2 ? w.join(" and ") : w.slice(0, -1).join(", ") + ", and " + w.at(-1);
    return joined + " tokens";
  }
  const FORMAT = {
    recompute_s: fmtTime, reload_s: fmtTime, reload_queue_s: x => x > 0 ? fmtTime(x) : "nothing (no load given, or no shared hop)", ttft_recompute_s: fmtTime, ttft_reload_s: fmtTime, compute_s: fmtTime, weights_read_s: fmtTime,
    reload_latency_s: fmtTime, reload_fixed_s: fmtTime, kv_bytes: fmtBytes,
    kv_bytes_per_gpu: fmtBytes, kv_bytes_unique: fmtBytes,
    tp: x => String(x), gpus: x => String(x), engine: x => x, prefill_model: x => x,
    layout_from: x => x, concurrent_reloads: x => `${sig3(x)} at once per node`,
    node_hop_copies: x => sig3(x), hbm_free_bytes_per_gpu: fmtBytes,
    kv_bytes_per_token: n => `${Math.round(n).toLocaleString("en-US")} B`,
    min_reload_bandwidth_Bps: b => Number.isFinite(b) ? `${fmtBytes(b)}/s per GPU`
      : "none suffices (the fixed cost, engine step included, alone loses)",
    reload_bandwidth_Bps: b => `${fmtBytes(b)}/s per GPU`,
    // as the CLI: a margin under 1 % is a tie in all but name
    speedup: x => x >= D.tie_speedup ? `${sig3(x)}×` : `${sig3(100 * (x - 1))} % (a tie in all but name)`,
    winner: w => w, breakeven_tokens: fmtTokens,
    prefill_flops: x => x.toPrecision(3) + " FLOP",
    model_flops_per_kv_byte: x => `${Math.round(x).toLocaleString("en-US")} FLOP/B`,
    model_flops_per_kv_byte_at_tokens: x => `${Math.round(x).toLocaleString("en-US")} FLOP/B`,
    gpu_flops_per_link_byte: x => `${Math.round(x).toLocaleString("en-US")} FLOP/B`,
    prefill_efficiency: x => `${sig3(100 * x)} % of peak`, kv_replication: x => `${sig3(x)}`,
    // kvmath.evaluate.bands.band, as compare prints it
    ttft_recompute_s_band: b => `${fmtTime(b[0])} to ${fmtTime(b[1])}`,
    ttft_reload_s_band: b => `${fmtTime(b[0])} to ${fmtTime(b[1])}`,
    verdict_flips_in_band: x => x ? "the other wins somewhere inside the ranges" : "the same winner across the ranges",
    prefill_fit_own: x => x ? "fitted on this GPU's own profiles" : "another GPU's fit (no profile of its own): a wider range",
    known_limits: ids => ids.length ? `${ids.join(", ")}: validation rows that show the model missing this configuration (their error is in the ranges)` : "none",
  };
  const usd = x => `$${Number(x.toPrecision(3))}`;
  Object.assign(FORMAT, {  // reuse, as the command line prints it (kvmath.cli.reuse.human)
    reuse_verdict: x => x, reuse_ttl_s: t => t === 0 ? "none pays (do not offload)" : Number.isFinite(t) ? fmtTime(t) : "keep until return",
    reuse_p_breakeven: p => p === null || p === undefined ? "none: not even p = 1 pays" : sig3(p),
    reuse_hit_probability: x => `${x.toFixed(3)} of returning conversations`,
    reuse_value_usd: usd, reuse_saving_usd: usd, reuse_gpu_usd_per_hour: x => `${usd(x)} per GPU-hour`,
    reuse_left_out: xs => xs.length ? `priced without ${xs.join(", ")}: the command line's reuse takes none of them` : "nothing: reuse takes every field set",
  });
  const LABELS = [
    ["winner", "winner"], ["speedup", "faster by"],
    ["ttft_recompute_s", "first token, recompute"], ["ttft_recompute_s_band", "… its range"],
    ["ttft_reload_s", "first token, reload"], ["ttft_reload_s_band", "… its range"],
    ["verdict_flips_in_band", "verdict within the ranges"], ["known_limits", "known limits"],
    ["prefill_fit_own", "prefill fit"], ["recompute_s", "recompute"],
    ["reload_s", "reload"], ["breakeven_tokens", "crossings"], ["prefill_model", "prefill model"],
    ["gpus", "GPUs per replica"], ["tp", "TP (attention)"], ["layout_from", "layout from"],
    ["engine", "engine"], ["concurrent_reloads", "replicas reloading"],
    ["reload_queue_s", "sharing adds to a reload"],
    ["reload_fixed_s", "reload fixed cost"], ["hbm_free_bytes_per_gpu", "HBM left per GPU"],
    ["min_reload_bandwidth_Bps", "minimum bandwidth"], ["compute_s", "prefill compute"],
    ["weights_read_s", "weight read (floor)"], ["kv_bytes", "KV moved"],
    ["kv_bytes_per_gpu", "KV per GPU"], ["kv_bytes_unique", "KV, one copy"],
    ["node_hop_copies", "copies through node hops"], ["kv_bytes_per_token", "KV per token"],
    ["kv_replication", "KV copies (TP)"], ["prefill_flops", "prefill FLOPs"],
    ["prefill_efficiency", "prefill efficiency"], ["reload_bandwidth_Bps", "reload bandwidth"],
    ["reload_latency_s", "reload first-byte latency"], ["model_flops_per_kv_byte", "model FLOP per KV byte"],
    ["model_flops_per_kv_byte_at_tokens", "… at this length"],
    ["gpu_flops_per_link_byte", "GPU FLOP per link byte"],
    ["reuse_verdict", "offload a paused conversation (reuse)"], ["reuse_p_breakeven", "… break-even return probability"],
    ["reuse_ttl_s", "… best TTL"], ["reuse_hit_probability", "… hit probability"],
    ["reuse_value_usd", "… value per offload"], ["reuse_saving_usd", "… a reuse saves"],
    ["reuse_gpu_usd_per_hour", "… at"], ["reuse_left_out", "… leaves out"],
  ];
  const REUSE_KEYS = LABELS.map(([k]) => k).filter(k => k.startsWith("reuse_"));

  // ------------------------------------------------------------------ page
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const k of kids) e.append(k);
    return e;
  }
  function select(name, label, options, describe) {
    const s = el("select", {name: name, id: `kvcalc-${name}`});
    for (const o of options) s.append(el("option", {value: o}, describe ? describe(o) : o));
    return el("label", {class: "kvcalc-field"}, el("span", {}, label), s);
  }
  function number(name, label, attrs) {
    return el("label", {class: "kvcalc-field"}, el("span", {}, label),
              el("input", Object.assign({name: name, id: `kvcalc-${name}`, type: "number",
                                         step: "any", inputmode: "decimal"}, attrs || {})));
  }

  function build(root) {
    const form = el("form", {class: "kvcalc-form", id: "kvcalc-form"});
    const L = k => O[k].label;  // the form's words, declared with the option (kvmath.scenario.options)
    form.append(select("model", L("model"), Object.keys(ROWS.models)),
                select("node", L("node"), [""].concat(Object.keys(ROWS.nodes)),
                       o => o || "none (the GPU's own count; nvme: tiers.csv's drives)"),
                select("gpu", L("gpu"), Object.keys(ROWS.gpus)),
                select("tier", L("tier"), Object.keys(ROWS.tiers)),
                select("tp", L("tp"), []),
                number("tokens", L("tokens"), {min: String(D.t_min), step: "1"}),
                select("engine", L("engine"), [""].concat(Object.keys(D.logic.engines)),
                       o => o || `default (${D.default_engine})`),
                select("prefill", L("prefill"), [""].concat(O.prefill.choices),
                       o => o || `default (${D.prefill_models[0]})`),
                select("kv-dtype", L("kv-dtype"), [""].concat(O["kv-dtype"].choices),
                       o => o || "deployment's"),
                select("compute-dtype", L("compute-dtype"), [""].concat(O["compute-dtype"].choices),
                       o => o || "deployment's"),
                select("rope-scaling", L("rope-scaling"), [""].concat(O["rope-scaling"].choices),
                       o => o || "none (the config's window)"),
                number("ep", L("ep"), {min: "1", step: "1"}),
                number("batch", L("batch"), {min: "1", step: "1"}),
                number("concurrent-reloads", L("concurrent-reloads")),
                number("resume-rate", L("resume-rate")),
                number("efficiency", L("efficiency")),
                number("bandwidth", L("bandwidth")),
                select("pause", L("pause"), [""].concat(Object.keys(ROWS.pauses)),
                       o => o || `default (${D.default_pause})`),
                number("gpu-price", L("gpu-price")),
                number("dram-price", L("dram-price")),
                number("nvme-price", L("nvme-price")),
                number("reach", L("reach")),
                number("turn-new-tokens", L("turn-new-tokens")),
                el("label", {class: "kvcalc-field"}, el("span", {}, L("allow-beyond-context")),
                   el("input", {name: "allow-beyond-context", id: "kvcalc-allow-beyond-context",
                                type: "checkbox"})));
    const own = el("details", {class: "kvcalc-own"}, el("summary", {}, "Your own values for the model and GPU rows"));
    const grid = el("div", {class: "kvcalc-form"});
    for (const i of F.inputs) {
      if (!SYMBOLS.includes(i.symbol)) continue;
      grid.append(number(i.symbol, `${i.meaning} (${i.symbol}${i.unit ? ", " + i.unit : ""})`));
    }
    own.append(grid);
    form.append(own);
    const out = el("table", {class: "kvcalc-results"});
    const body = el("tbody");
    for (const [key, label] of LABELS) {
      body.append(el("tr", {}, el("th", {scope: "row"}, label), el("td", {id: key})));
    }
    out.append(body);
    const status = el("p", {id: "kvcalc-status", class: "kvcalc-status", role: "status"});
    const link = el("a", {id: "kvcalc-permalink", href: "#"}, "Permalink to this scenario");
    const plot = el("div", {id: "kvcalc-plot", class: "kvcalc-plot"});
    // the chart first, the table of every number below it
    root.append(form, status, plot, el("div", {class: "kvcalc-scroll"}, out),
                el("p", {}, link));
    form.addEventListener("input", e => {
      const s = readForm(form);
      if (e.target.name === "node" && has(ROWS.nodes, s.node)) s.gpu = ROWS.nodes[s.node].gpu;
      if (e.target.tagName === "SELECT") {  // a new row: new TP choices and placeholders
        const tps = D.tps[s.model];
        if (tps && s.tp !== undefined && !tps.includes(s.tp)) delete s.tp;
        fillForm(form, s);
      }
      update(root, s);
    });
    form.addEventListener("submit", e => e.preventDefault());
    // redraw when the plot's box changes width, so its text keeps its size
    new ResizeObserver(() => {
      const svg = plot.querySelector("svg");
      if (svg && Math.abs(Number(svg.dataset.width) - plot.getBoundingClientRect().width) > 1) {
        update(root, readForm(form), true);
      }
    }).observe(plot);
  }

  function readForm(form) {
    const s = {};
    for (const k of CHOICES) {
      const f = form.elements[k];
      if (f && f.value !== "") s[k] = f.value;
    }
    for (const k of NUMBERS.concat(SYMBOLS)) {
      const f = form.elements[k];
      if (f && f.value !== "") s[k] = numberFrom(f.value);
    }
    for (const k of FLAGS) if (form.elements[k] && form.elements[k].checked) s[k] = true;
    return Object.assign({}, D.defaults, s);
  }

  function fillForm(form, state) {
    const tps = has(D.tps, state.model) ? D.tps[state.model] : [];
    const tp = form.elements.tp;
    tp.replaceChildren(el("option", {value: ""}, "deployment or smallest that fits"),
                       ...tps.map(k => el("option", {value: String(k)}, String(k))));
    for (const k of CHOICES.concat(NUMBERS, SYMBOLS)) {
      const f = form.elements[k];
      if (f) f.value = k in state ? String(state[k]) : "";
    }
    for (const k of FLAGS) form.elements[k].checked = Boolean(state[k]);
    if (check(state)) return;
    let v;  // the scenario's own values as placeholders (logic.load_values)
    try { v = LOGIC.load_values(record(state), state.tokens)[0][0]; } catch (e) { if (e instanceof R.ScenarioError) return; throw e; }
    for (const s of SYMBOLS) {
      if (form.elements[s] && s in v) form.elements[s].placeholder = String(Number(v[s].toPrecision(6)));
    }
    form.elements.efficiency.placeholder = String(Number(v.eta.toPrecision(4)));
    form.elements.bandwidth.placeholder = String(Number((v.B / D.bandwidth_scale).toPrecision(4)));
    form.elements["concurrent-reloads"].placeholder = String(Number(v.n_c.toPrecision(4)));
  }

  function query(state) {
    const q = new URLSearchParams();
    for (const k of CHOICES.concat(NUMBERS, SYMBOLS)) if (k in state && state[k] !== "") q.set(k, state[k]);
    for (const k of FLAGS) if (state[k]) q.set(k, "true");
    return "?" + q.toString();
  }

  /** A message in the form's words: "--tp 3" reads "“TP (GPUs)” 3", "pass --flag" reads
   * "tick “its label”" (compute() keeps the command line's words, which tests compare). */
  function formWords(msg) {
    return msg.replace(/\bpass --([a-z-]+)/g, (all, k) => has(O, k) ? `tick “${O[k].label}”` : all)
              .replace(/--([a-z-]+)/g, (all, k) => has(O, k) ? `“${O[k].label}”` : all);
  }

  function update(root, state, resizeOnly) {
    const r = compute(state);
    const status = root.querySelector("#kvcalc-status");
    if (r.error) {  // no stale numbers beside an error
      status.textContent = formWords(r.error);
      for (const [key] of LABELS) {
        const cell = root.querySelector(`#${key}`);
        delete cell.dataset.value;
        cell.textContent = "–";
      }
      root.querySelector("#kvcalc-plot").replaceChildren();
      return;
    }
    status.textContent = `${r.winner} wins for ${r.model} on ${r.gpus}× ${r.gpu} (TP ${r.tp}), ` +
      `tier ${r.tier}, ${r.tokens.toLocaleString("en-US")} tokens` +
      (r.verdict_flips_in_band ? " (the other wins somewhere inside the ranges)" : "");
    for (const [key] of LABELS) {
      const cell = root.querySelector(`#${key}`);
      const x = r[key];
      if (r.reuse_error && REUSE_KEYS.includes(key) && key !== "reuse_left_out") {  // refused: said once
        delete cell.dataset.value;
        cell.textContent = key === "reuse_verdict" ? formWords(r.reuse_error) : "–";
        continue;
      }
      cell.dataset.value = Array.isArray(x) ? JSON.stringify(x) : String(x);  // full precision
      cell.textContent = FORMAT[key](x);
    }
    const url = query(state);
    root.querySelector("#kvcalc-permalink").href = url;
    if (!resizeOnly) history.replaceState(null, "", url + location.hash);
    remember(state, r);
    plot(root.querySelector("#kvcalc-plot"), state, r);
    if (!resizeOnly) otherBands(root, state, r);
  }

  // ------------------------------------------------------------------ plot (SVG, log-log)
  /** [T, ttft_recompute_s, ttft_reload_s] at each length: the times the verdict compares
   *  (logic.ttft_curve). */
  function curve(state, lengths) {
    return LOGIC.ttft_curve(record(state), state.tokens, lengths);
  }

  /** The longest prompt the chart may draw, and why: the context window or what HBM holds
   *  (logic.prompt_limit). */
  function chartLimit(state) {
    return LOGIC.prompt_limit(record(state), state.tokens);
  }

  /** The tiers the chart draws: the scenario's own first, then the answer page's
   *  (kvmath.present.calculator.PLOT_TIERS), each in the state of the scenario's layout (the TP
   *  and experts compare chose at its length, held as the curve holds them). */
  function tierStates(state, r) {
    const names = [state.tier].concat(D.plot_tiers.filter(t => t !== state.tier && has(ROWS.tiers, t)));
    return names.map(t => Object.assign({}, state, {tier: t}, t === state.tier ? {} :
                                        {tp: r.tp}, t !== state.tier && r.ep > 1 ? {ep: r.ep} : {}));
  }

  /** Each tier's curve at the lengths drawn, or why it is not drawn (a tier this GPU has not,
   *  or a load its hop cannot carry): [{tier, points} or {tier, why}]. */
  function tierCurves(state, r, lengths) {
    return tierStates(state, r).map(s => {
      try {
        return {tier: s.tier, state: s, points: curve(s, lengths)};
      } catch (e) {
        if (!(e instanceof R.ScenarioError)) throw e;
        return {tier: s.tier, why: e.message};
      }
    });
  }

  /** A tier's band and crossings at the scenario's length (logic.band), or why not. */
  function tierBand(s) {
    try {
      const b = LOGIC.band(record(s), s.tokens, D.bands);
      return {ttft_reload_s_band: b.ttft_reload_s, breakeven_tokens: b.nominal.breakeven_tokens,
              ttft_reload_s: b.nominal.ttft_reload_s, winner: b.nominal.winner};
    } catch (e) {
      if (!(e instanceof R.ScenarioError)) throw e;
      return {why: e.message};
    }
  }

  // the other tiers' bands cost a comparison each: computed after the page has answered, a
  // tier at a time, and kept for the state they were computed for (a redraw reuses them)
  const BANDS = {key: null, bands: {}};
  let pending = null;

  /** Keep the scenario's own band (compute's) for the state's chart. */
  function remember(state, r) {
    const key = query(state);
    if (BANDS.key !== key) { BANDS.key = key; BANDS.bands = {}; }
    BANDS.bands[state.tier] = {ttft_reload_s_band: r.ttft_reload_s_band, breakeven_tokens: r.breakeven_tokens,
                               ttft_reload_s: r.ttft_reload_s, winner: r.winner};
  }

  function otherBands(root, state, r) {
    const key = query(state);
    clearTimeout(pending);
    const todo = tierStates(state, r).filter(s => !(s.tier in BANDS.bands));
    const next = () => {
      if (BANDS.key !== key || !todo.length) return;
      const s = todo.shift();
      BANDS.bands[s.tier] = tierBand(s);
      plot(root.querySelector("#kvcalc-plot"), state, r);
      if (todo.length) pending = setTimeout(next, 0);
    };
    if (todo.length) pending = setTimeout(next, 0);
  }

  function plot(box, state, r) {
    const W = Math.max(280, Math.round(box.getBoundingClientRect().width) || 640), H = Math.round(Math.min(360, W * 0.6));
    const pad = {l: 64, r: 28, t: 12, b: 44};
    const lx0 = Math.log10(Math.max(D.t_min, Math.min(16, state.tokens / 10)));
    const limit = chartLimit(state);  // no curve past the window or past what HBM holds
    const bands = BANDS.key === query(state) ? BANDS.bands : {};
    const crossings = Object.values(bands).flatMap(b => b.breakeven_tokens || []).concat(r.breakeven_tokens);
    const wanted = Math.log10(Math.max(1e6, state.tokens * 10, ...crossings.map(t => 3 * t)));
    const lx1 = limit ? Math.max(Math.log10(limit.tokens), lx0 + 1) : Math.ceil(wanted);
    const n = 240;
    const lengths = Array.from({length: n + 1}, (_, i) => Math.pow(10, lx0 + (lx1 - lx0) * i / n));
    const pts = curve(state, lengths);
    const tiers = tierCurves(state, r, lengths);
    const drawn = tiers.filter(c => c.points);
    const ys = pts.flatMap(p => [p[1], p[2]]).concat(drawn.flatMap(c => c.points.map(p => p[2])),
                                                    r.ttft_recompute_s_band, r.ttft_reload_s_band,
                                                    Object.values(bands).flatMap(b => b.ttft_reload_s_band || []))
      .filter(y => y > 0 && Number.isFinite(y));
    const ly0 = Math.floor(Math.log10(Math.min(...ys))), ly1 = Math.ceil(Math.log10(Math.max(...ys)));
    const X = T => pad.l + (W - pad.l - pad.r) * (Math.log10(T) - lx0) / (lx1 - lx0);
    const Y = t => H - pad.b - (H - pad.t - pad.b) * (Math.log10(t) - ly0) / Math.max(1, ly1 - ly0);
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("width", "100%");
    svg.dataset.width = W;
    svg.setAttribute("role", "img");
    const add = (tag, attrs, text) => {
      const e = document.createElementNS(ns, tag);
      for (const [k, val] of Object.entries(attrs)) e.setAttribute(k, val);
      if (text !== undefined) e.textContent = text;
      svg.append(e); return e;
    };
    const k0 = Math.ceil(lx0);  // decade grid lines from the first decade on the axis
    for (let k = k0; k <= lx1; k++) {
      add("line", {x1: X(10 ** k), x2: X(10 ** k), y1: pad.t, y2: H - pad.b, class: "grid"});
      if ((k - k0) % Math.ceil((lx1 - k0) / Math.max(2, Math.floor(W / 70))) === 0) {
        const prefix = ["", "k", "M", "G", "T", "P"][Math.floor(k / 3)] ?? `e${k}`;
        const label = k < 0 ? String(10 ** k) : `${10 ** (k % 3)}${prefix}`;
        add("text", {x: X(10 ** k), y: H - pad.b + 16, "text-anchor": "middle"}, label);
      }
    }
    // time ticks at round values of each unit (1, 10, 100 of it below the next unit's size)
    const ticks = [];
    D.time_units.forEach(([, scale, upto]) => {
      for (const mult of [1, 10, 100]) if (mult < fin(upto)) ticks.push(scale * mult);
    });
    const shown = ticks.filter(t => t >= 10 ** ly0 && t <= 10 ** ly1);
    const every = Math.ceil(shown.length / Math.max(2, Math.floor((H - pad.t - pad.b) / 16)));
    shown.forEach((t, i) => {
      add("line", {x1: pad.l, x2: W - pad.r, y1: Y(t), y2: Y(t), class: "grid"});
      if (i % every === 0) add("text", {x: pad.l - 6, y: Y(t) + 4, "text-anchor": "end"}, fmtTime(t));
    });
    add("text", {x: (pad.l + W - pad.r) / 2, y: H - 6, "text-anchor": "middle"}, "prompt length (tokens)");
    const path = (points, idx) => points.map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[idx]).toFixed(1)}`).join("");
    // the other tiers under the scenario's own, each in its colour (the legend names them)
    drawn.forEach((c, i) => {
      if (c.tier === state.tier) return;
      add("path", {d: path(c.points, 2), class: `reload-other tier-${i}`, "data-tier": c.tier});
    });
    add("path", {d: path(pts, 1), class: "recompute"});
    add("path", {d: path(pts, 2), class: "reload", "data-tier": state.tier});
    // the chosen length, and where each tier's reload and recompute cross (logic.band's)
    add("line", {x1: X(state.tokens), x2: X(state.tokens), y1: pad.t, y2: H - pad.b, class: "chosen"});
    add("text", {x: X(state.tokens) + 3, y: H - pad.b - 6, class: "chosen-label"},
        `${state.tokens.toLocaleString("en-US")} tokens`);
    for (const t of r.breakeven_tokens) {
      if (t < 10 ** lx0 || t > 10 ** lx1) continue;
      add("line", {x1: X(t), x2: X(t), y1: pad.t, y2: H - pad.b, class: "crossing"});
      add("text", {x: X(t) + 3, y: pad.t + 12, class: "crossing-label"}, Math.round(t).toLocaleString("en-US"));
    }
    drawn.forEach((c, i) => {
      const b = bands[c.tier];
      if (!b || !b.breakeven_tokens) return;
      for (const t of b.breakeven_tokens) {
        if (t < 10 ** lx0 || t > 10 ** lx1) continue;
        const [[, , y]] = curve(c.state, [t]);
        add("circle", {cx: X(t), cy: Y(y), r: 4, class: `crossing-dot tier-${i}`, "data-tier": c.tier,
                       "data-tokens": String(t)});
        if (c.tier !== state.tier) {
          add("text", {x: X(t), y: Y(y) - 7, "text-anchor": "middle", class: `crossing-dot-label tier-${i}`},
              Math.round(t).toLocaleString("en-US"));
        }
      }
    });
    if (limit) {
      add("line", {x1: X(limit.tokens), x2: X(limit.tokens), y1: pad.t, y2: H - pad.b, class: "limit"});
      add("text", {x: X(limit.tokens) - 3, y: pad.t + 12, "text-anchor": "end", class: "limit-label"},
          `${limit.why} (${Math.round(limit.tokens).toLocaleString("en-US")})`);
    }
    svg.dataset.limitTokens = limit ? String(limit.tokens) : "";
    // the scenario's own times to first token, on the curves they belong to, and their ranges
    // (kvmath.evaluate.bands.band) as whiskers; each other tier's range once computed
    const whisker = (band, cls, x) => {
      const [lo, hi] = band.map(t => Math.min(Math.max(t, 10 ** ly0), 10 ** ly1));
      add("line", {x1: x, x2: x, y1: Y(lo), y2: Y(hi), class: cls});
    };
    drawn.forEach((c, i) => {
      const b = bands[c.tier];
      if (c.tier === state.tier || !b || !b.ttft_reload_s_band) return;
      whisker(b.ttft_reload_s_band, `tier-band tier-${i}`, X(state.tokens) + 5 * (i % 2 ? 1 : -1) * Math.ceil(i / 2));
      add("circle", {cx: X(state.tokens), cy: Y(b.ttft_reload_s), r: 3, class: `tier-dot tier-${i}`});
    });
    whisker(r.ttft_recompute_s_band, "recompute-band", X(state.tokens));
    whisker(r.ttft_reload_s_band, "reload-band", X(state.tokens));
    add("circle", {cx: X(state.tokens), cy: Y(r.ttft_recompute_s), r: 4, class: "recompute-dot"});
    add("circle", {cx: X(state.tokens), cy: Y(r.ttft_reload_s), r: 4, class: "reload-dot"});
    // what a screen reader reads: each curve's time at the chosen length and its crossings
    const said = [`recompute ${fmtTime(r.ttft_recompute_s)}`].concat(drawn.map(c => {
      const b = bands[c.tier];
      const at = curve(c.state, [state.tokens])[0][2];
      return `reload from ${c.tier} ${fmtTime(at)}` +
        (b && b.breakeven_tokens ? `, crossing recompute at ${fmtTokens(b.breakeven_tokens)}` : "");
    }));
    svg.setAttribute("aria-label", "time to first token against prompt length, log-log, recompute " +
      `and reload from each tier; at ${state.tokens.toLocaleString("en-US")} tokens: ${said.join("; ")}`);
    const keys = [el("span", {class: "key recompute"}, "recompute"), " ",
                  el("span", {class: "key reload"}, `reload: ${state.tier}`)];
    drawn.forEach((c, i) => {
      if (c.tier !== state.tier) keys.push(" ", el("span", {class: `key reload-other tier-${i}`}, `reload: ${c.tier}`));
    });
    keys.push(" ", el("span", {class: "key crossing"}, "crossing"), " ",
              el("span", {class: "key chosen"}, "your length"));
    const missing = tiers.filter(c => c.why);
    const legend = el("p", {class: "kvcalc-legend"}, ...keys);
    const notes = missing.length ? [el("p", {class: "kvcalc-legend-note"},
      "not drawn: " + missing.map(c => `${c.tier} (${formWords(c.why)})`).join("; "))] : [];
    box.replaceChildren(svg, legend, ...notes);
  }

  // ------------------------------------------------------------------ start
  window.kvcalc = {compute: compute, curve: curve, stateFrom: stateFrom, query: query,
                   tierStates: tierStates, tierBand: tierBand};
  function start() {
    const root = document.getElementById("kvcalc");
    if (!root) return;
    root.replaceChildren();
    build(root);
    const state = stateFrom(location.search);
    fillForm(root.querySelector("form"), state);
    update(root, state);
  }
  if (typeof document === "undefined") return;  // evaluated outside a page (Node, tests)
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
