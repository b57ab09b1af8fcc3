"""The fleet page: one self-contained HTML file ranking every device of many hosts.

A sortable table (host, device, verdict, headroom, time over target, worst window), each
row linking to that device's charts. The charts' points are kept while the batches go by
(:class:`FleetCharts`, the per-bucket peak of IOPS, response time and %util, so a spike
survives the reduction) and drawn only when a device is opened, so the page opens at once
however many devices it holds. Sizes are in benchmarks/README.md (fleet_scale.py).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from iogauge.analysis.fleet import FleetResult
from iogauge.analysis.types import AnalysisResult
from iogauge.model.sampleframe import SampleFrame
from iogauge.reporting.fleet_terminal import headroom_text, worst_text

#: Points per device chart: 96 = one per 15 minutes over a day.
BUCKETS = 96
#: Charted measures: (column, title, unit).
CHARTED: tuple[tuple[str, str, str], ...] = (
    ("iops", "IOPS (r+w+d)/s", "IO/s"), ("await_ms", "await", "ms"),
    ("util_pct", "%util", "%"))


@dataclass
class FleetCharts:
    """Each device's peak per time bucket, gathered batch by batch (``on_batch``)."""

    start: datetime
    end: datetime
    buckets: int = BUCKETS
    series: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)

    @property
    def bucket_s(self) -> float:
        return max((self.end - self.start).total_seconds() / self.buckets, 1e-3)

    def on_batch(self, frame: SampleFrame, result: AnalysisResult) -> None:
        df = frame.df
        if df.height == 0:
            return
        del result  # the points come from the samples; the verdicts from the ranking
        cols = [c for c, _, _ in CHARTED if c in df.columns]
        idx = ((pl.col("ts").dt.epoch("us") - int(self.start.timestamp() * 1e6))
               / (self.bucket_s * 1e6)).floor().clip(0, self.buckets - 1).cast(pl.Int32)
        peaks = (df.select("host", "device", idx.alias("b"), *cols)
                 .group_by("host", "device", "b").agg(pl.col(c).max() for c in cols))
        for (host, device), g in peaks.group_by("host", "device"):
            key = f"{host}:{device}"
            out: dict[str, list[float | None]] = {}
            b = g["b"].to_list()
            for c in cols:
                vals: list[float | None] = [None] * self.buckets
                for i, v in zip(b, g[c].to_list(), strict=True):
                    vals[i] = None if v is None else float(f"{v:.3g}")
                out[c] = vals
            self.series[key] = out


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _row(r: Any, anchor: str) -> str:
    worst = r.worst
    w_sort = "" if worst is None else f"{worst.value:.6g}"
    head_sort = "" if r.headroom_pct is None else f"{r.headroom_pct:.3f}"
    return (f'<tr id="r-{anchor}"><td data-v="{r.rank}">{r.rank}</td><td>{_e(r.host)}</td>'
            f'<td><a href="#{anchor}">{_e(r.device)}</a></td>'
            f'<td data-v="{r.rank}" class="v v-{_e(r.verdict.split(",")[0].replace(" ", "-"))}">'
            f"{_e(r.verdict)}</td>"
            f'<td data-v="{head_sort}">{_e(headroom_text(r))}</td>'
            f'<td data-v="{r.over_target_s:.0f}">{r.over_target_s:,.0f} s</td>'
            f'<td data-v="{w_sort}">{_e(worst_text(r))}</td><td>{_e(r.reason)}</td></tr>')


