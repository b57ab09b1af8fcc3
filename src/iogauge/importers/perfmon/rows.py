"""Sample lines -> SampleFrame rows: times (UTC), partial intervals, invalid columns, one row
per device and sample."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers.base import Source
from iogauge.importers.perfmon.body import _convert
from iogauge.importers.perfmon.counters import _AS_IS, _TS_FORMAT, NAME
from iogauge.importers.perfmon.header import _Device, _Header
from iogauge.model.sampleframe import SCHEMA, TS_DTYPE, SampleFrame


def _sample_rows(df: pl.DataFrame, value_cols: list[str], header: _Header, header_idx: int,
                 source: Source) -> pl.DataFrame:
    """The sample lines to import, as a small frame: ``_row``, ``ts`` (UTC), ``_prev`` (the
    previous sample line's time) and ``interval_s`` (ts - _prev, seconds).

    Blank lines are passed over; a line whose time cannot be read or does not advance is a
    bad line; lines with no value at all (relog's first sample) are skipped with a note but
    still open the next line's interval.
    """
    side = df.select(
        "_row", pl.col("ts").alias("_text"),
        pl.any_horizontal([pl.col(c).is_not_null() for c in value_cols]).alias("_any"))
    side = side.filter(pl.col("_text").is_not_null() | pl.col("_any"))
    local = pl.col("_text").str.strip_chars().str.strptime(pl.Datetime("us"), _TS_FORMAT,
                                                           strict=False)
    side = side.with_columns(local.alias("_local"))
    bad_ts = side.filter(pl.col("_local").is_null())
    for r, txt in bad_ts.select("_row", "_text").iter_rows():
        source.bad_line(header_idx + 2 + int(r), f"timestamp {txt!r} is not "
                        "MM/DD/YYYY HH:MM:SS.mmm")
    side = side.filter(pl.col("_local").is_not_null())
    side = side.select("_row", "_any",
                       _to_utc(pl.col("_local"), header, source).cast(TS_DTYPE).alias("ts"))
    # Time must advance: a clock that repeats or goes back (a daylight-saving change, which
    # PDH does not fold into the header's fixed bias) cannot be placed.
    back = side.filter(pl.col("ts").diff() <= pl.duration(microseconds=0))
    for r in back["_row"].to_list():
        source.bad_line(header_idx + 2 + int(r), "timestamp is not after the previous "
                        "sample's (a daylight-saving change? PDH logs local time with the "
                        "bias of the log's start)")
    while back.height:  # lenient mode: drop until strictly increasing
        side = side.filter(~pl.col("_row").is_in(back["_row"].implode()))
        back = side.filter(pl.col("ts").diff() <= pl.duration(microseconds=0))
    if side.height == 0:
        raise InputFormatError(source.path, None, "no sample lines after the header")
    if side.height == 1:
        raise InputFormatError(source.path, header_idx + 2 + int(side["_row"][0]),
                               "a single sample line: the interval it covers is unknown "
                               "(PDH rates need a previous sample)")
    steps_us = side["ts"].diff().drop_nulls().dt.total_microseconds().to_numpy()
    median_us = int(np.median(steps_us))
    # The previous line's time; for the first line one sampling interval earlier.
    side = side.with_columns(pl.col("ts").shift(1).fill_null(
        pl.col("ts").first() - pl.duration(microseconds=median_us)).alias("_prev"))
    side = side.with_columns(
        ((pl.col("ts") - pl.col("_prev")).dt.total_microseconds() / 1e6).alias("interval_s"))
    empty = side.filter(~pl.col("_any"))
    if empty.height:
        source.note(f"perfmon: {empty.height} sample line(s) with no value at all skipped"
                    + (" (relog leaves the first sample empty: a rate needs two raw "
                       "samples)" if not side["_any"][0] else ""))
    elif side["_any"][0]:
        source.note(f"perfmon: the first sample has values; its interval is taken as the "
                    f"file's sampling interval ({median_us / 1e6:g} s)")
    side = side.filter(pl.col("_any")).drop("_any")
    if side.height == 0:
        raise InputFormatError(source.path, None, "no disk counter has a value in any "
                               "sample line")
    return side


def _to_utc(local: pl.Expr, header: _Header, source: Source) -> pl.Expr:
    if header.bias_min is not None:
        # Windows TIME_ZONE_INFORMATION: UTC = local time + bias (minutes).
        return (local + pl.duration(minutes=header.bias_min)).dt.replace_time_zone("UTC")
    if source.tz is not None:
        source.note(f"perfmon: the header states no time zone; local times read as "
                    f"{source.tz.key} (--tz)")
        return local.dt.replace_time_zone(source.tz.key, ambiguous="earliest",
                                          non_existent="null").dt.convert_time_zone("UTC")
    source.note("perfmon: the header states no time zone and no --tz was given; "
                "timestamps taken as UTC")
    return local.dt.replace_time_zone("UTC")


def _invalid_columns(df: pl.DataFrame, value_cols: list[str], source: Source) -> set[str]:
    """Counter columns holding a negative or non-finite value (noted with their count).

    min/max/NaN per column is one cheap pass; exact counts only for the (rare) suspects.
    """
    stats = df.select(pl.col(value_cols).min().name.suffix(":min"),
                      pl.col(value_cols).max().name.suffix(":max"),
                      pl.col(value_cols).is_nan().any().name.suffix(":nan")).row(0, named=True)

    def bad(c: str) -> bool:
        lo, hi = stats[f"{c}:min"], stats[f"{c}:max"]
        return bool((lo is not None and lo < 0) or (hi is not None and math.isinf(hi))
                    or stats[f"{c}:nan"])

    suspect = {c for c in value_cols if bad(c)}
    if suspect:
        counts = df.select([((pl.col(c) < 0) | ~pl.col(c).is_finite()).sum().alias(c)
                            for c in sorted(suspect)]).row(0)
        source.note(f"perfmon: {sum(int(n or 0) for n in counts)} negative or non-finite "
                    "counter value(s) left null (PDH shows them when a counter wraps or an "
                    "instance restarts)")
    return suspect


class _Part(NamedTuple):
    """A device's share of the output: every sample line (``mask`` None) or the lines
    ``mask`` selects, ``rows`` of them."""

    dev: _Device
    mask: pl.Series | None
    rows: int


def _reshape(columns: dict[str, pl.Series], header: _Header, suspect: set[str],
             source: Source) -> SampleFrame:
    """One row per (device, sample line that has a value for the device).

    ``columns`` holds the sample lines: ``ts``, ``_prev``, ``interval_s`` and the counter
    columns ``c<index>``; it is consumed. Each output column is built once, contiguous, by
    concatenating the devices' pieces (device after device, lines in time order), and each
    counter column is dropped once copied. ``suspect`` columns may hold negative or
    non-finite values, which become null.
    """
    parts = _device_parts(columns, header)
    if not parts:
        raise InputFormatError(source.path, None, "no disk counter has a value")
    # Counters first: their columns are freed as they are copied, so the identity
    # columns below can reuse that memory.
    out = _measure_columns(columns, header, parts, suspect)
    out.update(_identity_columns(parts))
    out.update(_time_columns(columns, parts))
    columns.clear()
    # Constant and absent columns as literals: polars keeps them as scalars, not as
    # 640,000 copies of "perfmon" or of null.
    constants: dict[str, pl.Expr] = {"source": pl.lit(NAME, pl.String()),
                                     "since_boot": pl.lit(False), "reset": pl.lit(False)}
    frame = pl.DataFrame(list(out.values())).select([
        pl.col(c) if c in out else constants.get(c, pl.lit(None, dtype)).alias(c)
        for c, dtype in SCHEMA.items()])
    # Not re-validated: every rule holds by construction -- ts strictly increases, so every
    # interval is > 0; negative and non-finite counter values were nulled and the
    # conversions (x 1000, / 1024, 100 - idle clipped at 0) keep values finite and >= 0;
    # kinds are constants; nothing is a reset row. tests/unit/importers/test_perfmon.py
    # validates generated files (hypothesis); skipping it saves ~15 % of a 200 MB import.
    return SampleFrame(frame, validate=False)


def _device_parts(columns: dict[str, pl.Series], header: _Header) -> list[_Part]:
    """The devices with a value in at least one sample line, each with its lines."""
    height = columns["ts"].len()
    parts: list[_Part] = []
    for dev in header.devices:
        names = [f"c{i}" for i, _c in dev.counters.values()]
        if all(columns[c].null_count() == 0 for c in names):
            parts.append(_Part(dev, None, height))  # a value in every line: no mask needed
            continue
        has = pl.DataFrame([columns[c] for c in names]).select(
            pl.any_horizontal(pl.all().is_not_null())).to_series()
        present = int(has.sum())
        if present:
            parts.append(_Part(dev, has if present < height else None, present))
    return parts


def _gather(series: pl.Series, mask: pl.Series | None) -> pl.Series:
    return series if mask is None else series.filter(mask)


def _measure_columns(columns: dict[str, pl.Series], header: _Header, parts: list[_Part],
                     suspect: set[str]) -> dict[str, pl.Series]:
    """One output column per measure with a value (disk counters and the host's CPU);
    each measure's counter columns are dropped from ``columns`` once copied."""
    out: dict[str, pl.Series] = {}
    measures = sorted({c for d in header.devices for c in d.counters}
                      | {c for cols in header.cpu.values() for c in cols})
    for name in measures:
        column = _measure(name, columns, header, parts, suspect)
        if column is not None:  # else no device with this counter has a value: left null
            out[name] = column
        for dev, _m, _n in parts:  # the counter columns of this measure are done
            src = dev.counters.get(name)
            if src:
                columns.pop(f"c{src[0]}", None)
    return out


def _measure(name: str, columns: dict[str, pl.Series], header: _Header, parts: list[_Part],
             suspect: set[str]) -> pl.Series | None:
    """One measure's column: each device's counter (or its host's CPU counter) over its
    lines, null for a device without it; None when no device has it."""
    pieces: list[pl.Series] = []
    convs: set[str] = set()
    check = False
    for dev, mask, n in parts:
        src = dev.counters.get(name)
        idx = src[0] if src else header.cpu.get(dev.host, {}).get(name)
        if idx is None:
            pieces.append(pl.repeat(None, n, dtype=pl.Float64(), eager=True))
            continue
        convs.add(src[1] if src else _AS_IS)
        check = check or f"c{idx}" in suspect
        pieces.append(_gather(columns[f"c{idx}"], mask))
    if not convs:
        return None
    (conv,) = convs  # one counter per column: its conversion is the column's
    return _convert(pl.concat(pieces, rechunk=True), conv, check).alias(name)


def _identity_columns(parts: list[_Part]) -> dict[str, pl.Series]:
    """host, device, device_kind, parent: a small per-device table gathered by a row ->
    device index."""
    ident = pl.DataFrame({
        "host": [d.host for d, _m, _n in parts],
        "device": [d.instance for d, _m, _n in parts],
        "device_kind": [d.kind for d, _m, _n in parts],
        "parent": [d.parent for d, _m, _n in parts],
    }, schema={"host": pl.String(), "device": pl.String(), "device_kind": pl.String(),
               "parent": pl.String()})
    dev_index = pl.Series(np.repeat(np.arange(len(parts), dtype=np.uint32),
                                    [n for _d, _m, n in parts]))
    return dict(zip(ident.columns, ident[dev_index].get_columns(), strict=True))


def _time_columns(columns: dict[str, pl.Series], parts: list[_Part]) -> dict[str, pl.Series]:
    """ts and interval_s (a device without a value in some lines: from its last value)."""
    ts, prev, interval = columns.pop("ts"), columns.pop("_prev"), columns.pop("interval_s")
    return {
        "ts": pl.concat([_gather(ts, m) for _d, m, _n in parts], rechunk=True),
        "interval_s": pl.concat([
            interval if m is None else _partial_interval(ts, prev, m) for _d, m, _n in parts],
            rechunk=True),
    }


def _partial_interval(ts: pl.Series, prev_line: pl.Series, mask: pl.Series) -> pl.Series:
    """Interval of a device that was empty in some lines: from the last line where it had a
    value (PDH rates run from the last raw sample collected), else from the previous
    line."""
    df = pl.DataFrame({"ts": ts, "prev": prev_line, "has": mask})
    prev_with_value = pl.when(pl.col("has")).then(pl.col("ts")).shift(1).forward_fill()
    return df.select(
        ((pl.col("ts") - pl.coalesce(prev_with_value, pl.col("prev")))
         .dt.total_microseconds() / 1e6).alias("interval_s")).filter(df["has"]).to_series()
