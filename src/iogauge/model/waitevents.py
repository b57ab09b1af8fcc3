"""WaitEventFrame: database wait events per snapshot interval (Oracle Statspack / AWR).

One row per event per report interval. Database waits are not device statistics, so they
live beside the SampleFrame rather than in it; per-datafile I/O statistics of the same
reports go into the SampleFrame (``device_kind`` ``datafile``, ``parent`` the tablespace).
[Insight-SSD9] reads them together with ``iostat -x``: the average wait per ``db file sequential
read`` / ``db file scattered read`` says what the database saw of the device.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from iogauge.errors import SchemaError
from iogauge.model.sampleframe import TS_DTYPE, Column

WAIT_COLUMNS: tuple[Column, ...] = (
    Column("source", pl.String(), "", "Format id: 'statspack' or 'awr'.", True, "identity"),
    Column("host", pl.String(), "", "Database host.", True, "identity"),
    Column("db_name", pl.String(), "", "Database name (DB Name).", False, "identity"),
    Column("instance", pl.String(), "", "Instance name.", False, "identity"),
    Column("ts", TS_DTYPE, "UTC", "End of the report interval (end snapshot time), UTC.", True,
           "identity"),
    Column("interval_s", pl.Float64(), "s", "Report interval (elapsed) in seconds.", True,
           "identity"),
    Column("section", pl.String(), "", "Report section the row came from, e.g. 'foreground "
           "wait events', 'top timed events'; 'iostat by filetype' rows (AWR IOStat by "
           "Filetype) carry a file type's read time ('Data File small read') in "
           "avg_wait_ms.", True, "identity"),
    Column("event", pl.String(), "", "Wait event name, e.g. 'db file sequential read'.", True,
           "identity"),
    Column("wait_class", pl.String(), "", "Wait class (User I/O, System I/O, ...) when given.",
           False, "identity"),
    Column("waits", pl.Float64(), "count", "Number of waits in the interval.", False),
    Column("timeouts_pct", pl.Float64(), "%", "Share of waits that timed out (%Time -outs).",
           False),
    Column("time_waited_s", pl.Float64(), "s", "Total time waited (reports in cs are converted)."
           , False),
    Column("avg_wait_ms", pl.Float64(), "ms", "Average wait: time_waited / waits, as the "
           "report prints it (Avg wait (ms)).", False),
    Column("waits_per_txn", pl.Float64(), "count", "Waits per transaction.", False),
    Column("pct_db_time", pl.Float64(), "%", "Share of DB time (% DB time / %Total Call Time)."
           , False),
    Column("waits_ge_32ms_pct", pl.Float64(), "%", "Share of the event's waits that took 32 ms "
           "or more (Wait Event Histogram rows only: its buckets from 32 ms up).", False),
    Column("waits_ge_1s_pct", pl.Float64(), "%", "Share of the event's waits that took 1 s or "
           "more (Wait Event Histogram rows only).", False),
)

WAIT_SCHEMA: dict[str, pl.DataType] = {c.name: c.dtype for c in WAIT_COLUMNS}
_REQUIRED = tuple(c.name for c in WAIT_COLUMNS if c.required)


class WaitEventFrame:
    """A validated polars DataFrame with exactly the :data:`WAIT_COLUMNS` schema."""

    __slots__ = ("df",)

    def __init__(self, df: pl.DataFrame) -> None:
        unknown = [c for c in df.columns if c not in WAIT_SCHEMA]
        if unknown:
            raise SchemaError(f"unknown WaitEventFrame column(s): {', '.join(unknown)}")
        exprs = []
        for name, dtype in WAIT_SCHEMA.items():
            if name in df.columns:
                exprs.append(pl.col(name).cast(dtype))
            else:
                exprs.append(pl.lit(None, dtype=dtype).alias(name))
        try:
            self.df = df.select(exprs)
        except pl.exceptions.PolarsError as exc:
            raise SchemaError(f"frame does not fit the WaitEventFrame schema: {exc}") from exc
        for name in _REQUIRED:
            if self.df[name].null_count():
                raise SchemaError(f"WaitEventFrame column {name!r} is required but null")
        for name in ("waits", "time_waited_s", "avg_wait_ms"):
            bad = self.df.filter((pl.col(name) < 0) | pl.col(name).is_nan())
            if bad.height:
                raise SchemaError(f"WaitEventFrame column {name!r} must be >= 0; event "
                                  f"{bad['event'][0]!r} has {bad[name][0]}")

    @classmethod
    def empty(cls) -> WaitEventFrame:
        return cls(pl.DataFrame(schema=WAIT_SCHEMA))

    @classmethod
    def concat(cls, frames: Sequence[WaitEventFrame]) -> WaitEventFrame:
        if not frames:
            return cls.empty()
        return cls(pl.concat([f.df for f in frames], how="vertical"))

    def __len__(self) -> int:
        return self.df.height
