"""SampleFrame: the canonical table every source produces and every analysis reads.

One row per device per interval. The schema below is the single place each
column is documented: name (which carries the unit), polars dtype, unit, and meaning.

Conventions that every producer must respect:

* **null means "not measured"**, never 0. A source that has no discard counters leaves
  ``d_iops`` null; a source that measured zero discards writes 0.0.
* Latency and size columns follow sysstat: when no request completed in the interval,
  ``r_await_ms`` and ``r_areq_kB`` are 0.0 (iostat prints 0.00), so live and imported data
  agree. Analyses that average latency must weight by the matching IOPS column.
* A counter that went backwards (device re-created, statistics reset) yields a row whose
  measures are all null and whose ``reset`` flag is true — never a negative rate.
* ``ts`` is the *end* of the interval, UTC, microsecond precision; ``interval_s`` is its
  length in seconds, so the interval is ``(ts - interval_s, ts]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from iogauge.errors import SchemaError

TS_DTYPE = pl.Datetime(time_unit="us", time_zone="UTC")

#: Allowed values of ``device_kind``. Linux kinds come from the collector; the others from
#: importers of other platforms (Windows LogicalDisk/PhysicalDisk, z/OS volume/rank/port).
DEVICE_KINDS: frozenset[str] = frozenset(
    {
        "disk",  # a whole physical or virtual disk (sda, nvme0n1, vda, hdisk0, sd0)
        "partition",  # a partition of a disk (sda1); ``parent`` names the disk
        "dm",  # a device-mapper device (LVM, dm-crypt, multipath); members in metadata
        "md",  # a Linux software RAID array
        "loop",  # a loop device (file-backed)
        "ram",  # a memory-backed device (zram, brd): never a disk bottleneck
        "logical_disk",  # Windows LogicalDisk (a volume, may span physical disks)
        "physical_disk",  # Windows PhysicalDisk
        "volume",  # a z/OS volume (VOLSER) or a storage-array LUN
        "rank",  # a DS8000 RAID rank / extent pool member
        "port",  # a host adapter / channel port
        "lcu",  # a z/OS logical control unit or storage group aggregate
        "datafile",  # a database data file (Oracle File IO Stats); parent = tablespace
        "tablespace",  # a database tablespace aggregate (Oracle Tablespace IO Stats)
        "other",
    }
)


@dataclass(frozen=True)
class Column:
    """One column of a frame schema.

    Attributes:
        name: column name; carries its unit (``_ms``, ``_kBps``, ``_pct``, ``_ps``).
        dtype: polars dtype every producer must deliver.
        unit: the unit spelled out, for renderers.
        doc: what the value means and where it comes from.
        required: the column may not contain nulls.
        group: ``identity``, ``flag``, ``measure``, ``attribute``, ``latency`` or ``host``.
    """

    name: str
    dtype: pl.DataType
    unit: str
    doc: str
    required: bool = False
    group: str = "measure"


def _m(name: str, unit: str, doc: str, group: str = "measure") -> Column:
    return Column(name, pl.Float64(), unit, doc, False, group)


SAMPLE_COLUMNS: tuple[Column, ...] = (
    # --- identity -------------------------------------------------------------------------
    Column("source", pl.String(), "", "Format id of the producer, e.g. 'linux-diskstats', "
           "'iostat', 'sar', 'perfmon', 'rmf'.", True, "identity"),
    Column("host", pl.String(), "", "Host name the statistics describe.", True, "identity"),
    Column("device", pl.String(), "", "Device name as the source spells it (kernel name on "
           "Linux: sda, dm-0, nvme0n1p1).", True, "identity"),
    Column("device_kind", pl.String(), "", "One of DEVICE_KINDS.", True, "identity"),
    Column("parent", pl.String(), "", "The device this one is part of: partition -> disk, "
           "volume -> rank, LogicalDisk -> PhysicalDisk. Null when none or unknown.",
           False, "identity"),
    Column("ts", TS_DTYPE, "UTC", "End of the interval (UTC, microseconds).", True, "identity"),
    Column("interval_s", pl.Float64(), "s", "Length of the interval the row covers.", True,
           "identity"),
    # --- flags ----------------------------------------------------------------------------
    Column("since_boot", pl.Boolean(), "", "True for a report that averages since boot "
           "(iostat's first report), not a measured interval.", True, "flag"),
    Column("reset", pl.Boolean(), "", "True when counters went backwards (device re-created "
           "or statistics reset); every measure of the row is then null.", True, "flag"),
    # --- Linux-style measures (sysstat 12.x iostat -x) -------------------------------------
    _m("r_iops", "1/s", "Reads completed per second (iostat r/s)."),
    _m("w_iops", "1/s", "Writes completed per second (iostat w/s)."),
    _m("d_iops", "1/s", "Discards completed per second (iostat d/s; kernel 4.18+)."),
    _m("f_iops", "1/s", "Flush requests completed per second (iostat f/s; kernel 5.5+)."),
    _m("iops", "1/s", "Reads + writes + discards per second, flushes excluded (sysstat tps; "
       "sar -d tps; Windows Disk Transfers/sec)."),
    _m("r_kBps", "kB/s", "kilobytes read per second (iostat rkB/s; 1 kB = 1024 bytes)."),
    _m("w_kBps", "kB/s", "kilobytes written per second (iostat wkB/s)."),
    _m("d_kBps", "kB/s", "kilobytes discarded per second (iostat dkB/s)."),
    _m("kBps", "kB/s", "Total kB/s read + written + discarded (sar blks/s converted)."),
    _m("r_merged_ps", "1/s", "Read requests merged per second (iostat rrqm/s)."),
    _m("w_merged_ps", "1/s", "Write requests merged per second (iostat wrqm/s)."),
    _m("d_merged_ps", "1/s", "Discard requests merged per second (iostat drqm/s)."),
    _m("r_rqm_pct", "%", "Share of read requests merged before dispatch (iostat %rrqm)."),
    _m("w_rqm_pct", "%", "Share of write requests merged (iostat %wrqm)."),
    _m("d_rqm_pct", "%", "Share of discard requests merged (iostat %drqm)."),
    _m("r_await_ms", "ms", "Mean time a read took, queue + service (iostat r_await; 0.0 "
       "when no read completed, as sysstat prints)."),
    _m("w_await_ms", "ms", "Mean time a write took (iostat w_await)."),
    _m("d_await_ms", "ms", "Mean time a discard took (iostat d_await)."),
    _m("f_await_ms", "ms", "Mean time a flush took (iostat f_await)."),
    _m("await_ms", "ms", "Mean time of reads, writes and discards, flushes excluded (sysstat "
       "await; Solaris svc_t; Windows Avg. Disk sec/Transfer x 1000)."),
    _m("svctm_ms", "ms", "Service time as the source reports it (sysstat < 12.1.2 svctm, "
       "Solaris asvc_t, sar avserv). Null when the source does not report it."),
    _m("aqu_sz", "requests", "Mean number of requests queued or in service (iostat aqu-sz, "
       "Windows Avg. Disk Queue Length, Solaris wait + actv)."),
    _m("util_pct", "%", "Share of the interval with at least one request in flight (iostat "
       "%util, Solaris %b, Windows 100 - % Idle Time). A capacity measure only for devices "
       "that serve one request at a time."),
    _m("r_areq_kB", "kB", "Mean read request size (iostat rareq-sz)."),
    _m("w_areq_kB", "kB", "Mean write request size (iostat wareq-sz)."),
    _m("d_areq_kB", "kB", "Mean discard request size (iostat dareq-sz)."),
    _m("areq_kB", "kB", "Mean request size over reads, writes and discards (sar areq-sz, "
       "iostat avgrq-sz converted from sectors)."),
    _m("inflight", "requests", "Requests in flight when the interval ended (diskstats field "
       "9; a gauge, not an average)."),
    # --- queue split (Solaris / AIX / HP-UX sar, RMF) -------------------------------------
    _m("queue_wait_ms", "ms", "Mean time waiting in the host queue before service (Solaris "
       "wsvc_t, sar avwait).", "attribute"),
    _m("queue_wait_pct", "%", "Share of time the wait queue was non-empty (Solaris %w).",
       "attribute"),
    _m("queue_wait_len", "requests", "Mean requests waiting, not yet active (Solaris wait).",
       "attribute"),
    _m("active_len", "requests", "Mean requests being serviced (Solaris actv).", "attribute"),
    # --- application attributes (RMF cache, arrays) ---------------------------------------
    _m("seq_read_ps", "1/s", "Sequential reads per second (RMF cache 'SEQUENTIAL').",
       "attribute"),
    _m("seq_write_ps", "1/s", "Sequential writes per second (RMF cache).", "attribute"),
    _m("cache_hit_pct", "%", "Cache hit ratio of the controller (RMF CACHE SUBSYSTEM).",
       "attribute"),
    _m("iosq_ms", "ms", "RMF IOSQ: queued in the host (UCB contention).", "attribute"),
    _m("pend_ms", "ms", "RMF PEND: waiting for the device to accept (channel, director, "
       "port).", "attribute"),
    _m("disc_ms", "ms", "RMF DISC: device working without transferring (cache miss, rank "
       "busy, destage).", "attribute"),
    _m("conn_ms", "ms", "RMF CONN: data transfer time.", "attribute"),
    _m("split_iops", "1/s", "Windows Split IO/Sec: requests split by fragmentation or size.",
       "attribute"),
    # --- latency percentiles (fio, histograms) --------------------------------------------
    _m("r_lat_p50_ms", "ms", "Median read completion latency.", "latency"),
    _m("r_lat_p95_ms", "ms", "95th percentile read completion latency.", "latency"),
    _m("r_lat_p99_ms", "ms", "99th percentile read completion latency.", "latency"),
    _m("r_lat_p999_ms", "ms", "99.9th percentile read completion latency.", "latency"),
    _m("w_lat_p50_ms", "ms", "Median write completion latency.", "latency"),
    _m("w_lat_p95_ms", "ms", "95th percentile write completion latency.", "latency"),
    _m("w_lat_p99_ms", "ms", "99th percentile write completion latency.", "latency"),
    _m("w_lat_p999_ms", "ms", "99.9th percentile write completion latency.", "latency"),
    # --- host CPU context over the same interval (iostat avg-cpu, sar -u) ---------------------
    _m("cpu_user_pct", "%", "Host CPU in user mode, guest time excluded (iostat %user).",
       "host"),
    _m("cpu_nice_pct", "%", "Host CPU in niced user mode (iostat %nice).", "host"),
    _m("cpu_system_pct", "%", "Host CPU in kernel incl. hard and soft IRQ (iostat %system).",
       "host"),
    _m("cpu_iowait_pct", "%", "Host CPU idle with I/O outstanding (iostat %iowait).", "host"),
    _m("cpu_steal_pct", "%", "Host CPU stolen by the hypervisor (iostat %steal).", "host"),
    _m("cpu_idle_pct", "%", "Host CPU idle without I/O outstanding (iostat %idle).", "host"),
    _m("psi_io_some_pct", "%", "Share of the interval in which some task stalled on I/O "
       "(/proc/pressure/io some).", "host"),
    _m("psi_io_full_pct", "%", "Share of the interval in which all non-idle tasks stalled "
       "on I/O at once (/proc/pressure/io full).", "host"),
)

SCHEMA: dict[str, pl.DataType] = {c.name: c.dtype for c in SAMPLE_COLUMNS}
COLUMNS_BY_NAME: dict[str, Column] = {c.name: c for c in SAMPLE_COLUMNS}
REQUIRED: tuple[str, ...] = tuple(c.name for c in SAMPLE_COLUMNS if c.required)
MEASURES: tuple[str, ...] = tuple(c.name for c in SAMPLE_COLUMNS if c.dtype == pl.Float64()
                                  and c.name != "interval_s")
_FLAGS: tuple[str, ...] = ("since_boot", "reset")
#: Identity columns that, with ``ts``, identify a row.
KEY: tuple[str, ...] = ("source", "host", "device", "ts")


class SampleFrame:
    """A validated polars DataFrame with exactly the :data:`SAMPLE_COLUMNS` schema.

    Construct from any DataFrame holding a subset of the columns: missing optional columns
    are added as nulls, flags default to false, columns are cast and ordered, and the result
    is validated. Unknown columns are refused so that a typo cannot silently drop data.
    """

    __slots__ = ("df",)

    def __init__(self, df: pl.DataFrame, *, validate: bool = True) -> None:
        self.df = _conform(df)
        if validate:
            self.validate()

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def empty(cls) -> SampleFrame:
        return cls(pl.DataFrame(schema=SCHEMA), validate=False)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> SampleFrame:
        rows = list(records)
        if not rows:
            return cls.empty()
        unknown = {k for r in rows for k in r} - SCHEMA.keys()
        if unknown:
            raise SchemaError(f"unknown SampleFrame column(s): {', '.join(sorted(unknown))}")
        present = [c for c in SCHEMA if any(c in r for r in rows)]
        schema = {c: SCHEMA[c] for c in present}
        if "ts" in schema and any(isinstance(r.get("ts"), str) for r in rows):
            schema["ts"] = pl.String()  # ISO text (JSON output); parsed by _conform
        # A flag absent from a record defaults to false, as an absent flag column does.
        defaults = {c: (False if c in _FLAGS else None) for c in present}
        try:
            df = pl.DataFrame([{c: r.get(c, defaults[c]) for c in present} for r in rows],
                              schema=schema, orient="row")
        except (pl.exceptions.PolarsError, TypeError, ValueError) as exc:
            raise SchemaError(f"records do not fit the SampleFrame schema: {exc}") from exc
        return cls(df)

    @classmethod
    def concat(cls, frames: Sequence[SampleFrame]) -> SampleFrame:
        if not frames:
            return cls.empty()
        if len(frames) == 1:
            return frames[0]  # (frames are immutable: no copy)
        return cls(pl.concat([f.df for f in frames], how="vertical"), validate=False)

    @classmethod
    def read_parquet(cls, path: str | Path) -> SampleFrame:
        return cls(pl.read_parquet(path))

    def to_parquet(self, path: str | Path) -> None:
        self.df.write_parquet(path, compression="zstd", statistics=True)

    # ---- access -------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.df.height

    def __repr__(self) -> str:
        return f"SampleFrame({self.df.height} rows, {self.df['device'].n_unique()} devices)"

    def devices(self) -> list[str]:
        return sorted(self.df["device"].unique().to_list())

    def to_dicts(self, *, drop_nulls: bool = False) -> list[dict[str, Any]]:
        rows = self.df.to_dicts()
        if drop_nulls:
            return [{k: v for k, v in r.items() if v is not None} for r in rows]
        return rows

    # ---- validation ---------------------------------------------------------------------
    def validate(self) -> None:
        """Raise :class:`SchemaError` naming the first violated rule and an offending row."""
        df = self.df
        for name in REQUIRED:
            nulls = df[name].null_count()
            if nulls:
                idx = df.with_row_index().filter(pl.col(name).is_null())["index"][0]
                raise SchemaError(f"column {name!r} is required but null in {nulls} row(s), "
                                  f"first at row {idx}")
        bad_kind = df.filter(~pl.col("device_kind").is_in(sorted(DEVICE_KINDS)))
        if bad_kind.height:
            raise SchemaError(f"unknown device_kind {bad_kind['device_kind'][0]!r} for device "
                              f"{bad_kind['device'][0]!r}; allowed: {sorted(DEVICE_KINDS)}")
        # polars orders NaN above every number, so "<= 0" alone would let NaN through.
        bad_iv = df.filter((pl.col("interval_s") <= 0) | pl.col("interval_s").is_nan()
                           | pl.col("interval_s").is_infinite())
        if bad_iv.height:
            raise SchemaError(f"interval_s must be > 0; device {bad_iv['device'][0]!r} at "
                              f"{bad_iv['ts'][0]} has {bad_iv['interval_s'][0]}")
        # Every measure is a count, rate, time, size or share: none can be negative, and NaN
        # is not a value (producers write null for "not measured").
        checks = [((pl.col(m) < 0) | pl.col(m).is_nan() | pl.col(m).is_infinite())
                  .fill_null(False).alias(m) for m in MEASURES]
        flags = df.select(checks)
        for m in MEASURES:
            if flags[m].any():
                row = df.filter(flags[m])
                raise SchemaError(f"column {m!r} must be finite, >= 0 and not NaN; device "
                                  f"{row['device'][0]!r} at {row['ts'][0]} has {row[m][0]}")
        reset_rows = df.filter(pl.col("reset"))
        if reset_rows.height:
            nonnull = reset_rows.select(pl.any_horizontal([pl.col(m).is_not_null()
                                                           for m in MEASURES]))
            if nonnull.to_series().any():
                raise SchemaError("a row flagged reset=True must have every measure null")


#: What an absent column becomes: false for the flags, null for the rest (built once: a
#: frame is conformed per importer batch, and 60 literal expressions cost more than its
#: select).
_ABSENT: dict[str, pl.Expr] = {
    name: (pl.lit(False, dtype=pl.Boolean()) if name in ("since_boot", "reset")
           else pl.lit(None, dtype=dtype)).alias(name)
    for name, dtype in SCHEMA.items()}


def _conform(df: pl.DataFrame) -> pl.DataFrame:
    unknown = [c for c in df.columns if c not in SCHEMA]
    if unknown:
        raise SchemaError(f"unknown SampleFrame column(s): {', '.join(unknown)}")
    exprs: list[pl.Expr] = []
    for name, dtype in SCHEMA.items():
        if name in df.columns:
            src = df[name].dtype
            if name == "ts" and src == pl.String():
                # ISO-8601 text, as the JSON outputs write it (offset honoured, then UTC).
                exprs.append(pl.col(name).str.to_datetime(time_unit="us", time_zone="UTC",
                                                          strict=True))
            elif name == "ts" and isinstance(src, pl.Datetime) and src.time_zone is None:
                # A naive timestamp is taken as UTC; importers convert local times first.
                exprs.append(pl.col(name).dt.replace_time_zone("UTC").dt.cast_time_unit("us"))
            elif src != dtype:
                try:
                    exprs.append(pl.col(name).cast(dtype, strict=True))
                except Exception as exc:  # pragma: no cover - polars raises lazily below
                    raise SchemaError(f"column {name!r} cannot be cast to {dtype}") from exc
            else:
                exprs.append(pl.col(name))
        else:
            exprs.append(_ABSENT[name])
    try:
        return df.select(exprs)
    except pl.exceptions.PolarsError as exc:
        raise SchemaError(f"frame does not fit the SampleFrame schema: {exc}") from exc
