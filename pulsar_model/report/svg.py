"""Inline SVG charts of the report: bars, paired bars, stacked bars, a log-log scatter and trend lines.

Every chart has an axis title with its unit; tick labels of byte axes use binary units (KiB, MiB, ...).
Bar labels always show the cluster: a label is ``cluster · topic · detail`` where only the topic is
shortened (in the middle, keeping tenant/namespace and the partition suffix) and the full label is the
bar's tooltip. Every string from the data is escaped (:func:`esc`).
"""

from __future__ import annotations

import html
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from pulsar_model.report.text import size

WIDTH = 980
LABEL_WIDTH = 400
VALUE_WIDTH = 130
ROW = 20
TOP = 44
#: Characters of a bar label (at 11px about 6.2px per character: fits :data:`LABEL_WIDTH`).
MAX_LABEL = 62


def esc(value: object) -> str:
    """HTML-escape any value for text or a quoted attribute; control characters become U+FFFD."""
    text = str(value)
    if any(unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\t\n" for ch in text):
        text = "".join(
            "\ufffd" if unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\t\n" else ch for ch in text
        )
    return html.escape(text, quote=True)


def shorten_middle(text: str, limit: int) -> str:
    """``text`` cut in the middle with ``…`` to at most ``limit`` characters (start and end kept)."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return "…"
    head = (limit - 1) * 3 // 5
    tail = limit - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def bar_label(
    cluster: str | None, topic: str | None, detail: str | None = None, limit: int = MAX_LABEL
) -> str:
    """``cluster · topic · detail`` within ``limit`` characters: the cluster and the detail stay whole (up to
    a third of the room each), the topic is shortened in the middle."""
    head = str(cluster) if cluster else ""
    tail = shorten_middle(str(detail), limit // 3) if detail else ""
    fixed = len(head) + len(tail) + 3 * (bool(head) + bool(tail))
    middle = shorten_middle(str(topic or ""), max(limit - fixed, 8))
    return " · ".join(p for p in (head, middle, tail) if p)


def _svg_open(height: float, caption: str, width: float = WIDTH) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{esc(caption)}">'
        f"<title>{esc(caption)}</title>"
    )


def nice_ticks(maximum: float, count: int = 5, *, binary: bool = False) -> list[float]:
    """Round tick values from 0 to ``maximum`` (powers of 1024 steps for byte axes)."""
    if maximum <= 0:
        return [0.0]
    raw = maximum / count
    if binary and raw >= 1024:
        unit = 1024 ** math.floor(math.log(raw, 1024))
        magnitude = unit * 10 ** math.floor(math.log10(raw / unit))
    else:
        magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks, value = [], 0.0
    while value <= maximum * 1.0001:
        ticks.append(value)
        value += step
    return ticks


def tick_text(value: float, unit: str = "") -> str:
    """A tick label: byte axes in binary units, others as ``12k``/``3.5M``; ``%`` axes with the sign."""
    if unit == "bytes":
        return size(value).replace(".0 ", " ")
    suffix = "%" if unit == "%" else ""
    for name, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:g}{name}{suffix}"
    return f"{value:g}{suffix}"


def _axis_title(unit: str) -> str:
    return {"bytes": "bytes", "%": "percent (%)"}.get(unit, unit)


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    text: str
    tooltip: str
    css: str = "bar"


def _top_axis(out: list[str], top: float, x0: float, plot: float, height: float, unit: str) -> None:
    out.append(f'<text class="axistitle" x="{x0:.0f}" y="12">{esc(_axis_title(unit))} →</text>')
    for tick in nice_ticks(top, binary=unit == "bytes"):
        x = x0 + plot * tick / top
        out.append(f'<line class="axis" x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{height - 6}"/>')
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{TOP - 10}" text-anchor="middle">'
            f"{esc(tick_text(tick, unit))}</text>"
        )


def hbar_svg(
    bars: Sequence[Bar],
    *,
    caption: str,
    unit: str,
    reference: float | None = None,
    reference_label: str = "",
    cap: float | None = None,
) -> str:
    """Horizontal bars, one row per item, a top axis titled with ``unit``, an optional dashed reference."""
    if not bars:
        return ""
    top = max([max(b.value, 0.0) for b in bars] + [reference or 0.0]) or 1.0
    if cap is not None:
        top = min(top, cap)
    x0 = LABEL_WIDTH + 8
    plot = WIDTH - x0 - VALUE_WIDTH
    height = TOP + len(bars) * ROW + 8
    out = [_svg_open(height, caption)]
    _top_axis(out, top, x0, plot, height, unit)
    for i, bar in enumerate(bars):
        y = TOP + i * ROW
        width = plot * min(max(bar.value, 0.0), top) / top
        out.append(
            f"<g><title>{esc(bar.tooltip)}</title>"
            f'<text x="{LABEL_WIDTH:.0f}" y="{y + 14}" text-anchor="end">{esc(bar.label)}</text>'
            f'<rect class="{esc(bar.css)}" x="{x0}" y="{y + 3}" width="{max(width, 1.0):.1f}" '
            f'height="{ROW - 6}"/>'
            f'<text x="{x0 + width + 5:.1f}" y="{y + 14}">{esc(bar.text)}</text></g>'
        )
    if reference is not None and reference <= top:
        x = x0 + plot * reference / top
        out.append(f'<line class="ref" x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{height - 6}"/>')
        out.append(f'<text class="tick" x="{x + 4:.1f}" y="{height - 8}">{esc(reference_label)}</text>')
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class Pair:
    label: str
    before: float
    after: float
    text: str
    tooltip: str


def paired_svg(pairs: Sequence[Pair], *, caption: str, unit: str) -> str:
    """Two bars per row: ``before`` (light) under ``after`` (blue), one scale titled with ``unit``."""
    if not pairs:
        return ""
    top = max(max(p.before, p.after, 0.0) for p in pairs) or 1.0
    x0 = LABEL_WIDTH + 8
    plot = WIDTH - x0 - VALUE_WIDTH - 60
    height = TOP + len(pairs) * ROW + 8
    out = [_svg_open(height, caption)]
    _top_axis(out, top, x0, plot, height, unit)
    for i, pair in enumerate(pairs):
        y = TOP + i * ROW
        wb = plot * max(pair.before, 0.0) / top
        wa = plot * max(pair.after, 0.0) / top
        out.append(
            f"<g><title>{esc(pair.tooltip)}</title>"
            f'<text x="{LABEL_WIDTH:.0f}" y="{y + 14}" text-anchor="end">{esc(pair.label)}</text>'
            f'<rect class="before" x="{x0}" y="{y + 2}" width="{max(wb, 1.0):.1f}" height="{ROW - 4}"/>'
            f'<rect class="after" x="{x0}" y="{y + 6}" width="{max(wa, 1.0):.1f}" height="{ROW - 12}"/>'
            f'<text x="{x0 + max(wa, wb) + 5:.1f}" y="{y + 14}">{esc(pair.text)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class Stack:
    label: str
    segments: tuple[tuple[str, int], ...]
    text: str
    bad: bool


def stacked_svg(stacks: Sequence[Stack], *, caption: str, unit: str) -> str:
    """One bar per row split into segments (name, count), colours cycling; names inside wide segments."""
    if not stacks:
        return ""
    top = max(sum(max(v, 0) for _, v in s.segments) for s in stacks) or 1
    x0 = LABEL_WIDTH + 8
    plot = WIDTH - x0 - VALUE_WIDTH
    height = TOP + len(stacks) * ROW + 8
    out = [_svg_open(height, caption)]
    _top_axis(out, float(top), x0, plot, height, unit)
    for i, stack in enumerate(stacks):
        y = TOP + i * ROW
        out.append(f'<text x="{LABEL_WIDTH:.0f}" y="{y + 14}" text-anchor="end">{esc(stack.label)}</text>')
        x = float(x0)
        for j, (name, value) in enumerate(stack.segments):
            width = plot * max(value, 0) / top
            out.append(
                f"<g><title>{esc(name)}: {value} {esc(unit)}</title>"
                f'<rect class="seg{j % 10}" x="{x:.1f}" y="{y + 3}" width="{max(width, 0.0):.1f}" '
                f'height="{ROW - 6}"/>'
            )
            if width > 7 * len(name) + 6:
                out.append(f'<text class="segtext" x="{x + 3:.1f}" y="{y + 14}">{esc(name)}</text>')
            out.append("</g>")
            x += width
        css = ' class="tick"' if not stack.bad else ' fill="#c8372d"'
        out.append(f'<text{css} x="{x + 5:.1f}" y="{y + 14}">{esc(stack.text)}</text>')
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    tooltip: str
    bad: bool


def _log_scale(value: float) -> float:
    return math.log10(1.0 + max(value, 0.0))


def scatter_svg(points: Sequence[Point], *, x_label: str, y_label: str, caption: str) -> str:
    """Log-log scatter (log10(1 + v)) of byte values with the y = x diagonal; axes titled with units."""
    size_px, margin = 520, 64
    top = max(max(_log_scale(p.x), _log_scale(p.y)) for p in points)
    top = max(1.0, math.ceil(top))
    scale = (size_px - 2 * margin) / top
    width = size_px + 40

    def sx(v: float) -> float:
        return margin + _log_scale(v) * scale

    def sy(v: float) -> float:
        return size_px - margin - _log_scale(v) * scale

    out = [_svg_open(size_px, caption, width)]
    for power in range(int(top) + 1):
        pos = margin + power * scale
        text = esc(tick_text(10.0**power - (1 if power == 0 else 0), "bytes"))
        out.append(
            f'<line class="axis" x1="{pos:.1f}" y1="{margin}" x2="{pos:.1f}" y2="{size_px - margin}"/>'
        )
        out.append(
            f'<line class="axis" x1="{margin}" y1="{size_px - pos:.1f}" x2="{size_px - margin}" '
            f'y2="{size_px - pos:.1f}"/>'
        )
        out.append(
            f'<text class="tick" x="{pos:.1f}" y="{size_px - margin + 16}" text-anchor="middle">{text}</text>'
        )
        out.append(
            f'<text class="tick" x="{margin - 6}" y="{size_px - pos + 4:.1f}" text-anchor="end">{text}</text>'
        )
    out.append(
        f'<line class="diag" x1="{margin}" y1="{size_px - margin}" x2="{size_px - margin}" y2="{margin}"/>'
    )
    out.append(
        f'<text class="axistitle" x="{size_px / 2:.0f}" y="{size_px - 18}" text-anchor="middle">'
        f"{esc(x_label)} (bytes, log scale)</text>"
    )
    out.append(
        f'<text class="axistitle" x="16" y="{size_px / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 16 {size_px / 2:.0f})">{esc(y_label)} (bytes, log scale)</text>'
    )
    for p in points:
        css = "dot bad" if p.bad else "dot"
        out.append(
            f'<circle class="{css}" cx="{sx(p.x):.1f}" cy="{sy(p.y):.1f}" r="4">'
            f"<title>{esc(p.tooltip)}</title></circle>"
        )
    out.append("</svg>")
    return "".join(out)


def line_svg(runs: Sequence[str], values: Sequence[float | None], *, caption: str, unit: str) -> str:
    """A small line plot of one measure over the runs (run dates on x, ``unit`` on y), nulls as gaps."""
    width, height, left, right, top_pad, bottom = 460, 230, 64, 14, 40, 40
    known = [v for v in values if v is not None]
    top = max([*known, 0.0]) or 1.0
    low = min([*known, 0.0])
    span = (top - low) or 1.0
    n = len(runs)
    plot_w, plot_h = width - left - right, height - top_pad - bottom

    def sx(i: int) -> float:
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def sy(v: float) -> float:
        return top_pad + plot_h * (1 - (v - low) / span)

    out = [_svg_open(height, caption, width)]
    out.append(f'<text x="{left}" y="14">{esc(caption)}</text>')
    out.append(f'<text class="axistitle" x="{left}" y="30">↑ {esc(_axis_title(unit))}</text>')
    for tick in nice_ticks(top, binary=unit == "bytes"):
        if tick < low:
            continue
        out.append(
            f'<line class="axis" x1="{left}" y1="{sy(tick):.1f}" x2="{width - right}" y2="{sy(tick):.1f}"/>'
        )
        out.append(
            f'<text class="tick" x="{left - 4}" y="{sy(tick) + 4:.1f}" text-anchor="end">'
            f"{esc(tick_text(tick, unit))}</text>"
        )
    for i, anchor in ((0, "start"), (n - 1, "end")) if n > 1 else ((0, "middle"),):
        out.append(
            f'<text class="tick" x="{sx(i):.1f}" y="{height - 22}" text-anchor="{anchor}">'
            f"{esc(runs[i])}</text>"
        )
    out.append(
        f'<text class="axistitle" x="{left + plot_w / 2:.0f}" y="{height - 6}" text-anchor="middle">'
        "run date →</text>"
    )
    segment: list[str] = []
    lines: list[list[str]] = []
    for i, v in enumerate(values):
        if v is None:
            if segment:
                lines.append(segment)
            segment = []
            continue
        segment.append(f"{sx(i):.1f},{sy(v):.1f}")
    if segment:
        lines.append(segment)
    for pts in lines:
        out.append(f'<polyline class="line" points="{" ".join(pts)}"/>')
    for i, v in enumerate(values):
        if v is not None:
            out.append(
                f'<circle class="dot" cx="{sx(i):.1f}" cy="{sy(v):.1f}" r="3">'
                f"<title>{esc(runs[i])}: {esc(tick_text(v, unit))}</title></circle>"
            )
    out.append("</svg>")
    return "".join(out)
