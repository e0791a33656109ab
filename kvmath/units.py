"""Formatting numbers with SI units for people (tables, CLI): 1 GB = 1e9 B, 1 GB/s = 1e9 B/s."""


def fmt_bytes(n, digits=3):
    """SI bytes: 1 GB = 1e9 B."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.{digits}g} {unit}"
    return f"{n:.0f} B"


def fmt_time(seconds):
    """Seconds, milliseconds or microseconds, three significant digits."""
    if seconds >= 1:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def fmt_bw(bps):
    """SI bandwidth: 1 GB/s = 1e9 B/s."""
    if bps >= 1e12:
        return f"{bps / 1e12:.3g} TB/s"
    return f"{bps / 1e9:.3g} GB/s"
