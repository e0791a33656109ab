/* The calculator's runtime: what the scenario logic, printed from Python
 * (kvmath/logic/ by kvmath.codegen.pyjs into kvcalc-logic.js), calls.
 *
 * Two kinds of names, nothing of the scenario itself:
 *  - Python's meanings where JavaScript differs (truthiness, and/or, %, min/max, `in`, str and
 *    format specs), so the printed logic computes what the Python computes;
 *  - the primitives of kvmath.logic.runtime, one for one: formula (a catalogued expression's
 *    generated function, from kvcalc-formulas.js), ScenarioError, the records Layout, Parallel
 *    and PathHop,
 *    with_fields, field, is_float, vmap, memo, and DATA (the tables, from kvcalc-data.js).
 */
(function () {
  "use strict";
  const F = window.KVCALC_FORMULAS, D = window.KVCALC_DATA;
  if (!F || !D) return;

  class ScenarioError extends Error {}
  const own = (o, k) => o !== null && typeof o === "object" && Object.prototype.hasOwnProperty.call(o, k);

  // ------------------------------------------------------------------ Python's meanings
  function truthy(x) {
    if (x === null || x === undefined) return false;
    if (Array.isArray(x) || typeof x === "string") return x.length > 0;
    if (typeof x === "object") return Object.keys(x).length > 0;
    return Boolean(x);
  }
  const and_ = (a, b) => truthy(a) ? b() : a;
  const or_ = (a, b) => truthy(a) ? a : b();
  const mod = (a, b) => a - b * Math.floor(a / b);
  function list(x) {
    if (Array.isArray(x)) return x;
    if (typeof x === "string") return Array.from(x);
    if (x !== null && typeof x === "object") return Object.keys(x);
    throw new TypeError(`not iterable: ${x}`);
  }
  function contains(c, x) {
    if (Array.isArray(c) || typeof c === "string") return c.includes(x);
    return own(c, x);
  }
  const get = (o, k, d) => own(o, k) ? o[k] : (d === undefined ? null : d);
  const len = x => Array.isArray(x) || typeof x === "string" ? x.length : Object.keys(x).length;
  function range(a, b, step) {
    if (b === undefined) { b = a; a = 0; }
    step = step || 1;
    const out = [];
    for (let i = a; step > 0 ? i < b : i > b; i += step) out.push(i);
    return out;
  }
  const enumerate = xs => list(xs).map((x, i) => [i, x]);
  function zip(...xss) {
    const n = Math.min(...xss.map(xs => list(xs).length));
    return Array.from({length: n}, (_, i) => xss.map(xs => list(xs)[i]));
  }
  const cmp = (a, b) => a < b ? -1 : a > b ? 1 : 0;
  const sorted = xs => [...list(xs)].sort(cmp);
  const sum = xs => list(xs).reduce((a, x) => a + x, 0);
  const any = xs => list(xs).some(truthy);
  const all = xs => list(xs).every(truthy);
  const unique = xs => [...new Set(list(xs))];
  const dict = o => Object.assign({}, o);
  const copy = x => Array.isArray(x) ? x.slice() : Object.assign({}, x);
  const items = o => Object.entries(o);
  const keys = o => Object.keys(o);
  const values = o => Object.values(o);
  const join = (sep, xs) => list(xs).join(sep);
  function pick(xs, better, key, dflt) {  // min/max of an iterable, Python's way
    const a = list(xs);
    if (!a.length) {
      if (dflt === undefined) throw new ScenarioError("min()/max() of an empty sequence");
      return dflt;
    }
    const k = key || (x => x);
    return a.reduce((best, x) => better(k(x), k(best)) ? x : best);
  }
  const min_of = (xs, key, dflt) => pick(xs, (a, b) => a < b, key, dflt);
  const max_of = (xs, key, dflt) => pick(xs, (a, b) => a > b, key, dflt);
  const min = (...xs) => min_of(xs);
  const max = (...xs) => max_of(xs);
  const isinf = x => x === Infinity || x === -Infinity;
  function isclose(a, b, opts) {
    const rel = opts && opts.rel_tol !== undefined ? opts.rel_tol : 1e-9;
    const abs = opts && opts.abs_tol !== undefined ? opts.abs_tol : 0;
    if (a === b) return true;
    if (isinf(a) || isinf(b)) return false;
    return Math.abs(a - b) <= Math.max(rel * Math.max(Math.abs(a), Math.abs(b)), abs);
  }

  // ------------------------------------------------------------------ str, repr and format specs
  /** Python's repr of a float from its shortest round-trip digits (scientific below 1e-4 and
   *  from 1e16), ints as integers: the page cannot tell 8 from 8.0, so both print "8". */
  function num(x) {
    if (Number.isNaN(x)) return "nan";
    if (isinf(x)) return x > 0 ? "inf" : "-inf";
    if (Number.isInteger(x) && Math.abs(x) < 1e16) return String(x);
    const [m, e] = x.toExponential().split("e");
    const exp = Number(e);
    if (exp < -4 || exp >= 16) return `${m}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
    return String(x);
  }
  function str(x) {
    if (x === null || x === undefined) return "None";
    if (x === true) return "True";
    if (x === false) return "False";
    if (typeof x === "number") return num(x);
    if (Array.isArray(x)) return "[" + x.map(y => repr(y, "")).join(", ") + "]";
    return String(x);
  }
  function repr(x, spec) {
    if (typeof x === "string") {  // Python's quotes: double where the text holds only single
      const body = x.replace(/\\/g, "\\\\");
      if (x.includes("'") && !x.includes('"')) return '"' + body + '"';
      return "'" + body.replace(/'/g, "\\'") + "'";
    }
    return fmt(x, spec);
  }
  const group = s => s.replace(/^(-?)(\d+)/, (_, sign, d) => sign + d.replace(/\B(?=(\d{3})+(?!\d))/g, ","));
  function general(x, p) {  // Python's 'g': p significant digits, trailing zeros dropped
    if (p === 0) p = 1;
    if (x === 0) return "0";
    const [m, e] = x.toExponential(p - 1).split("e");
    const exp = Number(e);
    const strip = s => s.includes(".") ? s.replace(/\.?0+$/, "") : s;
    if (exp < -4 || exp >= p) {
      return `${strip(m)}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
    }
    return strip(x.toFixed(Math.max(0, p - 1 - exp)));
  }
  /** Python's format(x, spec) for the specs the logic uses: [,][.precision][f|g|%|e|d]. */
  function fmt(x, spec) {
    if (typeof x !== "number") return str(x);
    if (!spec) return num(x);
    const m = /^(,)?(?:\.(\d+))?([fFgGe%d]?)$/.exec(spec);
    if (!m) throw new Error(`format spec ${spec} not supported`);
    const [, comma, prec, type] = m;
    const p = prec === undefined ? null : Number(prec);
    if (Number.isNaN(x) || isinf(x)) return num(x);
    let s;
    if (type === "f" || type === "F") s = x.toFixed(p === null ? 6 : p);
    else if (type === "%") s = (100 * x).toFixed(p === null ? 6 : p) + "%";
    else if (type === "e") s = x.toExponential(p === null ? 6 : p).replace(/e([+-])(\d)$/, "e$10$2");
    else if (type === "d") s = String(Math.round(x));
    else if (type === "g" || type === "G") s = general(x, p === null ? 6 : p);
    else s = p === null ? num(x) : general(x, p);
    return comma ? group(s) : s;
  }

  // ------------------------------------------------------------------ kvmath.logic.runtime
  function formula(key, v) {
    if (!own(F.formulas, key)) throw new Error(`no formula ${key} in kvcalc-formulas.js`);
    return F.formulas[key].f(v);
  }
  function Layout(f) {  // the record of kvmath.logic.runtime.Layout, with its properties
    const gpus = Math.max(f.tp, f.ep);
    return Object.assign({}, f, {gpus: gpus, expert_gpus: gpus});
  }
  // records with the defaults of their Python dataclasses (kvmath.logic.runtime.portable_data)
  const PathHop = f => Object.assign({}, D.logic.record_defaults.PathHop, f);
  const Parallel = f => Object.assign({}, D.logic.record_defaults.Parallel, f);
  const with_fields = (row, changes) => Object.assign({}, row, changes);
  const field = (row, name) => row[name];
  const is_float = x => typeof x === "number";
  const vmap = (f, xs) => xs.map(x => f(x));
  const memo = (parts, thunk) => thunk();
  // a division by zero or an overflow is NaN or an infinity here already (Python's raises)
  const formula_quiet = formula;

  /** erf(x), the formulas' one special function (Python's is math.erf), to about 1e-15
   *  relative: below 2.5 the series e^(-x^2) sum (2x^2)^n x / (1 3 ... (2n+1)), every term
   *  positive (Abramowitz and Stegun 7.1.6); above it one minus erfc's continued fraction
   *  (A&S 7.1.14), evaluated by Lentz's method; 1 from 6 on (erfc(6) < 3e-17). */
  function erf(x) {
    if (Number.isNaN(x)) return NaN;
    const a = Math.abs(x), sign = x < 0 ? -1 : 1;
    if (a >= 6) return sign;
    if (a < 2.5) {
      const q = 2 * a * a;
      let term = a, sum = a;
      for (let n = 1; n < 500 && term > sum * 1e-17; n++) {
        term *= q / (2 * n + 1);
        sum += term;
      }
      return sign * (2 / Math.sqrt(Math.PI)) * Math.exp(-a * a) * sum;
    }
    // erfc(a) = e^(-a^2) / sqrt(pi) / (a + (1/2) / (a + (2/2) / (a + (3/2) / (a + ...))))
    let f = a, C = a, D = 0;
    for (let k = 1; k < 500; k++) {
      D = 1 / (a + (k / 2) * D);
      C = a + (k / 2) / C;
      const delta = C * D;
      f *= delta;
      if (Math.abs(delta - 1) < 1e-16) break;
    }
    return sign * (1 - Math.exp(-a * a) / Math.sqrt(Math.PI) / f);
  }

  window.KVCALC_RUNTIME = {
    truthy, and_, or_, mod, list, contains, get, len, range, enumerate, zip, sorted, sum, any, all,
    unique, dict, copy, items, keys, values, join, min, max, min_of, max_of, isinf, isclose,
    str, repr, fmt, formula, formula_quiet, ScenarioError, Layout, Parallel, PathHop, with_fields, field,
    is_float, vmap, memo, erf, DATA: D.logic,
  };
})();
