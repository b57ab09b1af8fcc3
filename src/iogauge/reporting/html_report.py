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

import html
import json
import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from iogauge import __version__
from iogauge.analysis.types import (
    SEVERITY_RANK,
    AnalysisResult,
    DeviceReport,
    Evidence,
    Finding,
)
from iogauge.errors import IogaugeError
from iogauge.fsutil import fsync_dir
from iogauge.guarantee.figures import guarantee_figures
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.timeline import NO_INTERVAL, RelativeTimeline, is_relative
from iogauge.reporting.downsample import grid_thin, minmax_envelope
from iogauge.reporting.metrics import (
    ATTRIBUTE_FORMATS,
    CAPABILITY_FORMATS,
    CAPACITY_FORMATS,
    GUARANTEE_FORMATS,
    SERIES_FORMATS,
    WAIT_FORMATS,
    MetricFormat,
    metric_format,
)

#: Significant digits of embedded values: 4 keeps 0.1 % resolution, which no chart or
#: tooltip needs more of, and makes a day of data per device a few hundred kB.
SIG_DIGITS = 4
#: Scatter plots are thinned on a grid of this many cells (x, y): about 4 px per cell on a
#: 560 x 300 px plot, so the thinned plot looks like the full one.
SCATTER_GRID = (140, 80)
#: More RMF intervals than this are merged into this many bars (IOPS-weighted means of the
#: response-time components, the way RMF itself aggregates intervals).
MAX_RMF_BARS = 96
#: Request-size histogram bin upper edges (kB); the last bin is open.
SIZE_EDGES_KB: tuple[float, ...] = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: Wait events shown per report interval.
MAX_WAIT_EVENTS = 15

#: Time-series charts of a device: (id, title, series, fallback series if none of the first
#: set was measured, extra series drawn when measured).
TS_CHARTS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    ("iops", "IOPS", ("r_iops", "w_iops", "d_iops"), ("iops",), ()),
    ("mbps", "Throughput", ("r_MBps", "w_MBps", "d_MBps"), ("MBps",), ()),
    ("lat", "Latency", ("r_await_ms", "w_await_ms"), ("await_ms",), ("svctm_ms",)),
    ("util", "%util", ("util_pct",), (), ()),
    ("queue", "Queue", ("aqu_sz",), (), ()),
)
SERIES: tuple[str, ...] = tuple(dict.fromkeys(
    c for _id, _t, a, b, x in TS_CHARTS for c in (*a, *b, *x)))
RMF_PARTS: tuple[str, ...] = ("iosq_ms", "pend_ms", "disc_ms", "conn_ms")
#: SampleFrame columns the report reads (the MB/s series are derived from the kB/s ones).
_ROW_COLUMNS: tuple[str, ...] = (
    "host", "device", "ts", "interval_s", "r_iops", "w_iops", "d_iops", "iops", "r_kBps",
    "w_kBps", "d_kBps", "kBps", "r_await_ms", "w_await_ms", "await_ms", "svctm_ms",
    "util_pct", "aqu_sz", "r_areq_kB", "w_areq_kB", *RMF_PARTS)

_VERDICT_CLASS: dict[str, str] = {
    "bottleneck": "v-bottleneck", "near limit": "v-near", "busy, not the bottleneck": "v-busy",
    "healthy": "v-healthy", "idle": "v-idle", "cannot judge": "v-unknown",
}
_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "img-src data:; base-uri 'none'; form-action 'none'")


class ReportError(IogaugeError):
    """The report cannot be written (output path not writable, assets missing)."""


# ---- small formatting helpers ---------------------------------------------------------------
def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ts(dt: datetime | None) -> str:
    if dt is None:
        return "-"
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _span(start: datetime, end: datetime, line: RelativeTimeline | None = None) -> str:
    """``2024-05-01 02:10:00Z - 02:15:00Z (5 min)`` (an en dash); the date repeated only when
    it changes. On the relative time line of reports without time stamps, the reports
    (``report 2 of 5 (interval not in the file)``): no clock time, no duration."""
    if line is not None and is_relative(end):
        return line.describe(start, end)
    s, e = start.astimezone(UTC), end.astimezone(UTC)
    tail = e.strftime("%H:%M:%SZ") if s.date() == e.date() else _ts(e)
    return f"{_ts(s)} \u2013 {tail} ({_duration((e - s).total_seconds())})"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    if seconds < 172800:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} days"


def _smart(v: float) -> str:
    """A number with as many decimals as its size deserves (evidence values and thresholds)."""
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1 or a == 0:
        return f"{v:.2f}".rstrip("0").rstrip(".") if a < 10 else f"{v:.1f}"
    return f"{v:.3g}"


def _fmt(f: MetricFormat, v: float | None) -> str:
    return _e(f.fmt_unit(v))


def _verdict_badge(verdict: str) -> str:
    return f"<span class='badge {_VERDICT_CLASS.get(verdict, 'v-unknown')}'>{_e(verdict)}</span>"


def _sev_badge(sev: str) -> str:
    return f"<span class='sev sev-{_e(sev)}'>{_e(sev)}</span>"


# ---- compact JSON ---------------------------------------------------------------------------
class _Nums:
    """A number array to embed. Its JSON text is made by :func:`_dump` for every array of the
    document in one polars pass (one call per array costs ~1 ms of overhead each)."""

    __slots__ = ("text", "values")

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.text = ""


def round_sig(values: np.ndarray, sig: int = SIG_DIGITS) -> np.ndarray:
    """``values`` rounded to ``sig`` significant digits (NaN and 0 unchanged), computed so that
    the result is the double nearest the short decimal (its shortest repr is that decimal):
    divide by an exact power of ten for large values, multiply for small ones."""
    a = np.array(values, dtype=np.float64, copy=True)
    ok = np.isfinite(a) & (a != 0)
    if not ok.any():
        return a
    v = a[ok]
    exp = (sig - 1 - np.floor(np.log10(np.abs(v)))).astype(np.int64)
    small = exp >= 0
    out = np.empty_like(v)
    p_small = 10.0 ** exp[small]
    out[small] = np.round(v[small] * p_small) / p_small
    p_big = 10.0 ** (-exp[~small])
    out[~small] = np.round(v[~small] / p_big) * p_big
    a[ok] = out
    return a


def _num_array(values: np.ndarray | pl.Series, sig: int = SIG_DIGITS) -> _Nums:
    """Numbers rounded to ``sig`` significant digits; null for missing values."""
    a = values.to_numpy() if isinstance(values, pl.Series) else values
    return _Nums(round_sig(np.asarray(a, dtype=np.float64), sig))


def _time_array(seconds: np.ndarray | pl.Series) -> _Nums:
    """Offsets in seconds from the report's base time (or intervals), to the millisecond."""
    a = seconds.to_numpy() if isinstance(seconds, pl.Series) else seconds
    return _Nums(np.round(np.asarray(a, dtype=np.float64), 3))


