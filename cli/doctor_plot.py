"""The doctor's picture: saved-tensor memory and live autograd nodes per iteration, for
the run of the script as it is and, after --diff/--apply, for the run of the fixed script.

Two renderings of the same series (`Watch.series`: one point per backward pass, one at
the end of the run): an SVG file written by hand (no plotting library: the tool must not
grow a dependency for one picture) and a compact chart in the terminal (one unicode
sparkline per series). Pure functions of the series; no torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from autograd_fix.verification.verdict import format_bytes

#: the sparkline's levels, lowest first
BARS = "▁▂▃▄▅▆▇█"
#: a terminal chart shows at most this many points (the series is resampled to fit)
SPARK_WIDTH = 48

Point = dict[str, int]


@dataclass(frozen=True)
class Run:
    """One run's series and its label in the picture (``before``, ``after the fixes``)."""

    label: str
    series: tuple[Point, ...]
    colour: str

    def values(self, key: str) -> list[int]:
        return [int(p.get(key) or 0) for p in self.series]


#: what each panel plots: (series key, title, how a value is written)
PANELS = (
    ("saved_bytes", "saved-tensor memory held at each backward", format_bytes),
    ("nodes", "autograd nodes the script's variables reach", lambda n: f"{int(n):,}"),
)


def runs(before: list[Point] | tuple[Point, ...], after: list[Point] | tuple[Point, ...] | None) -> list[Run]:
    """The runs to draw: the script as it is, and the fixed script when there is one."""
    drawn = [Run("as written", tuple(before), "#c0392b")]
    if after is not None:
        drawn.append(Run("after the fixes", tuple(after), "#27ae60"))
    return [run for run in drawn if run.series]


def sparkline(values: list[int], top: int | None = None, width: int = SPARK_WIDTH) -> str:
    """`values` as unicode bars scaled to `top` (default: their maximum; resampled to
    `width` points, each the largest of the values it stands for)."""
    if not values:
        return ""
    if len(values) > width:
        values = [max(values[i * len(values) // width:(i + 1) * len(values) // width] or [0]) for i in range(width)]
    top = max(values) if top is None else top
    if top <= 0:
        return BARS[0] * len(values)
    return "".join(BARS[min(len(BARS) - 1, int(v * (len(BARS) - 1) / top + 0.5))] for v in values)


def terminal_chart(drawn: list[Run]) -> list[str]:
    """Lines of the compact chart: per panel, one sparkline per run with its last and
    largest value, the runs of a panel on one scale (so the fixed run's bars are lower)."""
    lines = []
    for key, title, written in PANELS:
        lines.append(f"{title} (one bar per backward pass, the last at the end of the run):")
        top = max(max(run.values(key)) for run in drawn)
        for run in drawn:
            values = run.values(key)
            lines.append(f"  {run.label:<16} {sparkline(values, top)}  last {written(values[-1])}, max {written(max(values))}")
    return lines


# -- SVG -------------------------------------------------------------------------------------

_WIDTH, _PANEL_H, _LEFT, _RIGHT, _TOP, _GAP = 640, 170, 92, 24, 44, 56


def _panel(drawn: list[Run], key: str, title: str, written, top: int) -> list[str]:
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _PANEL_H - 40
    x0, y0 = _LEFT, top + 24
    longest = max(len(run.series) for run in drawn)
    peak = max(max(run.values(key)) for run in drawn) or 1
    out = [f'<text x="{_LEFT}" y="{top + 14}" class="title">{escape(title)}</text>',
           f'<rect x="{x0}" y="{y0}" width="{plot_w}" height="{plot_h}" class="frame"/>']
    for fraction in (0.0, 0.5, 1.0):
        y = y0 + plot_h - fraction * plot_h
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + plot_w}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{escape(written(peak * fraction))}</text>')
    def x_of(i: int) -> float:
        return x0 + (plot_w * i / (longest - 1) if longest > 1 else plot_w / 2)
    for i in sorted({0, longest - 1, (longest - 1) // 2}):
        out.append(f'<text x="{x_of(i):.1f}" y="{y0 + plot_h + 14}" class="tick" text-anchor="middle">{i + 1}</text>')
    for run in drawn:
        values = run.values(key)
        points = " ".join(f"{x_of(i):.1f},{y0 + plot_h - plot_h * v / peak:.1f}" for i, v in enumerate(values))
        out.append(f'<polyline points="{points}" fill="none" stroke="{run.colour}" stroke-width="2"/>')
        for i, v in enumerate(values):
            out.append(f'<circle cx="{x_of(i):.1f}" cy="{y0 + plot_h - plot_h * v / peak:.1f}" r="2.5" fill="{run.colour}"/>')
    return out


def svg(drawn: list[Run], script: str) -> str:
    """The picture as an SVG document: one panel per measure, one line per run, the
    x axis the backward passes in order (the last point: the end of the run)."""
    height = _TOP + len(PANELS) * (_PANEL_H + _GAP) - _GAP + 40
    body = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" viewBox="0 0 {_WIDTH} {height}" '
            'font-family="sans-serif">',
            "<style>.title{font-size:13px;font-weight:bold;fill:#222}.tick{font-size:10px;fill:#555}"
            ".frame{fill:#fafafa;stroke:#bbb}.grid{stroke:#e3e3e3}.legend{font-size:12px;fill:#222}</style>",
            f'<rect width="{_WIDTH}" height="{height}" fill="white"/>',
            f'<text x="{_LEFT}" y="20" class="title">autograd-fix doctor: {escape(script)}</text>']
    for index, (key, title, written) in enumerate(PANELS):
        body += _panel(drawn, key, title, written, _TOP + index * (_PANEL_H + _GAP))
    legend_y = height - 14
    body.append(f'<text x="{_LEFT}" y="{legend_y - 16}" class="tick">backward pass (the last point: the end of the run)</text>')
    x = _LEFT
    for run in drawn:
        body.append(f'<rect x="{x}" y="{legend_y - 9}" width="14" height="4" fill="{run.colour}"/>')
        body.append(f'<text x="{x + 20}" y="{legend_y - 3}" class="legend">{escape(run.label)}</text>')
        x += 30 + 8 * len(run.label)
    body.append("</svg>")
    return "\n".join(body) + "\n"
