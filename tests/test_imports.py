"""The package's modules import one another in one direction only (issue 19): no cycle,
function-level imports included, so a module's place in the layering is its imports."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kvmath"


def import_graph():
    """{module: modules of kvmath it imports anywhere in its body}."""
    mods = {p.stem for p in PACKAGE.glob("*.py")}
    graph = {}
    for path in PACKAGE.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 and node.module:
                    deps.add(node.module.split(".")[0])
                elif node.level == 1:
                    deps.update(a.name for a in node.names)
                elif node.module and node.module.startswith("kvmath."):
                    deps.add(node.module.split(".")[1])
                elif node.module == "kvmath":
                    deps.update(a.name for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[1] for a in node.names
                            if a.name.startswith("kvmath."))
        graph[path.stem] = (deps & mods) - {path.stem}
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


def test_the_lower_layers_import_nothing_above_them():
    """Tables and the scenario's values sit below evaluation: they never import it, prefill,
    the traces or the commands."""
    graph = import_graph()
    above = {"evaluate", "prefill", "uncertainty", "reuse", "cachesim", "traces", "cli",
             "trace_cli", "webcalc", "changes", "report", "validation", "serving"}
    for low in ("schema", "tables", "units", "options", "values"):
        assert not graph[low] & above, (low, graph[low] & above)