def _int_array(values: Sequence[int] | np.ndarray | pl.Series) -> _Nums:
    a = values.to_numpy() if isinstance(values, pl.Series) else values
    return _Nums(np.asarray(a, dtype=np.float64))


def _format_all(items: Sequence[_Nums]) -> None:
    """Set the JSON text of every array: shortest round-trip text of each value (formatted by
    polars in Rust, ~10x faster than ``numpy.char.mod``; exponents such as ``1.235e-7`` are
    valid JSON), ``.0`` dropped from whole numbers, null for missing or non-finite values."""
    if not items:
        return
    sizes = [it.values.size for it in items]
    s = pl.Series("v", np.concatenate([it.values for it in items]), dtype=pl.Float64)
    text = (s.set(~s.is_finite().fill_null(value=False), None).cast(pl.String)
            .str.replace(r"\.0$", "").fill_null("null").to_list())
    pos = 0
    for it, n in zip(items, sizes, strict=True):
        it.text = "[" + ",".join(text[pos:pos + n]) + "]"
        pos += n


def _pending(obj: object, out: list[_Nums]) -> None:
    if isinstance(obj, _Nums):
        if not obj.text:
            out.append(obj)
    elif isinstance(obj, Mapping):
        for v in obj.values():
            _pending(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _pending(v, out)


def _dump(obj: object) -> str:
    """Compact JSON of ``obj``, with its number arrays formatted in one pass."""
    todo: list[_Nums] = []
    _pending(obj, todo)
    _format_all(todo)
    return _encode(obj)


def _encode(obj: object) -> str:
    if isinstance(obj, _Nums):
        return obj.text
    if isinstance(obj, Mapping):
        return "{" + ",".join(json.dumps(str(k)) + ":" + _encode(v) for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_encode(v) for v in obj) + "]"
    if isinstance(obj, float):
        return json.dumps(round(obj, 6)) if math.isfinite(obj) else "null"
    if isinstance(obj, datetime):
        return json.dumps(obj.isoformat())
    return json.dumps(obj, ensure_ascii=False)


def _script_json(text: str) -> str:
    """JSON safe inside ``<script>``: no ``<`` (so no ``</script>`` or ``<!--``), ``>``, ``&``;
    the escapes are valid only inside JSON strings, which is the only place they occur."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


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


# ---- rows per device ------------------------------------------------------------------------
def _device_name(rep: DeviceReport) -> str:
    """The SampleFrame ``device`` of a report (its key is ``host:device`` on multi-host data)."""
    prefix = f"{rep.host}:"
    return rep.device[len(prefix):] if rep.device.startswith(prefix) else rep.device


def _rows_for(frame: SampleFrame, reports: Sequence[DeviceReport]) -> pl.DataFrame:
    """Rows of every reported device with its index ``_dev``; parents the analysis
    synthesised from their parts (a rank from its volumes) are rebuilt the same way."""
    df = frame.df.filter(~pl.col("reset") & ~pl.col("since_boot"))
    ids = pl.DataFrame({"_dev": list(range(len(reports))),
                        "host": [r.host for r in reports],
                        "device": [_device_name(r) for r in reports]},
                       schema={"_dev": pl.Int32, "host": pl.String, "device": pl.String})
    # Device index per row: a replace per host is ~8x faster than joining on two string
    # columns; only the charted columns travel on (a SampleFrame has ~60, most null).
    by_host: dict[str, dict[str, int]] = {}
    for i, rep in enumerate(reports):
        by_host.setdefault(rep.host, {})[_device_name(rep)] = i
    dev_expr: pl.Expr = pl.lit(None, dtype=pl.Int32)
    for host, names in by_host.items():
        dev_expr = pl.when(pl.col("host") == host).then(
            pl.col("device").replace_strict(names, default=None, return_dtype=pl.Int32)
        ).otherwise(dev_expr)
    rows = (df.select(_ROW_COLUMNS).with_columns(dev_expr.alias("_dev"))
            .filter(pl.col("_dev").is_not_null()))
    missing = ids.join(rows.select("_dev").unique(), on="_dev", how="anti")
    if missing.height and df.height:
        try:
            from iogauge.analysis.aggregate import add_aggregates  # noqa: PLC0415 - optional
        except ImportError:
            return rows
        agg, _notes = add_aggregates(df, None)
        extra = agg.slice(df.height).join(missing, on=["host", "device"], how="inner")
        rows = pl.concat([rows, extra.select(rows.columns)], how="vertical")
    return rows


def _with_derived(rows: pl.DataFrame, base_us: int) -> pl.DataFrame:
    """Add ``_t`` (seconds from the base), MB/s series, total IOPS and a latency for scatter."""
    def mb(col: str) -> pl.Expr:
        return (pl.col(col) / 1024.0).alias(col.replace("kBps", "MBps"))

    rwd = [pl.col(c) for c in ("r_iops", "w_iops", "d_iops")]
    any_rwd = pl.any_horizontal([c.is_not_null() for c in rwd])
    total_iops = pl.coalesce(pl.col("iops"),
                             pl.when(any_rwd).then(pl.sum_horizontal(rwd)))
    rw = pl.col("r_iops").fill_null(0) + pl.col("w_iops").fill_null(0)
    rw_lat = ((pl.col("r_await_ms") * pl.col("r_iops")).fill_null(0)
              + (pl.col("w_await_ms") * pl.col("w_iops")).fill_null(0)) / rw
    lat = pl.coalesce(pl.col("await_ms"),
                      pl.when((rw > 0) & (pl.col("r_await_ms").is_not_null()
                                          | pl.col("w_await_ms").is_not_null()))
                      .then(rw_lat))
    return rows.with_columns(
        ((pl.col("ts").dt.epoch("us") - base_us) / 1e6).alias("_t"),
        mb("r_kBps"), mb("w_kBps"), mb("d_kBps"), mb("kBps"),
        total_iops.alias("_iops"), lat.alias("_lat"),
    )


def _present(rows: pl.DataFrame, cols: Sequence[str]) -> dict[int, set[str]]:
    """Device index -> the columns it has at least one value of."""
    if rows.height == 0:
        return {}
    has = rows.group_by("_dev").agg([pl.col(c).is_not_null().any().alias(c) for c in cols])
    out: dict[int, set[str]] = {}
    for r in has.iter_rows(named=True):
        out[int(r["_dev"])] = {c for c in cols if r[c]}
    return out


def _breaks(t_first: np.ndarray, t_last: np.ndarray, interval: np.ndarray) -> list[int]:
    """Indices i where a gap precedes point i: more than 1.5 sampling intervals between the
    last sample of point i-1 and the first of point i (times are interval ends), i.e. at
    least one sample missing (a stopped recorder, a file boundary)."""
    if t_first.size < 2:
        return []
    gap = t_first[1:] - t_last[:-1] > 1.5 * interval[1:] + 1e-6
    return [int(i) + 1 for i in np.flatnonzero(gap)]


def _timeseries(rows: pl.DataFrame, present: dict[int, set[str]], n_buckets: int
                ) -> dict[int, dict[str, Any]]:
    """Per device: the time axis and every measured series, raw or as a min/max envelope."""
    out: dict[int, dict[str, Any]] = {}
    if rows.height == 0:
        return out
    counts = dict(rows.group_by("_dev").len().iter_rows())
    small = [d for d, n in counts.items() if n <= n_buckets]
    big = [d for d, n in counts.items() if n > n_buckets]
    if small:
        for key, g in rows.filter(pl.col("_dev").is_in(small)).sort("_dev", "_t").partition_by(
                "_dev", as_dict=True).items():
            dev = int(key[0])
            t = g["_t"].to_numpy()
            iv = g["interval_s"].to_numpy()
            out[dev] = {"mode": "raw", "t": _time_array(t), "iv": _time_array(iv),
                        "t0": round(float(t[0] - iv[0]), 3), "n": None, "dt": None,
                        "breaks": _breaks(t, t, iv),
                        "series": {c: {"lo": _num_array(g[c])}
                                   for c in SERIES if c in present.get(dev, set())}}
    if big:
        cols = [c for c in SERIES if any(c in present.get(d, set()) for d in big)]
        env = minmax_envelope(rows.filter(pl.col("_dev").is_in(big)), t="_t",
                              columns=[*cols, "interval_s"], n_buckets=n_buckets, by="_dev")
        for key, g in env.partition_by("_dev", as_dict=True).items():
            dev = int(key[0])
            tf, tl = g["t_first"].to_numpy(), g["t_last"].to_numpy()
            iv = g["interval_s_hi"].to_numpy()
            span = float(tl.max() - tf.min()) if g.height else 0.0
            dt = span / n_buckets if span > 0 else float(iv.max())
            first_iv = float(g["interval_s_lo"][0])
            out[dev] = {"mode": "minmax", "t": _time_array(tf), "n": _int_array(g["n"]),
                        "t0": round(float(tf[0]) - first_iv, 3), "dt": round(dt, 3),
                        "breaks": _breaks(tf, tl, iv),
                        "series": {c: {"lo": _num_array(g[f"{c}_lo"]),
                                       "hi": _num_array(g[f"{c}_hi"])}
                                   for c in cols if c in present.get(dev, set())}}
    return out


def _scatter(rows: pl.DataFrame, y: str) -> dict[int, dict[str, Any]]:
    """Per device: thinned (IOPS, y) points with their counts."""
    sel = rows.select("_dev", "_iops", y).filter(pl.col("_iops").is_not_null()
                                                  & pl.col(y).is_not_null())
    if sel.height == 0:
        return {}
    thin = grid_thin(sel, x="_iops", y=y, nx=SCATTER_GRID[0], ny=SCATTER_GRID[1], by="_dev")
    out: dict[int, dict[str, Any]] = {}
    for key, g in thin.partition_by("_dev", as_dict=True).items():
        out[int(key[0])] = {"x": _num_array(g["_iops"]),
                            "y": _num_array(g[y]), "n": _int_array(g["n"]),
                            "total": int(g["n"].sum())}
    return out


def _mix(rows: pl.DataFrame) -> dict[int, dict[str, Any]]:
    """Per device: operations and kB read/written/discarded, and request-size histograms
    weighted by operations (rate x interval), from the per-interval mean sizes."""
    if rows.height == 0:
        return {}
    iv = pl.col("interval_s")
    sums = rows.group_by("_dev").agg(
        *[(pl.col(f"{k}_iops") * iv).sum().alias(f"{k}_ops") for k in "rwd"],
        *[(pl.col(f"{k}_kBps") * iv).sum().alias(f"{k}_kB") for k in "rwd"],
        *[pl.col(f"{k}_iops").is_not_null().any().alias(f"{k}_has") for k in "rwd"],
    )
    edges = np.asarray(SIZE_EDGES_KB, dtype=np.float64)
    hist: dict[tuple[int, str], np.ndarray] = {}
    for k in "rw":
        sub = rows.select("_dev", pl.col(f"{k}_areq_kB").alias("sz"),
                          (pl.col(f"{k}_iops") * iv).alias("ops")).filter(
            pl.col("sz").is_not_null() & (pl.col("ops") > 0))
        if sub.height == 0:
            continue
        bins = np.searchsorted(edges, sub["sz"].to_numpy(), side="left")
        agg = (sub.with_columns(pl.Series("bin", bins, dtype=pl.Int32))
               .group_by("_dev", "bin").agg(pl.col("ops").sum()))
        for r in agg.iter_rows(named=True):
            arr = hist.setdefault((int(r["_dev"]), k), np.zeros(len(edges) + 1))
            arr[int(r["bin"])] = float(r["ops"])
    out: dict[int, dict[str, Any]] = {}
    for r in sums.iter_rows(named=True):
        dev = int(r["_dev"])
        ops = [r[f"{k}_ops"] if r[f"{k}_has"] else None for k in "rwd"]
        kb = [r[f"{k}_kB"] if r[f"{k}_has"] else None for k in "rwd"]
        h = {k: _num_array(hist[(dev, k)]) for k in "rw" if (dev, k) in hist}
        out[dev] = {"ops": ops, "kB": kb, "hist": h}
    return out


def _rmf(rows: pl.DataFrame) -> dict[int, dict[str, Any]]:
    """Per device with RMF response-time components: one bar per interval (or per merged
    group of intervals when there are more than MAX_RMF_BARS)."""
    has = pl.any_horizontal([pl.col(c).is_not_null() for c in RMF_PARTS])
    sel = rows.filter(has).sort("_dev", "_t")
    if sel.height == 0:
        return {}
    out: dict[int, dict[str, Any]] = {}
    for key, part in sel.partition_by("_dev", as_dict=True).items():
        dev = int(key[0])
        g = part
        merged = g.height > MAX_RMF_BARS
        if merged:
            ops = (pl.coalesce(pl.col("_iops"), pl.lit(1.0)) * pl.col("interval_s"))
            g = (g.with_columns(_bar=((pl.col("_t") - pl.col("_t").min())
                                               / (pl.col("_t").max() - pl.col("_t").min())
                                               * MAX_RMF_BARS).floor()
                                .clip(0, MAX_RMF_BARS - 1), _w=ops)
                 .group_by("_bar")
                 .agg(pl.col("_t").max(), pl.col("interval_s").sum(),
                      *[((pl.col(c) * pl.col("_w")).sum()
                         / pl.col("_w").filter(pl.col(c).is_not_null()).sum()).alias(c)
                        for c in RMF_PARTS])
                 .sort("_t"))
        out[dev] = {"t": _time_array(g["_t"]), "iv": _num_array(g["interval_s"]),
                    "merged": merged,
                    "parts": {c: _num_array(g[c]) for c in RMF_PARTS}}
    return out


# ---- HTML sections --------------------------------------------------------------------------
def _evidence_row(ev: Evidence) -> str:
    numeric = isinstance(ev.value, (int, float)) and not isinstance(ev.value, bool)
    val = "-" if ev.value is None else str(ev.value)
    if numeric:
        val = _smart(float(ev.value))  # type: ignore[arg-type]
    unit = ev.unit or metric_format(ev.metric).unit
    thr = "" if ev.threshold is None else f"{ev.op or 'vs'} {_smart(ev.threshold)} {unit}"
    return (f"<tr><td>{_e(ev.metric)}</td><td{' class=num' if numeric else ''}>{_e(val)} "
            f"{_e(unit)}</td>"
            f"<td class='num'>{_e(thr)}</td><td>{_e(ev.note)}</td></tr>")


def _finding_card(i: int, f: Finding, dev_idx: Mapping[str, int],
                  line: RelativeTimeline | None = None) -> str:
    d = dev_idx.get(f.device) if f.device is not None else None
    if d is not None:
        where = (f"<a href='#dev-d{d}' class='devlink' data-zoom-dev='{d}' data-zoom-finding"
                 f"='{i}'>{_e(f.device)}</a>")
    else:
        where = _e(f.device or "host-wide")
    ev = ""
    if f.evidence:
        ev = ("<table class='evidence'><thead><tr><th>measured</th><th>value</th>"
              "<th>threshold</th><th>note</th></tr></thead><tbody>"
              + "".join(_evidence_row(e) for e in f.evidence) + "</tbody></table>")
    dev_attr = "" if d is None else f" data-dev='{d}'"
    return (f"<article class='finding sev-{_e(f.severity)}' id='f{i}'{dev_attr}>"
            f"<header><span class='fid'>#{i + 1}</span> {_sev_badge(f.severity)} "
            f"<strong>{_e(f.title)}</strong></header>"
            f"<p class='when'>{where} · {_e(_span(f.window_start, f.window_end, line))} · rule "
            f"<code>{_e(f.rule)}</code></p>{ev}"
            f"<p><b>Why it matters.</b> {_e(f.explanation)}</p>"
            f"<p><b>What to do.</b> {_e(f.suggestion)}</p>"
            f"<p class='source'><b>Source.</b> {_e(f.source)}</p></article>")


def _kv_table(caption: str, rows: Sequence[tuple[str, str]]) -> str:
    """A key/value table; rows keyed ``note`` or ``source`` are set small (context)."""
    if not rows:
        return ""
    body = "".join(f"<tr{' class=small' if k in ('note', 'source') else ''}><th>{_e(k)}</th>"
                   f"<td>{v}</td></tr>" for k, v in rows)
    return f"<table class='kv'><caption>{_e(caption)}</caption><tbody>{body}</tbody></table>"


def _device_facts(rep: DeviceReport) -> str:
    a = rep.attributes
    attrs: list[tuple[str, str]] = []
    for name, f in ATTRIBUTE_FORMATS.items():
        v = getattr(a, name, None)
        if v is not None:
            label = f.title
            if name == "seq_pct" and a.seq_method:
                label += f" ({a.seq_method})"
            if name == "svctm_ms" and a.svctm_estimated:
                label += " (estimated: util / IOPS)"
            attrs.append((label, _fmt(f, v)))
    if a.intervals:
        attrs.insert(0, ("intervals", _e(f"{a.intervals:,} over {_duration(a.span_s)}")))
    parts = [_kv_table("Workload attributes", attrs)]
    svc = rep.service
    if svc is not None:
        # How the device serves requests, decided from its samples, with every signal.
        rows = [("model", _e(f"{svc.model} (decided by {svc.decided_by})")),
                ("why", _e(svc.summary))]
        rows += [(f"{s.name} ({s.strength})", _e(f"{s.points_to}: {s.text}"))
                 for s in svc.signals]
        parts.append(_kv_table("Service model", rows))
    cap = rep.capability
    if cap is not None:
        rows = [("profile", _e(f"{cap.title} ({cap.profile})")),
                ("matched by", _e(cap.matched_by)),
                ("serves requests", _e("in parallel (%util is not a capacity measure)"
                                       if cap.parallel else "one at a time"))]
        rows += [(f.title, _fmt(f, getattr(cap, n))) for n, f in CAPABILITY_FORMATS.items()
                 if getattr(cap, n) is not None]
        rows += [("note", _e(n)) for n in cap.notes]
        rows += [("source", _e(s)) for s in cap.sources]
        parts.append(_kv_table("Capability for this mix", rows))
    c = rep.capacity
    if c is not None:
        rows = [("method", _e(c.method)), ("why", _e(c.reason))]
        rows += [(f.title, _fmt(f, getattr(c, n))) for n, f in CAPACITY_FORMATS.items()
                 if getattr(c, n) is not None]
        if c.points:
            rows.append(("intervals fitted", _e(f"{c.points:,}")))
        rows += [("note", _e(n)) for n in c.notes]
        parts.append(_kv_table("Capacity and headroom", rows))
    notes = "".join(f"<li>{_e(n)}</li>" for n in a.notes)
    if notes:
        parts.append(f"<ul class='notes'>{notes}</ul>")
    return "<div class='facts'>" + "".join(parts) + "</div>"


def _headroom(rep: DeviceReport) -> str:
    c = rep.capacity
    if c is None or c.max_iops is None:
        return "-"
    txt = f"~{c.max_iops:,.0f} IO/s max"
    if c.headroom_iops is not None:
        txt = f"{c.headroom_iops:,.0f} IO/s left of " + txt
        if c.headroom_pct is not None:
            txt += f" ({c.headroom_pct:.0f} %)"
    txt += f" · {c.method}"
    if c.confidence is not None:
        txt += f", confidence {c.confidence:.2f}"
    return _e(txt)


def _verdicts_table(result: AnalysisResult) -> str:
    head = ("<table class='verdicts'><thead><tr><th>device</th><th>kind</th><th>verdict</th>"
            "<th>why</th><th>IOPS mean / peak</th><th>MB/s mean</th><th>await mean</th>"
            "<th>%util peak</th><th>headroom</th><th>capability used</th><th>findings</th>"
            "</tr></thead><tbody>")
    rows = []
    for i, d in enumerate(result.devices):
        a = d.attributes
        used = "-"
        if d.capability is not None:
            used = d.capability.title
            if d.capability.used_pct is not None:
                used = f"{d.capability.used_pct:.0f} % of {d.capability.title}"
        fc = d.finding_count
        counts = " ".join(f"<span class='sev sev-{s}'>{fc[s]}</span>"
                          for s in ("critical", "warning", "info") if fc.get(s))
        iops = ATTRIBUTE_FORMATS["iops_mean"]
        rows.append(
            f"<tr data-dev='{i}' class='{_VERDICT_CLASS.get(d.verdict, 'v-unknown')}'>"
            f"<td><a href='#dev-d{i}'>{_e(d.device)}</a></td><td>{_e(d.kind)}</td>"
            f"<td>{_verdict_badge(d.verdict)}</td><td>{_e(d.verdict_reason)}</td>"
            f"<td class='num'>{_e(iops.fmt(a.iops_mean))} / {_e(iops.fmt(a.iops_peak))}</td>"
            f"<td class='num'>{_e(ATTRIBUTE_FORMATS['MBps_mean'].fmt(a.MBps_mean))}</td>"
            f"<td class='num'>{_fmt(ATTRIBUTE_FORMATS['await_ms'], a.await_ms)}</td>"
            f"<td class='num'>{_fmt(ATTRIBUTE_FORMATS['util_peak_pct'], a.util_peak_pct)}</td>"
            f"<td>{_headroom(d)}</td><td>{_e(used)}</td><td>{counts or '-'}</td></tr>")
    return head + "".join(rows) + "</tbody></table>"


def _figure(fid: str, title: str, caption: str, kind: str) -> str:
    return (f"<figure class='chart chart-{kind}' id='{fid}' data-chart='{kind}'>"
            f"<figcaption><b>{_e(title)}</b> <span class='cap'>{_e(caption)}</span>"
            "</figcaption><div class='plot'><canvas class='base'></canvas></div>"
            "<div class='legend'></div></figure>")


def _device_section(i: int, rep: DeviceReport, charts: list[tuple[str, str, str, str]],
                    findings: Sequence[tuple[int, Finding]], missing_note: str,
                    line: RelativeTimeline | None = None) -> str:
    meta = [rep.kind, f"host {rep.host}", f"source {rep.source}"]
    if rep.parent:
        meta.append(f"part of {rep.parent}")
    worst = ""
    if rep.worst_windows:
        items = "".join(
            f"<li><a href='#dev-d{i}' data-zoom-dev='{i}' data-zoom-start="
            f"'{w.start.timestamp():.3f}' data-zoom-end='{w.end.timestamp():.3f}'>"
            f"{_e(metric_format(w.metric).title)} {_e(_smart(w.value))} {_e(w.unit)}</a> · "
            f"{_e(_span(w.start, w.end, line))}</li>" for w in rep.worst_windows)
        worst = f"<div class='worst'><b>Worst windows</b> (shaded grey)<ul>{items}</ul></div>"
    flist = ""
    if findings:
        flist = "<div class='devfindings'><b>Findings</b><ul>" + "".join(
            f"<li>{_sev_badge(f.severity)} <a href='#f{j}'>#{j + 1} {_e(f.title)}</a></li>"
            for j, f in findings) + "</ul></div>"
    figs = "".join(_figure(fid, t, c, k) for fid, t, c, k in charts)
    if not charts:
        figs = f"<p class='muted'>{_e(missing_note or 'No time-series measure to chart.')}</p>"
    toolbar = ("<p class='hint noprint'>Drag across a time chart to zoom (all this device's "
               "time charts follow), shift-drag to pan, double-click to reset; click a legend "
               "entry to hide it.</p>") if charts else ""
    return (f"<section class='device {_VERDICT_CLASS.get(rep.verdict, 'v-unknown')}' "
            f"id='dev-d{i}' data-dev='{i}' data-key='{_e(rep.device)}' "
            f"data-verdict='{_e(rep.verdict)}'>"
            f"<h2>{_e(rep.device)} {_verdict_badge(rep.verdict)}</h2>"
            f"<p class='meta'>{_e(' · '.join(meta))}</p>"
            f"<p class='reason'>{_e(rep.verdict_reason)}</p>"
            + (f"<p class='meta'>{_e('verdict from ' + rep.verdict_basis)}</p>"
               if rep.verdict_basis else "") +
            f"{_device_facts(rep)}{worst}{flist}{toolbar}<div class='charts'>{figs}</div>"
            "</section>")


def _waits_section(waits: pl.DataFrame) -> str:
    """Oracle wait events per report interval: one row per event (the sections of a report
    repeat events: the largest figures of an event are kept), top events by time waited."""
    if waits.height == 0:
        return ""
    keys = ["host", "db_name", "instance", "ts", "interval_s", "event"]
    ev = (waits.group_by(keys)
          .agg(pl.col("wait_class").drop_nulls().first(), pl.col("waits").max(),
               pl.col("time_waited_s").max(), pl.col("avg_wait_ms").max(),
               pl.col("pct_db_time").max())
          .sort(["host", "ts", "time_waited_s"], descending=[False, False, True],
                nulls_last=True))
    parts = [("<section id='waits'><h2>Oracle wait events</h2><p class='muted'>Per report "
              "interval, the events with the most time waited (seed 003 reads the average "
              "wait of <i>db file sequential/scattered read</i> against what the device "
              "should give).</p>")]
    fm = WAIT_FORMATS
    for key, g in ev.partition_by(["host", "db_name", "instance", "ts", "interval_s"],
                                  as_dict=True, maintain_order=True).items():
        host, db, inst, ts, iv = key
        head = f"{host} · {db or '-'}/{inst or '-'} · interval ending {_ts(ts)}"
        head += f" ({_duration(float(iv))})"
        rows = []
        for r in g.head(MAX_WAIT_EVENTS).iter_rows(named=True):
            io = "db file" in r["event"] or (r["wait_class"] or "").endswith("I/O")
            rows.append(
                f"<tr{' class=io' if io else ''}><td>{_e(r['event'])}</td>"
                f"<td>{_e(r['wait_class'] or '-')}</td>"
                f"<td class='num'>{_e(fm['waits'].fmt(r['waits']))}</td>"
                f"<td class='num'>{_fmt(fm['time_waited_s'], r['time_waited_s'])}</td>"
                f"<td class='num'>{_fmt(fm['avg_wait_ms'], r['avg_wait_ms'])}</td>"
                f"<td class='num'>{_fmt(fm['pct_db_time'], r['pct_db_time'])}</td></tr>")
        more = g.height - min(g.height, MAX_WAIT_EVENTS)
        tail = f"<p class='muted'>{more} more event(s) not shown.</p>" if more > 0 else ""
        parts.append(f"<table class='waits'><caption>{_e(head)}</caption><thead><tr>"
                     "<th>event</th><th>class</th><th>waits</th><th>time waited</th>"
                     "<th>avg wait</th><th>DB time</th></tr></thead><tbody>"
                     + "".join(rows) + f"</tbody></table>{tail}")
    parts.append("</section>")
    return "".join(parts)


def _signed_pct(v: object) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        return "-"
    return f"{v:+.1f} %"


def _p_value(v: object) -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "-"
    return f"{v:.2g}" if v >= 1e-4 else "< 0.0001"


def _change_cells(c: Mapping[str, Any], f: MetricFormat) -> str:
    """before, after, change, ratio, direction, beyond noise, test, p, n of one change."""
    direction = str(c.get("direction") or "-")
    ratio = c.get("ratio")
    ratio_txt = f"\u00d7{ratio:.2f}" if isinstance(ratio, (int, float)) else "-"
    return (f"<td class='num'>{_e(f.fmt(c.get('before')))}</td>"
            f"<td class='num'>{_e(f.fmt(c.get('after')))}</td>"
            f"<td class='num'>{_e(_signed_pct(c.get('change_pct')))}</td>"
            f"<td class='num'>{_e(ratio_txt)}</td>"
            f"<td class='dir dir-{_e(direction)}'>{_e(direction)}</td>"
            f"<td>{'yes' if c.get('significant') else 'no'}</td>"
            f"<td>{_e(c.get('test') or '-')}</td><td class='num'>"
            f"{_e(_p_value(c.get('p_value')))}</td>"
            f"<td class='num'>{_e(c.get('n_before', '-'))} / {_e(c.get('n_after', '-'))}</td>")


_CHANGE_HEAD = ("<th>before</th><th>after</th><th>change</th><th>ratio</th><th>direction</th>"
                "<th>beyond noise</th><th>test</th><th>p</th><th>n before / after</th>")


def _compare_section(comparison: Mapping[str, Any]) -> str:
    """The compare view of ``Comparison.to_dict()`` (analysis/compare.py): device pairs,
    metric changes and wait-event changes, the changes beyond noise highlighted."""
    changes = [c for c in comparison.get("changes") or [] if isinstance(c, Mapping)]
    waits = [w for w in comparison.get("wait_changes") or [] if isinstance(w, Mapping)]
    pairs = [p for p in comparison.get("pairs") or [] if isinstance(p, Mapping)]
    n_sig = sum(1 for c in (*changes, *waits) if c.get("significant"))
    alpha, effect = comparison.get("alpha"), comparison.get("min_effect_pct")
    parts = ["<section id='compare'><h2>Compare: before → after</h2>"]
    rule = ""
    if isinstance(alpha, (int, float)) and isinstance(effect, (int, float)):
        rule = (f" A change is beyond noise when its test gives p < {alpha:g} and it is at "
                f"least {effect:g} %.")
    parts.append(f"<p class='muted'>{n_sig} of {len(changes) + len(waits)} change(s) beyond "
                 f"noise (highlighted).{_e(rule)}</p>")
    if pairs:
        parts.append("<table class='pairs'><thead><tr><th>before</th><th>after</th>"
                     "<th>paired by</th></tr></thead><tbody>" + "".join(
                         f"<tr><td>{_e(p.get('device_before'))} ({_e(p.get('kind_before'))})"
                         f"</td><td>{_e(p.get('device_after'))} ({_e(p.get('kind_after'))})"
                         f"</td><td>{_e(p.get('how'))}</td></tr>" for p in pairs)
                     + "</tbody></table>")
    if changes or waits:
        parts.append("<p class='noprint'><label><input type='checkbox' id='cmp-only-sig'> "
                     "only changes beyond noise</label></p>")
    if changes:
        body = []
        for c in changes:
            before, after = str(c.get("device_before")), str(c.get("device_after"))
            dev = before if before == after else f"{before} → {after}"
            metric = str(c.get("metric"))
            f = metric_format(metric)
            unit = f.unit or str(c.get("unit") or "")
            name = f.title if not unit or f.title.endswith(unit) else f"{f.title} ({unit})"
            note = str(c.get("note") or "")
            body.append(f"<tr class='{'sig' if c.get('significant') else 'nosig'}'>"
                        f"<td>{_e(dev)}</td><td>{_e(name)}</td>{_change_cells(c, f)}"
                        f"<td>{_e(note)}</td></tr>")
        parts.append("<table class='compare'><thead><tr><th>device</th><th>metric</th>"
                     f"{_CHANGE_HEAD}<th>note</th></tr></thead><tbody>{''.join(body)}"
                     "</tbody></table>")
    if waits:
        f = WAIT_FORMATS["avg_wait_ms"]
        body = [f"<tr class='{'sig' if w.get('significant') else 'nosig'}'>"
                f"<td>{_e(w.get('event'))}</td><td>{_e(w.get('wait_class') or '-')}</td>"
                f"{_change_cells(w, f)}<td class='num'>"
                f"{_e(WAIT_FORMATS['waits'].fmt(w.get('waits_before')))} / "
                f"{_e(WAIT_FORMATS['waits'].fmt(w.get('waits_after')))}</td>"
                f"<td>{_e(w.get('note') or '')}</td></tr>" for w in waits]
        parts.append("<table class='compare'><caption>Oracle average wait per event (ms)"
                     "</caption><thead><tr><th>event</th><th>class</th>"
                     f"{_CHANGE_HEAD}<th>waits before / after</th><th>note</th></tr></thead>"
                     f"<tbody>{''.join(body)}</tbody></table>")
    if not changes and not waits:
        parts.append("<p class='muted'>Nothing was measured on both sides.</p>")
    notes = [n for n in comparison.get("notes") or [] if isinstance(n, str)]
    if notes:
        parts.append("<ul class='notes'>" + "".join(f"<li>{_e(n)}</li>" for n in notes)
                     + "</ul>")
    parts.append("</section>")
    return "".join(parts)


def _guarantee(guarantee: pl.DataFrame, base_us: int, n_buckets: int
               ) -> tuple[str, list[dict[str, Any]]]:
    """The guarantee view: a summary table and, per controller run and device, charts of A's
    IOPS against its floor, B's IOPS against its limit, and X with %util."""
    if guarantee.height == 0:
        return "", []
    g = guarantee.with_columns(
        ((pl.col("ts").dt.epoch("us") - base_us) / 1e6).alias("_t"),
        (pl.col("b_riops_limit") + pl.col("b_wiops_limit")).cast(pl.Float64)
        .alias("b_limit_iops"),
        pl.col("a_miss").cast(pl.Float64).alias("_miss"),
    ).sort(["run_id", "device", "_t"])
    groups = g.select("run_id", "device").unique(maintain_order=True)
    g = g.join(groups.with_row_index("_grp").with_columns(pl.col("_grp").cast(pl.Int32)),
               on=["run_id", "device"])
    cols = ["a_iops", "a_floor_iops", "b_iops", "b_limit_iops", "x_pct", "util_pct", "_miss",
            "interval_s"]
    env = minmax_envelope(g, t="_t", columns=cols, n_buckets=n_buckets, by="_grp")
    summary = (g.group_by("_grp", "run_id", "device", "policy", "actuator",
                          maintain_order=True)
               .agg(pl.len().alias("n"), pl.col("a_miss").sum().alias("miss"),
                    pl.col("x_pct").first().alias("x0"), pl.col("x_pct").last().alias("x1"),
                    pl.col("x_pct").min().alias("xmin"), pl.col("ts").min().alias("t0"),
                    pl.col("ts").max().alias("t1"),
                    pl.col("warnings").drop_nulls().len().alias("warned")))
    fm = GUARANTEE_FORMATS["x_pct"]
    rows = "".join(
        f"<tr><td>{_e(r['run_id'])}</td><td>{_e(r['device'])}</td><td>{_e(r['policy'])} / "
        f"{_e(r['actuator'])}</td><td>{_e(_span(r['t0'], r['t1']))}</td>"
        f"<td class='num'>{r['n']:,}</td><td class='num'>{r['miss']:,} "
        f"({100.0 * r['miss'] / max(r['n'], 1):.1f} %)</td>"
        f"<td class='num'>{_e(fm.fmt_unit(r['x0']))} → {_e(fm.fmt_unit(r['x1']))} (min "
        f"{_e(fm.fmt_unit(r['xmin']))})</td><td class='num'>{r['warned']:,}</td></tr>"
        for r in summary.iter_rows(named=True))
    parts = [("<section id='guarantee'><h2>IOPS guarantee</h2><p class='muted'>Seed 004: A "
              "(protected) must get its floor; B (throttled) is limited to what is left "
              "under the target busy rate X.</p><table class='guarantee'><thead><tr>"
              "<th>run</th><th>device</th><th>policy / actuator</th><th>span</th>"
              "<th>decisions</th><th>A below floor</th><th>X first → last</th>"
              f"<th>warnings</th></tr></thead><tbody>{rows}</tbody></table>")]
    for rid in summary["run_id"].unique(maintain_order=True).to_list():
        # What the floor cost B while A was idle, and A's wake-ups (guarantee/figures.py).
        parts.append("<ul class='notes'>" + "".join(
            f"<li>{_e(rid)}: {_e(line)}</li>"
            for line in guarantee_figures(guarantee, rid).lines()) + "</ul>")
    data: list[dict[str, Any]] = []
    for key, e in env.partition_by("_grp", as_dict=True, maintain_order=True).items():
        grp = int(key[0])
        tf, tl = e["t_first"].to_numpy(), e["t_last"].to_numpy()
        iv = e["interval_s_hi"].to_numpy()
        raw = bool((e["n"] == 1).all())
        span = float(tl.max() - tf.min()) if e.height else 0.0
        dt = span / n_buckets if span > 0 else float(iv.max())
        series = {}
        for c in cols[:6]:
            if e[f"{c}_hi"].is_not_null().any():
                s = {"lo": _num_array(e[f"{c}_lo"])}
                if not raw:
                    s["hi"] = _num_array(e[f"{c}_hi"])
                series[c] = s
        misses = [int(i) for i in np.flatnonzero(e["_miss_hi"].fill_null(0).to_numpy() > 0)]
        charts: list[tuple[str, str, list[str]]] = []
        for cid, title, names in (("a", "A: IOPS vs floor", ("a_iops", "a_floor_iops")),
                                  ("b", "B: IOPS vs limit", ("b_iops", "b_limit_iops")),
                                  ("x", "Target busy X and %util", ("x_pct", "util_pct"))):
            names_ok = [n for n in names if n in series]
            if names_ok:
                charts.append((f"g{grp}-{cid}", title, names_ok))
        data.append({"id": f"g{grp}", "mode": "raw" if raw else "minmax",
                     "t": _time_array(tf), "n": None if raw else _int_array(e["n"]),
                     "iv": _time_array(iv) if raw else None,
                     "t0": round(float(tf[0]) - float(e["interval_s_lo"][0]), 3),
                     "dt": None if raw else round(dt, 3),
                     "breaks": _breaks(tf, tl, iv),
                     "series": series, "misses": misses,
                     "charts": [{"el": el, "title": t, "series": n} for el, t, n in charts]})
        parts.append(f"<div class='charts' data-guarantee='{grp}'>" + "".join(
            _figure(el, t, "", "ts") for el, t, _n in charts) + "</div>")
    parts.append("</section>")
    return "".join(parts), data


# ---- the page -------------------------------------------------------------------------------
def _chart_specs(i: int, rep: DeviceReport, has: set[str], ts: dict[str, Any] | None,
                 util_sc: dict[str, Any] | None, lat_sc: dict[str, Any] | None,
                 mix: dict[str, Any] | None, rmf: dict[str, Any] | None
                 ) -> tuple[list[dict[str, Any]], list[tuple[str, str, str, str]]]:
    """Chart specs for the data block and (id, title, caption, kind) for the figures."""
    specs: list[dict[str, Any]] = []
    figs: list[tuple[str, str, str, str]] = []
    if ts is not None:
        cap = ("every sample" if ts["mode"] == "raw" else
               f"min\u2013max band of the samples in each {_duration(ts['dt'])} column")
        for cid, title, first, fallback, extra in TS_CHARTS:
            names = [c for c in first if c in has] or [c for c in fallback if c in has]
            names += [c for c in extra if c in has]
            if not names:
                continue
            el = f"d{i}-{cid}"
            specs.append({"el": el, "type": "ts", "title": title, "series": names})
            figs.append((el, title, cap, "ts"))
    c = rep.capacity
    if util_sc is not None:
        el = f"d{i}-sc-util"
        fit: dict[str, Any] = {}
        if c is not None:
            fit = {"method": c.method, "busy_per_iops": c.busy_per_iops,
                   "knee_iops": c.knee_iops, "knee_util_pct": c.knee_util_pct,
                   "max_iops": c.max_iops, "current_iops": c.current_iops}
        specs.append({"el": el, "type": "scatter", "title": "%util vs IOPS",
                      "x": "iops", "y": "util_pct", "data": util_sc, "fit": fit})
        cap = "one dot per occupied pixel cell (darker = more intervals)"
        if c is not None and c.method == "util-linear" and c.busy_per_iops:
            cap += "; line: linear fit up to the knee, dashed to the max at 100 %"
        figs.append((el, "%util vs IOPS", cap, "scatter"))
    if lat_sc is not None:
        el = f"d{i}-sc-lat"
        ref: dict[str, Any] = {}
        cap_obj = rep.capability
        if cap_obj is not None:
            ref = {"typical_ms": cap_obj.latency_ms_typical,
                   "design_ms": cap_obj.latency_ms_design}
        if c is not None and c.method == "latency-knee":
            ref.update(knee_iops=c.knee_iops, max_iops=c.max_iops)
        specs.append({"el": el, "type": "scatter", "title": "Latency vs IOPS",
                      "x": "iops", "y": "await_ms", "data": lat_sc, "fit": ref})
        figs.append((el, "Latency vs IOPS", "await per interval against its load", "scatter"))
    if mix is not None and any(v for v in mix["ops"] if v):
        a = rep.attributes
        el = f"d{i}-mix"
        specs.append({"el": el, "type": "mix", "title": "Read/write mix", "data": mix,
                      "read_pct": a.read_pct, "read_bytes_pct": a.read_bytes_pct,
                      "seq_pct": a.seq_pct, "seq_method": a.seq_method})
        figs.append((el, "Read/write mix", "share of operations and of bytes", "mix"))
        if mix["hist"]:
            el = f"d{i}-sizes"
            specs.append({"el": el, "type": "hist", "title": "Request sizes",
                          "edges": list(SIZE_EDGES_KB), "data": mix["hist"]})
            figs.append((el, "Request sizes",
                         "operations by mean request size of their interval", "hist"))
    if rmf is not None:
        el = f"d{i}-rmf"
        specs.append({"el": el, "type": "stack", "title": "RMF response time",
                      "data": rmf, "parts": list(RMF_PARTS)})
        cap = "IOSQ + PEND + DISC + CONN per interval"
        if rmf["merged"]:
            cap += f" (intervals merged into {MAX_RMF_BARS} bars, IOPS-weighted)"
        figs.append((el, "RMF response time", cap, "stack"))
    return specs, figs


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
        comparison: ``Comparison.to_dict()`` of ``analysis/compare.py`` for the compare view.
        guarantee: guarantee-controller decisions (GuaranteeFrame columns).
        width_px: pixel columns per time chart: longer series are reduced to a min/max
            envelope of this many buckets.
    """
    if width_px < 100:
        raise ReportError(f"width_px must be at least 100, got {width_px}")
    reports = result.devices
    rows = _rows_for(frame, reports)
    firsts = [rows["ts"].min() if rows.height else None, result.start,
              guarantee["ts"].min() if guarantee is not None and guarantee.height else None]
    times = [t for t in firsts if isinstance(t, datetime)]
    base_dt = min(times) if times else datetime.now(tz=UTC)
    # whole seconds: offsets of 1 s data are then integers, the most compact JSON
    base_us = math.floor(base_dt.timestamp()) * 1_000_000
    base_s = base_us / 1e6

    def off(dt: datetime) -> float:
        return round(dt.timestamp() - base_s, 3)

    rows = _with_derived(rows, base_us)
    present = _present(rows, [*SERIES, "_iops", "_lat"])
    ts = _timeseries(rows, present, width_px)
    util_sc = _scatter(rows.filter(pl.col("util_pct").is_not_null()), "util_pct")
    lat_sc = _scatter(rows, "_lat")
    mix = _mix(rows)
    rmf = _rmf(rows)

    ordered = sorted(enumerate(result.findings), key=lambda p: -SEVERITY_RANK[p[1].severity])
    findings = [f for _i, f in ordered]
    dev_idx = {r.device: i for i, r in enumerate(reports)}
    by_dev: dict[int, list[tuple[int, Finding]]] = {}
    for j, f in enumerate(findings):
        if f.device is not None and f.device in dev_idx:
            by_dev.setdefault(dev_idx[f.device], []).append((j, f))

    devices_data: list[dict[str, Any]] = []
    sections: list[str] = []
    for i, rep in enumerate(reports):
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

    guarantee_html = ""
    guarantee_data: list[dict[str, Any]] = []
    if guarantee is not None:
        guarantee_html, guarantee_data = _guarantee(guarantee, base_us, width_px)
    waits_html = _waits_section(waits) if waits is not None else ""
    compare_html = _compare_section(comparison) if comparison is not None else ""

    metrics = {k: f.to_dict() for k, f in SERIES_FORMATS.items()}
    metrics.update({k: f.to_dict() for k, f in GUARANTEE_FORMATS.items() if k not in metrics})
    data = {"version": 1, "base": int(base_s), "width": width_px, "metrics": metrics,
            "relative": (None if result.timeline is None else
                         {"interval": result.timeline.interval_s}),
            "devices": devices_data, "guarantee": guarantee_data,
            "findings": [{"title": f.title, "severity": f.severity} for f in findings]}
    data_json = _script_json(_dump(data))
    result_json = _script_json(json.dumps(result.to_dict(), ensure_ascii=False))

    n_crit = sum(1 for f in findings if f.severity == "critical")
    n_warn = sum(1 for f in findings if f.severity == "warning")
    line = result.timeline
    span = (_span(result.start, result.end, line) if result.start is not None
            and result.end is not None else "no data")
    meta = [span, f"{len(reports)} device(s)",
            f"{len(findings)} finding(s): {n_crit} critical, {n_warn} warning"]
    if line is not None:  # no interval or duration the file does not hold
        meta.append(f"reports without time stamps ({NO_INTERVAL}); analysis windows "
                    f"{line.windows_text(result.window_s)}")
    else:
        if result.interval_s is not None:
            meta.append(f"samples every {_duration(result.interval_s)}")
        meta.append(f"analysis windows {_duration(result.window_s)}")
    notes = "".join(f"<li>{_e(n)}</li>" for n in result.notes)
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
    written = datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    findings_html = ("".join(_finding_card(j, f, dev_idx, line) for j, f in enumerate(findings))
                     or "<p class='muted'>No finding: no rule saw a problem.</p>")
    toolbar = (
        "<nav class='toolbar noprint'>" + " ".join(nav)
        + "<span class='tools'><input type='search' id='dev-filter' placeholder='filter "
        "devices' aria-label='filter devices'> <select id='verdict-filter' aria-label="
        "'verdict filter'><option value=''>any verdict</option>" + verdict_opts
        + "</select> <select id='dev-jump' aria-label='go to device'><option value=''>go to "
        "device\u2026</option>" + options + "</select> <label><input type='checkbox' "
        "id='local-time'> local time</label> <button type='button' id='reset-zoom'>reset "
        "zoom</button></span></nav>")
    header = (f"<header class='top'><h1>{_e(title)}</h1><p class='meta'>"
              f"{_e(' · '.join(meta))}</p><p class='meta'>iogauge {_e(__version__)} · written "
              f"{_e(written)} · times in UTC</p></header>")
    footer = ("<footer class='muted'><p>Charts: times are interval ends. A time series longer "
              "than the chart is wide is drawn as the min\u2013max band of the samples in each "
              "pixel column, so one-sample peaks stay visible; scatter plots keep one point "
              "per occupied pixel cell. Values are rounded to 4 significant digits. The "
              "analysis itself (every number in the tables) used every sample. The "
              "machine-readable analysis is embedded as JSON (script#iogauge-result; schema: "
              "docs/analysis.md).</p></footer>")
    noscript = ("<noscript><p class='errors'>Charts need JavaScript; every table and finding "
                "is readable without it.</p></noscript>")
    return "".join([
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<meta name='generator' content='iogauge {_e(__version__)}'>",
        f"<title>{_e(title)}</title><style>{_asset('report.css')}</style></head>",
        "<body data-charts-rendered='0'>", header, toolbar,
        "<div id='js-errors' class='errors' hidden></div>", noscript,
        f"<ul class='notes'>{notes}</ul>" if notes else "",
        "<section id='verdicts'><h2>Verdict per device</h2>",
        _verdicts_table(result) if reports else "<p class='muted'>No device.</p>",
        "</section><section id='findings'><h2>Findings</h2>", findings_html, "</section>",
        "<div id='devices'>", "".join(sections), "</div>",
        waits_html, compare_html, guarantee_html, footer,
        f"<script type='application/json' id='iogauge-data'>{data_json}</script>",
        f"<script type='application/json' id='iogauge-result'>{result_json}</script>",
        f"<script>{_asset('report.js')}</script></body></html>\n",
    ])


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
