"""Hand-written SVG primitives: escaping, number formats, scales with nice ticks, a chart frame and axes.

Every piece of text that reaches an SVG string goes through `esc`, so values from a run's files cannot
inject markup. The charts themselves are in `reports/charts.py`.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from html import escape as _html_escape
from typing import Callable, Iterable


_FRAME_IDS = itertools.count(1)


def esc(value: object) -> str:
    return _html_escape(str(value), quote=True)


def r1(v: float) -> str:
    """A coordinate with one decimal, without a trailing '.0' (keeps the SVG small)."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def fmt_count(v: float) -> str:
    v = float(v)
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            s = f"{v / div:.1f}".rstrip("0").rstrip(".")
            return s + unit
    return f"{v:.0f}" if v == int(v) else f"{v:.2g}"


def fmt_seconds(v: float) -> str:
    """A duration in seconds as a short human string: 12 µs, 3.4 ms, 250 ms, 1.5 s, 12 min."""
    a = abs(v)
    if a == 0:
        return "0"
    if a < 1e-3:
        return f"{v * 1e6:.3g} µs"
    if a < 1:
        return f"{v * 1e3:.3g} ms"
    if a < 120:
        return f"{v:.3g} s"
    return f"{v / 60:.3g} min"


def fmt_clock(v: float) -> str:
    """Seconds since the test started, for a time axis: 0, 15, 1:30, 12:00."""
    if v < 60:
        return f"{v:g}" if v != int(v) else f"{int(v)}"
    m, s = divmod(int(round(v)), 60)
    return f"{m}:{s:02d}"


def nice_step(span: float, target: int) -> float:
    if span <= 0:
        return 1.0
    raw = span / max(1, target)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


TIME_STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900,
              1800, 3600, 7200, 14400, 43200, 86400)


def time_ticks(lo: float, hi: float, target: int = 10) -> list[float]:
    """Ticks for a seconds axis: steps that read well as clock times (15 s, 1 min, 5 min, ...)."""
    span = max(hi - lo, 1e-9)
    step = next((s for s in TIME_STEPS if span / s <= target), TIME_STEPS[-1])
    first = math.ceil(lo / step - 1e-9) * step
    out, k = [], 0
    while first + k * step <= hi + step * 1e-9:
        out.append(round(first + k * step, 9))
        k += 1
    return out


class Linear:
    def __init__(self, d0: float, d1: float, r0: float, r1_: float, *, integer: bool = False):
        if d1 == d0:
            d1 = d0 + 1
        self.d0, self.d1, self.r0, self.r1 = d0, d1, r0, r1_
        self.integer = integer  # ticks only at whole numbers (offsets, counts)
        self._k = (r1_ - r0) / (d1 - d0)

    def __call__(self, v: float) -> float:
        return self.r0 + (v - self.d0) * self._k

    def ticks(self, target: int = 6) -> list[float]:
        step = nice_step(self.d1 - self.d0, target)
        if self.integer:
            step = max(1, round(step))
        first = math.ceil(self.d0 / step - 1e-9) * step
        out, v = [], first
        while v <= self.d1 + step * 1e-9:
            out.append(round(v, 10))
            v += step
        return out


class Log:
    def __init__(self, d0: float, d1: float, r0: float, r1_: float):
        d0 = max(d0, 1e-9)
        d1 = max(d1, d0 * 10)
        self.d0, self.d1, self.r0, self.r1 = d0, d1, r0, r1_
        self._l0 = math.log10(d0)
        self._k = (r1_ - r0) / (math.log10(d1) - self._l0)

    def __call__(self, v: float) -> float:
        return self.r0 + (math.log10(max(v, self.d0)) - self._l0) * self._k

    def ticks(self, target: int = 6) -> list[float]:
        lo, hi = math.floor(math.log10(self.d0)), math.ceil(math.log10(self.d1))
        decades = [10.0 ** e for e in range(lo, hi + 1)]
        mults = (1,) if len(decades) > target else (1, 2, 5) if len(decades) <= 3 else (1, 3)
        return [d * m for d in decades for m in mults if self.d0 <= d * m <= self.d1 * 1.0001]


