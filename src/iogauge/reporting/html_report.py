"""The analysis report: one self-contained, interactive HTML file.

What it holds, in order (``docs/report.md``): a verdict per device; the findings with their
evidence, most severe first; per device, the facts behind the verdict and its charts (time
series of IOPS, MB/s, latency, %util and queue with the worst windows shaded and the
findings' windows marked; util-vs-IOPS with the capacity fit, knee and extrapolated maximum;
latency-vs-IOPS; read/write and request-size mix; the RMF response-time breakdown); the
Oracle wait events; a compare view; a guarantee view.

Everything is inlined — the CSS and the chart code (``assets/report.css``,
``assets/report.js``, plain JavaScript drawing on canvas) and the data — and a
Content-Security-Policy of ``default-src 'none'`` forbids the page to load anything, so the
file opens offline, can be mailed, and never phones home. Tables and text are plain HTML,
readable without JavaScript and printed as they are.

Data embedding (``<script type="application/json" id="iogauge-data">``): columnar arrays
per device, times as seconds from one base time, values rounded to 4 significant digits.
Time series longer than the chart is wide are reduced per pixel column to the min and max
of each bucket (``downsample.minmax_envelope``), scatter plots to one point per occupied
pixel cell (``downsample.grid_thin``): peaks survive, nothing is averaged away. The full
analysis result is embedded too (``id="iogauge-result"``, the ``iogauge analyze --json``
document) for tools that scrape the report.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from iogauge import __version__
from iogauge.analysis.types import (
    SEVERITY_RANK,
    AnalysisResult,
    DeviceReport,
    Finding,
)
from iogauge.errors import IogaugeError
from iogauge.fsutil import fsync_dir
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.timeline import NO_INTERVAL
from iogauge.reporting.html.charts import _chart_specs
from iogauge.reporting.html.encode import (
    _dump,
    _num_array,
    _script_json,
    _time_array,
    round_sig,
)
from iogauge.reporting.html.guarantee import _guarantee
from iogauge.reporting.html.rows import (
    SERIES,
    _mix,
    _present,
    _rmf,
    _rows_for,
    _scatter,
    _timeseries,
    _with_derived,
)
from iogauge.reporting.html.sections import (
    _compare_section,
    _device_section,
    _duration,
    _e,
    _finding_card,
    _span,
    _verdicts_table,
    _waits_section,
)
from iogauge.reporting.metrics import (
    GUARANTEE_FORMATS,
    SERIES_FORMATS,
)

# The page's parts live in iogauge.reporting.html; the names callers and tests used from
# this module stay importable here.
__all__ = ["SERIES", "ReportError", "_dump", "_num_array", "_time_array", "render_report",
           "round_sig", "write_report"]

_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'")


class ReportError(IogaugeError):
    """The report cannot be written (output path not writable, assets missing)."""


# ---- assets ---------------------------------------------------------------------------------
def _asset(name: str) -> str:
    try:
        text = resources.files("iogauge.reporting").joinpath("assets", name).read_text(
            encoding="utf-8")
    except (FileNotFoundError, OSError) as exc:
        raise ReportError(f"report asset {name} is missing from the installation: {exc}"
                          ) from exc
    if re.search(r"</(script|style)", text, re.IGNORECASE):
        # inlined, such text would end the element early (HTML "script data" rules)
        raise ReportError(f"report asset {name} contains a closing script/style tag")
    return text


def render_report(frame: SampleFrame, result: AnalysisResult, *, title: str,
                  waits: pl.DataFrame | None = None, comparison: dict[str, Any] | None = None,
                  guarantee: pl.DataFrame | None = None, width_px: int = 1200) -> str:
    """The whole report as one HTML string.

    Args:
        frame: the samples the analysis read (rows of devices not in ``result`` are ignored;
            reset and since-boot rows are left out).
        result: ``analysis.engine.analyze``'s result.
        title: page title.
        waits: Oracle wait events (WaitEventFrame columns) for the waits table.
        comparison: ``Comparison.to_dict()`` of ``analysis/compare/`` for the compare view.
        guarantee: guarantee-controller decisions (GuaranteeFrame columns).
        width_px: pixel columns per time chart: longer series are reduced to a min/max
            envelope of this many buckets.
    """
    if width_px < 100:
        raise ReportError(f"width_px must be at least 100, got {width_px}")
    reports = result.devices
    rows = _rows_for(frame, reports)
    base_us = _base_us(rows, result, guarantee)
    rows = _with_derived(rows, base_us)
    ordered = sorted(enumerate(result.findings), key=lambda p: -SEVERITY_RANK[p[1].severity])
    findings = [f for _i, f in ordered]
    dev_idx = {r.device: i for i, r in enumerate(reports)}
    devices_data, sections = _devices(rows, result, findings, dev_idx, base_us, width_px)

    guarantee_html = ""
    guarantee_data: list[dict[str, Any]] = []
    if guarantee is not None:
        guarantee_html, guarantee_data = _guarantee(guarantee, base_us, width_px)
    waits_html = _waits_section(waits) if waits is not None else ""
    compare_html = _compare_section(comparison) if comparison is not None else ""

    metrics = {k: f.to_dict() for k, f in SERIES_FORMATS.items()}
    metrics.update({k: f.to_dict() for k, f in GUARANTEE_FORMATS.items() if k not in metrics})
    data = {"version": 1, "base": int(base_us / 1e6), "width": width_px, "metrics": metrics,
            "relative": (None if result.timeline is None else
                         {"interval": result.timeline.interval_s}),
            "devices": devices_data, "guarantee": guarantee_data,
            "findings": [{"title": f.title, "severity": f.severity} for f in findings]}
    data_json = _script_json(_dump(data))
    result_json = _script_json(json.dumps(result.to_dict(), ensure_ascii=False))

    notes = "".join(f"<li>{_e(n)}</li>" for n in result.notes)
    findings_html = ("".join(_finding_card(j, f, dev_idx, result.timeline)
                             for j, f in enumerate(findings))
                     or "<p class='muted'>No finding: no rule saw a problem.</p>")
    return "".join([
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<meta name='generator' content='iogauge {_e(__version__)}'>",
        f"<title>{_e(title)}</title><style>{_asset('report.css')}</style></head>",
        "<body data-charts-rendered='0'>", _header(title, result, findings),
        _toolbar(reports, waits_html, compare_html, guarantee_html),
        "<div id='js-errors' class='errors' hidden></div>", _NOSCRIPT,
        f"<ul class='notes'>{notes}</ul>" if notes else "",
        "<section id='verdicts'><h2>Verdict per device</h2>",
        _verdicts_table(result) if reports else "<p class='muted'>No device.</p>",
        "</section><section id='findings'><h2>Findings</h2>", findings_html, "</section>",
        "<div id='devices'>", "".join(sections), "</div>",
        waits_html, compare_html, guarantee_html, _FOOTER,
        f"<script type='application/json' id='iogauge-data'>{data_json}</script>",
        f"<script type='application/json' id='iogauge-result'>{result_json}</script>",
        f"<script>{_asset('report.js')}</script></body></html>\n",
    ])


def _base_us(rows: pl.DataFrame, result: AnalysisResult, guarantee: pl.DataFrame | None
             ) -> int:
    """The time every embedded offset counts from: the earliest of the data, in microseconds
    (whole seconds: offsets of 1 s data are then integers, the most compact JSON)."""
    firsts = [rows["ts"].min() if rows.height else None, result.start,
              guarantee["ts"].min() if guarantee is not None and guarantee.height else None]
    times = [t for t in firsts if isinstance(t, datetime)]
    base_dt = min(times) if times else datetime.now(tz=UTC)
    return math.floor(base_dt.timestamp()) * 1_000_000


def _devices(rows: pl.DataFrame, result: AnalysisResult, findings: list[Finding],
             dev_idx: dict[str, int], base_us: int, width_px: int
             ) -> tuple[list[dict[str, Any]], list[str]]:
    """Per device: its entry in the data block (chart specs, marks) and its HTML section."""
    base_s = base_us / 1e6

    def off(dt: datetime) -> float:
        return round(dt.timestamp() - base_s, 3)

    present = _present(rows, [*SERIES, "_iops", "_lat"])
    ts = _timeseries(rows, present, width_px)
    util_sc = _scatter(rows.filter(pl.col("util_pct").is_not_null()), "util_pct")
    lat_sc = _scatter(rows, "_lat")
    mix = _mix(rows)
    rmf = _rmf(rows)
    by_dev: dict[int, list[tuple[int, Finding]]] = {}
    for j, f in enumerate(findings):
        if f.device is not None and f.device in dev_idx:
            by_dev.setdefault(dev_idx[f.device], []).append((j, f))

    devices_data: list[dict[str, Any]] = []
    sections: list[str] = []
    for i, rep in enumerate(result.devices):
        specs, figs = _chart_specs(i, rep, present.get(i, set()), ts.get(i), util_sc.get(i),
                                   lat_sc.get(i), mix.get(i), rmf.get(i))
        marks = {
            "worst": [[off(w.start), off(w.end), w.metric, w.value, w.unit]
                      for w in rep.worst_windows],
            "findings": [[j, off(f.window_start), off(f.window_end), f.severity]
                         for j, f in by_dev.get(i, [])],
        }
        devices_data.append({"id": f"d{i}", "key": rep.device, "ts": ts.get(i),
                             "marks": marks, "charts": specs})
        note = "" if i in present else ("No samples of this device in the data given to the "
                                        "report.")
        sections.append(_device_section(i, rep, figs, by_dev.get(i, []), note,
                                        result.timeline))
    return devices_data, sections


def _header(title: str, result: AnalysisResult, findings: list[Finding]) -> str:
    """The page's title and what it covers: time span, devices, findings, sampling."""
    n_crit = sum(1 for f in findings if f.severity == "critical")
    n_warn = sum(1 for f in findings if f.severity == "warning")
    line = result.timeline
    span = (_span(result.start, result.end, line) if result.start is not None
            and result.end is not None else "no data")
    meta = [span, f"{len(result.devices)} device(s)",
            f"{len(findings)} finding(s): {n_crit} critical, {n_warn} warning"]
    if line is not None:  # no interval or duration the file does not hold
        meta.append(f"reports without time stamps ({NO_INTERVAL}); analysis windows "
                    f"{line.windows_text(result.window_s)}")
    else:
        if result.interval_s is not None:
            meta.append(f"samples every {_duration(result.interval_s)}")
        meta.append(f"analysis windows {_duration(result.window_s)}")
    written = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    return (f"<header class='top'><h1>{_e(title)}</h1><p class='meta'>"
            f"{_e(' · '.join(meta))}</p><p class='meta'>iogauge {_e(__version__)} · written "
            f"{_e(written)} · times in UTC</p></header>")


