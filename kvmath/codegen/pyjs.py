"""A portable subset of Python, printed as JavaScript: the scenario logic is written once.

:mod:`kvmath.logic`'s modules (which deployment, which hops, what each engine rule sets, the
crossings, the bands) run as Python on the command line and, printed by
:func:`transpile_modules` as one bundle, as the calculator's JavaScript
(``kvmath/_generated/kvcalc_logic.js``). The printer reads the modules' sources (it imports
nothing of them) and accepts only what both languages do alike:

* functions with positional and keyword parameters (defaults allowed); a call to one of the
  module's own functions may pass keywords, resolved to positions here; nested functions and
  lambdas;
* ``if``/``elif``/``else``, ``for`` over an iterable (tuple targets unpack), ``while``,
  ``return``, ``break``, ``continue``, ``raise Name(message)``;
* numbers, strings, f-strings (format specs by the runtime's ``fmt``), ``None``, booleans,
  lists and tuples (arrays), dicts with string keys (objects; ``**d`` spreads), list and dict
  comprehensions, conditional expressions, chained comparisons of plain operands;
* the builtins and methods in :data:`BUILTINS` and :data:`METHODS`, ``math`` as JavaScript's
  ``Math``, the names a module imports from :mod:`kvmath.logic.runtime` (each the same name in
  the JavaScript runtime ``R``), and the names it imports from the modules before it in the
  bundle (one scope: two modules may not define the same name).

Python's own meanings are kept where JavaScript differs: truthiness (an empty list or dict is
false), ``and``/``or`` returning an operand, ``%`` and ``//`` rounding toward minus infinity,
``x in d`` meaning an own key, ``is None`` matching undefined too, ``+`` concatenating lists
(where an operand is written as a list). Anything else raises
:class:`Unsupported`, naming the line, so the module cannot drift out of the subset.
"""
from __future__ import annotations

import ast
import json

#: the runtime module the portable code imports its primitives from
RUNTIME_MODULE = "kvmath.logic.runtime"
#: the package whose modules import each other's names
PACKAGE = "kvmath.logic"

#: the prefixes of the catalogue's keys (kvmath.codegen.catalogue): a string constant of the
#: module that starts with one may name a formula the code calls
FORMULA_PREFIXES = ("derive.", "derive_prefill.", "derive_reuse.", "attention.")

#: Python builtin -> JavaScript (a runtime function of R unless it starts with a global)
BUILTINS = {
    "len": "R.len", "abs": "Math.abs", "range": "R.range", "enumerate": "R.enumerate",
    "zip": "R.zip", "sorted": "R.sorted", "sum": "R.sum", "any": "R.any", "all": "R.all",
    "float": "Number", "int": "Math.trunc", "bool": "R.truthy", "str": "R.str",
    "set": "R.unique", "list": "R.list", "tuple": "R.list", "dict": "R.dict",
    "isinstance": None,
}
#: math.<name> -> JavaScript
MATH = {"inf": "Infinity", "nan": "NaN", "isfinite": "Number.isFinite", "isnan": "Number.isNaN",
        "isinf": "R.isinf", "floor": "Math.floor", "ceil": "Math.ceil", "sqrt": "Math.sqrt",
        "log10": "Math.log10", "log": "Math.log", "exp": "Math.exp", "isclose": "R.isclose",
        "pi": "Math.PI"}
#: obj.<method>(...) -> a runtime call R.<function>(obj, ...), or a native method name
METHODS = {"get": "R.get", "items": "R.items", "keys": "R.keys", "values": "R.values",
           "update": "Object.assign", "copy": "R.copy", "startswith": ".startsWith",
           "endswith": ".endsWith", "append": ".push", "join": "R.join", "count": "R.count",
           "index": "R.index", "setdefault": "R.setdefault"}
#: expressions whose value is a boolean: printed as such in tests and in and/or
_BOOL_CALLS = {"bool", "any", "all", "isinstance"}

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "===", ast.NotEq: "!=="}


