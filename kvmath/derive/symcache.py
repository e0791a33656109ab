"""SymPy's solve, simplify, integrate and simultaneous subs, remembered by their inputs across processes.

The derivations (kvmath/derive/*.py) solve and simplify at import. The answer path never imports
them (it runs kvmath/_generated/numeric.py), but every book chapter and test does, and the same inputs
give the same result: each result is stored under a hash of the function name, the inputs'
``srepr`` (symbols with their assumptions) and the SymPy version, in ``$KVMATH_CACHE``
(default ``~/.cache/kvmath``; nothing is stored when no home directory is known, never
``/.cache``). A changed derivation is a new key, so a stored result is never
stale; an unreadable or unwritable cache only costs the time of the computation.

The cache cannot run code (issue 20: it was a pickle, and a crafted file ran code on import):
it is JSON holding each result's ``srepr``, read back by :func:`parse_srepr`, which builds only
the arithmetic the derivations produce (:data:`ALLOWED`: sums, products, powers, numbers,
symbols, Min, Max, Piecewise, relationals, floor, ceiling, exp, log, erf) from literals of a
bounded size, numbers of bounded bits and Floats of bounded precision, so no entry can make
the import hang (a factorial of 10^8, 10^(10^10), nested powers, a billion-digit Float); an entry
that is not what its function returns (solve: a list of expressions) is recomputed. It is used
only when the file and its directory belong to this user and no one else may write them, so
another user cannot plant values, and only a regular file of a bounded size is read (a FIFO in
its place would block the import; a file nested too deep is written afresh). A value planted by this user's own account is not detected:
such an account could change the installed package itself; and a planted value never reaches
the answer path, which reads the committed generated code, whose test
(tests/codegen/test_numeric.py) regenerates it and fails if it differs.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import stat
from pathlib import Path

import sympy as sp

def _cache_dir():
    """``$KVMATH_CACHE``, else ``$HOME/.cache/kvmath``, else the account's home directory's
    (the password database); None (nothing stored, only the time of the computation lost) when
    none is an absolute path: an empty or relative HOME made the cache ``/.cache`` or a
    directory relative to wherever the process started."""
    given = os.environ.get("KVMATH_CACHE")
    if given:
        return Path(given)
    home = os.environ.get("HOME", "")
    if not os.path.isabs(home):
        try:
            import pwd
            home = pwd.getpwuid(os.getuid()).pw_dir
        except (ImportError, KeyError, AttributeError, OSError):
            home = ""
    if not os.path.isabs(home) or Path(home) == Path(home).parent:  # none, or the root
        return None
    return Path(home) / ".cache" / "kvmath"


_DIR = _cache_dir()
_FILE = _DIR / f"sympy-{sp.__version__}.json" if _DIR is not None else None
#: the largest cache file read, B: the derivations' results take about 0.14 MB; a larger file is
#: not one (and is not read: a FIFO, a device or a huge file would hang or fill the import)
MAX_CACHE_BYTES = 64 * 2 ** 20
_FORMAT = 1
_store = None


class UnsafeCache(ValueError):
    """A stored result that is not a plain SymPy expression (or list, tuple, dict of them)."""


#: the SymPy classes a stored srepr may call: the arithmetic the derivations' results are made
#: of (tests/derive/test_symcache.py checks every stored result's are among them), nothing that
#: computes more than it is given
ALLOWED = ("Add", "Mul", "Pow", "Symbol", "Dummy", "Integer", "Rational", "Float", "Half",
           "NegativeOne", "One", "Zero", "Infinity", "NegativeInfinity", "NaN", "ComplexInfinity",
           "ImaginaryUnit", "Pi", "Exp1", "Min", "Max", "Piecewise", "ExprCondPair",
           "LessThan", "StrictLessThan", "GreaterThan", "StrictGreaterThan", "Equality",
           "Unequality", "And", "Or", "Not", "BooleanTrue", "BooleanFalse", "floor", "ceiling",
           "exp", "log", "erf", "erfc", "Abs", "sign", "re", "im", "LambertW", "Tuple")
#: the largest integer literal a stored srepr may hold (the derivations' are small counts)
MAX_INTEGER = 10 ** 30
#: the largest numeric exponent of a numeric power it may ask for (10^(10^10) would not end)
MAX_EXPONENT = 1000
#: the most bits a number built from an entry may have (numerator or denominator)
MAX_BITS = 4096


def _bits(x):
    """Bits of a rational number's larger part (0 for a Float or an irrational)."""
    return max(int(x.p).bit_length(), int(x.q).bit_length()) if isinstance(x, sp.Rational) else 0


