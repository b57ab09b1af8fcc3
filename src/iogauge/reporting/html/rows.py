"""The report's rows per device and the chart data made from them: time series reduced to a
min/max envelope per pixel column, scatter plots thinned per pixel cell, the read/write and
request-size mix, the RMF response-time breakdown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from iogauge.analysis.types import (
    DeviceReport,
)
from iogauge.model.sampleframe import SampleFrame
from iogauge.reporting.downsample import grid_thin, minmax_envelope
from iogauge.reporting.html.encode import _int_array, _num_array, _time_array

#: Scatter plots are thinned on a grid of this many cells (x, y): about 4 px per cell on a
#: 560 x 300 px plot, so the thinned plot looks like the full one.
SCATTER_GRID = (140, 80)
#: More RMF intervals than this are merged into this many bars (IOPS-weighted means of the
#: response-time components, the way RMF itself aggregates intervals).
MAX_RMF_BARS = 96
#: Request-size histogram bin upper edges (kB); the last bin is open.
SIZE_EDGES_KB: tuple[float, ...] = (4, 8, 16, 32, 64, 128, 256, 512, 1024)


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
