"""Line plots against message size as a standalone SVG, for the tools that
compare libraries (compare-peers) and algorithms (sim-plot). No plotting
library: Debian's python3 has none by default, and the plots must be made
wherever the benchmarks run.

Lines rise to the right (busbw, and time on a log scale), so the legend
sits at the top left. A plot is a column of panels sharing the x axis (bytes, log 2). A panel has
a title, a y axis (linear from 0, or log 10), its series (a label, a colour,
a dash pattern and {size: value}) and optional horizontal reference lines
(a label and a value), such as a bandwidth bound.
"""
import math

WIDTH, PANEL_HEIGHT, PAD = 900, 380, 70
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


class Panel:
    def __init__(self, title, logy=False):
        self.title = title
        self.logy = logy
        self.series = []  # (label, colour, dash, {size: value})
        self.hlines = []  # (label, value)

    def add(self, label, points, colour=None, dash=""):
        self.series.append((label, colour or PALETTE[len(self.series) % len(PALETTE)], dash, points))

    def add_hline(self, label, value):
        self.hlines.append((label, value))


def render(panels):
    """The SVG text of `panels`, one under the other; "" when nothing has a point."""
    sizes = sorted({s for p in panels for _, _, _, pts in p.series for s in pts if s > 0})
    if not sizes:
        return ""
    x_lo, x_hi = math.log2(sizes[0]), math.log2(sizes[-1])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{len(panels) * PANEL_HEIGHT}" '
           f'font-family="sans-serif" font-size="12">', '<rect width="100%" height="100%" fill="white"/>']

    def px(s):
        return PAD + (math.log2(s) - x_lo) / max(x_hi - x_lo, 1e-9) * (WIDTH - 2 * PAD)

    for index, panel in enumerate(panels):
        top = index * PANEL_HEIGHT
        bottom = top + PANEL_HEIGHT - PAD + 10
        values = [v for _, _, _, pts in panel.series for v in pts.values() if v > 0]
        values += [v for _, v in panel.hlines if v > 0]
        lo, hi = (min(values), max(values)) if values else (1, 2)
        to_axis = math.log10 if panel.logy else (lambda y: y)
        y_lo, y_hi = (to_axis(lo), to_axis(hi)) if panel.logy else (0, hi * 1.05)
        y_hi = y_hi if y_hi > y_lo else y_lo + 1

        def py(v):
            return bottom - (to_axis(v) - y_lo) / (y_hi - y_lo) * (PANEL_HEIGHT - 2 * PAD)

        out.append(f'<text x="{WIDTH / 2}" y="{top + 20}" text-anchor="middle">{panel.title}</text>')
        out.append(f'<line x1="{PAD}" y1="{bottom}" x2="{WIDTH - PAD}" y2="{bottom}" stroke="black"/>'
                   f'<line x1="{PAD}" y1="{top + PAD - 10}" x2="{PAD}" y2="{bottom}" stroke="black"/>')
        for s in sizes[::max(1, len(sizes) // 8)]:
            out.append(f'<text x="{px(s):.1f}" y="{bottom + 18}" text-anchor="middle">{human(s)}</text>')
        for k in range(5):
            v = y_lo + (y_hi - y_lo) * k / 4
            label = 10 ** v if panel.logy else v
            y = bottom - (v - y_lo) / (y_hi - y_lo) * (PANEL_HEIGHT - 2 * PAD)
            out.append(f'<text x="{PAD - 6}" y="{y:.1f}" text-anchor="end">{label:.3g}</text>')
        for label, value in panel.hlines:
            if value <= 0:
                continue
            out.append(f'<line x1="{PAD}" y1="{py(value):.1f}" x2="{WIDTH - PAD}" y2="{py(value):.1f}" '
                       f'stroke="black" stroke-dasharray="2,3"/>')
            out.append(f'<text x="{WIDTH - PAD}" y="{py(value) - 4:.1f}" text-anchor="end">{label}</text>')
        for n, (label, colour, dash, pts) in enumerate(panel.series):
            line = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in sorted(pts.items()) if s > 0 and v > 0)
            if line:
                out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}" '
                           f'points="{line}"/>')
            out.append(f'<text x="{PAD + 12}" y="{top + PAD + 16 * n}" fill="{colour}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out)