class Unsupported(ValueError):
    """The portable module used Python the printer does not take (line and what)."""

    def __init__(self, node, what):
        super().__init__(f"line {getattr(node, 'lineno', '?')}: {what} is not portable")


def _assigned(body):
    """Names a function body assigns (not inside nested functions, lambdas or comprehensions)."""
    names = []

    def targets(t):
        if isinstance(t, ast.Name):
            if t.id not in names:
                names.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)

    def walk(stmts):
        for s in stmts:
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    targets(t)
            elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
                targets(s.target)
            elif isinstance(s, ast.For):
                targets(s.target)
                walk(s.body)
                walk(s.orelse)
            elif isinstance(s, (ast.If, ast.While)):
                walk(s.body)
                walk(s.orelse)
            elif isinstance(s, ast.FunctionDef):
                if s.name not in names:
                    names.append(s.name)
    walk(body)
    return names


class _Printer:
    def __init__(self, runtime_names, functions):
        self.runtime = set(runtime_names)
        self.functions = functions  # name -> ast.arguments of the module's own functions
        self.formulas = set()  # formula keys the code names literally

    # ------------------------------------------------------------------ statements
    def block(self, stmts, indent):
        out = []
        for s in stmts:
            out.extend(self.stmt(s, indent))
        return out

    def stmt(self, s, ind):
        pad = "  " * ind
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                return []  # a docstring
            return [f"{pad}{self.expr(s.value)};"]
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise Unsupported(s, "chained assignment")
            return [f"{pad}{self.target(s.targets[0])} = {self.expr(s.value)};"]
        if isinstance(s, ast.AnnAssign):
            if s.value is None:
                return []
            return [f"{pad}{self.target(s.target)} = {self.expr(s.value)};"]
        if isinstance(s, ast.AugAssign):
            t = self.target(s.target)
            if type(s.op) in _BINOPS:
                return [f"{pad}{t} {_BINOPS[type(s.op)]}= {self.expr(s.value)};"]
            raise Unsupported(s, f"augmented {type(s.op).__name__}")
        if isinstance(s, ast.Return):
            return [f"{pad}return{' ' + self.expr(s.value) if s.value is not None else ''};"]
        if isinstance(s, ast.If):
            out = [f"{pad}if ({self.test(s.test)}) {{", *self.block(s.body, ind + 1)]
            orelse = s.orelse
            while len(orelse) == 1 and isinstance(orelse[0], ast.If):
                e = orelse[0]
                out += [f"{pad}}} else if ({self.test(e.test)}) {{", *self.block(e.body, ind + 1)]
                orelse = e.orelse
            if orelse:
                out += [f"{pad}}} else {{", *self.block(orelse, ind + 1)]
            return out + [f"{pad}}}"]
        if isinstance(s, ast.For):
            if s.orelse:
                raise Unsupported(s, "for ... else")
            return [f"{pad}for (const {self.pattern(s.target)} of R.list({self.expr(s.iter)})) {{",
                    *self.block(s.body, ind + 1), f"{pad}}}"]
        if isinstance(s, ast.While):
            if s.orelse:
                raise Unsupported(s, "while ... else")
            return [f"{pad}while ({self.test(s.test)}) {{", *self.block(s.body, ind + 1),
                    f"{pad}}}"]
        if isinstance(s, ast.Break):
            return [f"{pad}break;"]
        if isinstance(s, ast.Continue):
            return [f"{pad}continue;"]
        if isinstance(s, ast.Pass):
            return []
        if isinstance(s, ast.Raise):
            if not (isinstance(s.exc, ast.Call) and isinstance(s.exc.func, ast.Name)
                    and s.exc.func.id in self.runtime):
                raise Unsupported(s, "raise of anything but a runtime error type")
            args = ", ".join(self.expr(a) for a in s.exc.args)
            return [f"{pad}throw new R.{s.exc.func.id}({args});"]
        if isinstance(s, ast.FunctionDef):  # a nested function: a value assigned where it
            # stands (a declaration would clash with its name's let, and blocks scope them)
            lines = self.function(s, ind)
            lines[0] = lines[0].replace(f"{pad}function ", f"{pad}{s.name} = function ", 1)
            lines[-1] += ";"
            return lines
        raise Unsupported(s, type(s).__name__)

    def function(self, f, ind):
        pad = "  " * ind
        if f.decorator_list:
            raise Unsupported(f, "a decorator")
        a = f.args
        if a.vararg or a.kwarg or a.posonlyargs:
            raise Unsupported(f, "*args, **kwargs or positional-only parameters")
        params = [p.arg for p in a.args + a.kwonlyargs]
        defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults) + list(a.kw_defaults)
        sig = ", ".join(p if d is None else f"{p} = {self.expr(d)}" for p, d in zip(params, defaults))
        local = [n for n in _assigned(f.body) if n not in params]
        body = self.block(f.body, ind + 1)
        decl = [f"{pad}  let {', '.join(local)};"] if local else []
        return [f"{pad}function {f.name}({sig}) {{", *decl, *body, f"{pad}}}"]

    def target(self, t):
        if isinstance(t, ast.Name):
            return t.id
        if isinstance(t, (ast.Subscript, ast.Attribute)):
            return self.expr(t)
        if isinstance(t, (ast.Tuple, ast.List)):
            return self.pattern(t)
        raise Unsupported(t, f"assignment to {type(t).__name__}")

    def pattern(self, t):
        if isinstance(t, ast.Name):
            return t.id
        if isinstance(t, (ast.Tuple, ast.List)):
            return "[" + ", ".join(self.pattern(e) for e in t.elts) + "]"
        raise Unsupported(t, "a loop or unpacking target other than names")

    # ------------------------------------------------------------------ expressions
    def is_bool(self, e):
        if isinstance(e, ast.Compare):
            return True
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return True
        if isinstance(e, ast.BoolOp):
            return all(self.is_bool(v) for v in e.values)
        if isinstance(e, ast.Constant) and isinstance(e.value, bool):
            return True
        if isinstance(e, ast.Call):
            f = e.func
            if isinstance(f, ast.Name) and f.id in _BOOL_CALLS:
                return True
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                    f.value.id == "math" and f.attr in ("isfinite", "isnan", "isinf", "isclose"):
                return True
            if isinstance(f, ast.Attribute) and f.attr in ("startswith", "endswith"):
                return True
        return False

    def test(self, e):
        """e as a JavaScript condition, with Python's truthiness."""
        return self.expr(e) if self.is_bool(e) else f"R.truthy({self.expr(e)})"

    def expr(self, e):
        method = getattr(self, f"_{type(e).__name__}", None)
        if method is None:
            raise Unsupported(e, type(e).__name__)
        return method(e)

    def _Constant(self, e):
        v = e.value
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            if v != v or v in (float("inf"), float("-inf")):
                raise Unsupported(e, "a non-finite literal (use math.inf)")
            return repr(v)
        if isinstance(v, str):
            if v.startswith(FORMULA_PREFIXES):  # a catalogued expression's key, maybe
                self.formulas.add(v)
            return json.dumps(v)
        raise Unsupported(e, f"constant {v!r}")

    def _Name(self, e):
        if e.id in self.runtime:
            return f"R.{e.id}"
        if e.id in ("True", "False", "None"):
            return {"True": "true", "False": "false", "None": "null"}[e.id]
        if e.id in BUILTINS:
            raise Unsupported(e, f"the builtin {e.id} used as a value")
        return e.id

    def _Attribute(self, e):
        if isinstance(e.value, ast.Name) and e.value.id == "math":
            if e.attr not in MATH:
                raise Unsupported(e, f"math.{e.attr}")
            return MATH[e.attr]
        return f"{self.expr(e.value)}.{e.attr}"

    def _Subscript(self, e):
        if isinstance(e.slice, ast.Slice):
            if e.slice.step is not None:
                raise Unsupported(e, "a slice step")
            lo = self.expr(e.slice.lower) if e.slice.lower else "0"
            hi = f", {self.expr(e.slice.upper)}" if e.slice.upper else ""
            return f"{self.expr(e.value)}.slice({lo}{hi})"
        idx = e.slice
        if isinstance(idx, ast.UnaryOp) and isinstance(idx.op, ast.USub):
            return f"{self.expr(e.value)}.at({self.expr(idx)})"
        return f"{self.expr(e.value)}[{self.expr(idx)}]"

    def _BinOp(self, e):
        a, b = self.expr(e.left), self.expr(e.right)
        if isinstance(e.op, ast.FloorDiv):
            return f"Math.floor({a} / {b})"
        if isinstance(e.op, ast.Mod):
            if isinstance(e.left, ast.Constant) and isinstance(e.left.value, str):
                raise Unsupported(e, "%-formatting (use an f-string)")
            return f"R.mod({a}, {b})"
        if type(e.op) not in _BINOPS:
            raise Unsupported(e, type(e.op).__name__)
        lists = (ast.List, ast.ListComp, ast.Tuple)
        if isinstance(e.op, ast.Add) and (isinstance(e.left, lists) or isinstance(e.right, lists)):
            return f"[...{a}, ...{b}]"  # lists concatenate (an operand that is written as one)
        return f"({a} {_BINOPS[type(e.op)]} {b})"

    def _UnaryOp(self, e):
        if isinstance(e.op, ast.Not):
            return f"!({self.test(e.operand)})"
        if isinstance(e.op, ast.USub):
            return f"(-{self.expr(e.operand)})"
        if isinstance(e.op, ast.UAdd):
            return f"(+{self.expr(e.operand)})"
        raise Unsupported(e, type(e.op).__name__)

    def _BoolOp(self, e):
        if all(self.is_bool(v) for v in e.values):
            op = " && " if isinstance(e.op, ast.And) else " || "
            return "(" + op.join(self.expr(v) for v in e.values) + ")"
        fn = "R.and_" if isinstance(e.op, ast.And) else "R.or_"
        out = self.expr(e.values[-1])
        for v in reversed(e.values[:-1]):
            out = f"{fn}({self.expr(v)}, () => {out})"
        return out

    def _Compare(self, e):
        parts = []
        left = e.left
        for op, right in zip(e.ops, e.comparators):
            if len(e.ops) > 1 and not isinstance(left, (ast.Name, ast.Constant, ast.Attribute)):
                raise Unsupported(e, "a chained comparison of a compound operand")
            a, b = self.expr(left), self.expr(right)
            if isinstance(op, ast.Is) or isinstance(op, ast.IsNot):
                if not (isinstance(right, ast.Constant) and right.value is None):
                    raise Unsupported(e, "'is' with anything but None")
                parts.append(f"({a} {'==' if isinstance(op, ast.Is) else '!='} null)")
            elif isinstance(op, ast.In):
                parts.append(f"R.contains({b}, {a})")
            elif isinstance(op, ast.NotIn):
                parts.append(f"!R.contains({b}, {a})")
            else:
                parts.append(f"({a} {_CMPOPS[type(op)]} {b})")
            left = right
        return parts[0] if len(parts) == 1 else "(" + " && ".join(parts) + ")"

    def _IfExp(self, e):
        return f"({self.test(e.test)} ? {self.expr(e.body)} : {self.expr(e.orelse)})"

    def _List(self, e):
        return "[" + ", ".join(self.expr(x) for x in e.elts) + "]"

    _Tuple = _List

    def _Starred(self, e):
        return f"...{self.expr(e.value)}"

    def _Dict(self, e):
        items = []
        for k, v in zip(e.keys, e.values):
            if k is None:
                items.append(f"...{self.expr(v)}")
            elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                items.append(f"{json.dumps(k.value)}: {self.expr(v)}")
            else:
                items.append(f"[{self.expr(k)}]: {self.expr(v)}")
        return "({" + ", ".join(items) + "})"

    def _Lambda(self, e):
        a = e.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults:
            raise Unsupported(e, "a lambda with anything but plain parameters")
        return f"(({', '.join(p.arg for p in a.args)}) => {self.expr(e.body)})"

    def _comprehension(self, e, element):
        """A list of element over the generators, as chained flatMap/filter/map."""
        def level(i):
            g = e.generators[i]
            if g.is_async:
                raise Unsupported(e, "async comprehension")
            var = self.pattern(g.target)
            src = self.expr(g.iter)
            for cond in g.ifs:
                src = f"R.list({src}).filter(({var}) => {self.test(cond)})"
            if i == len(e.generators) - 1:
                return f"R.list({src}).map(({var}) => {element})"
            return f"R.list({src}).flatMap(({var}) => {level(i + 1)})"
        return level(0)

    def _ListComp(self, e):
        return self._comprehension(e, self.expr(e.elt))

    _GeneratorExp = _ListComp

    def _DictComp(self, e):
        return f"Object.fromEntries({self._comprehension(e, f'[{self.expr(e.key)}, {self.expr(e.value)}]')})"

    def _JoinedStr(self, e):
        out = []
        for v in e.values:
            if isinstance(v, ast.Constant):
                out.append(v.value.replace("\\", "\\\\").replace("`", "\\`").replace("${", "\\${"))
            else:
                if v.conversion not in (-1, 114):  # none or !r
                    raise Unsupported(e, "an f-string conversion other than !r")
                spec = ""
                if v.format_spec is not None:
                    if any(not isinstance(p, ast.Constant) for p in v.format_spec.values):
                        raise Unsupported(e, "a computed format spec")
                    spec = "".join(p.value for p in v.format_spec.values)
                fn = "R.repr" if v.conversion == 114 else "R.fmt"
                out.append("${" + f"{fn}({self.expr(v.value)}, {json.dumps(spec)})" + "}")
        return "`" + "".join(out) + "`"

    def _Call(self, e):
        f = e.func
        if any(isinstance(k.arg, type(None)) for k in e.keywords):
            raise Unsupported(e, "**kwargs in a call")
        args = [self.expr(a) for a in e.args]
        kw = {k.arg: k.value for k in e.keywords}
        if isinstance(f, ast.Name):
            name = f.id
            if name in ("min", "max"):
                return self._minmax(e, name, args, kw)
            if name in self.functions:
                return f"{name}({', '.join(self._positional(e, name, args, kw))})"
            if name in self.runtime:
                if kw and args:
                    raise Unsupported(e, f"{name}: positional and keyword arguments together")
                if kw:  # a record: one object of its fields
                    return f"R.{name}({self._Dict(ast.Dict(keys=[ast.Constant(k) for k in kw], values=list(kw.values())))})"
                return f"R.{name}({', '.join(args)})"
            if name in BUILTINS:
                if BUILTINS[name] is None or kw:
                    raise Unsupported(e, f"{name}(...) with keywords or at all")
                return f"{BUILTINS[name]}({', '.join(args)})"
            if kw:
                raise Unsupported(e, f"keywords in a call of the local {name}")
            return f"{name}({', '.join(args)})"
        if isinstance(f, ast.Attribute):
            if isinstance(f.value, ast.Name) and f.value.id == "math":
                if kw:
                    return f"{MATH[f.attr]}({', '.join(args)}, {self._Dict(ast.Dict(keys=[ast.Constant(k) for k in kw], values=list(kw.values())))})"
                return f"{self._Attribute(f)}({', '.join(args)})"
            if kw:
                raise Unsupported(e, f"keywords in a method call .{f.attr}")
            if f.attr not in METHODS:
                raise Unsupported(e, f"the method .{f.attr}")
            target = METHODS[f.attr]
            obj = self.expr(f.value)
            if target.startswith("."):
                return f"{obj}{target}({', '.join(args)})"
            return f"{target}({', '.join([obj] + args)})"
        if isinstance(f, (ast.Call, ast.Lambda, ast.Subscript)):
            if kw:
                raise Unsupported(e, "keywords in a computed call")
            return f"({self.expr(f)})({', '.join(args)})"
        raise Unsupported(e, f"a call of {type(f).__name__}")

    def _minmax(self, e, name, args, kw):
        if set(kw) - {"default", "key"}:
            raise Unsupported(e, f"{name} with {sorted(kw)}")
        if len(args) == 1:  # of an iterable
            key = self.expr(kw["key"]) if "key" in kw else "null"
            default = self.expr(kw["default"]) if "default" in kw else "undefined"
            return f"R.{name}_of({args[0]}, {key}, {default})"
        if kw:
            raise Unsupported(e, f"{name} of several values with keywords")
        return f"R.{name}({', '.join(args)})"

    def _positional(self, e, name, args, kw):
        a = self.functions[name]
        params = [p.arg for p in a.args + a.kwonlyargs]
        if len(args) > len(a.args):
            raise Unsupported(e, f"{name}: too many positional arguments")
        out = list(args) + ["undefined"] * (len(params) - len(args))
        for k, v in kw.items():
            if k not in params:
                raise Unsupported(e, f"{name} has no parameter {k}")
            out[params.index(k)] = self.expr(v)
        while out and out[-1] == "undefined":
            out.pop()
        return out