def _constructors():
    """The allowed SymPy classes by name (:data:`ALLOWED`)."""
    out = {}
    for name in ALLOWED:
        obj = getattr(sp, name, None) or getattr(sp.core.numbers, name, None) or \
            getattr(sp.logic.boolalg, name, None)
        if obj is not None:
            out[name] = obj
    from sympy.functions.elementary.piecewise import ExprCondPair
    out["ExprCondPair"] = ExprCondPair
    out["Function"] = sp.Function  # undefined functions: Function('f')(x)
    return out


_CALLABLE = _constructors()
#: the constructors whose first argument is text in an srepr: a name, or a Float's digits
_NAMED = (sp.Symbol, sp.Dummy, sp.Wild, sp.Function, sp.Float)
_DIGITS = re.compile(r"-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?|[-+]?inf|nan")
#: SymPy's named constants an srepr writes bare (pi, E, oo, zoo, nan, I, true, false)
_CONSTANTS = {n: getattr(sp, n) for n in ("pi", "E", "oo", "zoo", "nan", "I", "EulerGamma",
                                          "true", "false")}


def parse_srepr(text):
    """The SymPy object of an ``srepr`` string, built from its syntax tree: calls of SymPy
    classes on literals, symbols' assumptions as keyword literals, lists, tuples and dicts.
    Anything else (an attribute, a name that is not a SymPy class, a lambda) raises
    :class:`UnsafeCache` before anything is called."""
    def build(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool,
                                                                      type(None))):
            if isinstance(node.value, int) and abs(node.value) > MAX_INTEGER:
                raise UnsafeCache("an integer literal too large for a derivation's result")
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
                isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)):
            return -node.operand.value
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if isinstance(node, ast.List):
            return [build(e) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(build(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return {build(k): build(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in _CALLABLE:
                func = _CALLABLE[node.func.id]
            elif isinstance(node.func, ast.Call):  # Function('f')(x)
                func = build(node.func)
                if not isinstance(func, sp.core.function.UndefinedFunction):
                    raise UnsafeCache("a call of something that is not a SymPy function")
            else:
                raise UnsafeCache(f"a call of {ast.dump(node.func)[:60]}")
            kwargs = {}
            for kw in node.keywords:
                value = build(kw.value)
                if kw.arg is None or not isinstance(value, (bool, int)):
                    raise UnsafeCache("a keyword that is not a literal assumption")
                kwargs[kw.arg] = value
            args = [build(a) for a in node.args]
            # text reaches only the constructors that take a name or digits as text: any other
            # SymPy function would sympify a string, which evaluates it as Python
            named = func in _NAMED and len(args) >= 1 and isinstance(args[0], str)
            if any(isinstance(a, str) for a in args[1 if named else 0:]):
                raise UnsafeCache(f"text given to {getattr(func, '__name__', func)}")
            if named and func is sp.Float and not _DIGITS.fullmatch(args[0]):
                raise UnsafeCache("a Float whose text is not a number")
            if func is sp.Pow and len(args) == 2 and all(isinstance(a, sp.Number) for a in args) \
                    and (abs(args[1]) > MAX_EXPONENT or _bits(args[0]) * abs(args[1]) > MAX_BITS):
                raise UnsafeCache("a numeric power too large to compute")
            if func is sp.Float and (any(isinstance(a, int) and a > MAX_EXPONENT
                                         for a in args[1:]) or
                                     kwargs.get("precision", 0) > MAX_BITS or
                                     kwargs.get("dps", 0) > MAX_EXPONENT):
                raise UnsafeCache("a Float of a precision no derivation produces")
            out = func(*args, **kwargs)
            if isinstance(out, sp.Rational) and _bits(out) > MAX_BITS:
                raise UnsafeCache("a number larger than a derivation's result")
            return out
        raise UnsafeCache(f"{type(node).__name__} is not part of an srepr")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise UnsafeCache(f"not an srepr ({exc})") from None
    return build(tree.body)


def _private(path):
    """Whether path is this user's and no one else may write it (group or others)."""
    try:
        st = path.stat()
    except OSError:
        return False
    return (not hasattr(os, "getuid") or st.st_uid == os.getuid()) and \
        not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _read_private(path):
    """The text of a cache file that is this user's alone, a regular file of at most
    :data:`MAX_CACHE_BYTES`, or None. Opened without blocking and checked on the open file (a
    FIFO in its place hung the import; a swap after a check reads nothing else)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CACHE_BYTES or (
                hasattr(os, "getuid") and st.st_uid != os.getuid()) or \
                st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        data = fh.read(MAX_CACHE_BYTES + 1)
    return data.decode("utf-8") if len(data) <= MAX_CACHE_BYTES else None


def _load():
    if _DIR is None or not _private(_DIR):
        return {}
    try:
        text = _read_private(_FILE)
        if text is None:
            return {}
        data = json.loads(text)
        if data.get("format") != _FORMAT or data.get("sympy") != sp.__version__:
            return {}
        return {key: parse_srepr(text) for key, text in data["entries"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return {}  # missing, truncated, unsafe or from another SymPy: start afresh


def _save(key, value):
    if _DIR is None:
        return  # no home to keep it in: computed each time
    try:
        if _DIR.exists() and not _private(_DIR):
            return  # a directory others may write: never store there
        stored = {}
        try:
            text = _read_private(_FILE)
            stored = json.loads(text).get("entries", {}) if text is not None else {}
            if not isinstance(stored, dict):
                stored = {}
        except (OSError, ValueError, AttributeError, RecursionError):
            stored = {}  # a file nested too deep, truncated or not JSON: written afresh
        stored = {**stored, key: sp.srepr(value)}  # keep what other processes stored meanwhile
        _DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = _FILE.with_name(f"{_FILE.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"format": _FORMAT, "sympy": sp.__version__, "entries": stored}, f)
        os.replace(tmp, _FILE)
    except (OSError, TypeError, ValueError):
        pass


def _of_its_kind(fn, value):
    """Whether a stored value is what fn returns: solve a list of expressions, the others one
    expression (a planted symbol where a list belongs is recomputed, not a TypeError)."""
    if fn is sp.solve:
        return isinstance(value, list) and all(isinstance(v, sp.Basic) for v in value)
    return isinstance(value, sp.Basic)


def _remembered(fn):
    def call(*args):
        global _store
        if _store is None:
            _store = _load()
        key = hashlib.sha256(f"{fn.__name__}{sp.srepr(args)}".encode()).hexdigest()
        if key not in _store or not _of_its_kind(fn, _store[key]):
            _store[key] = fn(*args)
            _save(key, _store[key])
        return _store[key]
    call.__name__, call.__doc__ = fn.__name__, f"sympy.{fn.__name__}, remembered by its inputs."
    return call


def subs_simultaneous(expr, mapping):
    """expr.subs(mapping, simultaneous=True): slow where the result has Max/Min to compare."""
    return expr.subs(mapping, simultaneous=True)


solve, simplify, integrate = (_remembered(f) for f in (sp.solve, sp.simplify, sp.integrate))
subs = _remembered(subs_simultaneous)
