"""The primitives the portable scenario logic (the modules of :mod:`kvmath.logic`) calls, in Python.

The calculator's JavaScript runtime (``_ext/kvcalc_runtime.js``) defines each name here with the
same meaning, so the logic, printed as JavaScript by :mod:`kvmath.codegen.pyjs`, runs unchanged
in the page:

* :func:`formula`: a catalogued SymPy expression's generated function, called with a dict of
  symbol values (numbers, or numpy arrays here);
* :class:`ScenarioError`, the one error a scenario raises; :class:`Layout`, :class:`Parallel`
  and :class:`PathHop`, the records the logic builds; :func:`with_fields`, a row (or a scenario
  record) with some fields changed;
  :func:`field`, a row's field by a computed name; :func:`is_float`, a number test;
* :func:`vmap`, a function evaluated over a list of numbers (one numpy call here);
  :func:`memo`, a result remembered by its inputs (here; the page recomputes);
* :data:`DATA`, the bundled tables as the logic reads them (:func:`portable_data`, which is also
  what the page's ``kvcalc-data.js`` holds).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from kvmath._generated import numeric as _numeric
from kvmath.errors import InputError
from kvmath.tables.families import FAMILIES
from kvmath.tiers.records import GPU_HOST_LINK, GPU_HOST_MEMORY


class Numeric:
    """A numeric expression, called by keyword with one value or numpy array per symbol.

    ``Numeric.generated(key)``: the generated function of a catalogued expression
    (:mod:`kvmath.codegen.catalogue`); ``Numeric(expr)``: any other SymPy expression,
    lambdified on the spot (the book's ad-hoc expressions). ``f(T=..., B=...)``; missing
    keywords raise TypeError; ``f.take(values)`` picks its arguments from a larger dict.
    """

    def __init__(self, expr=None, name="", *, func=None, arg_names=None, key=None):
        self.name = name
        self._key = key
        if func is None:
            import sympy as sp
            self._expr = expr
            symbols = tuple(sorted(expr.free_symbols, key=lambda s: s.name))
            func = sp.lambdify(symbols, expr, modules=[{"erf": _numeric._erf}, "numpy"])
            arg_names = tuple(s.name for s in symbols)
        self._f = func
        self.arg_names = tuple(arg_names)

    @classmethod
    def generated(cls, key, name=""):
        """The generated function for a key of :mod:`kvmath.codegen.catalogue`."""
        func, args = _numeric.FUNCS[key]
        return cls(name=name or key, func=func, arg_names=args, key=key)

    @property
    def expr(self):
        """The SymPy expression (imports the derivations)."""
        if self._key is not None:
            from kvmath.codegen.catalogue import expression
            return expression(self._key)
        return self._expr

    @property
    def symbols(self):
        return tuple(sorted(self.expr.free_symbols, key=lambda s: s.name))

    def __call__(self, **values):
        missing = [n for n in self.arg_names if n not in values]
        if missing:
            raise TypeError(f"{self.name or self.expr}: missing values for {', '.join(missing)}")
        return self.take(values)

    def take(self, values):
        """Call with the subset of a larger dict that this expression needs."""
        out = self._f(*[values[n] for n in self.arg_names])
        # scalars come back as plain Python numbers (numpy scalars print as np.float64(...))
        return out.item() if isinstance(out, np.generic) else out


@lru_cache(maxsize=None)
def _generated(key):
    return Numeric.generated(key)


def formula(key, values):
    """The catalogued expression ``key`` (kvmath.codegen.catalogue) at ``values`` (a dict by
    symbol name holding at least its arguments)."""
    return _generated(key).take(values)


def formula_quiet(key, values):
    """:func:`formula`, NaN where the expression divides by zero or overflows, without a
    warning: a search over TTLs from 10 ms to years meets both at its ends (the page's
    JavaScript gives NaN or an infinity there of itself)."""
    import math
    with np.errstate(all="ignore"):
        try:
            return _generated(key).take(values)
        except (ZeroDivisionError, OverflowError, FloatingPointError):
            return math.nan


class ScenarioError(ValueError, InputError):
    """A scenario that cannot be evaluated (e.g. TP degree that does not fit the KV heads)."""


@dataclass(frozen=True)
class Layout:
    """How a model is laid out on GPUs: attention TP, expert spread, dtypes, and why."""
    tp: int  #: GPUs that split one request's attention and KV (K)
    ep: int  #: expert-parallel ranks: 1 = routed experts sharded by tensor parallelism over the
    #: tp GPUs (vLLM's and SGLang's default); 1 < N <= tp = experts spread over N of the tp GPUs
    #: (each split tp / N ways) under tensor-parallel attention, no dispatch; N > tp =
    #: data-parallel attention in N / tp groups, each rank dispatching its own tokens
    dp_attention: bool
    weight_dtype: str
    compute_dtype: str
    kv_dtype: str
    reason: str  #: where the layout comes from (a sourced deployment, the user, the smallest fit)

    @property
    def gpus(self):
        """GPUs one replica occupies."""
        return max(self.tp, self.ep)

    @property
    def expert_gpus(self):
        """GPUs the routed experts' weights are spread over (K_e): the replica's GPUs."""
        return self.gpus


@dataclass(frozen=True)
class Parallel:
    """How one prefill forward is spread: ``gpus`` GPUs of one replica, attention tensor-parallel
    over them or (``dp_attention``) data-parallel in groups of ``tp_attn``, routed experts over
    ``ep`` ranks (None: sharded by tensor parallelism, or over every GPU with data-parallel
    attention), in ``compute_dtype``, ``batch`` equal prompts at once, the busiest expert rank's
    tokens ``imbalance`` times the mean."""
    gpus: int
    ep: int | None = None
    dp_attention: bool = False
    tp_attn: int = 1
    compute_dtype: str = "bf16"
    batch: int = 1
    imbalance: float = 1.0
    kernels: str | None = None  #: the engine whose kernels run it (kernels.csv); None: the scenario's


@dataclass(frozen=True)
class PathHop:
    link: str
    count: int
    scope: str
    effective_Bps: float  #: bandwidth x efficiency x count, after the engine's copy and I/O sizes
    latency_s: float
    host_memory: bool = False  #: the node's host memory (every rank's copies are read from it)


def with_fields(row, changes):
    """The row with the fields in ``changes`` (a dict) replaced."""
    return dataclasses.replace(row, **changes)


def field(row, name):
    """A row's field by name (the field's name computed)."""
    return getattr(row, name)


def is_float(x):
    """Whether x is a number, not a flag (in the page: any number)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def vmap(f, xs):
    """[f(x) for x in xs], as one vectorised call."""
    x = np.asarray(xs, dtype=float)
    return [float(y) for y in np.broadcast_to(np.asarray(f(x), dtype=float), x.shape)]


