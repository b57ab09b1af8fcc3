"""What the two readers of sadf exports share (format ``sadf``): the CSV reader
(:mod:`iogauge.importers.sadf`) and the JSON reader (:mod:`iogauge.importers.sadf_json`).

Hosts and the UTC conversion of sadf's stamps (with the DST fall-back hour told apart); the
last step to SampleFrame rows is :func:`iogauge.importers.sar_text.device_frame`.
"""

from __future__ import annotations

import polars as pl

from iogauge.importers.base import Source
from iogauge.importers.sar_text.common import local_to_utc_us, zone_note
from iogauge.importers.sar_text.rows import file_stem

NAME = "sadf"


def fallback_host(source: Source) -> str:
    """Host for rows whose file names none: --host, else the file name's stem."""
    return source.host or file_stem(source.path)


def utc_us(frame: pl.DataFrame, source: Source,
           fold_max: dict[int, int] | None = None) -> pl.Series:
    """UTC epoch microseconds from ``local_s`` (naive epoch seconds) and ``is_utc``.

    Local stamps (sadf -T / -t) use --tz, else UTC with a note. The document's own
    ``timezone`` is not used: it is the zone of the machine that wrote the sa file, which
    is what -t prints but not -T (the zone of whoever ran sadf), and the two are not told
    apart. An interval whose stamp is not later than every stamp of the intervals before it
    in its section (``blk``) is on the second pass of a DST fall-back hour (the repeated
    hour's last stamp equals the first pass's last one); ``fold_max`` holds each section's
    latest stamp in the pieces read before (updated)."""
    local = frame["local_s"]
    if bool(frame["is_utc"].all()):
        return local * 1_000_000
    zone = source.tz
    if zone is None:
        zone_note(source, "sadf timestamps without 'UTC'")
        return local * 1_000_000
    seen = fold_max if fold_max is not None else {}
    carried = pl.col("blk").replace_strict(seen, default=None, return_dtype=pl.Int64())
    s = pl.col("local_s")
    # the latest stamp before each interval (a run of rows with one stamp: its devices)
    starts = (s != s.shift(1).over("blk")).fill_null(True)
    before_run = (pl.when(starts).then(s.cum_max().shift(1).over("blk"))
                  .forward_fill().over("blk"))
    latest = pl.max_horizontal(before_run, carried)
    fold = frame.select((s <= latest).fill_null(False).alias("f"))["f"]
    if fold_max is not None:
        for blk, latest in frame.group_by("blk").agg(pl.col("local_s").max()).iter_rows():
            if blk is not None and latest is not None:
                fold_max[int(blk)] = max(int(latest), fold_max.get(int(blk), int(latest)))
    converted = local_to_utc_us(local, fold, zone)
    return pl.select(pl.when(frame["is_utc"]).then(local * 1_000_000)
                     .otherwise(converted).alias("us")).to_series()
