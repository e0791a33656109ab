"""Every SymPy expression that kvmath evaluates numerically, by key (not on the answer path).

``scripts/generate_numeric.py`` prints each one, after common-subexpression elimination,
into :mod:`kvmath._generated.numeric`; ``kvmath.evaluate.compare.Numeric`` looks them up by key there, so no
answer pays for SymPy. Keys: ``<module>.<name>`` for a module-level expression of
kvmath/derive/*.py, ``[i]`` for an item of a list, ``.<part>`` for a value of a dict, plus the
pieces the evaluators build from functions (parameter counts, crossing regimes, busy
coefficients).
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp
from sympy.core.function import AppliedUndef

from kvmath.derive import kv as derive
from kvmath.derive.attention import FAMILIES
from kvmath.derive import prefill as derive_prefill
from kvmath.derive import reuse as derive_reuse
from kvmath.derive import serving as derive_serving

#: each derivation module and the prefix of its keys (stable names: the keys predate the
#: derive/ folder, and code and tests look expressions up by them)
MODULES = ((derive, "derive"), (derive_prefill, "derive_prefill"), (derive_reuse, "derive_reuse"),
           (derive_serving, "derive_serving"))


def _numeric(value):
    return (isinstance(value, (sp.Expr, sp.logic.boolalg.Boolean))
            and not isinstance(value, (sp.Symbol, sp.logic.boolalg.BooleanAtom))
            and not value.atoms(AppliedUndef))


def _module_entries(module, prefix):
    out = []
    for name, value in vars(module).items():
        if name.startswith("__"):
            continue
        key = f"{prefix}.{name}"
        if isinstance(value, sp.Symbol):
            if name in _ALIASES.get(prefix, ()):
                out.append((key, value))
        elif _numeric(value):
            out.append((key, value))
        elif isinstance(value, list) and value and all(_numeric(v) for v in value):
            out.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, dict) and value and all(
                isinstance(k, str) and _numeric(v) for k, v in value.items()):
            out.extend((f"{key}.{k}", v) for k, v in value.items())
    return out


#: module-level names that are a bare symbol yet are evaluated as an expression
_ALIASES = {}


def family_entries(name, fam):
    """Each attention family's expressions, keyed ``attention.<family>.<name>`` (a bare symbol,
    such as MLA's rho = K, is an expression too)."""
    out = [(f"attention.{name}.{item}", sp.sympify(getattr(fam, item)))
           for item in ("e_kv", "rho", "attn_params", "head_elements", "aux_elements")]
    out += [(f"attention.{name}.derived.{sym}", sp.sympify(e)) for sym, e in fam.derived.items()]
    out.append((f"attention.{name}.params_active_matmul", derive.params_active_matmul(fam.attn_params)))
    out.append((f"attention.{name}.params_total", derive.params_total(fam.attn_params)))
    out += [(f"derive_prefill.parts.{name}.{part}", e)
            for part, e in derive_prefill.PARTS[name].items()]
    out.append((f"derive_prefill.weights_floor.{name}", derive_prefill.WEIGHTS_FLOOR[name]))
    return out


@lru_cache(maxsize=None)
def entries():
    """((key, expression), ...) in a fixed order."""
    out = []
    for module, prefix in MODULES:
        out.extend(_module_entries(module, prefix))
    for name, fam in FAMILIES.items():
        out.extend(family_entries(name, fam))
    for name, expr, conds in derive.regimes():
        for i, c in enumerate(derive.quadratic_coefficients(expr)):
            out.append((f"derive.regimes({name}).a{2 - i}", c))
        for i, c in enumerate(conds):
            out.append((f"derive.regimes({name}).condition{i}", c))
    for i, c in enumerate(derive.quadratic_coefficients(derive_serving.busy_advantage)):
        out.append((f"derive_serving.busy_advantage.a{2 - i}", c))
    keys = [k for k, _ in out]
    assert len(keys) == len(set(keys)), "duplicate keys"
    return tuple(out)


def regime_names():
    """Names of the smooth pieces of t_advantage (:func:`kvmath.derive.kv.regimes`), in order."""
    return tuple(name for name, _, _ in derive.regimes())


@lru_cache(maxsize=None)
def expression(key):
    """The SymPy expression generated under ``key``."""
    return dict(entries())[key]
