"""Formatting numbers with SI units for people (tables, CLI): 1 GB = 1e9 B, 1 GB/s = 1e9 B/s."""
import math

#: a speed-up below this is reported as a tie in all but name (CLI and calculator)
TIE_SPEEDUP = 1.01


def fmt_bytes(n, digits=3):
    """SI bytes: 1 GB = 1e9 B."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.{digits}g} {unit}"
    return f"{n:.0f} B"


def _sig3(x):
    """Three significant digits without exponent notation (x < 1000 here)."""
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}"


_TIME_UNITS = (("ns", 1e-9, 1000), ("µs", 1e-6, 1000), ("ms", 1e-3, 1000), ("s", 1.0, 60),
               ("min", 60.0, 60), ("h", 3600.0, math.inf))


def fmt_time(seconds):
    """A duration in the largest unit that keeps it >= 1: ns, µs, ms, s, min or h; 3 digits.

    1,030 s reads "17.2 min"; never exponent notation (hours above 999 get thousands commas).
    """
    if not math.isfinite(seconds):
        return "inf"
    if seconds == 0:
        return "0 s"
    for unit, scale, upto in _TIME_UNITS:
        x = float(f"{seconds / scale:.3g}")  # round first: 59.96 s reads "1 min", not "60 s"
        if x < upto:
            return f"{_sig3(seconds / scale)} {unit}"
        if x == upto:  # carry the rounding up: 59.96 s is 1 min
            seconds = x * scale
    raise AssertionError("unreachable")


def fmt_bw(bps):
    """SI bandwidth: 1 GB/s = 1e9 B/s."""
    if bps >= 1e12:
        return f"{bps / 1e12:.3g} TB/s"
    return f"{bps / 1e9:.3g} GB/s"


def join_and(items):
    """'a', 'a and b', 'a, b and c'... with the Oxford comma for three or more: 'a, b, and c'."""
    items = list(items)
    if len(items) <= 2:
        return " and ".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]


def fmt_token_list(tokens):
    """Crossing lengths for a sentence: '61 and 176,907 tokens'; 'none' when empty."""
    if not tokens:
        return "none"
    return join_and(f"{t:,.0f}" for t in tokens) + (" token" if len(tokens) == 1 and
                                                      round(tokens[0]) == 1 else " tokens")
