"""A self-contained HTML page of a live diagnosis: summary table and inline SVG charts.

No script and no external resource: the file opens offline, prints, and can be mailed.
Charts are drawn server-side as SVG polylines; each series keeps per-pixel min and max so a
one-interval spike stays visible however long the run (never plain averaging).
"""

from __future__ import annotations

import html
import math
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from iogauge import __version__
from iogauge.analysis.summary import DeviceSummary
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame
from iogauge.reporting.metrics import SUMMARY_FORMATS

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1d232a}
h1{font-size:1.4rem;margin:0 0 .3rem}h2{font-size:1.1rem;margin:1.6rem 0 .4rem}
.meta{color:#5b6670;margin-bottom:1rem}
table{border-collapse:collapse;margin:.5rem 0}
th,td{padding:.25rem .6rem;border-bottom:1px solid #dde3e8;text-align:right;white-space:nowrap}
th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}
th{background:#f3f6f8}
ul.notes{margin:.3rem 0 .8rem 1rem;padding:0}
.charts{display:flex;flex-wrap:wrap;gap:1rem}
figure{margin:0}figcaption{font-size:.85rem;color:#5b6670}
svg{background:#fbfcfd;border:1px solid #dde3e8}
@media print{body{margin:.5cm}.charts{page-break-inside:avoid}}
"""

_CHARTS: tuple[tuple[str, str, str], ...] = (
    ("iops", "IOPS (r+w+d)", "#1f77b4"),
    ("kBps", "kB/s", "#2ca02c"),
    ("await_ms", "await (ms)", "#d62728"),
    ("util_pct", "%util", "#9467bd"),
    ("aqu_sz", "aqu-sz", "#8c564b"),
)


def _svg_series(ts_s: list[float], ys: list[float | None], color: str, *, width: int = 360,
                height: int = 110) -> str:
    pts = [(t, y) for t, y in zip(ts_s, ys, strict=True) if y is not None and math.isfinite(y)]
    if not pts:
        return (f'<svg width="{width}" height="{height}" role="img"><text x="10" y="20" '
                'font-size="12">no data</text></svg>')
    t0, t1 = pts[0][0], pts[-1][0]
    ymax = max(y for _t, y in pts) or 1.0
    pad = 4
    span = (t1 - t0) or 1.0
    # Per-pixel min/max envelope: keeps spikes whatever the number of samples.
    buckets: dict[int, tuple[float, float]] = {}
    for t, y in pts:
        px = round((t - t0) / span * (width - 2 * pad))
        lo, hi = buckets.get(px, (y, y))
        buckets[px] = (min(lo, y), max(hi, y))
    coords: list[str] = []
    for px in sorted(buckets):
        lo, hi = buckets[px]
        for y in ((lo, hi) if lo != hi else (lo,)):
            yy = height - pad - y / ymax * (height - 2 * pad)
            coords.append(f"{px + pad:.1f},{yy:.1f}")
    return (f'<svg width="{width}" height="{height}" role="img" data-points="{len(pts)}">'
            f'<polyline fill="none" stroke="{color}" stroke-width="1.5" '
            f'points="{" ".join(coords)}"/>'
            f'<text x="{width - pad}" y="12" font-size="11" text-anchor="end">max '
            f'{ymax:,.2f}</text></svg>')


def render_html(frame: SampleFrame, summaries: list[DeviceSummary],
                infos: dict[str, DeviceInfo], *, host: str, title: str) -> str:
    """The whole page as a string."""
    esc = html.escape
    now = datetime.now(tz=UTC).isoformat(timespec="seconds")
    df = frame.df.filter(~pl.col("reset") & ~pl.col("since_boot")).sort("ts")
    span = ""
    if df.height:
        span = f"{df['ts'].min()!s} to {df['ts'].max()!s}"
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        (f"<div class='meta'>host <b>{esc(host)}</b> · {esc(span)} · {df.height} device-"
         f"intervals · iogauge {esc(__version__)} · written {esc(now)}</div>"),
        "<h2>Devices</h2><table><thead><tr><th>device</th><th>kind</th>",
    ]
    for fmt in SUMMARY_FORMATS.values():
        unit = f" ({fmt.unit})" if fmt.unit else ""
        parts.append(f"<th>{esc(fmt.title + unit)}</th>")
    parts.append("</tr></thead><tbody>")
    for s in summaries:
        info = infos.get(s.device)
        desc = s.kind
        if info is not None:
            bits = [b for b in (info.model, info.dm_name, info.scheduler) if b]
            if info.rotational is not None:
                bits.insert(0, "rotational" if info.rotational else "non-rotational")
            if bits:
                desc += " · " + ", ".join(bits)
        cells = "".join(f"<td>{esc(f.fmt(getattr(s, k)))}</td>"
                        for k, f in SUMMARY_FORMATS.items())
        parts.append(f"<tr><td>{esc(s.device)}</td><td>{esc(desc)}</td>{cells}</tr>")
    parts.append("</tbody></table>")
    for s in summaries:
        parts.append(f"<h2 id='dev-{esc(s.device)}'>{esc(s.device)}</h2>")
        if s.notes:
            parts.append("<ul class='notes'>" + "".join(f"<li>{esc(n)}</li>" for n in s.notes)
                         + "</ul>")
        g = df.filter(pl.col("device") == s.device)
        ts_s = [t.timestamp() for t in g["ts"].to_list()]
        parts.append("<div class='charts'>")
        for col, label, color in _CHARTS:
            parts.append(f"<figure>{_svg_series(ts_s, g[col].to_list(), color)}"
                         f"<figcaption>{esc(label)}</figcaption></figure>")
        parts.append("</div>")
    parts.append("</body></html>\n")
    return "".join(parts)


def write_html(path: str | Path, page: str) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(page, encoding="utf-8")
    return p
