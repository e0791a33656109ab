"""The package's shape (issue 32): no module of kvmath/ over 600 lines but the declarative tables
and the generated code, and no call of a kvmath function with eight or more positional arguments
anywhere in the project (state travels as records: the scenario record, the logic's records,
named tuples into the compiled kernels)."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kvmath"
#: the most lines a module of kvmath/ may hold
MAX_LINES = 600
#: modules exempt from it: generated code, and declarations that are one table each (every
#: option of every command, declared once)
EXEMPT = {"_generated", "scenario/options.py"}
#: the fewest positional arguments a call may not pass
MAX_POSITIONAL = 8


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "data" not in p.relative_to(PACKAGE).parts)


def _exempt(path):
    rel = path.relative_to(PACKAGE).as_posix()
    return any(rel == e or rel.startswith(e + "/") for e in EXEMPT)


def test_no_module_is_over_the_line_limit():
    long = {p.relative_to(ROOT).as_posix(): n for p in _modules() if not _exempt(p)
            for n in [len(p.read_text(encoding="utf-8").splitlines())] if n > MAX_LINES}
    assert long == {}


def _defined():
    """Every function and class kvmath defines (a call of one of these names is a kvmath call)."""
    names = set()
    for p in _modules():
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(n.name)
    return names


def long_calls(tree, names):
    """(line, name, positional count) of each call in ``tree`` of one of ``names`` with
    MAX_POSITIONAL or more positional arguments (a starred argument counts as none)."""
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        count = sum(not isinstance(a, ast.Starred) for a in n.args)
        if name in names and count >= MAX_POSITIONAL:
            out.append((n.lineno, name, count))
    return out


def _sources():
    """Every Python source of the project: the package, its tests, scripts and benchmarks, and
    the chapters' code cells (MyST ``{code-cell}`` blocks)."""
    for folder in ("kvmath", "tests", "scripts", "benchmarks"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            if "_generated" not in p.parts:
                yield p, p.read_text(encoding="utf-8")
    for p in sorted((ROOT / "chapters").glob("*.md")):
        cells, cell = [], None
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.startswith("```{code-cell}"):
                cell = []
            elif line.startswith("```") and cell is not None:
                cells.append("\n".join(l for l in cell if not l.startswith(":")))
                cell = None
            elif cell is not None:
                cell.append(line)
        yield p, "\n\n".join(cells)


def test_no_kvmath_function_is_called_with_eight_positional_arguments():
    names = _defined()
    found = {}
    for path, text in _sources():
        try:
            tree = ast.parse(text)
        except SyntaxError:  # a chapter cell of IPython magic: not Python to check
            continue
        local = set()
        if path.is_relative_to(PACKAGE) is False:  # a test's own helpers are not kvmath's
            local = {n.name for n in ast.walk(tree)
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        calls = long_calls(tree, names - local)
        if calls:
            found[path.relative_to(ROOT).as_posix()] = calls
    assert found == {}


def test_the_check_finds_a_long_call():
    tree = ast.parse("def f(*a): pass\nf(1, 2, 3, 4, 5, 6, 7, 8)\nf(1, 2, 3, 4, 5, 6, 7)\n"
                     "f(*range(9))\ng(1, 2, 3, 4, 5, 6, 7, 8)\n")
    assert long_calls(tree, {"f"}) == [(2, "f", 8)]


@pytest.mark.parametrize("folder", ["logic", "tiers", "node", "scenario", "evaluate", "cli"])
def test_every_package_says_what_it_holds(folder):
    init = PACKAGE / folder / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc and len(doc) > 80, f"kvmath/{folder}/__init__.py needs a docstring of its layout"
