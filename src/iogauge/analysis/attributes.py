"""The workload's application attributes on one device ([Yuge]).

Before judging a device against what it can do, establish *what is asked of it*: rate,
read/write split, transfer size, sequential share, concurrency, cache hit ratio, burstiness,
response and service time. :func:`compute` fills :class:`~iogauge.analysis.types.Attributes`
from a device's interval rows and analysis windows with a handful of polars expressions
(a day of 1 s rows, 86,400 intervals, takes a few milliseconds).

Weighting (the same rules as :mod:`iogauge.analysis.windows`):

* rates and gauges (IOPS, kB/s, %util, aqu-sz) are **time-weighted** (weight ``interval_s``);
* latencies, sizes and hit ratios are **operation-weighted** (weight IOPS x ``interval_s``,
  the number of operations the interval completed), so an idle interval's 0.00 await
  (sysstat prints 0.00 when nothing completed) does not pull a mean down.

Sources differ in what they report; every attribute is computed from what is there and
left None (with a note where a reader would wonder) when there is no basis:

* IOPS: ``iops`` where reported, else ``r_iops + w_iops + d_iops`` (RMF ranks report only
  the split); kB/s likewise.
* request size: ``*_areq_kB`` where reported, else kB/s / IOPS of the interval.
* response time: ``await_ms``, else the operation-weighted mix of ``r_await_ms`` and
  ``w_await_ms`` of the same interval.
* sequential share: counted by the controller where the source has it (RMF cache
  ``seq_read_ps``/``seq_write_ps``: ``seq_method="rmf-cache"``); else *estimated* from the
  block layer's merges and request sizes (``seq_method="estimate"``), see
  :func:`_seq_ops`.
* service time: ``svctm_ms`` as reported (sysstat < 12.1.2, Solaris asvc_t, sar avserv),
  else estimated as busy time per operation, %util / IOPS ([Oe]: at 100 % busy
  IOPS = 1/svctm).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import polars as pl

from iogauge.analysis.types import Attributes
from iogauge.analysis.windows import device_codes

if TYPE_CHECKING:
    from iogauge.analysis.context import AnalysisContext, DeviceContext

#: Every SampleFrame column this module reads (added as nulls when a hand-built frame
#: lacks one, so a test or a synthetic device may carry only what it has).
_COLUMNS: tuple[str, ...] = (
    "interval_s", "iops", "r_iops", "w_iops", "d_iops", "kBps", "r_kBps", "w_kBps", "d_kBps",
    "r_merged_ps", "w_merged_ps", "r_rqm_pct", "w_rqm_pct", "areq_kB", "r_areq_kB",
    "w_areq_kB", "await_ms", "r_await_ms", "w_await_ms", "d_await_ms", "svctm_ms", "aqu_sz",
    "util_pct", "seq_read_ps", "seq_write_ps", "cache_hit_pct",
)

#: Request size (kB) at or below which a request alone is no evidence of sequential access:
#: one 4 kB page up to a 16 kB database block (Oracle's default db_block_size is 8 kB; the
#: single-block reads of [Insight-SSD9] are 8 kB). Random small-block work lives here.
SEQ_SIZE_RANDOM_KB = 16.0
#: Request size (kB) from which a request counts as sequential evidence on its own: the
#: block layer only builds requests this large from contiguous data -- Linux read-ahead
#: issues 128 kB by default (``queue/read_ahead_kb``), filesystems cluster contiguous
#: writes ([Goodus]: UFS maxcontig 128 x 8 kB blocks for sequential work), databases read
#: multi-block extents for full scans ([Insight-SSD9]'s ``db file scattered read``).
SEQ_SIZE_SEQUENTIAL_KB = 64.0
#: Size quantiles reported (weighted by operations).
SIZE_QUANTILES: tuple[float, ...] = (0.10, 0.50, 0.90)
#: Percentile of per-window await reported: peaks, not only means ([MS-Azure-JP]).
AWAIT_WINDOW_QUANTILE = 0.95


def _ensure(df: pl.DataFrame, cols: tuple[str, ...]) -> pl.DataFrame:
    """``df`` with every column of ``cols`` present (missing ones as Float64 nulls)."""
    missing = [c for c in cols if c not in df.columns]
    if not missing:
        return df
    return df.with_columns([pl.lit(None, dtype=pl.Float64).alias(c) for c in missing])


def _sum_present(*cols: str) -> pl.Expr:
    """Sum of the columns that are not null; null when all of them are."""
    any_present = pl.any_horizontal([pl.col(c).is_not_null() for c in cols])
    return pl.when(any_present).then(pl.sum_horizontal([pl.col(c) for c in cols]))


def iops_expr() -> pl.Expr:
    """Operations per second of a row: ``iops``, else reads + writes + discards."""
    return pl.coalesce(pl.col("iops"), _sum_present("r_iops", "w_iops", "d_iops"))


def kbps_expr() -> pl.Expr:
    """kB/s of a row: ``kBps``, else read + write + discard kB/s."""
    return pl.coalesce(pl.col("kBps"), _sum_present("r_kBps", "w_kBps", "d_kBps"))


def await_expr() -> pl.Expr:
    """Response time of a row: ``await_ms``, else the operation-weighted mean of the read,
    write and discard awaits reported (sysstat's await: flushes excluded)."""
    dirs = ("r", "w", "d")
    num = pl.sum_horizontal([pl.col(f"{x}_await_ms") * pl.col(f"{x}_iops") for x in dirs])
    den = pl.sum_horizontal([pl.when(pl.col(f"{x}_await_ms").is_not_null())
                             .then(pl.col(f"{x}_iops")) for x in dirs])
    return pl.coalesce(pl.col("await_ms"), pl.when(den > 0).then(num / den))


def _per_op(num: str | pl.Expr, ops: str | pl.Expr) -> pl.Expr:
    """num / ops where ops > 0, else null (no operation completed: no per-op value)."""
    n = pl.col(num) if isinstance(num, str) else num
    o = pl.col(ops) if isinstance(ops, str) else ops
    return pl.when(o > 0).then(n / o)


def _wmean(value: pl.Expr, weight: pl.Expr, *, complete: bool = False) -> pl.Expr:
    """Weighted mean over rows where both are known (NaN when the weights sum to 0; the
    caller turns non-finite results into None). Written as sum / filtered sum, the
    cheapest form polars evaluates (a when/then mask costs twice as much at 86,400 rows);
    ``complete``: ``value`` has no null, so the weights need no filter."""
    den = weight.sum() if complete else weight.filter(value.is_not_null()).sum()
    return (value * weight).sum() / den


def _share(part: pl.Expr, whole: pl.Expr) -> pl.Expr:
    """100 x sum(part) / sum(whole) over rows where both are known (NaN if whole is 0)."""
    ok = part.is_not_null() & whole.is_not_null()
    return 100.0 * part.filter(ok).sum() / whole.filter(ok).sum()


_LOG2_RANDOM = math.log2(SEQ_SIZE_RANDOM_KB)
_LOG2_SPAN = math.log2(SEQ_SIZE_SEQUENTIAL_KB) - _LOG2_RANDOM


def _size_fraction(areq_kb: pl.Expr) -> pl.Expr:
    """Sequential evidence (0-1) from a mean request size: 0 at <= 16 kB, 1 at >= 64 kB,
    linear in log2(size) between (each doubling of the request size counts the same).
    A size of 0 (no request) gives log2 = -inf, clipped to 0."""
    return ((areq_kb.log(2) - _LOG2_RANDOM) / _LOG2_SPAN).clip(0.0, 1.0)


def _seq_ops(ops: str, areq: pl.Expr, merged_ps: str | None, rqm_pct: str | None) -> pl.Expr:
    """Estimated sequential operations per second of one direction in one interval.

    The model (an estimate, and said so in the attributes' notes): a completed request is
    sequential evidence when it took in a merged bio or when it is large; the interval's
    sequential share is the larger of the two shares.

    * Merges: the block layer merges a bio only into a queued request it is contiguous
      with, so each merge is direct evidence of sequential submission; requests that took
      in a merge number at most min(merged, completed) (many bios can merge into one).
      iostat's %rrqm = merged / (completed + merged) x 100 gives merged = completed x
      rqm / (100 - rqm) when only the percentage is reported.
    * Size (:func:`_size_fraction`): the block layer builds >= 64 kB requests only from
      contiguous data (read-ahead, write clustering, multi-block reads).

    Large random direct I/O (a backup reading 128 kB at scattered offsets) is over-counted;
    small sequential direct I/O that never merges (4 kB O_DIRECT at queue depth 1) is
    under-counted. ``merged_ps``/``rqm_pct`` are None when the source has no such column.
    """
    n = pl.col(ops)
    parts = [_size_fraction(areq) * n]
    merged: pl.Expr | None = None
    if merged_ps is not None and rqm_pct is not None:
        rqm = pl.col(rqm_pct).clip(0.0, 99.9)
        merged = pl.coalesce(pl.col(merged_ps), n * rqm / (100.0 - rqm))
    elif merged_ps is not None:
        merged = pl.col(merged_ps)
    elif rqm_pct is not None:
        rqm = pl.col(rqm_pct).clip(0.0, 99.9)
        merged = n * rqm / (100.0 - rqm)
    if merged is not None:
        parts.append(pl.min_horizontal(merged, n))
    seq = pl.max_horizontal(parts) if len(parts) > 1 else parts[0]
    # No operation: nothing sequential (its size is null, as sysstat leaves it 0.00).
    return pl.when(n == 0).then(0.0).otherwise(seq)


def _weighted_quantiles(values: npt.NDArray[np.float64], weights: npt.NDArray[np.float64],
                        qs: tuple[float, ...]) -> list[float | None]:
    """Weighted quantiles: the smallest value whose cumulative weight share reaches q.

    numpy rather than a polars sort: one argsort of 86,400 values is ~2 ms, a third of
    what sorting the pair in a frame costs.
    """
    ok = np.isfinite(values) & np.isfinite(weights) & (weights > 0)
    v, w = values[ok], weights[ok]
    if v.size == 0:
        return [None] * len(qs)
    order = np.argsort(v)  # equal values are interchangeable for a quantile
    cum = np.cumsum(w[order])
    total = float(cum[-1])
    idx = np.searchsorted(cum, np.asarray(qs) * total * (1.0 - 1e-12), side="left")
    idx = np.minimum(idx, v.size - 1)
    return [float(v[order[i]]) for i in idx]


def _f(v: object) -> float | None:
    """A finite float, or None (null, NaN from 0/0, inf)."""
    if v is None:
        return None
    x = float(v)  # type: ignore[arg-type]
    return x if math.isfinite(x) else None


class _Columns:
    """Which columns the rows carry: (has any value, has no null) per column."""

    def __init__(self, signature: dict[str, tuple[bool, bool]]) -> None:
        self.sig = signature

    def has(self, c: str) -> bool:
        return self.sig[c][0]

    def full(self, c: str) -> bool:
        return self.sig[c][1]

    def col(self, c: str) -> pl.Expr:
        return pl.col(c) if self.has(c) else pl.lit(None, dtype=pl.Float64)

    def total(self, single: str, parts: tuple[str, ...]) -> pl.Expr:
        """``single`` where reported, else the sum of the parts present."""
        if self.full(single):
            return pl.col(single)
        present = [p for p in parts if self.has(p)]
        if present and all(self.full(p) for p in present):
            summed = pl.sum_horizontal([pl.col(p) for p in present])
        elif present:
            summed = _sum_present(*present)
        else:
            summed = pl.lit(None, dtype=pl.Float64)
        return pl.coalesce(self.col(single), summed) if self.has(single) else summed


def _plan(rows: pl.DataFrame, signature: dict[str, tuple[bool, bool]] | None = None
          ) -> tuple[pl.LazyFrame, dict[str, pl.Expr]]:
    """The per-row derived columns (lazy) and the aggregations :func:`compute` reads.

    The plan is specialised to the columns the rows actually carry (a null count is free
    in polars): a column that is all null gets no expression, one without nulls needs no
    null handling. A day of 1 s Linux rows then costs ~40 expressions instead of ~120.
    ``signature`` (column -> (has any value, has no null)) overrides what ``rows`` say, for
    a plan shared by several devices that carry the same columns (:func:`compute_all`).
    """
    rows = _ensure(rows, _COLUMNS)
    if signature is None:
        h = rows.height
        signature = {c: (rows[c].null_count() < h, rows[c].null_count() == 0)
                     for c in _COLUMNS}
    k = _Columns(signature)
    col = k.col
    dt = pl.col("interval_s")
    derived: dict[str, pl.Expr] = {
        "_ops": k.total("iops", ("r_iops", "w_iops", "d_iops")),
        "_kb": k.total("kBps", ("r_kBps", "w_kBps", "d_kBps")),
        "_await": pl.col("await_ms") if k.full("await_ms") else await_expr(),
    }
    lf = rows.lazy().with_columns(**derived)
    ops = pl.col("_ops")
    second: dict[str, pl.Expr] = {
        "_n": ops * dt, "_rn": col("r_iops") * dt, "_wn": col("w_iops") * dt,
        "_areq": pl.coalesce(pl.when(ops > 0).then(col("areq_kB")), _per_op("_kb", "_ops")),
        "_rareq": pl.coalesce(pl.when(col("r_iops") > 0).then(col("r_areq_kB")),
                              _per_op(col("r_kBps"), col("r_iops"))),
        "_wareq": pl.coalesce(pl.when(col("w_iops") > 0).then(col("w_areq_kB")),
                              _per_op(col("w_kBps"), col("w_iops"))),
    }
    lf = lf.with_columns(**second)
    aggs = _load_aggs(k)
    aggs.update(_seq_aggs(k))
    aggs.update(_busy_aggs(k))
    return lf, aggs


def _load_aggs(k: _Columns) -> dict[str, pl.Expr]:
    """Rates, sizes, latencies and shares of the rows (over :func:`_plan`'s columns)."""
    col, has, dt, ops = k.col, k.has, pl.col("interval_s"), pl.col("_ops")
    aggs: dict[str, pl.Expr] = {
        "intervals": pl.len(), "span_s": dt.sum(),
        "iops_mean": _wmean(ops, dt), "iops_peak": ops.max(),
        "kb_mean": _wmean(pl.col("_kb"), dt), "kb_peak": pl.col("_kb").max(),
        "areq": _wmean(pl.col("_areq"), pl.col("_n")),
        "await_mean": _wmean(pl.col("_await"), pl.col("_n")),
        "await_seen": (pl.col("_await").is_not_null() | col("r_await_ms").is_not_null()
                       | col("w_await_ms").is_not_null()).any(),
    }
    for name, c in (("r_iops_mean", "r_iops"), ("w_iops_mean", "w_iops"),
                    ("aqu_mean", "aqu_sz"), ("util_mean", "util_pct"),
                    ("hit_time", "cache_hit_pct")):
        if has(c):
            aggs[name] = _wmean(pl.col(c), dt, complete=k.full(c))
    for name, c in (("aqu_peak", "aqu_sz"), ("util_peak", "util_pct")):
        if has(c):
            aggs[name] = pl.col(c).max()
    for name, c, w in (("rareq", "_rareq", "_rn"), ("wareq", "_wareq", "_wn"),
                       ("r_await", "r_await_ms", "_rn"), ("w_await", "w_await_ms", "_wn"),
                       ("hit_ops", "cache_hit_pct", "_n"), ("svctm_rep", "svctm_ms", "_n")):
        if c.startswith("_") or has(c):
            aggs[name] = _wmean(pl.col(c), pl.col(w))
    if has("r_iops") and has("w_iops"):
        d_n = (pl.col("d_iops") * dt).fill_null(0.0) if has("d_iops") else pl.lit(0.0)
        aggs["read_pct"] = _share(pl.col("_rn"), pl.col("_rn") + pl.col("_wn") + d_n)
    if has("r_kBps") and has("w_kBps"):
        d_kb = (pl.col("d_kBps") * dt).fill_null(0.0) if has("d_kBps") else pl.lit(0.0)
        aggs["read_bytes_pct"] = _share(pl.col("r_kBps") * dt,
                                        (pl.col("r_kBps") + pl.col("w_kBps")) * dt + d_kb)
    return aggs


def _seq_aggs(k: _Columns) -> dict[str, pl.Expr]:
    """The sequential share: counted by the controller (RMF cache) or estimated."""
    col, has, dt = k.col, k.has, pl.col("interval_s")
    if has("seq_read_ps") or has("seq_write_ps"):
        seq = _sum_present("seq_read_ps", "seq_write_ps")
        # The controller counts sequential operations in its cache report, whose read and
        # write rates (r_iops, w_iops) are the matching denominator; the device activity
        # rate (iops) of the same interval may differ (RMF counts them in another report).
        cache_ops = pl.coalesce(_sum_present("r_iops", "w_iops", "d_iops"), col("iops"))
        return {"seq_counted": _share(seq * dt,
                                      pl.when(seq.is_not_null()).then(cache_ops * dt)),
                "seq_r": (col("seq_read_ps") * dt).sum(),
                "seq_w": (col("seq_write_ps") * dt).sum()}
    merges = {d: (f"{d}_merged_ps" if has(f"{d}_merged_ps") else None,
                  f"{d}_rqm_pct" if has(f"{d}_rqm_pct") else None) for d in ("r", "w")}
    # Reads and writes separately where the split is known (their sizes and merges differ
    # a lot: 4 kB random reads beside 512 kB writeback), else the interval as a whole from
    # its mean size.
    est = (_seq_ops("r_iops", pl.col("_rareq"), *merges["r"])
           + _seq_ops("w_iops", pl.col("_wareq"), *merges["w"])
           if has("r_iops") and has("w_iops")
           else _size_fraction(pl.col("_areq")) * pl.col("_ops"))
    return {"seq_est": _share(est * dt, pl.col("_n")),
            "has_merges": pl.lit(any(m is not None for pair in merges.values()
                                     for m in pair))}


def _busy_aggs(k: _Columns) -> dict[str, pl.Expr]:
    """Busy milliseconds per operation ([Oe]'s busy_per_iops in time units): the
    operation-weighted mean of util/IOPS. Saturated intervals are left out: on a device
    serving several requests at once %util caps at 100 % and util/IOPS there says nothing
    about a request's service time. So are intervals with operations but 0 %util: their
    busy time is below the source's resolution (RMF prints 0.00)."""
    if not k.has("util_pct"):
        return {}
    dt, ops, util = pl.col("interval_s"), pl.col("_ops"), pl.col("util_pct")
    below = (ops > 0) & (util > 0.0) & (util < 100.0)
    saturated = (ops > 0) & (util >= 100.0)
    return {"busy_ms": (util * dt * 10.0).filter(below).sum(),
            "busy_n": pl.col("_n").filter(below).sum(),
            "sat_ms": (dt * 1000.0).filter(saturated).sum(),
            "sat_n": pl.col("_n").filter(saturated).sum()}


def compute(dev: DeviceContext, ctx: AnalysisContext | None = None) -> Attributes:
    """The application attributes of one device over its analysed intervals.

    Args:
        dev: the device (``dev.rows``: interval rows, reset and since-boot rows already
            removed; ``dev.windows``: the same rows aggregated into analysis windows).
        ctx: the analysis context (its database waits are consulted for the cache-hit
            note); None when the device is analysed alone.

    Returns:
        :class:`Attributes` with every field the rows support; None where they do not.
    """
    rows = dev.rows
    out = Attributes()
    if rows.height == 0:
        out.notes.append("no intervals to analyse")
        return out
    lf, aggs = _plan(rows)
    agg_lf = lf.select(**aggs)
    sizes_lf = lf.filter(pl.col("_ops") > 0).select(pl.col("_areq"), pl.col("_n"))
    agg_df, sizes = pl.collect_all([agg_lf, sizes_lf])
    return _finish(dev, ctx, agg_df.row(0, named=True), sizes)


def compute_all(devs: Sequence[DeviceContext], ctx: AnalysisContext) -> None:
    """:func:`compute` for many devices at once, setting each ``dev.attributes``.

    The same aggregations run as one group-by over ``ctx.frame`` for every group of devices
    that carry the same columns (usually all of them), instead of one query per device: a
    day of 1 s samples for 100 devices is one pass over 8.64 M rows. Devices the frame does
    not hold (built by hand) fall back to :func:`compute`.
    """
    frame = ctx.frame
    if frame is None or not devs:
        for d in devs:
            d.attributes = compute(d, ctx)
        return
    keys = pl.DataFrame({"host": [d.host for d in devs], "device": [d.device for d in devs]})
    df = _ensure(frame.join(keys, on=["host", "device"], how="semi")
                 if keys.height < frame.select("host", "device").n_unique() else frame,
                 _COLUMNS)
    # Integer device codes as the group key (windows.device_codes): cheaper than two
    # string columns; host and device ride along as the groups' first values.
    df = df.with_columns(_dev=device_codes(df))
    by = ["_dev"]
    counts = df.group_by(by).agg(pl.col("host").first(), pl.col("device").first(),
                                 pl.len().alias("_h"),
                                 *[pl.col(c).null_count().alias(c) for c in _COLUMNS])
    groups: dict[tuple[tuple[bool, bool], ...], list[tuple[str, str]]] = {}
    for row in counts.iter_rows(named=True):
        h = row["_h"]
        sig = tuple((row[c] < h, row[c] == 0) for c in _COLUMNS)
        groups.setdefault(sig, []).append(row["_dev"])
    names = {row["_dev"]: (str(row["host"]), str(row["device"]))
             for row in counts.select("_dev", "host", "device").iter_rows(named=True)}
    by_key = {(d.host, d.device): d for d in devs}
    for sig, members in groups.items():
        signature = dict(zip(_COLUMNS, sig, strict=True))
        part = df if len(groups) == 1 else df.filter(pl.col("_dev").is_in(members))
        lf, aggs = _plan(part, signature)
        agg_lf = lf.group_by(by).agg(**aggs)
        sizes_lf = lf.filter(pl.col("_ops") > 0).select(*by, pl.col("_areq"), pl.col("_n"))
        agg_df, sizes = pl.collect_all([agg_lf, sizes_lf], engine="streaming")
        size_parts = {p["_dev"][0]: p for p in
                      sizes.sort("_dev").partition_by("_dev", maintain_order=True)}
        empty = sizes.clear().drop(by)
        for row in agg_df.iter_rows(named=True):
            dev = by_key.get(names[row["_dev"]])
            if dev is None:
                continue
            sz = size_parts.get(row["_dev"])
            dev.attributes = _finish(dev, ctx, {c: v for c, v in row.items() if c not in by},
                                     empty if sz is None else sz.drop(by))
    for d in devs:
        if d.attributes is None:
            d.attributes = compute(d, ctx)


def _finish(dev: DeviceContext, ctx: AnalysisContext | None, row: dict[str, object],
            sizes: pl.DataFrame) -> Attributes:
    """Attributes from one device's aggregated row and its (size, operations) points."""
    out = Attributes()
    agg = {k: (_f(v) if isinstance(v, float) else v) for k, v in row.items()}
    g = agg.get
    out.intervals = int(g("intervals") or 0)  # type: ignore[call-overload]
    out.span_s = _f(g("span_s")) or 0.0
    out.iops_mean, out.iops_peak = _f(g("iops_mean")), _f(g("iops_peak"))
    out.r_iops_mean, out.w_iops_mean = _f(g("r_iops_mean")), _f(g("w_iops_mean"))
    kb_mean, kb_peak = _f(g("kb_mean")), _f(g("kb_peak"))
    out.MBps_mean = None if kb_mean is None else kb_mean / 1024.0
    out.MBps_peak = None if kb_peak is None else kb_peak / 1024.0
    out.read_pct, out.read_bytes_pct = _f(g("read_pct")), _f(g("read_bytes_pct"))
    out.areq_kB_mean = _f(g("areq"))
    out.r_areq_kB_mean, out.w_areq_kB_mean = _f(g("rareq")), _f(g("wareq"))
    p10, p50, p90 = _weighted_quantiles(
        sizes["_areq"].cast(pl.Float64).fill_null(np.nan).to_numpy(),
        sizes["_n"].cast(pl.Float64).fill_null(np.nan).to_numpy(), SIZE_QUANTILES)
    out.areq_kB_p10, out.areq_kB_p50, out.areq_kB_p90 = _f(p10), _f(p50), _f(p90)
    out.aqu_sz_mean, out.aqu_sz_peak = _f(g("aqu_mean")), _f(g("aqu_peak"))
    out.util_mean_pct, out.util_peak_pct = _f(g("util_mean")), _f(g("util_peak"))
    out.await_ms = _f(g("await_mean"))
    out.r_await_ms, out.w_await_ms = _f(g("r_await")), _f(g("w_await"))
    _sequential(out, agg)
    _cache(out, agg, ctx)
    _latency_notes(out, agg)
    _service_time(out, agg)
    if out.iops_mean is not None and out.await_ms is not None:
        out.concurrency_little = out.iops_mean * out.await_ms / 1000.0
    _windows(out, dev.windows)
    if out.util_mean_pct is None:
        out.notes.append("no %util in this source: busy time and service time are unknown")
    return out


def _sequential(out: Attributes, agg: dict[str, object]) -> None:
    counted = agg.get("seq_counted")
    if counted is not None:
        out.seq_pct = min(100.0, float(counted))  # type: ignore[arg-type]
        out.seq_method = "rmf-cache"
        seq_r, seq_w = float(agg["seq_r"] or 0.0), float(agg["seq_w"] or 0.0)  # type: ignore[arg-type]
        if seq_r + seq_w > 0:
            out.notes.append(
                f"sequential share counted by the controller cache (RMF): of the sequential "
                f"operations {100 * seq_r / (seq_r + seq_w):.1f} % were reads and "
                f"{100 * seq_w / (seq_r + seq_w):.1f} % writes")
        return
    est = agg.get("seq_est")
    if est is None:
        return
    out.seq_pct = float(est)  # type: ignore[arg-type]
    out.seq_method = "estimate"
    basis = ("merged requests and request size" if agg.get("has_merges")
             else "request size alone (this source has no merge counts)")
    out.notes.append(
        f"sequential share is an estimate from {basis}: a request that took in merged bios "
        f"or is >= {SEQ_SIZE_SEQUENTIAL_KB:g} kB counts as sequential, <= "
        f"{SEQ_SIZE_RANDOM_KB:g} kB without merges as random (large random direct I/O is "
        "over-counted)")


def _cache(out: Attributes, agg: dict[str, object], ctx: AnalysisContext | None) -> None:
    hit = agg.get("hit_ops")
    if hit is None:
        hit = agg.get("hit_time")
    if hit is not None:
        out.cache_hit_pct = float(hit)  # type: ignore[arg-type]
        return
    if ctx is not None and ctx.waits is not None:
        # [Insight-SSD9] reads the buffer-cache effect from the waits (few physical reads per
        # logical read); the reports' hit ratio is not part of the WaitEventFrame.
        out.notes.append("cache hit ratio unknown: the database's buffer-cache hit ratio is "
                         "not among the imported wait events")


def _latency_notes(out: Attributes, agg: dict[str, object]) -> None:
    if not agg["await_seen"]:
        out.notes.append("no latency columns in this source: response time is unknown")
    elif out.await_ms is None:
        out.notes.append("no operation completed: response time is undefined")


def _service_time(out: Attributes, agg: dict[str, object]) -> None:
    if agg.get("svctm_rep") is not None:
        out.svctm_ms = _f(agg["svctm_rep"])
        return
    below = ("service time estimated as %util / IOPS over the intervals below 100 % busy "
             "([Oe]: at 100 % busy IOPS = 1/svctm); exact only for a device that serves one "
             "request at a time")
    saturated = ("service time estimated as 1/IOPS from intervals at 100 % busy only: exact "
                 "for a one-at-a-time device ([Oe]), a lower bound for a device that serves "
                 "requests in parallel")
    # the intervals below 100 % busy first; only the saturated ones, else
    for ms_key, n_key, note in (("busy_ms", "busy_n", below), ("sat_ms", "sat_n", saturated)):
        busy_ms, n = _f(agg.get(ms_key)) or 0.0, _f(agg.get(n_key)) or 0.0
        if n > 0:
            out.svctm_ms = busy_ms / n
            out.svctm_estimated = True
            out.notes.append(note)
            return


def _windows(out: Attributes, windows: pl.DataFrame) -> None:
    if windows.height == 0:
        return
    w = _ensure(windows, ("iops", "r_iops", "w_iops", "d_iops", "await_ms", "r_await_ms",
                          "w_await_ms", "d_await_ms"))
    res = w.lazy().with_columns(_ops=iops_expr(), _await=await_expr()).select(
        peak=pl.col("_ops").max(),
        p95=pl.col("_await").filter(pl.col("_ops") > 0)
        .quantile(AWAIT_WINDOW_QUANTILE, interpolation="linear"),
    ).collect().row(0, named=True)
    peak = _f(res["peak"])
    # One window has no peak-to-mean ratio worth reporting (it would always be 1).
    if peak is not None and out.iops_mean and windows.height > 1:
        out.burstiness = peak / out.iops_mean
    out.await_p95_ms = _f(res["p95"])


def inherit_counted_sequential(ctx: AnalysisContext, key: str) -> None:
    """A rank (or disk) whose own rows carry no sequential counts takes them from its parts.

    RMF counts sequential operations per volume in the cache report, not per rank; [Yuge]
    judges the rank by the volumes' sequential share (57 % reads / 43 % writes of the
    sequential operations). A counted share of the parts beats the size-based estimate of
    the parent: the operation-weighted mean over the parts that have counts is used when
    they carry at least a tenth of the parts' I/O (a sample of the volumes; the coverage is
    stated in the note).
    """
    dev = ctx.devices[key]
    a = dev.attributes
    if a is None or a.seq_method == "rmf-cache":
        return
    parts = [c for c in ctx.children(key) if c.attributes is not None]
    total = sum(c.attributes.iops_mean or 0.0 for c in parts if c.attributes)
    counted = [(c.attributes.seq_pct, c.attributes.iops_mean or 0.0) for c in parts
               if c.attributes and c.attributes.seq_method == "rmf-cache"
               and c.attributes.seq_pct is not None]
    weight = sum(w for _s, w in counted)
    if counted and total > 0 and weight >= 0.1 * total:
        share = sum(s * w for s, w in counted) / weight
        note = (f"sequential share counted by the controller for {len(counted)} of "
                f"{len(parts)} parts ({100 * weight / total:.0f} % of their I/O), "
                "operation-weighted")
    elif dev.kind == "rank" and parts:
        # No volume of this rank has a cache page: RMF's subsystem-wide (SSID) counts are
        # the next best measurement, when there is exactly one subsystem in the data.
        ssids = [d for d in ctx.devices.values() if d.kind == "lcu" and d.host == dev.host
                 and d.attributes is not None and d.attributes.seq_method == "rmf-cache"
                 and d.attributes.seq_pct is not None]
        if len(ssids) != 1:
            return
        share = ssids[0].attributes.seq_pct  # type: ignore[union-attr, assignment]
        note = (f"sequential share counted by the controller for the whole subsystem "
                f"{ssids[0].device} (no per-volume cache counts for this rank's volumes)")
    else:
        return
    a.seq_pct = share
    a.seq_method = "rmf-cache"
    a.notes = [n for n in a.notes if "sequential share is an estimate" not in n]
    a.notes.append(note)
