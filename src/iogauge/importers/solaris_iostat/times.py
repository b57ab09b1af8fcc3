"""Report times of Solaris/illumos ``iostat``: ``-T u`` (epoch seconds) and ``-T d``
(``date``-style) stamps, or a clock laid from ``--start`` and ``--interval``, or the relative
time line when the file has neither; and the file's sampling interval."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers._lines import localize, start_local
from iogauge.importers.base import Source
from iogauge.model import timeline
from iogauge.model.sampleframe import TS_DTYPE

MONTHS = {m: i + 1 for i, m in enumerate(
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"])}
TS_D_RE = (r"^\s*(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\s+(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|"
            r"Nov|Dec)\s+(\d{1,2})\s+(\d{1,2}):(\d{2}):(\d{2})\s+(?:([A-Za-z][A-Za-z0-9+\-]*)"
            r"\s+)?(\d{4})\s*$")


def report_times(df: pl.DataFrame, n_reports: int, timestamped: bool, source: Source,
                  base: int = 0, prev_ts: datetime | None = None, *, lead: int = 0
                  ) -> pl.DataFrame:
    """``rid`` -> ``ts`` (UTC) and ``interval_s`` (since the previous report) for a piece of
    the file whose first report is the file's report ``base`` (0-based), ``prev_ts`` the time
    of the report before it (``lead``: see :class:`~iogauge.importers.solaris_iostat._Carry`)."""
    if not timestamped:
        start = start_local(source)
        if start is None:
            # no clock in the file and none given: report k (from 1) on the relative line
            source.note(timeline.placement_note(source.interval_s))
            step_s = source.interval_s or timeline.NOMINAL_INTERVAL_S
            ts = pl.DataFrame({"rid": list(range(n_reports)), "ts": [
                timeline.RELATIVE_EPOCH + timedelta(seconds=(base + k + 1) * step_s)
                for k in range(n_reports)]}, schema={"rid": pl.Int64(), "ts": TS_DTYPE})
        elif source.interval_s is None or source.interval_s <= 0:
            raise InputFormatError(source.path, None, "these iostat reports carry no time "
                                   "stamps (iostat was run without -T d|u): with --start, "
                                   "give the sampling interval too (--interval)")
        else:
            step = timedelta(seconds=source.interval_s)
            naive = pl.DataFrame({"rid": list(range(n_reports)),
                                  "ts_local": [start + (base + k + lead) * step
                                               for k in range(n_reports)]},
                                 schema={"rid": pl.Int64(), "ts_local": pl.Datetime("us")})
            ts = naive.with_columns(localize(pl.col("ts_local"), source).alias("ts"))
    else:
        stamps = df.filter(pl.col("is_ts")).select("rid", "line_no", "line", "is_ts_u")
        u = stamps.filter(pl.col("is_ts_u")).select(
            "rid", pl.from_epoch(pl.col("line").str.strip_chars().cast(pl.Int64), "s")
            .dt.replace_time_zone("UTC").dt.cast_time_unit("us").alias("ts"))
        d = stamps.filter(~pl.col("is_ts_u")).with_columns(
            pl.col("line").str.extract_groups(TS_D_RE).alias("g")).unnest("g")
        parts = [u]
        if d.height:
            zones = [z for z in d["6"].unique().to_list() if z]
            naive = d.select("rid", pl.datetime(
                pl.col("7").cast(pl.Int32),
                pl.col("1").replace_strict(MONTHS, return_dtype=pl.Int32),
                pl.col("2").cast(pl.Int32), pl.col("3").cast(pl.Int32),
                pl.col("4").cast(pl.Int32), pl.col("5").cast(pl.Int32),
                time_unit="us").alias("ts_local"))
            zone = zones[0] if len(zones) == 1 else (None if not zones else "/".join(zones))
            parts.append(naive.select("rid", localize(pl.col("ts_local"), source,
                                                      zone_stated=zone).alias("ts")))
        ts = pl.concat([p.with_columns(pl.col("ts").cast(TS_DTYPE)) for p in parts]).sort("rid")
    ts = ts.select("rid", pl.col("ts").cast(TS_DTYPE)).sort("rid")
    if prev_ts is not None:
        # the first report's interval starts at the last report of the piece before
        ts = pl.concat([pl.DataFrame({"rid": [-1], "ts": [prev_ts]},
                                     schema={"rid": pl.Int64(), "ts": TS_DTYPE}), ts])
    ts = ts.with_columns(
        (pl.col("ts").diff().dt.total_microseconds() / 1e6).alias("interval_s"))
    return ts.filter(pl.col("rid") >= 0) if prev_ts is not None else ts


def regular_interval(times: pl.DataFrame, source: Source, *, relative: bool) -> float:
    """The file's sampling interval: ``Source.interval_s``, else the median report spacing
    (on the ``relative`` time line, the nominal spacing for a single report)."""
    if source.interval_s is not None and source.interval_s > 0:
        return float(source.interval_s)
    diffs = times["interval_s"].drop_nulls()
    diffs = diffs.filter(diffs > 0)
    if diffs.len() == 0 and relative:
        return timeline.NOMINAL_INTERVAL_S
    if diffs.len() == 0:
        raise InputFormatError(source.path, None, "a single since-boot iostat report has no "
                               "sampling interval: supply it with --interval")
    return float(diffs.median())  # type: ignore[arg-type]
