/* The book's calculator: user interface only.
 *
 * Every formula comes from kvcalc-formulas.js and every number from kvcalc-data.js, both
 * generated at build time by kvmath.webcalc from the SymPy expressions and the bundled tables.
 * This file reads the state from the query string (parameter names = the CLI's flag names,
 * symbol names for a reader's own values), evaluates, and shows each result in an element whose
 * id is its `compare --json` key, with the full-precision value in data-value.
 */
(function () {
  "use strict";
  const F = window.KVCALC_FORMULAS, D = window.KVCALC_DATA;
  if (!F || !D) return;

  // ------------------------------------------------------------------ evaluation
  const CHOICES = ["model", "gpu", "tier", "engine", "kv-dtype"];
  const NUMBERS = ["tokens", "tp", "efficiency", "bandwidth"];
  const SYMBOLS = D.inputs.map(i => i.symbol).filter(
    s => !Object.values(D.flags).some(f => f.symbol === s));

  function fin(x) { return x === null ? Infinity : x; }

  function stateFrom(search) {
    const q = new URLSearchParams(search), s = Object.assign({}, D.defaults);
    for (const k of CHOICES) if (q.has(k)) s[k] = q.get(k);
    for (const k of NUMBERS.concat(SYMBOLS)) {
      if (q.has(k) && q.get(k) !== "") s[k] = Number(q.get(k));
    }
    return s;
  }

  function check(state) {
    const m = D.models[state.model];
    if (!m) return `unknown model ${state.model}`;
    if (!D.gpus[state.gpu]) return `unknown GPU ${state.gpu}`;
    if (!D.paths[state.gpu][state.tier]) return `unknown tier ${state.tier}`;
    if (!(state.tokens > 0)) return "tokens must be positive";
    if (!m.tps.includes(state.tp)) return `TP ${state.tp} does not fit ${state.model}'s KV heads`;
    if (state["kv-dtype"] && !(state["kv-dtype"] in D.dtype_bytes)) return "unknown KV dtype";
    for (const k of ["efficiency", "bandwidth"].concat(SYMBOLS)) {
      if (k in state && !Number.isFinite(state[k])) return `${k} must be a number`;
    }
    if ("efficiency" in state && !(state.efficiency > 0 && state.efficiency <= 1)) {
      return "efficiency must be in (0, 1]";
    }
    return null;
  }

  /** Symbol values of a scenario, in the order compare() builds them. */
  function values(state) {
    const m = D.models[state.model], g = D.gpus[state.gpu], p = D.paths[state.gpu][state.tier];
    const v = Object.assign({}, m.values, g.values, {K: state.tp, t_0: p.t_0,
                                                      B_gpu: fin(p.B_gpu), B_node: fin(p.B_node)});
    if (state["kv-dtype"]) v.b_kv = D.dtype_bytes[state["kv-dtype"]];
    const engine = D.engines.find(e => e.name === state.engine);
    if (engine) Object.assign(v, engine.values);
    for (const s of SYMBOLS) if (s in state) v[s] = state[s];
    for (const [name, e] of Object.entries(F.architecture[m.attention])) v[name] = e.f(v);
    for (const [name, e] of Object.entries(F.path)) v[name] = e.f(v);
    for (const [flag, f] of Object.entries(D.flags)) if (flag in state) v[f.symbol] = state[flag] * f.scale;
    return v;
  }

  /** Positive roots in T of the crossing expression: sign changes on a log grid, then bisection. */
  function crossings(v) {
    const f = T => F.crossing.f(Object.assign({}, v, {T: T}));
    const lo = -3, hi = 12, perDecade = 200, roots = [];
    let a = Math.pow(10, lo), fa = f(a);
    for (let i = 1; i <= (hi - lo) * perDecade; i++) {
      const b = Math.pow(10, lo + i / perDecade), fb = f(b);
      if (fa === 0) roots.push(a);
      else if (fa * fb < 0) {
        let x0 = a, x1 = b, f0 = fa;
        for (let k = 0; k < 200 && x1 - x0 > 1e-15 * x1; k++) {
          const mid = 0.5 * (x0 + x1), fm = f(mid);
          if (fm === 0) { x0 = x1 = mid; break; }
          if (f0 * fm < 0) x1 = mid; else { x0 = mid; f0 = fm; }
        }
        roots.push(0.5 * (x0 + x1));
      }
      a = b; fa = fb;
    }
    return roots;
  }

  function compute(state) {
    const err = check(state);
    if (err) return {error: err};
    const v = values(state), at = Object.assign({}, v, {T: state.tokens}), r = {};
    for (const [key, e] of Object.entries(F.outputs)) r[key] = e.f(at);
    return Object.assign(r, {
      model: state.model, gpu: state.gpu, tier: state.tier, tokens: state.tokens, tp: state.tp,
      kv_dtype: state["kv-dtype"] || D.models[state.model].kv_dtype,
      kv_replication: v.rho, prefill_efficiency: v.eta,
      reload_bandwidth_Bps: v.B, reload_latency_s: v.t_0,
      winner: r.reload_s < r.recompute_s ? "reload" : "recompute",
      breakeven_tokens: crossings(v),
    });
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
    if (!ts.length) return "none: the same winner at every length";
    const w = ts.map(t => Math.round(t).toLocaleString("en-US"));
    const joined = w.length <= 2 ? w.join(" and ") : w.slice(0, -1).join(", ") + ", and " + w.at(-1);
    return joined + " tokens";
  }
  const FORMAT = {
    recompute_s: fmtTime, reload_s: fmtTime, compute_s: fmtTime, weights_read_s: fmtTime,
    reload_latency_s: fmtTime, kv_bytes: fmtBytes, kv_bytes_per_gpu: fmtBytes,
    kv_bytes_per_token: n => `${Math.round(n).toLocaleString("en-US")} B`,
    min_reload_bandwidth_Bps: b => Number.isFinite(b) ? `${fmtBytes(b)}/s per GPU`
      : "none suffices (latency alone loses)",
    reload_bandwidth_Bps: b => `${fmtBytes(b)}/s per GPU`,
    speedup: x => `${sig3(x)}×`, winner: w => w, breakeven_tokens: fmtTokens,
    prefill_flops: x => x.toPrecision(3) + " FLOP",
    model_flops_per_kv_byte: x => `${Math.round(x).toLocaleString("en-US")} FLOP/B`,
    model_flops_per_kv_byte_at_tokens: x => `${Math.round(x).toLocaleString("en-US")} FLOP/B`,
    gpu_flops_per_link_byte: x => `${Math.round(x).toLocaleString("en-US")} FLOP/B`,
    prefill_efficiency: x => `${sig3(100 * x)} % of peak`, kv_replication: x => `${sig3(x)}`,
  };
  const LABELS = [
    ["winner", "winner"], ["speedup", "faster by"], ["recompute_s", "recompute"],
    ["reload_s", "reload"], ["breakeven_tokens", "crossings"],
    ["min_reload_bandwidth_Bps", "minimum bandwidth"], ["compute_s", "prefill compute"],
    ["weights_read_s", "weight read (floor)"], ["kv_bytes", "KV moved"],
    ["kv_bytes_per_gpu", "KV per GPU"], ["kv_bytes_per_token", "KV per token"],
    ["kv_replication", "KV copies (TP)"], ["prefill_flops", "prefill FLOPs"],
    ["prefill_efficiency", "prefill efficiency"], ["reload_bandwidth_Bps", "reload bandwidth"],
    ["reload_latency_s", "reload latency"], ["model_flops_per_kv_byte", "model FLOP per KV byte"],
    ["model_flops_per_kv_byte_at_tokens", "… at this length"],
    ["gpu_flops_per_link_byte", "GPU FLOP per link byte"],
  ];

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
    form.append(select("model", "model", Object.keys(D.models)),
                select("gpu", "GPU", Object.keys(D.gpus)),
                select("tier", "tier", D.tiers),
                select("tp", "TP (GPUs)", []),
                number("tokens", "prompt length (tokens)", {min: "1", step: "1"}),
                select("kv-dtype", "KV dtype", [""].concat(Object.keys(D.dtype_bytes)),
                       o => o || "model's"));
    if (D.engines.length) {
      form.append(select("engine", "engine", [""].concat(D.engines.map(e => e.name)),
                         o => o || "none"));
    }
    form.append(number("efficiency", "prefill efficiency (0–1)"),
                number("bandwidth", "reload bandwidth per GPU (GB/s)"));
    const own = el("details", {class: "kvcalc-own"}, el("summary", {}, "Your own values for the model and GPU rows"));
    const grid = el("div", {class: "kvcalc-form"});
    for (const i of D.inputs) {
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
    root.append(form, status, el("div", {class: "kvcalc-scroll"}, out), plot,
                el("p", {}, link));
    form.addEventListener("input", e => {
      const s = readForm(form);
      if (e.target.tagName === "SELECT") {  // a new row: new TP choices and placeholders
        const m = D.models[s.model];
        if (m && !m.tps.includes(s.tp)) s.tp = m.tps[0];
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
      if (f && f.value !== "") s[k] = Number(f.value);
    }
    return Object.assign({}, D.defaults, s);
  }

  function fillForm(form, state) {
    const m = D.models[state.model];
    const tp = form.elements.tp;
    tp.replaceChildren(...(m ? m.tps : []).map(k => el("option", {value: String(k)}, String(k))));
    for (const k of CHOICES.concat(NUMBERS, SYMBOLS)) {
      const f = form.elements[k];
      if (f) f.value = k in state ? String(state[k]) : "";
    }
    if (!m) return;
    const v = values(Object.assign({}, state, {tp: m.tps.includes(state.tp) ? state.tp : m.tps[0]}));
    for (const s of SYMBOLS) if (form.elements[s]) form.elements[s].placeholder = String(Number(v[s].toPrecision(6)));
    form.elements.efficiency.placeholder = String(Number(v.eta.toPrecision(4)));
    form.elements.bandwidth.placeholder = String(Number((v.B / D.flags.bandwidth.scale).toPrecision(4)));
  }

  function query(state) {
    const q = new URLSearchParams();
    for (const k of CHOICES.concat(NUMBERS, SYMBOLS)) if (k in state && state[k] !== "") q.set(k, state[k]);
    return "?" + q.toString();
  }

  function update(root, state, resizeOnly) {
    const r = compute(state);
    const status = root.querySelector("#kvcalc-status");
    if (r.error) { status.textContent = r.error; return; }
    status.textContent = `${r.winner} wins for ${r.model} on ${r.tp}× ${r.gpu}, ` +
      `tier ${r.tier}, ${r.tokens.toLocaleString("en-US")} tokens`;
    for (const [key] of LABELS) {
      const cell = root.querySelector(`#${key}`);
      const x = r[key];
      cell.dataset.value = Array.isArray(x) ? JSON.stringify(x) : String(x);
      cell.textContent = FORMAT[key](x);
    }
    const url = query(state);
    root.querySelector("#kvcalc-permalink").href = url;
    if (!resizeOnly) history.replaceState(null, "", url + location.hash);
    plot(root.querySelector("#kvcalc-plot"), state, r);
  }

  // ------------------------------------------------------------------ plot (SVG, log-log)
  function plot(box, state, r) {
    const v = values(state);
    const W = Math.max(280, Math.round(box.getBoundingClientRect().width) || 640), H = Math.round(Math.min(360, W * 0.6));
    const pad = {l: 64, r: 28, t: 12, b: 44};
    const lx0 = Math.floor(Math.log10(Math.min(16, state.tokens / 10)));
    const lx1 = Math.ceil(Math.log10(Math.max(1e6, state.tokens * 10, ...r.breakeven_tokens.map(t => 3 * t))));
    const n = 240, pts = [];
    for (let i = 0; i <= n; i++) {
      const T = Math.pow(10, lx0 + (lx1 - lx0) * i / n), at = Object.assign({}, v, {T: T});
      pts.push([T, F.outputs.recompute_s.f(at), F.outputs.reload_s.f(at)]);
    }
    const ys = pts.flatMap(p => [p[1], p[2]]).filter(y => y > 0 && Number.isFinite(y));
    const ly0 = Math.floor(Math.log10(Math.min(...ys))), ly1 = Math.ceil(Math.log10(Math.max(...ys)));
    const X = T => pad.l + (W - pad.l - pad.r) * (Math.log10(T) - lx0) / (lx1 - lx0);
    const Y = t => H - pad.b - (H - pad.t - pad.b) * (Math.log10(t) - ly0) / Math.max(1, ly1 - ly0);
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    svg.setAttribute("width", "100%");
    svg.dataset.width = W;
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "recompute and reload time against prompt length");
    const add = (tag, attrs, text) => {
      const e = document.createElementNS(ns, tag);
      for (const [k, val] of Object.entries(attrs)) e.setAttribute(k, val);
      if (text !== undefined) e.textContent = text;
      svg.append(e); return e;
    };
    for (let k = lx0; k <= lx1; k++) {
      add("line", {x1: X(10 ** k), x2: X(10 ** k), y1: pad.t, y2: H - pad.b, class: "grid"});
      if ((k - lx0) % Math.ceil((lx1 - lx0) / Math.max(2, Math.floor(W / 70))) === 0) {
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
    const path = idx => pts.map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[idx]).toFixed(1)}`).join("");
    add("path", {d: path(1), class: "recompute"});
    add("path", {d: path(2), class: "reload"});
    for (const t of r.breakeven_tokens) {
      if (t < 10 ** lx0 || t > 10 ** lx1) continue;
      add("line", {x1: X(t), x2: X(t), y1: pad.t, y2: H - pad.b, class: "crossing"});
      add("text", {x: X(t) + 3, y: pad.t + 12, class: "crossing-label"}, Math.round(t).toLocaleString("en-US"));
    }
    add("circle", {cx: X(state.tokens), cy: Y(r.recompute_s), r: 4, class: "recompute-dot"});
    add("circle", {cx: X(state.tokens), cy: Y(r.reload_s), r: 4, class: "reload-dot"});
    const legend = el("p", {class: "kvcalc-legend"},
      el("span", {class: "key recompute"}, "recompute"), " ",
      el("span", {class: "key reload"}, "reload"), " ",
      el("span", {class: "key crossing"}, "crossing"));
    box.replaceChildren(svg, legend);
  }

  // ------------------------------------------------------------------ start
  window.kvcalc = {compute: compute, stateFrom: stateFrom, query: query};
  function start() {
    const root = document.getElementById("kvcalc");
    if (!root) return;
    root.replaceChildren();
    build(root);
    const state = stateFrom(location.search);
    fillForm(root.querySelector("form"), state);
    update(root, state);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
