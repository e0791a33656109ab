"""SVG for the book's figures, drawn as text: a canvas of lines, paths, shapes and labels, log
scales and their ticks, and the figure that wraps a drawing with what a screen reader reads.

The figures of :mod:`kvmath.present.figures` are SVG written here rather than raster images, so
their words (axis labels, curve names, the crossings' lengths) are text a reader can select and
a screen reader can read, the same drawing serves the book, the PDF, the README and a design
review (:mod:`kvmath.present.review`), and the output is deterministic (the same data give the
same bytes). Every drawing carries a ``<title>`` and a ``<desc>`` (the figure's alt text) and
``role="img"`` with ``aria-labelledby`` pointing at both.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

#: the figures' colours: black for recompute, then the Okabe-Ito palette (told apart with
#: red-green colour blindness) for the tiers, in order
INK = "#222222"
MUTED = "#6b6b6b"
GRID = "#dddddd"
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8c564b")
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"


def _num(x):
    """A coordinate as SVG text: one decimal, no trailing zeros."""
    s = f"{x:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _attrs(attrs):
    out = []
    for k, v in attrs.items():
        if v is None:
            continue
        if isinstance(v, float):
            v = _num(v)
        out.append(f'{k.rstrip("_").replace("_", "-")}="{escape(str(v), quote=True)}"')
    return " ".join(out)


class Canvas:
    """An SVG drawing of ``width`` x ``height`` user units that scales to its box. ``ident``
    prefixes the ids of its title and description (unique within a page); ``title`` and
    ``desc`` are what a screen reader reads for the whole drawing."""

    def __init__(self, width, height, ident, title, desc):
        self.width, self.height, self.ident = width, height, ident
        self.title, self.desc = title, desc
        self.parts = [f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']

    def add(self, tag, text=None, **attrs):
        body = "" if text is None else escape(str(text), quote=False)
        self.parts.append(f"<{tag} {_attrs(attrs)}>{body}</{tag}>" if text is not None
                          else f"<{tag} {_attrs(attrs)}/>")

    def line(self, x1, y1, x2, y2, stroke=INK, width=1.0, dash=None, opacity=None):
        self.add("line", x1=float(x1), y1=float(y1), x2=float(x2), y2=float(y2), stroke=stroke,
                 stroke_width=width, stroke_dasharray=dash, stroke_opacity=opacity)

    def polyline(self, points, stroke=INK, width=2.0, dash=None):
        if len(points) < 2:
            return
        d = "M" + " L".join(f"{_num(x)},{_num(y)}" for x, y in points)
        self.add("path", d=d, fill="none", stroke=stroke, stroke_width=width,
                 stroke_dasharray=dash, stroke_linejoin="round")

    def polygon(self, points, fill, opacity=0.18):
        if len(points) < 3:
            return
        self.add("polygon", points=" ".join(f"{_num(x)},{_num(y)}" for x, y in points),
                 fill=fill, fill_opacity=opacity, stroke="none")

    def rect(self, x, y, w, h, fill="none", stroke=INK, width=1.0, rx=None, opacity=None):
        self.add("rect", x=float(x), y=float(y), width=float(max(w, 0.0)),
                 height=float(max(h, 0.0)), fill=fill, stroke=stroke, stroke_width=width,
                 rx=rx, fill_opacity=opacity)

    def circle(self, x, y, r, fill=INK, stroke="#ffffff"):
        self.add("circle", cx=float(x), cy=float(y), r=float(r), fill=fill, stroke=stroke,
                 stroke_width=1.2)

    def text(self, x, y, words, anchor="start", size=12, fill=INK, weight=None, italic=False):
        self.add("text", words, x=float(x), y=float(y), text_anchor=anchor, font_size=size,
                 fill=fill, font_weight=weight, font_style="italic" if italic else None)

    def arrow(self, x1, y, x2, stroke=INK, width=1.5):
        """A horizontal arrow from x1 to x2 at height y, its head at x2."""
        self.line(x1, y, x2 - 6, y, stroke=stroke, width=width)
        self.add("path", d=f"M{_num(x2)},{_num(y)} L{_num(x2 - 8)},{_num(y - 4)} "
                           f"L{_num(x2 - 8)},{_num(y + 4)} Z", fill=stroke, stroke="none")

    def render(self):
        """The drawing as an ``<svg>`` element: role img, labelled by its title and described
        by its desc; it scales to the width of its box."""
        t, d = f"{self.ident}-title", f"{self.ident}-desc"
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} '
                f'{self.height}" width="100%" role="img" aria-labelledby="{t} {d}" '
                f'font-family="{FONT}" class="kvmath-svg" style="max-width:{self.width}px;'
                'height:auto;display:block">')
        return "\n".join([head, f'<title id="{t}">{escape(self.title)}</title>',
                          f'<desc id="{d}">{escape(self.desc)}</desc>', *self.parts, "</svg>"])


@dataclass(frozen=True)
class LogScale:
    """A log10 axis from ``lo`` to ``hi`` (data) onto ``a`` to ``b`` (drawing)."""
    lo: float
    hi: float
    a: float
    b: float

    def __call__(self, v):
        v = min(max(v, self.lo), self.hi)
        f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        return self.a + (self.b - self.a) * f

    def inside(self, v):
        return self.lo <= v <= self.hi


def decades(lo, hi):
    """The powers of ten from the first at or above ``lo`` to the last at or below ``hi``."""
    k = math.ceil(math.log10(lo) - 1e-9)
    out = []
    while 10.0 ** k <= hi * (1 + 1e-9):
        out.append(10.0 ** k)
        k += 1
    return out


def log_bounds(values, margin=1.2):
    """(lower, upper) around the positive finite ``values`` on a log axis, ``margin`` times
    beyond the smallest and the largest."""
    vs = [v for v in values if v > 0 and math.isfinite(v)]
    lo, hi = min(vs) / margin, max(vs) * margin
    return lo, max(hi, lo * 10)


def log_ticks(lo, hi):
    """Tick values between ``lo`` and ``hi``: the powers of ten, and 2 and 5 times them where
    fewer than three decades show."""
    ticks = decades(lo / 10, hi * 10)
    if len([t for t in ticks if lo <= t <= hi]) < 3:
        ticks = [t * m for t in ticks for m in (1, 2, 5)]
    return [t for t in sorted(ticks) if lo <= t <= hi]


def fmt_count(x):
    """A count of tokens on an axis: 100, 1k, 10k, 100k, 1M."""
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:g}{unit}"
    return f"{x:g}"


@dataclass(frozen=True)
class Figure:
    """A drawing with what is said of it: ``svg`` (text), ``alt`` (one paragraph saying what
    it shows, with its numbers; also the drawing's ``<desc>``), ``caption`` (the words under
    it) and ``ident`` (its anchor). Shown in a notebook as a ``<figure>``; :meth:`save` writes
    the SVG file the README and a design review link."""
    ident: str
    svg: str
    alt: str
    caption: str

    def html(self):
        return (f'<figure class="kvmath-figure" id="{escape(self.ident)}">\n{self.svg}\n'
                f"<figcaption>{escape(self.caption)}</figcaption>\n</figure>")

    def _repr_html_(self):
        return self.html()

    def __repr__(self):
        return f"<Figure {self.ident}: {self.caption[:60]}...>"

    def file_text(self):
        """The SVG as a file of its own: its XML declaration, and its size in pixels (an image
        element showing it has no box to take a width from)."""
        import re
        w, h = re.search(r'viewBox="0 0 (\S+) (\S+)"', self.svg).groups()
        return ('<?xml version="1.0" encoding="UTF-8"?>\n'
                + self.svg.replace('width="100%"', f'width="{w}" height="{h}"', 1) + "\n")

    def save(self, path):
        """Write the SVG file (:meth:`file_text`) to ``path``; returns the path."""
        from pathlib import Path
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.file_text(), encoding="utf-8")
        return path
