"""The SymPy cache cannot run code or take values planted by another user (issue 20: it was an
unchecked pickle, and a crafted file ran code on ``import kvmath.derive.kv``)."""
import json
import os
import subprocess
import sys

import pytest
import sympy as sp

from kvmath.derive.symcache import UnsafeCache, parse_srepr

PROBE = """
import sympy as sp
from kvmath.derive import symcache as symcache
x = sp.Symbol('x')
print(symcache.simplify(x + x))
"""


def _run(cache_dir):
    env = {**os.environ, "KVMATH_CACHE": str(cache_dir)}
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                          timeout=120)


def _key():
    import hashlib
    x = sp.Symbol("x")
    return hashlib.sha256(f"simplify{sp.srepr((x + x,))}".encode()).hexdigest()


def _plant(cache_dir, text, mode=0o600):
    cache_dir.mkdir(mode=0o700, exist_ok=True)
    f = cache_dir / f"sympy-{sp.__version__}.json"
    f.write_text(json.dumps({"format": 1, "sympy": sp.__version__, "entries": {_key(): text}}))
    f.chmod(mode)
    return f


def test_a_stored_result_is_reused(tmp_path):
    cache = tmp_path / "c"
    assert _run(cache).stdout.strip() == "2*x"
    f = cache / f"sympy-{sp.__version__}.json"
    assert json.loads(f.read_text())["entries"][_key()] == sp.srepr(2 * sp.Symbol("x"))
    assert f.stat().st_mode & 0o077 == 0  # private
    _plant(cache, sp.srepr(3 * sp.Symbol("x")))  # the user's own file is trusted as written
    assert _run(cache).stdout.strip() == "3*x"


def test_a_crafted_entry_runs_no_code(tmp_path):
    marker = tmp_path / "pwned"
    _plant(tmp_path / "c", f"__import__('pathlib').Path({str(marker)!r}).touch()")
    r = _run(tmp_path / "c")
    assert r.returncode == 0 and r.stdout.strip() == "2*x" and not marker.exists()


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_file_others_may_write_is_not_used(tmp_path):
    _plant(tmp_path / "c", sp.srepr(5 * sp.Symbol("x")), mode=0o666)
    assert _run(tmp_path / "c").stdout.strip() == "2*x"  # recomputed, the planted value unused


@pytest.mark.parametrize("text", ["__import__('os').system('true')", "Symbol.__class__",
                                  "(lambda: 1)()", "Integer(2).__reduce__()",
                                  "Symbol('x', positive=open)", "Integer(2)(3)", "[" * 2000,
                                  "sin('__import__(\\'os\\').system(\\'true\\')')",
                                  "Max('1+1', Integer(2))", "Poly('x**2')",
                                  "Float('__import__(1)')", "Symbol('x', positive='yes')"])
def test_only_sympy_objects_are_built(text):
    with pytest.raises(UnsafeCache):
        parse_srepr(text)


def test_sreprs_round_trip():
    x = sp.Symbol("x", positive=True, integer=True)
    for e in (sp.Max(x, 2) * sp.pi / 3, [sp.Eq(x, 1)], {x: sp.Rational(1, 3)},
              sp.Piecewise((x, x > 2), (0, True)), sp.Float("1.25"), sp.erf(x) - sp.log(x)):
        assert parse_srepr(sp.srepr(e)) == e


@pytest.mark.parametrize("text", ["factorial(Integer(100000000))",
                                  "Pow(Integer(10), Integer(10000000000))",
                                  "Integer(" + "9" * 40 + ")", "gamma(Integer(10**8))"])
def test_an_entry_that_would_not_end_is_refused(text):
    """issue 20: a factorial of 10^8 or 10^(10^10) made the import hang; only the derivations'
    own arithmetic, with literals of a bounded size, is built."""
    with pytest.raises(UnsafeCache):
        parse_srepr(text)


@pytest.mark.parametrize("text", ["Symbol('B')", "Integer(5)"])
def test_an_entry_of_the_wrong_kind_is_recomputed(tmp_path, text):
    """issue 20: a symbol where solve's list of roots belongs gave a TypeError on import; such an
    entry is recomputed (a simplify result planted as a list likewise)."""
    probe = ("import sympy as sp\nfrom kvmath.derive import symcache\nx = sp.Symbol('x')\n"
             "print(symcache.solve(sp.Eq(x, 2), x))\n")
    import hashlib
    x = sp.Symbol("x")
    key = hashlib.sha256(f"solve{sp.srepr((sp.Eq(x, 2), x))}".encode()).hexdigest()
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    f = cache / f"sympy-{sp.__version__}.json"
    f.write_text(json.dumps({"format": 1, "sympy": sp.__version__, "entries": {key: text}}))
    f.chmod(0o600)
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       env={**os.environ, "KVMATH_CACHE": str(cache)}, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[2]", r.stderr


