"""The package's modules import one another in one direction only (issue 19): no cycle,
function-level imports included, so a module's place in the layering is its imports."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kvmath"


def _name(path):
    """kvmath/tables/rows.py -> tables.rows; kvmath/errors.py -> errors."""
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts) or "__init__"


def import_graph():
    """{module: modules of kvmath it imports anywhere in its body}, modules by dotted path under
    kvmath (``tables.rows``); a folder's own name stands for its __init__.py."""
    paths = [p for p in PACKAGE.rglob("*.py") if "data" not in p.relative_to(PACKAGE).parts]
    mods = {_name(p) for p in paths}
    graph = {}
    for path in paths:
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path}: relative import (the package imports by full name)"
                if node.module == "kvmath":
                    deps.update(a.name for a in node.names if a.name in mods)
                elif node.module and node.module.startswith("kvmath."):
                    base = node.module[len("kvmath."):]
                    deps.add(base)
                    deps.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods)
            elif isinstance(node, ast.Import):
                deps.update(a.name[len("kvmath."):] for a in node.names
                            if a.name.startswith("kvmath."))
        graph[_name(path)] = (deps & mods) - {_name(path)}
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


#: the layers, lowest first: a module imports only from its own layer or those below it
#: A name is a top-level package or module, or a dotted part of one that sits lower than the
#: rest of it: the routers' declarations (names, reach rules), which the options and the analytic
#: reach read, sit with the logic, below the fleet that runs them
LAYERS = (("errors", "version"), ("derive",), ("codegen", "_generated"), ("tables", "tiers"),
          ("logic", "fleet.routers"), ("scenario",), ("evaluate",), ("node",), ("traces",),
          ("fleet",), ("present",), ("cli",), ("book", "__init__", "__main__", "entry"))


def _layer(module):
    """The layer of the longest name of LAYERS that is the module or a package holding it."""
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        name = ".".join(parts[:k])
        for i, names in enumerate(LAYERS):
            if name in names:
                return i
    raise LookupError(f"{module} has no layer in LAYERS")


def test_every_module_has_a_layer():
    for module in import_graph():
        _layer(module)


def test_the_lower_layers_import_nothing_above_them():
    """derive -> codegen -> tables, tiers -> logic (and the routers' declarations) -> scenario ->
    evaluate -> node -> traces -> fleet -> present -> cli, arrows
    one way: no module imports from a layer above its own, function-level imports included."""
    graph = import_graph()
    wrong = sorted((m, d) for m, deps in graph.items() for d in deps if _layer(d) > _layer(m))
    assert wrong == []


def test_derivations_import_only_derivations():
    """The SymPy layer stands alone (the answer path never imports it: test_numeric)."""
    graph = import_graph()
    for module, deps in graph.items():
        if module.startswith("derive"):
            assert all(d.startswith("derive") or d in ("errors", "version") for d in deps), (module, deps)
