/* The book's calculator: user interface only.
 *
 * Every formula comes from kvcalc-formulas.js (printed from the SymPy expressions by
 * kvmath.codegen.javascript into kvmath/_generated/kvcalc_formulas.js) and every number from kvcalc-data.js
 * (written at build time by kvmath.present.calculator from the bundled tables).
 * This file reads the state from the query string (parameter names = the CLI's flag names,
 * symbol names for a reader's own values), evaluates, and shows each result in an element whose
 * id is its `compare --json` key, with the full-precision value in data-value.
 */
(function () {
  "use strict";
  const F = window.KVCALC_FORMULAS, D = window.KVCALC_DATA;
  if (!F || !D) return;

  // ------------------------------------------------------------------ evaluation
  // The algorithms of kvmath.evaluate.compare (compare, scenario_values, choose_layout, tier_path,
  // numeric_crossings) and kvmath.evaluate.prefill.calibrated_values, in the same order; every formula
  // they apply is a generated function of F, every number a field of D.
  // the form's fields and their bounds: kvmath.scenario.options (the command line's own declarations)
  const O = D.options, NAMES = Object.keys(O);
  const FLAGS = NAMES.filter(k => O[k].flag);
  const CHOICES = NAMES.filter(k => O[k].text || O[k].choices.length);
  const NUMBERS = NAMES.filter(k => !FLAGS.includes(k) && !CHOICES.includes(k));
  const SYMBOLS = F.inputs.map(i => i.symbol);
  const S = F.scenario;

  class ScenarioError extends Error {}
  function fail(msg) { throw new ScenarioError(msg); }
  function fin(x) { return x === null ? Infinity : x; }
  function fmtInt(x) { return Math.round(x).toLocaleString("en-US"); }

  function stateFrom(search) {
    const q = new URLSearchParams(search), s = Object.assign({}, D.defaults);
    for (const k of CHOICES) if (q.has(k) && q.get(k) !== "") s[k] = q.get(k);
    for (const k of NUMBERS.concat(SYMBOLS)) {
      if (q.has(k) && q.get(k) !== "") s[k] = Number(q.get(k));
    }
    for (const k of FLAGS) if (q.has(k) && q.get(k) !== "false") s[k] = true;
    return s;
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

  function check(state) {
    if (!has(D.models, state.model)) return `unknown model ${state.model}`;
    if (!has(D.gpus, state.gpu)) return `unknown GPU ${state.gpu}`;
    if (!has(D.tiers, state.tier)) return `unknown tier ${state.tier}`;
    if (state.engine !== undefined && !has(D.engines, state.engine)) return `unknown engine ${state.engine}`;
    for (const k of ["kv-dtype", "compute-dtype"]) {
      if (state[k] !== undefined && !has(D.dtype_bytes, state[k])) return `unknown ${k} ${state[k]}`;
    }
    for (const k of NUMBERS) {
      if (k in state && !within(O[k], state[k])) return `${O[k].label} must be ${O[k].words}, got ${state[k]}`;
    }
    for (const k of SYMBOLS) {
      if (k in state && !within(D.own[k], state[k])) {
        return `your own ${k} must be ${D.own[k].words}, got ${state[k]}`;
      }
    }
    for (const k of CHOICES) {
      if (O[k].choices.length && state[k] !== undefined && !O[k].choices.includes(state[k])) {
        return `${O[k].label} must be ${O[k].words}, got '${state[k]}'`;
      }
    }
    if (!(state.tokens >= D.numeric_crossings.t_min)) {  // kvmath.evaluate.compare.MIN_PREFIX_TOKENS
      return `--tokens must be at least ${D.numeric_crossings.t_min}, got ${state.tokens}: a ` +
             "one-token prefix leaves nothing to reload beyond the request's own forward pass";
    }
    return null;
  }

  /** A model's symbol values (kvmath.evaluate.compare.architecture_values) with the reader's own. */
  function modelValues(state, kvDtype, weightDtype) {
    const m = D.models[state.model], v = Object.assign({}, m.values);
    for (const s of SYMBOLS) if (s in state && s in m.values) v[s] = state[s];
    v.b_kv = D.dtype_bytes[kvDtype];
    v.b_w = D.dtype_bytes[weightDtype];
    for (const [name, e] of Object.entries(F.architecture[m.attention])) v[name] = e.f(v);
    if (has(D.head_block_dtypes, kvDtype)) {  // kvmath.evaluate.values.kv_element_bytes
      const f = D.head_block_dtypes[kvDtype];
      v.b_kv = S.dtype_bytes.f({n_bits: f.n_bits, s_bits: f.s_bits, g_s: m.attention === "mla" ? v.e_kv : v.d_h});
    }
    return v;
  }
  function gpuValue(state, name, value) { return name in state ? state[name] : value; }

  function headsFit(state, k) {  // kvmath.evaluate.compare.heads_fit
    const m = D.models[state.model];
    if (gpuValue(state, "n_q", m.values.n_q) % k) return false;
    if (m.attention === "mla") return true;
    const n = gpuValue(state, "n_kv", m.values.n_kv);
    return !(n % k && k % n);
  }
  function replication(state, k) {
    const m = D.models[state.model];
    const nq = gpuValue(state, "n_q", m.values.n_q);
    if (nq % k) {
      fail(`--tp ${k} does not fit ${state.model}'s ${nq} attention heads: TP must divide them (vLLM and SGLang refuse it)`);
    }
    if (m.attention === "mla") return S.rho_mla.f({K: k});
    const n = gpuValue(state, "n_kv", m.values.n_kv);
    if (!headsFit(state, k)) {
      fail(`--tp ${k} does not fit ${state.model}'s ${n} KV heads: one must divide the other`);
    }
    return S.rho_gqa.f({K: k, n_kv: n});
  }

  function hbmSlack(state, layout, usable) {
    const g = D.gpus[state.gpu];
    const v = Object.assign(modelValues(state, layout.kv_dtype, layout.weight_dtype), {
      K: layout.tp, K_e: Math.max(layout.tp, layout.ep), rho: replication(state, layout.tp),
      n_seq: state.batch || 1, u_hbm: usable, C_hbm: gpuValue(state, "C_hbm", g.C_hbm),
      T: state.tokens});
    return {slack: S.hbm_slack.f(v), weights: S.weights_per_gpu.f(v),
            kv: (state.batch || 1) * F.outputs.kv_bytes_per_gpu.f(v)};
  }

  /** kvmath.evaluate.compare.choose_layout with check_fit (compare checks the fit). */
  function chooseLayout(state, usable) {
    const m = D.models[state.model], g = D.gpus[state.gpu];
    const tp = state.tp, ep = state.ep, kv = state["kv-dtype"];
    let compute = state["compute-dtype"], layout;
    if (ep !== undefined && ep > 1 && !m.is_moe) {
      fail(`--ep ${ep}: ${state.model} has no routed experts to spread (expert parallelism applies to MoE models only)`);
    }
    const experts = gpuValue(state, "E", m.values.E);
    if (ep !== undefined && m.is_moe && ep > experts) {
      fail(`--ep ${ep}: ${state.model} has ${experts} routed experts, so at most that many ranks hold one each`);
    }
    const served = (D.deployments[state.model] || {})[state.gpu];  // also sets a given TP's dtypes
    const dep = tp === undefined ? served : undefined;
    if (dep) {
      layout = {tp: dep.tp, ep: ep || dep.ep, dp_attention: dep.dp_attention,
                weight_dtype: dep.weight_dtype, compute_dtype: compute || dep.compute_dtype,
                kv_dtype: kv || dep.kv_dtype, reason: dep.reason};
    } else {
      let weight = served ? served.weight_dtype : m.weight_dtype;
      if (!compute) compute = served ? served.compute_dtype : weight === "fp8" && g.P.fp8 !== null ? "fp8" : "bf16";
      if ((compute === "fp8" || compute === "nvfp4") && D.dtype_bytes[weight] > D.dtype_bytes[compute]) weight = compute;
      const make = (k, why) => ({tp: k, ep: ep || 1, dp_attention: Boolean(ep && ep > k),
                                 weight_dtype: weight, compute_dtype: compute,
                                 kv_dtype: kv || (served || m).kv_dtype, reason: why});
      if (tp !== undefined) {
        replication(state, tp);
        layout = make(tp, "given");
      } else {
        const k = D.tp_candidates.find(c => headsFit(state, c) && hbmSlack(state, make(c, ""), usable).slack >= 0);
        if (k === undefined) {
          fail(`${state.model} does not fit ${D.tp_candidates.at(-1)} ${state.gpu} GPUs with ` +
               `${state.batch || 1} x ${fmtInt(state.tokens)} tokens of KV`);
        }
        layout = make(k, "smallest TP that holds the weights and the batch's KV");
      }
    }
    if (layout.ep > 1 && (layout.ep <= layout.tp ? layout.tp % layout.ep : layout.ep % layout.tp)) {
      fail(`--ep ${layout.ep} and --tp ${layout.tp}: one must divide the other (experts split tp / ep ways, or ep / tp attention groups)`);
    }
    const h = hbmSlack(state, layout, usable);
    if (h.slack < 0) {
      const fits = D.tp_candidates.filter(k => headsFit(state, k) && hbmSlack(state, Object.assign(
        {}, layout, {tp: k, ep: ep ? layout.ep : 1}), usable).slack >= 0);
      fail(`--tp ${layout.tp} cannot hold ${state.model} on ${state.gpu}` +
           (fits.length ? `; --tp ${fits[0]} fits` : ""));
    }
    layout.gpus = Math.max(layout.tp, layout.ep);
    return layout;
  }

  /** Engine.load_kernel: copies below kernel_below_bytes load by a kernel, no per-copy cost
   *  (CUDA only; driver_copies: the band's slow end, the driver copies the kernel replaced). */
  function loadKernel(eng, copy, platform) {
    return eng.kernel_below_bytes !== null && !eng.driver_copies && platform === "cuda" &&
      copy !== null && copy < eng.kernel_below_bytes;
  }

  /** kvmath.evaluate.compare.tier_path: the tier's hops and their effective bandwidths. */
  function tierPath(state, eng, copy) {
    const g = D.gpus[state.gpu];
    return D.tiers[state.tier].map(hop => {
      const host = hop.link === D.gpu_host_link;
      const name = host ? g.host_link : hop.link === D.gpu_host_memory ? g.host_memory_link : hop.link;
      const link = D.links[name];
      let one = link.B_one;
      const scope = hop.scope || link.scope;
      if (host && eng.copy_tokens !== null && copy !== null && !loadKernel(eng, copy, g.platform)) {
        // a batched call's copies at the driver's per-descriptor cost, where measured (the band's fast end)
        const fast = eng.fast_copies && eng.copy_batched && link.batched_copy_s !== null;
        one = S.bandwidth_at_size.f({s: copy, B: one, t_0: fast ? link.batched_copy_s : link.latency_s});
      }
      if (host && eng.writes_overlap) one *= link.duplex_retained;
      if (hop.requests) {  // a pool's read path: its own requests' size, cost and depth
        const [size, tReq, inFlight] = hop.requests;
        one = S.bandwidth_at_size_qd.f({s: size, q_io: inFlight, B: one, t_0: tReq});
      } else if (scope === "per-node" && eng.storage_io_bytes !== null && link.latency_s > 0 &&
                 hop.engine_io) {
        one = S.bandwidth_at_size_qd.f({s: eng.storage_io_bytes, q_io: eng.queue_depth, B: one,
                                        t_0: link.latency_s});
      }
      return {link: name, count: hop.count, scope: scope, effective_Bps: one * hop.count * hop.share,
              latency_s: link.latency_s + (hop.requests ? hop.requests[1] : 0),
              host_memory: hop.link === D.gpu_host_memory};
    });
  }

  /** kvmath.evaluate.compare.concurrent_at_load: the reloads sharing the busiest node-shared hop
   *  as one arrives, at the state's resumes per second (each reload alone on it, first). */
  function concurrentAtLoad(state) {
    const one = Object.assign({}, state, {"concurrent-reloads": 1});
    delete one["resume-rate"];
    const {v, hops} = values(one), rate = state["resume-rate"];
    let worst = 0, name = null, busiest = null;
    for (const h of hops) {
      if (h.copies === null) continue;
      const at = Object.assign({}, v, {T: state.tokens, r: rate, rho_n: h.copies, B_node: h.effective_Bps});
      const u = S.hop_utilisation.f(at);
      if (u > worst) { worst = u; name = h.link; busiest = at; }
    }
    if (busiest === null) return 1;  // no node-shared hop: each reload has its GPU's own link
    if (worst >= 1) {
      fail(`--resume-rate ${rate}/s saturates ${name}: each reload holds it for ` +
           `${sig3(worst / rate)} s, so at most ${sig3(rate / worst)} reloads per second fit`);
    }
    return S.concurrent_reloads_at_load.f(busiest);
  }

  /** kvmath.evaluate.compare.scenario_values: every symbol value but T, the hops and the layout. */
  function values(state, engine) {
    const g = D.gpus[state.gpu];
    const eng = engine || D.engines[state.engine || D.default_engine];
    const layout = chooseLayout(state, eng.hbm_fit_fraction);
    if (D.fp4_kv_dtypes.includes(layout.kv_dtype) && !g.fp4) {  // kvmath.evaluate.values.check_kv_dtype
      fail(`KV dtype ${layout.kv_dtype} (--kv-dtype, or the model row's kv_dtype) needs FP4 tensor ` +
           `cores (Blackwell): GPU ${state.gpu} has none (gpus.csv fp4_dense_flops is empty)`);
    }
    const v = modelValues(state, layout.kv_dtype, layout.weight_dtype);
    v.K = layout.tp;
    v.K_e = layout.gpus;
    v.rho = replication(state, layout.tp);
    const peak = g.P[layout.compute_dtype];
    if (peak === null) fail(`GPU ${state.gpu} has no ${layout.compute_dtype} tensor-core peak`);
    v.P = gpuValue(state, "P", peak);
    const eta = "efficiency" in state ? state.efficiency : g.eta[layout.compute_dtype];
    if (eta === null) fail(`no ${layout.compute_dtype} prefill efficiency for GPU ${state.gpu}; pass --efficiency`);
    v.eta = eta;
    v.B_hbm = gpuValue(state, "B_hbm", g.B_hbm);
    v.N_node = gpuValue(state, "N_node", g.N_node);
    const replicas = S.default_concurrency.f(v);  // kvmath.evaluate.compare.compare: no more than the node holds
    if ("concurrent-reloads" in state && state["concurrent-reloads"] > replicas) {
      fail(`--concurrent-reloads ${state["concurrent-reloads"]} exceeds the ${replicas} replica(s) of TP ` +
           `${layout.tp} that a node of ${v.N_node} ${state.gpu} GPUs holds (each replica reloads one ` +
           "cache at a time here; give at most that many)");
    }
    v.n_c = "concurrent-reloads" in state ? state["concurrent-reloads"] : replicas;
    if ("resume-rate" in state) v.n_c = concurrentAtLoad(state);
    const perModel = rule => rule === "always" || (rule === "mla" && D.models[state.model].attention === "mla");
    const once = perModel(eng.replicated_read_once);  // kvmath.evaluate.compare.reads_once, stores_once
    const single = eng.stored_once === "mla-single-node" ||
      (eng.stored_once === "mla-single-node-cuda" && D.gpus[state.gpu].platform === "cuda");
    const stored = eng.stored_once.startsWith("mla-single-node")
      ? single && D.models[state.model].attention === "mla" && layout.tp <= v.N_node
      : perModel(eng.stored_once);
    v.rho_n = once ? 1 : v.rho;
    v.rho_s = once || stored ? 1 : v.rho;
    let copy = null;
    if (eng.copy_tokens !== null) {
      v.c_tok = eng.copy_tokens;
      const mode = eng.copy_spans_layers;  // kvmath.evaluate.compare.copies_span_layers
      const spans = mode === "always" || (mode === "uniform" && !(v.L_win > 0 && v.L_full > 0));
      // per-layer copies carry K and V apart (a packing engine falls back for a hybrid); MLA: one tensor
      v.c_split = (eng.kv_split || (mode === "uniform" && !spans)) && D.models[state.model].attention !== "mla" ? 2 : 1;
      v.c_lay = spans ? v.L_full + v.L_win : 1;
      copy = S.copy_bytes.f(v);
    }
    const hops = tierPath(state, eng, copy);
    const narrowest = scope => Math.min(...hops.filter(h => h.scope === scope).map(h => h.effective_Bps));
    // kvmath.evaluate.compare.hop_copies: each node hop's copies; the path's B is the narrowest of them
    hops.forEach(h => { h.copies = h.scope !== "per-node" ? null : once || (stored && !h.host_memory) ? 1 : v.rho; });
    const nodeHops = hops.filter(h => h.copies !== null);
    const bGpu = narrowest("per-gpu");
    v.B = nodeHops.length
      ? Math.min(...nodeHops.map(h => S.B_path.f(Object.assign({}, v, {B_gpu: bGpu, B_node: h.effective_Bps, rho_n: h.copies}))))
      : S.B_path.f(Object.assign({}, v, {B_gpu: bGpu, B_node: Infinity}));
    // kvmath.evaluate.values.state_path_rate: a hybrid's state, split by head, never replicated
    v.B_state = nodeHops.length
      ? Math.min(...nodeHops.map(h => S.B_path_state.f(Object.assign({}, v, {B_gpu: bGpu, B_node: h.effective_Bps}))))
      : S.B_path_state.f(Object.assign({}, v, {B_gpu: bGpu, B_node: Infinity}));
    v.t_lat = hops.reduce((a, h) => a + h.latency_s, 0);
    // kvmath.evaluate.compare.request_cost_values: what the engine charges every request, and per loaded token
    const costs = eng.costs;
    v.t_req = costs.request_fixed_s || 0;
    v.c_hash = costs.hash_token_s || 0;
    v.c_tokz = state["token-ids"] ? 0 : costs.tokenize_token_s || 0;
    v.c_hit = state.tier === "hbm" ? 0 : costs.hit_token_s || 0;
    v.n = state["new-tokens"] || 1;
    v.n_step = eng.request_steps;
    // kvmath.evaluate.compare.scenario_values: a layer-by-layer load hides under the step from host memory only
    const tierHops = D.tiers[state.tier];
    const hostOnly = tierHops.length > 0 && tierHops.every(h => h.link === D.gpu_host_link || h.link === D.gpu_host_memory);
    v.o_lay = eng.layer_overlap && hostOnly ? 1 : 0;
    v.t_step = S.t_step_ideal.f(v);  // evaluate() re-times it with its prefill model
    v.t_0 = S.fixed_cost.f(v);
    if ("bandwidth" in state) v.B = v.B_state = state.bandwidth * D.flags.bandwidth.scale;
    return {v: v, hops: hops, layout: layout, engine: state.engine || D.default_engine, copy: copy};
  }

  /** kvmath.evaluate.prefill.calibrated_values for compare's layout: every value of the parts but T. */
  function calibratedValues(state, layout) {
    const m = D.models[state.model], g = D.gpus[state.gpu], tp = layout.gpus;
    const served = (D.deployments[state.model] || {})[state.gpu];  // as chooseLayout with this TP
    let weight = served ? served.weight_dtype : m.weight_dtype;
    if ((layout.compute_dtype === "fp8" || layout.compute_dtype === "nvfp4") &&
        D.dtype_bytes[weight] > D.dtype_bytes[layout.compute_dtype]) weight = layout.compute_dtype;
    const v = modelValues(state, (served || m).kv_dtype, weight);
    v.K = tp;
    v.K_e = tp;
    v.rho = replication(state, tp);
    v.P = gpuValue(state, "P", g.P[layout.compute_dtype]);
    v.eta = g.eta[layout.compute_dtype];
    v.B_hbm = gpuValue(state, "B_hbm", g.B_hbm);
    Object.assign(v, g.calibrated);
    v.r_dt = v.eta / g.prefill_efficiency;  // the FP8/BF16 matmul-ceiling ratio (prefill.py)
    v.P_a = g.P.bf16;
    v.B_peak = g.B_peak;
    v.n_seq = 1;
    let ep;
    // experts expert-parallel over layout.ep ranks, or sharded by TP (ep 1): evaluate.recompute_fn
    if (layout.dp_attention) { v.K_d = layout.tp; ep = tp; } else { v.K_d = tp; ep = layout.ep > 1 ? layout.ep : 1; }
    v.ep = ep;
    v.K_x = ep > 1 ? Math.floor(tp / ep) : tp;
    if (!m.is_moe) { v.E = 1; v.k_top = 1; }
    v.f_imb = ep > 1 ? D.default_imbalance : 1;
    return v;
  }

  /** (name, f(T) -> recompute seconds) of the prefill model in use (evaluate.recompute_fn). */
  function recomputeFn(state, sv) {
    let prefill = state.prefill || D.prefill_models[0];
    if ("efficiency" in state) prefill = "ideal";
    const ideal = T => F.outputs.recompute_s.f(Object.assign({}, sv.v, {T: T}));
    if (prefill === "ideal") return ["ideal", ideal];
    if (D.gpus[state.gpu].calibrated === null) return ["ideal (no calibration for this GPU)", ideal];
    const cv = calibratedValues(state, sv.layout);
    const parts = Object.values(F.prefill[D.models[state.model].attention]);
    return ["calibrated", T => {
      const at = Object.assign({}, cv, {T: T});
      return parts.reduce((a, p) => a + p.f(at), 0);
    }];
  }

  /** values() and the prefill model in use. */
  function timed(state) {
    const sv = values(state);
    const [prefillName, rec] = recomputeFn(state, sv);
    return {sv: sv, prefillName: prefillName, rec: rec};
  }

  /** The values at prefix length T with the engine step timed by the prefill model in use
   *  (kvmath.evaluate.compare.time_step): the new tokens' forward pass over the loaded prefix. */
  function timeStep(v, rec, T) {
    const at = Object.assign({}, v, {T: T, t_rec_p: rec(T), t_rec_pn: rec(T + v.n), t_rec_n: rec(v.n)});
    at.t_step = S.t_suffix.f(at);
    at.t_0 = S.fixed_cost.f(at);
    return at;
  }

  /** The reload with the node's shared hops to itself (one reload in flight), s. */
  function reloadAlone(state, rec) {
    const one = Object.assign({}, state, {"concurrent-reloads": 1});
    delete one["resume-rate"];
    return F.outputs.reload_s.f(timeStep(values(one).v, rec, state.tokens));
  }

  /** Positive roots in T of an advantage: sign changes on a log grid, then bisection. */
  function bracketRoots(f, lo, hi, points, iterations) {
    const roots = [], l0 = Math.log10(lo), step = (Math.log10(hi) - l0) / (points - 1);
    const grid = Array.from({length: points}, (_, i) => i === 0 ? lo : i === points - 1 ? hi : 10 ** (l0 + i * step));
    const vals = grid.map(f);
    for (let i = 0; i + 1 < points; i++) {
      if (Math.sign(vals[i]) * Math.sign(vals[i + 1]) >= 0) continue;
      let a = grid[i], b = grid[i + 1], fa = vals[i];
      for (let k = 0; k < iterations; k++) {
        const mid = Math.sqrt(a * b), fm = f(mid);
        if (Math.sign(fm) === Math.sign(fa)) { a = mid; fa = fm; } else b = mid;
      }
      roots.push(Math.sqrt(a * b));
    }
    return roots;
  }

  /** kvmath.evaluate.bands.binding_hop: the narrowest per-GPU hop when it sets B, else the
   *  narrowest node-shared one. */
  function bindingHop(v, hops) {
    const narrowest = hs => hs.reduce((a, h) => h.effective_Bps < a.effective_Bps ? h : a, hs[0]);
    const gpuHops = hops.filter(h => h.scope === "per-gpu"), nodeHops = hops.filter(h => h.scope === "per-node");
    const g = gpuHops.length ? narrowest(gpuHops) : null;
    if (g && Math.abs(v.B - g.effective_Bps) <= D.bands.binding_rel_tol * Math.max(Math.abs(v.B), Math.abs(g.effective_Bps))) return g;
    return narrowest(nodeHops.length ? nodeHops : gpuHops);
  }

  /** kvmath.evaluate.bands.band: each time at the ends of its measured band, never past physics. */
  function band(state, r, sv) {
    const BD = D.bands, v = sv.v, hops = sv.hops, eng = D.engines[sv.engine];
    const at = Object.assign({}, v, {T: state.tokens, t_0: r.reload_fixed_s});
    const tReload = B => F.outputs.reload_s.f(Object.assign({}, at, {B: B}));
    let reload = [r.reload_s, r.reload_s], bLo = null, bHi = null, fastest = r.reload_s, hop = null;
    if (hops.length) {  // the binding hop's measured spread, never above its spec rate
      hop = bindingHop(v, hops);
      const [lo, hi] = BD.bandwidth_range[hop.link];
      bLo = v.B * lo;
      bHi = v.B * Math.min(hi, 1 / BD.link_efficiency[hop.link]);
      if (eng.writes_overlap || eng.copy_batched) {  // nothing else offloading meanwhile
        const alone = values(state, Object.assign({}, eng, {writes_overlap: false, fast_copies: true})).v;
        bHi = Math.max(bHi, alone.B);
        fastest = Math.min(fastest, tReload(alone.B));
      }
      if (loadKernel(eng, sv.copy, D.gpus[state.gpu].platform)) {  // the driver copies it replaced
        bLo = Math.min(bLo, values(state, Object.assign({}, eng, {driver_copies: true})).v.B);
      }
      reload = [tReload(bHi), tReload(bLo)];
    }
    const ownFit = !BD.borrowed_fit_gpus.includes(state.gpu);
    let recompute;
    if (r.prefill_model === "calibrated") {  // the held-out error, never below the roofline
      const e = BD.calibrated_error[state.gpu];
      const floor = Math.min(F.outputs.recompute_s.f(at), r.recompute_s);
      let lo = 1 - e, hi = 1 + e;
      if (!ownFit) { lo = Math.min(lo, 1 / BD.borrowed_fit_factor); hi = Math.max(hi, BD.borrowed_fit_factor); }
      recompute = [Math.max(r.recompute_s * lo, floor), r.recompute_s * hi];
    } else {
      recompute = [r.recompute_s, r.recompute_s / BD.efficiency_low];
    }
    // a configuration validation rows show the model missing (same architecture, GPU, GPUs and
    // expert layout) carries that miss; your own model values are another architecture
    const own = Object.keys(D.own).some(k => has(state, k) && D.model_symbols.includes(k));
    const ep = r.ep > 1 ? r.ep : null;
    const limits = own ? [] : BD.known_limits.filter(k => k.models.includes(state.model) &&
      k.gpu === state.gpu && k.gpus === r.gpus && k.ep === ep && k.dp_attention === Boolean(r.dp_attention));
    const stepRatios = limits.filter(k => k.quantity === "decode_step_s" && r.new_tokens === 1).map(k => k.ratio);
    for (const k of limits) {
      if (k.quantity === "decode_step_s") continue;
      const [side, base] = k.quantity === "ttft_reload_s" ? [reload, r.reload_s] : [recompute, r.recompute_s];
      side[0] = Math.min(side[0], base * k.ratio);
      side[1] = Math.max(side[1], base * k.ratio);
    }
    const f = BD.engine_cost_factor[sv.engine];  // the fitted request costs' held-out error
    reload = [Math.min(reload[0], fastest / f), Math.max(reload[1], r.reload_s * f)];
    // the reload's own step moves with the recompute's band
    const step = r.reload_fixed_s - r.reload_latency_s;
    const stepLo = Math.min(step * recompute[0] / r.recompute_s, ...stepRatios.map(x => step * x));
    const stepHi = Math.max(step * recompute[1] / r.recompute_s, ...stepRatios.map(x => step * x));
    reload = [reload[0] - (step - stepLo), reload[1] + (stepHi - step)];
    // no widening beats physics: the latency, the step's low end and every hop at its spec rate
    const floor = r.reload_latency_s + stepLo + Math.max(0, ...r.path.map(h => h.bytes / (BD.link_spec_Bps[h.link] * h.count)));
    reload[0] = Math.max(reload[0], Math.min(floor, r.reload_s));
    const coldAdd = r.ttft_recompute_s - r.recompute_s, hitAdd = r.ttft_reload_s - r.reload_s;
    const hidden = r.overlap_hidden_s;
    let ends = [hidden, hidden];
    if (hops.length && v.o_lay) {
      const layers = v.L_full + v.L_win;
      ends = [[bHi, stepLo], [bLo, stepHi]].map(([b, s]) => v.o_lay * Math.min(r.kv_bytes_per_gpu / b, s) * (1 - 1 / layers));
    }
    const ttftRecompute = recompute.map(x => x + coldAdd);
    const ttftReload = reload.map((x, i) => x + hitAdd + hidden - ends[i]);
    const winners = new Set([r.winner]);
    for (const rc of ttftRecompute) for (const rl of ttftReload) winners.add(rl < rc ? "reload" : "recompute");
    return {recompute_s_band: recompute, reload_s_band: reload, ttft_recompute_s_band: ttftRecompute,
            ttft_reload_s_band: ttftReload, reload_bandwidth_Bps_band: hops.length ? [bLo, bHi] : null,
            verdict_flips_in_band: winners.size > 1, prefill_fit_own: ownFit,
            binding_hop: hop ? hop.link : null, known_limits: limits.map(k => k.id)};
  }

  function compute(state) {
    const err = check(state);
    if (err) return {error: err};
    try {
      const r = evaluate(state);
      Object.assign(r, band(r._state || state, r, r._sv));
      delete r._sv;
      delete r._state;
      // an answer is finite and positive, or it is not an answer (your own values can make
      // a model with no layers, or a GPU so slow a time overflows)
      for (const k of ["reload_s", "recompute_s", "ttft_reload_s", "ttft_recompute_s"]) {
        if (!(Number.isFinite(r[k]) && r[k] > 0)) {
          return {error: `no finite answer: ${k} is ${r[k]} for these values (check your own values)`};
        }
      }
      return r;
    } catch (e) {
      if (e instanceof ScenarioError) return {error: e.message};
      throw e;
    }
  }

  /** kvmath.evaluate.compare.compare: a hybrid model reloads its last state checkpoint and
   *  computes the tail past it with the new turn. */
  function evaluate(state) {
    const m = D.models[state.model];
    const r = evaluateAt(state);
    if (!(m.values.L_rec > 0)) return r;
    const c = r.state_checkpoint_tokens;
    const at = Math.floor(state.tokens / c) * c;
    if (at < D.numeric_crossings.t_min) {
      fail(`${state.model} keeps its recurrent state only every ${fmtInt(c)} tokens (vLLM's ` +
           `block grid at TP ${r.tp}): a prefix of ${fmtInt(state.tokens)} tokens has no ` +
           "checkpoint to reload, so it is recomputed");
    }
    let out = r;
    if (at < state.tokens) {
      const n = state["new-tokens"] || 1;
      const s2 = Object.assign({}, state, {tokens: at, "new-tokens": n + state.tokens - at, tp: r.tp});
      if (r.ep > 1) s2.ep = r.ep; else delete s2.ep;
      out = evaluateAt(s2);
      Object.assign(out, {tokens: state.tokens, new_tokens: n, layout_from: r.layout_from});
      out._state = s2;  // for band(): the scenario reloaded, at the checkpoint
    }
    // no reload below the first checkpoint: a crossing the continuous model puts there is at it
    const cross = [...new Set(out.breakeven_tokens.map(x => Math.max(x, c)))].sort((a, b) => a - b);
    return Object.assign(out, {state_checkpoint_at_tokens: at, state_tail_tokens: state.tokens - at,
                               breakeven_tokens: cross});
  }

  /** kvmath.evaluate.compare.compare_at: the scenario at exactly state.tokens reloaded. */
  function evaluateAt(state) {
    const m = D.models[state.model];
    if (state.tokens > m.max_context_tokens && !state["allow-beyond-context"]) {
      fail(`--tokens ${fmtInt(state.tokens)} exceeds ${state.model}'s context window of ` +
           `${fmtInt(m.max_context_tokens)} tokens (pass --allow-beyond-context to evaluate it anyway)`);
    }
    if ("resume-rate" in state && "concurrent-reloads" in state) {
      fail("give --resume-rate or --concurrent-reloads, not both (the load sets the reloads in " +
           "flight; --concurrent-reloads overrides it)");
    }
    const {sv, prefillName, rec} = timed(state), v = sv.v;
    const at = timeStep(v, rec, state.tokens);
    const r = {};
    for (const [key, e] of Object.entries(F.outputs)) r[key] = e.f(at);
    r.recompute_s = at.t_rec_p;
    // kvmath.evaluate.compare._ttft_crossings: where the TTFTs cross, each length with its own step
    const adv = T => { const a = timeStep(v, rec, T); return F.outputs.ttft_reload_s.f(a) - F.outputs.ttft_recompute_s.f(a); };
    const nc = D.numeric_crossings;
    const cross = bracketRoots(adv, nc.t_min, Math.max(m.max_context_tokens, state.tokens), nc.points, nc.iterations);
    const h = hbmSlack(state, sv.layout, D.engines[sv.engine].hbm_fit_fraction);
    const path = sv.hops.map(hop => {
      const bytes = hop.copies !== null
        ? v.n_c * F.outputs.node_hop_bytes.f(Object.assign({}, at, {rho_n: hop.copies}))
        : r.kv_bytes_per_gpu;
      const out = Object.assign({}, hop, {bytes: bytes, time_s: bytes / hop.effective_Bps});
      delete out.copies;
      delete out.host_memory;
      return out;
    });
    const L = sv.layout;
    Object.assign(r, {
      model: state.model, gpu: state.gpu, tier: state.tier, tokens: state.tokens,
      tp: L.tp, ep: L.ep, dp_attention: L.dp_attention, gpus: L.gpus, layout_from: L.reason,
      weight_dtype: L.weight_dtype, compute_dtype: L.compute_dtype, kv_dtype: L.kv_dtype,
      engine: sv.engine, prefill_model: prefillName, batch: state.batch || 1,
      concurrent_reloads: v.n_c, gpus_per_node: v.N_node, kv_replication: v.rho,
      kv_bytes_stored: v.rho_s * (r.kv_bytes_unique - r.state_bytes) + r.state_bytes,
      weights_bytes_per_gpu: h.weights, hbm_free_bytes_per_gpu: h.slack,
      prefill_efficiency: v.eta, reload_bandwidth_Bps: v.B, reload_latency_s: v.t_lat,
      new_tokens: v.n, token_ids: Boolean(state["token-ids"]),
      request_fixed_s: v.t_req, hash_token_s: v.c_hash, tokenize_token_s: v.c_tokz, hit_token_s: v.c_hit,
      hit_cost_s: v.c_hit * state.tokens, engine_costs_calibrated: D.engines[sv.engine].costs_calibrated,
      reload_step_s: at.t_step, reload_fixed_s: at.t_0, copy_bytes: sv.copy, path: path,
      winner: r.ttft_reload_s < r.ttft_recompute_s ? "reload" : "recompute",
      resume_rate_per_s: "resume-rate" in state ? state["resume-rate"] : null,
      // what sharing the node's hops adds to one reload at that load
      reload_queue_s: "resume-rate" in state ? r.reload_s - reloadAlone(state, rec) : 0,
      speedup: S.speedup.f({reload_s: r.ttft_reload_s, recompute_s: r.ttft_recompute_s}),
      breakeven_tokens: cross,
      min_reload_bandwidth_Bps: at.t_rec_pn > at.t_0 + v.c_hit * state.tokens
        ? S.breakeven_bandwidth_at.f(Object.assign({}, at, {t_rec: at.t_rec_pn})) : Infinity,
    });
    for (const [key, x] of Object.entries(r)) {
      if (typeof x === "number" && !Number.isFinite(x) && key !== "min_reload_bandwidth_Bps") {
        fail(`${state.model} on ${state.gpu}: ${key} is not a finite number; an input is out of range`);
      }
    }
    r._sv = sv;  // for band()
    return r;
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
    if (!ts.length) return "none: the same winner at every length from 2 tokens";
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
    const L = k => O[k].label;  // the form's words, declared with the option (kvmath.scenario.options)
    form.append(select("model", L("model"), Object.keys(D.models)),
                select("gpu", L("gpu"), Object.keys(D.gpus)),
                select("tier", L("tier"), Object.keys(D.tiers)),
                select("tp", L("tp"), []),
                number("tokens", L("tokens"), {min: String(D.numeric_crossings.t_min), step: "1"}),
                select("engine", L("engine"), [""].concat(Object.keys(D.engines)),
                       o => o || `default (${D.default_engine})`),
                select("prefill", L("prefill"), [""].concat(O.prefill.choices),
                       o => o || `default (${D.prefill_models[0]})`),
                select("kv-dtype", L("kv-dtype"), [""].concat(O["kv-dtype"].choices),
                       o => o || "deployment's"),
                select("compute-dtype", L("compute-dtype"), [""].concat(O["compute-dtype"].choices),
                       o => o || "deployment's"),
                number("ep", L("ep"), {min: "1", step: "1"}),
                number("batch", L("batch"), {min: "1", step: "1"}),
                number("concurrent-reloads", L("concurrent-reloads")),
                number("resume-rate", L("resume-rate")),
                number("efficiency", L("efficiency")),
                number("bandwidth", L("bandwidth")),
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
    root.append(form, status, el("div", {class: "kvcalc-scroll"}, out), plot,
                el("p", {}, link));
    form.addEventListener("input", e => {
      const s = readForm(form);
      if (e.target.tagName === "SELECT") {  // a new row: new TP choices and placeholders
        const m = D.models[s.model];
        if (m && s.tp !== undefined && !m.tps.includes(s.tp)) delete s.tp;
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
    for (const k of FLAGS) if (form.elements[k] && form.elements[k].checked) s[k] = true;
    return Object.assign({}, D.defaults, s);
  }

  function fillForm(form, state) {
    const m = D.models[state.model];
    const tp = form.elements.tp;
    tp.replaceChildren(el("option", {value: ""}, "deployment or smallest that fits"),
                       ...(m ? m.tps : []).map(k => el("option", {value: String(k)}, String(k))));
    for (const k of CHOICES.concat(NUMBERS, SYMBOLS)) {
      const f = form.elements[k];
      if (f) f.value = k in state ? String(state[k]) : "";
    }
    for (const k of FLAGS) form.elements[k].checked = Boolean(state[k]);
    if (!m || check(state)) return;
    let sv;
    try { sv = values(state); } catch (e) { if (e instanceof ScenarioError) return; throw e; }
    for (const s of SYMBOLS) {
      if (form.elements[s] && s in sv.v) form.elements[s].placeholder = String(Number(sv.v[s].toPrecision(6)));
    }
    form.elements.efficiency.placeholder = String(Number(sv.v.eta.toPrecision(4)));
    form.elements.bandwidth.placeholder = String(Number((sv.v.B / D.flags.bandwidth.scale).toPrecision(4)));
    form.elements["concurrent-reloads"].placeholder = String(Number(sv.v.n_c.toPrecision(4)));
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
      cell.dataset.value = Array.isArray(x) ? JSON.stringify(x) : String(x);  // full precision
      cell.textContent = FORMAT[key](x);
    }
    const url = query(state);
    root.querySelector("#kvcalc-permalink").href = url;
    if (!resizeOnly) history.replaceState(null, "", url + location.hash);
    plot(root.querySelector("#kvcalc-plot"), state, r);
  }

  // ------------------------------------------------------------------ plot (SVG, log-log)
  /** [T, recompute s, reload s] at each prompt length, as the chart draws them. */
  /** [T, ttft_recompute_s, ttft_reload_s] at each length: the times the verdict compares. */
  function curve(state, lengths) {
    const {sv, rec} = timed(state), v = sv.v;
    return lengths.map(T => {
      const at = timeStep(v, rec, T);
      return [T, F.outputs.ttft_recompute_s.f(at), F.outputs.ttft_reload_s.f(at)];
    });
  }

  /** The longest prompt the chart may draw, and why: the model's context window (unless the
   *  reader allows beyond it) and the length whose KV no longer fits HBM beside the weights
   *  (the largest T with hbm_slack >= 0, bisected in log space). */
  function chartLimit(state) {
    const m = D.models[state.model], {sv} = timed(state);
    const usable = D.engines[sv.engine].hbm_fit_fraction;
    const slack = T => hbmSlack(Object.assign({}, state, {tokens: T}), sv.layout, usable).slack;
    let lo = D.numeric_crossings.t_min, hi = 1e12, hbm = null;
    if (slack(hi) < 0) {
      for (let i = 0; i < 200 && hi / lo > 1 + 1e-3; i++) {
        const mid = Math.sqrt(lo * hi);
        if (slack(mid) >= 0) lo = mid; else hi = mid;
      }
      hbm = lo;
    }
    const ctx = state["allow-beyond-context"] ? null : m.max_context_tokens;
    if (hbm !== null && (ctx === null || hbm < ctx)) return {tokens: hbm, why: "HBM full"};
    return ctx === null ? null : {tokens: ctx, why: "context window"};
  }

  function plot(box, state, r) {
    const W = Math.max(280, Math.round(box.getBoundingClientRect().width) || 640), H = Math.round(Math.min(360, W * 0.6));
    const pad = {l: 64, r: 28, t: 12, b: 44};
    const lx0 = Math.log10(Math.max(D.numeric_crossings.t_min, Math.min(16, state.tokens / 10)));
    const limit = chartLimit(state);  // no curve past the window or past what HBM holds
    const wanted = Math.log10(Math.max(1e6, state.tokens * 10, ...r.breakeven_tokens.map(t => 3 * t)));
    const lx1 = limit ? Math.max(Math.log10(limit.tokens), lx0 + 1) : Math.ceil(wanted);
    const n = 240;
    const pts = curve(state, Array.from({length: n + 1}, (_, i) => Math.pow(10, lx0 + (lx1 - lx0) * i / n)));
    const ys = pts.flatMap(p => [p[1], p[2]]).concat(r.ttft_recompute_s_band, r.ttft_reload_s_band)
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
    svg.setAttribute("aria-label", "time to first token, recompute and reload, against prompt length");
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
    const path = idx => pts.map((p, i) => `${i ? "L" : "M"}${X(p[0]).toFixed(1)},${Y(p[idx]).toFixed(1)}`).join("");
    add("path", {d: path(1), class: "recompute"});
    add("path", {d: path(2), class: "reload"});
    for (const t of r.breakeven_tokens) {
      if (t < 10 ** lx0 || t > 10 ** lx1) continue;
      add("line", {x1: X(t), x2: X(t), y1: pad.t, y2: H - pad.b, class: "crossing"});
      add("text", {x: X(t) + 3, y: pad.t + 12, class: "crossing-label"}, Math.round(t).toLocaleString("en-US"));
    }
    if (limit) {
      add("line", {x1: X(limit.tokens), x2: X(limit.tokens), y1: pad.t, y2: H - pad.b, class: "limit"});
      add("text", {x: X(limit.tokens) - 3, y: pad.t + 12, "text-anchor": "end", class: "limit-label"},
          `${limit.why} (${Math.round(limit.tokens).toLocaleString("en-US")})`);
    }
    svg.dataset.limitTokens = limit ? String(limit.tokens) : "";
    // the scenario's own times to first token, on the curves they belong to
    // and their ranges (kvmath.evaluate.bands.band) as whiskers
    for (const [key, cls] of [["ttft_recompute_s_band", "recompute-band"], ["ttft_reload_s_band", "reload-band"]]) {
      const [lo, hi] = r[key].map(t => Math.min(Math.max(t, 10 ** ly0), 10 ** ly1));
      add("line", {x1: X(state.tokens), x2: X(state.tokens), y1: Y(lo), y2: Y(hi), class: cls});
    }
    add("circle", {cx: X(state.tokens), cy: Y(r.ttft_recompute_s), r: 4, class: "recompute-dot"});
    add("circle", {cx: X(state.tokens), cy: Y(r.ttft_reload_s), r: 4, class: "reload-dot"});
    const legend = el("p", {class: "kvcalc-legend"},
      el("span", {class: "key recompute"}, "recompute"), " ",
      el("span", {class: "key reload"}, "reload"), " ",
      el("span", {class: "key crossing"}, "crossing"));
    box.replaceChildren(svg, legend);
  }

  // ------------------------------------------------------------------ start
  window.kvcalc = {compute: compute, curve: curve, stateFrom: stateFrom, query: query};
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