_MEMO = {}


def _frozen(x):
    if isinstance(x, dict):
        return tuple(sorted((k, type(v), _frozen(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_frozen(v) for v in x)
    return x


def memo(parts, thunk):
    """thunk(), remembered by ``parts`` (a list of the inputs it depends on) for the process:
    the crossings' bisection costs more than the rest of a comparison. A part that cannot be
    hashed (an array) means no memory."""
    try:
        key = _frozen(parts)
        hash(key)
    except TypeError:
        return thunk()
    if key not in _MEMO:
        if len(_MEMO) >= 4096:
            _MEMO.clear()
        _MEMO[key] = thunk()
    return _MEMO[key]


class _Data:
    """The bundled tables as the portable logic reads them (attributes built on first use)."""

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        value = portable_data()[name]
        setattr(self, name, value)
        return value


#: the tables the logic reads: DATA.links, DATA.deployments, ... (:func:`portable_data`)
DATA = _Data()


@lru_cache(maxsize=None)
def portable_data():
    """Every bundled table the scenario logic reads, keyed by name, in shapes both languages
    index alike (string keys, rows as records); the page's kvcalc-data.js is this as JSON."""
    from kvmath.tables.rows import (ENGINE_COST_PARAMETERS, DTYPE_BYTES, PEAK_FIELDS,
                                    allreduce_figures, bundled, copy_paths, deployments,
                                    engine_costs, moe_fits,
                                    engines, fitted_parameters, gpu_prices, plan_defaults, prices,
                                    rope_scalings, row_location)
    from kvmath.tables.costs import cost_evidence
    from kvmath.tables.schema import table
    from kvmath.tiers.kinds import KINDS
    cat = bundled()
    deps = {}
    for (model, gpu), d in deployments().items():
        deps.setdefault(model, {})[gpu] = d
    rope = {}  # by model: its bundled config window (the row a card's scaling applies to)
    for (model, method), r in rope_scalings().items():
        rope.setdefault(model, {"config_context_tokens": cat.models[model].max_context_tokens,
                                "methods": {}})["methods"][method] = r
    efficiency = {}
    for (item, quantity), e in cat.efficiencies.items():
        if quantity.startswith("prefill-"):
            efficiency.setdefault(item, {})[quantity[len("prefill-"):]] = e.value
    return {
        "gpu_host_link": GPU_HOST_LINK, "gpu_host_memory": GPU_HOST_MEMORY,
        "links": dict(cat.links), "copy_paths": copy_paths(), "deployments": deps, "compute_efficiency": efficiency,
        "activation_reserve_fraction": plan_defaults()["activation_reserve_fraction"].value,
        "dtypes": dict(table("dtypes")), "dtype_bytes": dict(DTYPE_BYTES),
        "engines": dict(engines()), "rope_scaling": rope,
        "engine_costs": {e: {p: r.value for p, r in engine_costs(e).items()} for e in engines()},
        "engine_cost_evidence": {e: cost_evidence(e) for e in engines()},
        "engine_cost_parameters": list(ENGINE_COST_PARAMETERS),
        "prefill_fit": fitted_parameters(),
        "allreduce": {g: list(f) for g, f in allreduce_figures().items()},
        "moe_fit": moe_fits(), "kernels": dict(table("kernels")),
        # the link an expert dispatch crosses between nodes (one per GPU on the bundled nodes)
        "scale_out_link": "nic-400g",
        "peak_fields": dict(PEAK_FIELDS),
        # where each bundled GPU is, for an error that names its row
        "gpu_rows": {n: "{}, row {}".format(*row_location("gpus", n)) for n in cat.gpus},
        "families": {n: {"replicated_latent": f.replicated_latent, "fields": dict(f.fields),
                         "derived": list(f.derived)} for n, f in FAMILIES.items()},
        # the reuse condition's prices (prices.csv, gpu_prices.csv) and the tokens a returning
        # turn adds (plan_defaults.csv)
        "prices": {k: p.value for k, p in prices().items()},
        "gpu_prices": {k: p.usd_per_gpu_hour for k, p in gpu_prices().items()},
        "turn_new_tokens": plan_defaults()["turn_new_tokens"].value,
        # the node's running batch a default layout holds beside a prompt (plan_defaults.csv)
        "running_batch_seqs": plan_defaults()["batch_seqs"].value,
        # what each tier kind declares (kvmath.tiers.kinds), as the logic reads it
        "tier_kinds": {n: k.portable() for n, k in KINDS.items()},
        # the records' defaults, so the page's constructors fill what the logic leaves out
        "record_defaults": {cls.__name__: {f.name: f.default for f in dataclasses.fields(cls)
                                           if f.default is not dataclasses.MISSING}
                            for cls in (Parallel, PathHop)},
    }
