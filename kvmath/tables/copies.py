"""The copy paths' rows (copy_paths.csv): each host link's per-copy costs and rates of a batched
driver call and of a copy kernel, by direction and copy size, a same_as row taking another link's
figures (kvmath.logic.path.copy_rate reads them)."""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from kvmath.tables.schema import DataError, FieldError, Row, data_path, read


class CopyPath(Row, table="copy_paths"):
    def check(self):
        given = [f for f in ("per_copy_s", "rate_fraction") if getattr(self, f) is not None]
        if self.same_as and given:
            raise FieldError(given[0], f"a same_as row takes {self.same_as}'s values: leave it empty")
        if not self.same_as and len(given) < 2:
            raise FieldError("per_copy_s" if self.per_copy_s is None else "rate_fraction",
                             "missing value (expected a number, or same_as naming another link)")


@lru_cache(maxsize=None)
def copy_paths():
    """{link: {"<path> <direction>": [rows by from_bytes]}} of copy_paths.csv, a same_as row with
    its link's values (and its own kind, source and notes)."""
    rows = read(CopyPath)
    own = {k: r for k, r in rows.items() if not r.same_as}
    out = {}
    for i, (k, r) in enumerate(rows.items(), start=1):
        if r.same_as:
            ref = own.get((r.same_as,) + k[1:])
            if ref is None:
                raise DataError(data_path("copy_paths.csv"), i, "same_as", f"no {r.path} "
                                f"{r.direction} row of link {r.same_as!r} from {r.from_bytes:g} B")
            r = replace(r, **{f: getattr(ref, f) for f in (
                "per_copy_s", "per_copy_fast_s", "per_copy_slow_s", "rate_fraction",
                "rate_fraction_low", "rate_fraction_high")})
        out.setdefault(r.link, {}).setdefault(f"{r.path} {r.direction}", []).append(r)
    return {n: {p: sorted(v, key=lambda r: r.from_bytes) for p, v in d.items()}
            for n, d in out.items()}