_CSS = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;width:100%}th,td{padding:3px 6px;border-bottom:1px solid #ddd;
text-align:left;vertical-align:top}th{cursor:pointer;background:#f4f4f4;position:sticky;top:0}
th:after{content:" \\2195";color:#aaa}.v-bottleneck{color:#b00;font-weight:bold}
.v-near-limit{color:#a60}.v-healthy{color:#070}.v-idle{color:#888}
#chart{border:1px solid #ccc;padding:8px;margin:1em 0;display:none}
#chart svg{display:block;margin:4px 0}.note{color:#555}
"""

# Sorting by a column header, and the chart of the device in the URL's #hash, drawn on
# demand from the embedded points (nothing is drawn for devices never opened).
_JS = """
const D=JSON.parse(document.getElementById('fleet-data').textContent);
document.querySelectorAll('th').forEach((th,i)=>th.addEventListener('click',()=>{
 const tb=th.closest('table').tBodies[0],rows=[...tb.rows],up=th.dataset.dir!=='up';
 th.dataset.dir=up?'up':'down';const val=r=>{const c=r.cells[i],v=c.dataset.v;
 return v===undefined?c.textContent:(v===''?Infinity:parseFloat(v))};
 rows.sort((a,b)=>{const x=val(a),y=val(b);const o=(typeof x==='number'&&typeof y==='number')
 ?x-y:String(x).localeCompare(String(y));return up?o:-o});rows.forEach(r=>tb.appendChild(r))}));
function line(vals,w,h,max){let p='',pen=false;vals.forEach((v,i)=>{if(v===null){pen=false;return}
 const x=(i+0.5)*w/vals.length,y=h-2-(h-4)*v/max;p+=(pen?'L':'M')+x.toFixed(1)+' '+y.toFixed(1);
 pen=true});return p}
function show(){const id=decodeURIComponent(location.hash.slice(1)),dev=D.devices[id],
 box=document.getElementById('chart');if(!dev){box.style.display='none';return}
 let s='<b>'+dev.title+'</b> <span class="note">(peak per '+D.bucket+'; '+D.span+')</span>';
 D.charted.forEach(([c,t,u])=>{const v=dev.series[c];if(!v)return;
  const max=Math.max(1e-9,...v.filter(x=>x!==null));s+='<div>'+t+' (max '+max.toPrecision(3)
  +' '+u+')</div><svg width="900" height="70" viewBox="0 0 900 70"><path fill="none" '
  +'stroke="#36c" d="'+line(v,900,70,max)+'"/></svg>'});box.innerHTML=s;
 box.style.display='block';box.scrollIntoView()}
window.addEventListener('hashchange',show);show();
"""


def render_fleet(fleet: FleetResult, charts: FleetCharts | None, *, title: str,
                 source: str) -> str:
    """The whole page."""
    devices: dict[str, Any] = {}
    rows = []
    for r in fleet.rows:
        anchor = f"d{r.rank}"
        rows.append(_row(r, anchor))
        series = charts.series.get(f"{r.host}:{r.device}") if charts else None
        if series is not None:
            devices[anchor] = {"title": f"{r.host} {r.device}: {r.verdict}",
                               "series": series}
    bucket = "-"
    span = ""
    if charts is not None:
        minutes = charts.bucket_s / 60
        bucket = f"{minutes:.0f} min" if minutes >= 1 else f"{charts.bucket_s:.0f} s"
        span = f"{charts.start:%Y-%m-%d %H:%M} to {charts.end:%Y-%m-%d %H:%M} UTC"
    data = json.dumps({"devices": devices, "charted": CHARTED, "bucket": bucket,
                       "span": span}, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    notes = "".join(f"<li>{_e(n)}</li>" for n in fleet.result.notes)
    window = fleet.result.window_s
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}'
            f"</title><style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
            f'<p class="note">{fleet.hosts} host(s), {len(fleet.rows)} device(s) from '
            f"{_e(source)}, {window:g} s windows. Ranked by worst verdict, then least "
            "headroom, then longest time over the response-time target; click a column to "
            "sort, a device for its charts.</p>"
            f'<div id="chart"></div><table><thead><tr><th>#</th><th>host</th><th>device</th>'
            "<th>verdict</th><th>headroom</th><th>over target</th><th>worst window</th>"
            f"<th>why</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f"<h2>Notes</h2><ul>{notes}</ul>"
            f'<script type="application/json" id="fleet-data">{data}</script>'
            f"<script>{_JS}</script></body></html>")