def _toolbar(reports: Sequence[DeviceReport], waits_html: str, compare_html: str,
             guarantee_html: str) -> str:
    """Links to the sections present, the device filters and the chart controls."""
    nav = ["<a href='#verdicts'>Verdicts</a>", "<a href='#findings'>Findings</a>",
           "<a href='#devices'>Devices</a>"]
    if waits_html:
        nav.append("<a href='#waits'>Wait events</a>")
    if compare_html:
        nav.append("<a href='#compare'>Compare</a>")
    if guarantee_html:
        nav.append("<a href='#guarantee'>Guarantee</a>")
    options = "".join(f"<option value='{i}'>{_e(r.device)}</option>"
                      for i, r in enumerate(reports))
    verdict_opts = "".join(f"<option>{_e(v)}</option>"
                           for v in dict.fromkeys(r.verdict for r in reports))
    return (
        "<nav class='toolbar noprint'>" + " ".join(nav)
        + "<span class='tools'><input type='search' id='dev-filter' placeholder='filter "
        "devices' aria-label='filter devices'> <select id='verdict-filter' aria-label="
        "'verdict filter'><option value=''>any verdict</option>" + verdict_opts
        + "</select> <select id='dev-jump' aria-label='go to device'><option value=''>go to "
        "device\u2026</option>" + options + "</select> <label><input type='checkbox' "
        "id='local-time'> local time</label> <button type='button' id='reset-zoom'>reset "
        "zoom</button></span></nav>")


_FOOTER = ("<footer class='muted'><p>Charts: times are interval ends. A time series longer "
           "than the chart is wide is drawn as the min\u2013max band of the samples in each "
           "pixel column, so one-sample peaks stay visible; scatter plots keep one point "
           "per occupied pixel cell. Values are rounded to 4 significant digits. The "
           "analysis itself (every number in the tables) used every sample. The "
           "machine-readable analysis is embedded as JSON (script#iogauge-result; schema: "
           "docs/analysis.md).</p></footer>")
_NOSCRIPT = ("<noscript><p class='errors'>Charts need JavaScript; every table and finding "
             "is readable without it.</p></noscript>")


def write_report(path: str | Path, page: str) -> Path:
    """Write the page atomically (temporary file in the same directory, fsync, rename), so a
    reader never sees half a report and an old report survives a failed write."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise ReportError(f"{p}: cannot write the report: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(page)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).chmod(0o644)
        Path(tmp).replace(p)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ReportError(f"{p}: cannot write the report: {exc.strerror or exc}") from exc
    fsync_dir(p.parent)
    return p