def transpile(source, global_name):
    """(JavaScript, formula keys) of one portable module's source (:func:`transpile_modules`)."""
    return transpile_modules([("module", source)], global_name)


def transpile_modules(modules, global_name):
    """(JavaScript, formula keys) of portable modules' sources ([(name, source), ...], each after
    those it imports): their functions and constants inside one closure over the runtime ``R``,
    exported as ``window[global_name]`` (an object of every module-level function and constant),
    and the string constants that may be catalogue keys (:data:`FORMULA_PREFIXES`). A module may
    import from the runtime and, by name, what a module before it defines (their names share the
    closure); anything else, or a name two modules define, raises :class:`Unsupported` naming
    the module and line."""
    trees = [(name, ast.parse(source)) for name, source in modules]
    runtime, functions, defined = [], {}, {}
    for name, tree in trees:
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                if node.module == "__future__":
                    continue
                if node.module == RUNTIME_MODULE:
                    runtime += [a.asname or a.name for a in node.names]
                    continue
                package, _, sibling = (node.module or "").rpartition(".")
                if package != PACKAGE or node.level:
                    raise Unsupported(node, f"{name}: an import from {node.module}")
                for a in node.names:
                    if a.asname:
                        raise Unsupported(node, f"{name}: an import under another name")
                    if defined.get(a.name) != sibling:
                        raise Unsupported(node, f"{name}: {a.name} is not defined by a module "
                                          f"{sibling} before it")
            elif isinstance(node, ast.Import):
                if [a.name for a in node.names] != ["math"]:
                    raise Unsupported(node, f"{name}: an import other than math")
            elif isinstance(node, (ast.FunctionDef, ast.Assign, ast.AnnAssign)):
                if isinstance(node, ast.FunctionDef):
                    names = [node.name]
                    functions[node.name] = node.args
                else:
                    target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                    names = [target.id] if isinstance(target, ast.Name) else []
                for n in names:
                    if n in defined:
                        raise Unsupported(node, f"{name}: {n} is defined by {defined[n]} too")
                    defined[n] = name
    printer = _Printer(runtime, functions)
    lines, exported = [], []
    for name, tree in trees:
        if len(trees) > 1:
            lines.append(f"\n  // {'-' * 66} {name}")
        for node in tree.body:
            if isinstance(node, (ast.ImportFrom, ast.Import)):
                continue
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the module's docstring
            if isinstance(node, ast.FunctionDef):
                lines += [""] + printer.function(node, 1)
                exported.append(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                if not isinstance(target, ast.Name):
                    raise Unsupported(node, "a module-level assignment to anything but a name")
                lines.append(f"  const {target.id} = {printer.expr(node.value)};")
                exported.append(target.id)
            else:
                raise Unsupported(node, f"module-level {type(node).__name__}")
    body = "\n".join(lines)
    return (f"(function (R) {{\n  \"use strict\";\n{body}\n\n"
            f"  window[{json.dumps(global_name)}] = {{{', '.join(exported)}}};\n"
            f"}})(window.KVCALC_RUNTIME);\n"), sorted(printer.formulas)
