"""Small inline SVG plots (no script, no inline style: the console's CSP allows neither).

Each function returns a complete ``<svg>`` element as text, every label escaped, with
a ``<title>`` and ``role="img"`` so a screen reader names it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape


def _svg(width: int, height: int, title: str, body: list[str]) -> str:
    return (
        f'<svg class="plot" viewBox="0 0 {width} {height}" width="{width}" height="{height}"'
        f' role="img" aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def bars(
    points: Sequence[tuple[str, float, float]], title: str, width: int = 640, height: int = 180
) -> str:
    """Stacked bars over time: (label, total, highlighted part) per bucket."""
    left, bottom, top = 36, 26, 10
    inner_w, inner_h = width - left - 8, height - bottom - top
    peak = max((p[1] for p in points), default=0.0) or 1.0
    body = [
        f'<line class="axis" x1="{left}" y1="{top + inner_h}" x2="{width - 8}"'
        f' y2="{top + inner_h}"/>',
        f'<text class="tick" x="{left - 4}" y="{top + 8}" text-anchor="end">{peak:g}</text>',
        f'<text class="tick" x="{left - 4}" y="{top + inner_h}" text-anchor="end">0</text>',
    ]
    n = max(len(points), 1)
    step = inner_w / n
    for i, (label, total, part) in enumerate(points):
        x = left + i * step + step * 0.1
        w = max(step * 0.8, 1.0)
        h = inner_h * total / peak
        hp = inner_h * part / peak
        body.append(
            f'<rect class="bar" x="{x:.1f}" y="{top + inner_h - h:.1f}" width="{w:.1f}"'
            f' height="{h:.1f}"><title>{escape(label)}: {total:g} ({part:g} low or empty)'
            "</title></rect>"
        )
        if hp:
            body.append(
                f'<rect class="bar-low" x="{x:.1f}" y="{top + inner_h - hp:.1f}"'
                f' width="{w:.1f}" height="{hp:.1f}"/>'
            )
        if n <= 12 or i % math.ceil(n / 12) == 0:
            body.append(
                f'<text class="tick" x="{x + w / 2:.1f}" y="{height - 8}"'
                f' text-anchor="middle">{escape(label)}</text>'
            )
    return _svg(width, height, title, body)


def reliability(bands: Sequence[tuple[float, float, int]], title: str, size: int = 240) -> str:
    """Reported confidence (x) against how often the first tool was right (y), per band;
    the diagonal is perfect agreement; a dot's area grows with its discoveries."""
    pad = 32
    inner = size - 2 * pad

    def x(v: float) -> float:
        return pad + inner * v

    def y(v: float) -> float:
        return size - pad - inner * v

    body = [
        f'<rect class="frame" x="{pad}" y="{pad}" width="{inner}" height="{inner}"/>',
        f'<line class="diagonal" x1="{x(0)}" y1="{y(0)}" x2="{x(1)}" y2="{y(1)}"/>',
        f'<text class="tick" x="{x(0.5)}" y="{size - 6}" text-anchor="middle">'
        "reported confidence</text>",
        f'<text class="tick" x="10" y="{y(0.5)}" text-anchor="middle"'
        f' transform="rotate(-90 10 {y(0.5)})">first tool right</text>',
    ]
    for v in (0.0, 0.5, 1.0):
        body.append(f'<text class="tick" x="{x(v)}" y="{size - pad + 12}" text-anchor="middle">'
                    f"{v:g}</text>")  # fmt: skip
        body.append(f'<text class="tick" x="{pad - 4}" y="{y(v) + 4}" text-anchor="end">'
                    f"{v:g}</text>")  # fmt: skip
    most = max((b[2] for b in bands), default=1) or 1
    for conf, right, n in bands:
        r = 3 + 7 * math.sqrt(n / most)
        body.append(
            f'<circle class="dot" cx="{x(conf):.1f}" cy="{y(right):.1f}" r="{r:.1f}">'
            f"<title>confidence {conf:.2f}: right first {right:.0%} of {n}</title></circle>"
        )
    return _svg(size, size, title, body)


def graph(
    nodes: Sequence[str],
    edges: Sequence[tuple[str, str, float]],
    title: str,
    width: int = 760,
    height: int = 400,
) -> str:
    """Tools on a circle, an edge per overlapping pair (thicker: more often confused);
    the circle is narrow enough to leave room for the labels on both sides."""
    if not nodes:
        return _svg(
            width, 60, title, ['<text class="tick" x="8" y="30">no overlapping pairs</text>']
        )
    cx, cy = width / 2, height / 2
    r = min(height / 2 - 24, width / 2 - 230)
    at: dict[str, tuple[float, float, float]] = {}
    for i, node in enumerate(nodes):
        angle = 2 * math.pi * i / len(nodes) - math.pi / 2
        at[node] = (cx + r * math.cos(angle), cy + r * math.sin(angle), angle)
    body = []
    for a, b, rate in edges:
        (x1, y1, _), (x2, y2, _) = at[a], at[b]
        body.append(
            f'<line class="edge" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}"'
            f' stroke-width="{1 + 6 * min(rate, 1.0):.1f}"><title>{escape(a)} ↔ {escape(b)}:'
            f" {rate:.0%}</title></line>"
        )
    for node, (nx, ny, ang) in at.items():
        anchor = "start" if math.cos(ang) >= -1e-9 else "end"
        dx = 8 if anchor == "start" else -8
        body.append(f'<circle class="node" cx="{nx:.1f}" cy="{ny:.1f}" r="5"/>')
        body.append(
            f'<text class="label" x="{nx + dx:.1f}" y="{ny + 4:.1f}" text-anchor="{anchor}">'
            f"{escape(node)}</text>"
        )
    return _svg(width, height, title, body)


__all__ = ["bars", "graph", "reliability"]