@dataclass(frozen=True)
class Margins:
    """The space, in px, between a chart's outer edge and its plot area (the axes and labels go there)."""
    left: int = 64
    top: int = 30
    right: int = 16
    bottom: int = 30


class Frame:
    """A chart's canvas: outer size, plot area margins, and the SVG parts drawn so far."""

    def __init__(self, width: int, height: int, margins: Margins = Margins(), *, label: str = "",
                 css_class: str = "chart"):
        self.width, self.height = width, height
        self.left, self.top = margins.left, margins.top
        self.right_x, self.bottom_y = width - margins.right, height - margins.bottom
        self.label, self.css_class = label, css_class
        self.parts: list[str] = []
        self._clip = f"clip{next(_FRAME_IDS)}"

    @property
    def plot_w(self) -> float:
        return self.right_x - self.left

    @property
    def plot_h(self) -> float:
        return self.bottom_y - self.top

    def add(self, part: str) -> None:
        self.parts.append(part)

    def clip_id(self) -> str:
        """This chart's own clipPath id (unique in the page: every frame gets the next number)."""
        return self._clip

    def render(self) -> str:
        cid = self.clip_id()
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="{esc(self.css_class)}" '
                f'viewBox="0 0 {self.width} {self.height}" role="img" aria-label="{esc(self.label)}">'
                f'<defs><clipPath id="{cid}"><rect x="{r1(self.left)}" y="{r1(self.top - 2)}" '
                f'width="{r1(self.plot_w)}" height="{r1(self.plot_h + 4)}"/></clipPath></defs>')
        return head + "".join(self.parts) + "</svg>"

    # --- axes ---------------------------------------------------------------------------------
    def x_axis(self, scale: Linear, fmt: Callable[[float], str] = fmt_clock, *, title: str = "",
               grid: bool = True, target: int = 10) -> None:
        y = self.bottom_y
        out = []
        for v in (time_ticks(scale.d0, scale.d1, target) if fmt is fmt_clock else scale.ticks(target)):
            x = scale(v)
            if grid:
                out.append(f'<line class="grid" x1="{r1(x)}" y1="{r1(self.top)}" x2="{r1(x)}" y2="{r1(y)}"/>')
            out.append(f'<text x="{r1(x)}" y="{r1(y + 14)}" text-anchor="middle">{esc(fmt(v))}</text>')
        out.append(f'<line class="base" x1="{r1(self.left)}" y1="{r1(y)}" x2="{r1(self.right_x)}" y2="{r1(y)}"/>')
        self._add_axis("x", out, title and (f'<text class="title" x="{r1(self.right_x)}" y="{r1(y + 27)}" '
                                            f'text-anchor="end">{esc(title)}</text>'))

    def y_axis(self, scale: Linear | Log, fmt: Callable[[float], str] = fmt_count, *, title: str = "",
               target: int = 5) -> None:
        out = []
        for v in scale.ticks(target):
            y = scale(v)
            out.append(f'<line class="grid" x1="{r1(self.left)}" y1="{r1(y)}" x2="{r1(self.right_x)}" y2="{r1(y)}"/>')
            out.append(f'<text x="{r1(self.left - 6)}" y="{r1(y + 4)}" text-anchor="end">{esc(fmt(v))}</text>')
        self._add_axis("y", out, title and (f'<text class="title" transform="translate(12 '
                                            f'{r1((self.top + self.bottom_y) / 2)}) rotate(-90)" '
                                            f'text-anchor="middle">{esc(title)}</text>'))

    def _add_axis(self, name: str, ticks: list[str], title: str) -> None:
        """One axis group: its ticks and lines, then its title element ("" for none)."""
        self.add(f'<g class="axis {name}">' + "".join(ticks) + title + "</g>")


def polyline_path(points: Iterable[tuple[float, float] | None]) -> str:
    """An SVG path 'd' through the points; None breaks the line (an empty bucket)."""
    out: list[str] = []
    pen_down = False
    for p in points:
        if p is None:
            pen_down = False
            continue
        out.append(("L" if pen_down else "M") + f"{r1(p[0])} {r1(p[1])}")
        pen_down = True
    return "".join(out)