def test_the_derivations_results_are_made_of_allowed_classes():
    """Every result the derivations store is built of ALLOWED classes (else it would be
    refused on reading and recomputed every time)."""
    import re
    from kvmath.derive import kv  # noqa: F401 (fills the cache's memory)
    from kvmath.derive import symcache
    names = set()
    for value in symcache._store.values():
        names |= set(re.findall(r"([A-Za-z_]\w*)\(", sp.srepr(value)))
    assert names <= set(symcache._CALLABLE), names - set(symcache._CALLABLE)


@pytest.mark.parametrize("text", [
    "Float('1.5', 1000000000)",  # a billion-digit Float
    "Float('1.5', precision=100000000)",
    "Pow(Pow(Pow(Integer(10), Integer(1000)), Integer(1000)), Integer(100))",  # nested powers
    "Mul(" + ", ".join(["Integer(10**29)"] * 200) + ")",  # a product past any result's size
])
def test_an_entry_that_would_take_long_to_build_is_refused(text):
    # the review found these ran past 20 s: bounded bits and precision, refused before the
    # number is built
    from kvmath.derive.symcache import UnsafeCache, parse_srepr
    with pytest.raises(UnsafeCache):
        parse_srepr(text.replace("10**29", str(10 ** 29)))


def test_a_cache_file_nested_deep_is_written_afresh(tmp_path):
    """issue 37: a cache file nested 100,000 deep ended the import in a RecursionError (the
    store read it back before adding an entry)."""
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    f = cache / f"sympy-{sp.__version__}.json"
    f.write_text('{"format": 1, "sympy": "%s", "entries": {"a": %s}}'
                 % (sp.__version__, "[" * 100_000 + "]" * 100_000))
    f.chmod(0o600)
    r = _run(cache)
    assert r.returncode == 0 and r.stdout.strip() == "2*x", r.stderr
    assert json.loads(f.read_text())["entries"][_key()] == sp.srepr(2 * sp.Symbol("x"))


def test_a_cache_file_that_is_a_fifo_is_not_read(tmp_path):
    """issue 37: a FIFO in the cache file's place hung the import for ever."""
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    os.mkfifo(cache / f"sympy-{sp.__version__}.json", 0o600)
    r = _run(cache)  # 120 s timeout: a hang fails the test
    assert r.returncode == 0 and r.stdout.strip() == "2*x", r.stderr


def test_a_cache_file_too_large_is_not_read(tmp_path, monkeypatch):
    from kvmath.derive import symcache
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    f = cache / "big.json"
    f.write_text(json.dumps({"entries": {}}) + " " * 100)
    f.chmod(0o600)
    assert symcache._read_private(f) is not None
    monkeypatch.setattr(symcache, "MAX_CACHE_BYTES", 50)
    assert symcache._read_private(f) is None


def test_with_home_empty_the_cache_is_never_the_root(monkeypatch):
    """issue 37: with HOME empty the cache went to /.cache/kvmath. It is the account's home
    directory's (the password database) when that is a real one, else none (computed each
    time)."""
    import pwd
    from pathlib import Path
    from kvmath.derive import symcache
    monkeypatch.delenv("KVMATH_CACHE", raising=False)
    for home in ("", "relative/dir"):
        monkeypatch.setenv("HOME", home)
        got = symcache._cache_dir()
        assert got is None or (got.is_absolute() and got.parent.parent != Path("/")), got
        monkeypatch.setattr(pwd, "getpwuid", lambda uid: type("E", (), {"pw_dir": "/"})())
        assert symcache._cache_dir() is None
        monkeypatch.setattr(pwd, "getpwuid", lambda uid: type("E", (), {"pw_dir": "/home/u"})())
        assert symcache._cache_dir() == Path("/home/u/.cache/kvmath")
        monkeypatch.undo()
        monkeypatch.delenv("KVMATH_CACHE", raising=False)
    monkeypatch.setenv("HOME", "/home/v")
    assert symcache._cache_dir() == Path("/home/v/.cache/kvmath")
    r = subprocess.run([sys.executable, "-c", "from kvmath.derive import symcache; "
                        "print(symcache._DIR)"], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in {**os.environ, "HOME": ""}.items()
                            if k != "KVMATH_CACHE"})
    assert r.returncode == 0 and not r.stdout.startswith("/.cache"), r.stdout + r.stderr
