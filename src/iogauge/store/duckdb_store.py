"""The embedded store: one DuckDB file holding SampleFrame rows and device metadata.

Layout (store schema version :data:`STORE_SCHEMA_VERSION`):

* ``samples`` — one column per :data:`~iogauge.model.sampleframe.SAMPLE_COLUMNS` entry, same
  name, DuckDB type mapped from the polars dtype (:func:`duckdb_type`), ``NOT NULL`` where the
  model says *required*. The table is derived from the model at open time, never written by
  hand: a model that gained a column gets it added (``ALTER TABLE ... ADD COLUMN``) the next
  time a store is opened for writing, so the two cannot drift apart.
* ``devices`` — one row per (host, device name): ``first_seen`` and ``changed`` timestamps and
  every :class:`~iogauge.model.device.DeviceInfo` field, again derived from the dataclass.
* ``meta`` — key/value text: ``schema_version``, ``created_by``, ``created_at``.

Imports too large to hold go in batch by batch, still as one transaction
(:meth:`Store.bulk_append`, :class:`StoreImport` for ``iogauge import``), under a small DuckDB
memory limit (:data:`BULK_SETTINGS`).

Durability: every :meth:`Store.append` is one transaction; DuckDB writes it to its write-ahead
log before the commit returns, so a process killed at any instant (``kill -9``) leaves a file
that opens again with every committed batch and nothing of the batch in flight. A new store is
built under a temporary name and linked into place, so a crash while *creating* one cannot leave
a half-initialised (unreadable) file at the requested path either.

Live data: ``iogauge record`` and ``iogauge guarantee`` write through
:class:`~iogauge.store.live.LiveStore`, which appends Parquet segments in ``<db>.live/``
(:mod:`iogauge.store.segments`) and never holds this file after start-up; every read here
(:meth:`Store.read`, :meth:`Store.count`, :meth:`Store.export_parquet`, devices, guarantee
decisions) takes the table's rows and then the segments' rows, listed at the read.

Data moves between polars and DuckDB as Arrow through the PyCapsule interface (no pyarrow, no
row-by-row inserts). Timestamps are ``TIMESTAMPTZ`` and every connection runs with
``TimeZone = 'UTC'``, so ``ts`` comes back as ``Datetime("us", "UTC")``, identical to what went in.
"""

# SQL here is assembled only from module constants and identifiers quoted by _q(); every
# value travels as a bound parameter, so the S608 pattern match does not apply.
# ruff: noqa: S608

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import secrets
import time
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from iogauge import __version__
from iogauge.errors import SchemaError, StoreBusyError, StoreError
from iogauge.fsutil import fsync_dir
from iogauge.model.device import DeviceInfo
from iogauge.model.guaranteeframe import GUARANTEE_COLUMNS, GuaranteeFrame
from iogauge.model.sampleframe import SAMPLE_COLUMNS, SampleFrame
from iogauge.model.waitevents import WAIT_COLUMNS, WaitEventFrame
from iogauge.store.segments import live_dir, live_segments

#: Version of the table layout. Bump it when a change is not a pure column addition.
STORE_SCHEMA_VERSION = 1
DB_FILENAME = "iogauge.duckdb"
SAMPLES_TABLE = "samples"
WAITS_TABLE = "wait_events"
DEVICES_TABLE = "devices"
META_TABLE = "meta"

_BATCH_VIEW = "_iogauge_batch"
_WAITS_VIEW = "_iogauge_waits_batch"
#: Columns identifying a sample row; an import replaces stored rows with the same key.
SAMPLE_KEY: tuple[str, ...] = ("source", "host", "device", "ts")
#: Columns identifying a wait-event row.
WAIT_KEY: tuple[str, ...] = ("source", "host", "db_name", "instance", "ts", "section", "event")

TimeArg = datetime | str | None


# ---- type mapping (model -> DuckDB) --------------------------------------------------------
def duckdb_type(dtype: pl.DataType) -> str:
    """DuckDB type for a polars dtype of the model, spelled as ``information_schema`` does.

    Raises:
        SchemaError: for a dtype the store has no mapping for (a model change that needs a
            decision here, not a silent guess).
    """
    if isinstance(dtype, pl.Datetime):
        if dtype.time_unit != "us":
            raise SchemaError(f"store keeps timestamps in microseconds, not {dtype}")
        return "TIMESTAMP" if dtype.time_zone is None else "TIMESTAMP WITH TIME ZONE"
    simple: dict[type[pl.DataType], str] = {
        pl.String: "VARCHAR", pl.Float64: "DOUBLE", pl.Float32: "FLOAT",
        pl.Boolean: "BOOLEAN", pl.Int64: "BIGINT", pl.Int32: "INTEGER", pl.Int16: "SMALLINT",
        pl.Int8: "TINYINT", pl.UInt64: "UBIGINT", pl.UInt32: "UINTEGER", pl.Date: "DATE",
    }
    for cls, name in simple.items():
        if isinstance(dtype, cls):
            return name
    raise SchemaError(f"no DuckDB type mapping for polars dtype {dtype}")


def _hint_type(hint: object) -> str:
    """DuckDB type of a DeviceInfo field from its annotation (Optional stripped)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise SchemaError(f"no DuckDB type mapping for annotation {hint}")
        hint = args[0]
    if typing.get_origin(hint) is tuple and typing.get_args(hint)[:1] == (str,):
        return "VARCHAR[]"
    mapping: dict[object, str] = {str: "VARCHAR", int: "BIGINT", bool: "BOOLEAN",
                                  float: "DOUBLE"}
    if hint in mapping:
        return mapping[hint]
    raise SchemaError(f"no DuckDB type mapping for annotation {hint}")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


#: (name, DuckDB type, NOT NULL) of the samples table, in model order.
SAMPLE_TABLE_COLUMNS: tuple[tuple[str, str, bool], ...] = tuple(
    (c.name, duckdb_type(c.dtype), c.required) for c in SAMPLE_COLUMNS)
#: (name, DuckDB type, NOT NULL) of the wait_events table (database waits, beside samples).
WAIT_TABLE_COLUMNS: tuple[tuple[str, str, bool], ...] = tuple(
    (c.name, duckdb_type(c.dtype), c.required) for c in WAIT_COLUMNS)
#: Table of the guarantee controller's decisions (one GuaranteeFrame row per interval).
GUARANTEE_TABLE = "guarantee_decisions"
#: (name, DuckDB type, NOT NULL) of the guarantee_decisions table, from the model.
GUARANTEE_TABLE_COLUMNS: tuple[tuple[str, str, bool], ...] = tuple(
    (c.name, duckdb_type(c.dtype), c.required) for c in GUARANTEE_COLUMNS)

_DEVICE_HINTS = typing.get_type_hints(DeviceInfo)
#: DeviceInfo fields stored in the devices table (``name`` is part of the key).
DEVICE_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(DeviceInfo)
                                       if f.name != "name")
#: (name, DuckDB type, NOT NULL) of the devices table.
DEVICE_TABLE_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("host", "VARCHAR", True),
    ("name", "VARCHAR", True),
    ("first_seen", "TIMESTAMP WITH TIME ZONE", True),
    ("changed", "TIMESTAMP WITH TIME ZONE", True),
    *((f, _hint_type(_DEVICE_HINTS[f]), f == "kind") for f in DEVICE_FIELDS),
)


# ---- bulk imports (BulkAppend) -------------------------------------------------------------
#: DuckDB's block size; a column being appended to keeps one block pinned.
_DUCKDB_BLOCK_BYTES = 256 << 10
#: ``memory_limit`` while a :class:`BulkAppend` transaction is open: two blocks per samples
#: column, at least 32 MiB. An insert pins about one block per column, and a transaction's
#: partial row group (122,880 rows x 63 columns x 8 bytes, all-null columns included) is about
#: 60 MB uncompressed: beyond the limit DuckDB's buffer manager spills it to its temporary
#: directory instead of holding it. Measured with benchmarks/import_speed.py's 100 MB iostat
#: log (689,106 rows in ~87k-row batches), one thread: a new store ran out of memory at 18 MB
#: and worked at 20 MB; a re-import into it (the DELETE of replace) ran out at 20 MB and worked
#: at 24 MB. Peak RSS of ``iogauge import --db`` (MiB, five runs each): 266-275 at 24 MB,
#: 271-279 at 32 MB, 281-287 at 40 MB, 290 at 48 MB -- the limit adds about one to one. The
#: spilling costs time: 5.4-6.1 s wall instead of 4.8 s without a limit (same run).
#: Three blocks a column (47.25 MiB for 63 columns) since 2026-11-24: at two (32 MiB) a
#: clean-clone CI run failed test_a_large_batch_with_replace_stays_within_the_memory_limit
#: ("could not allocate block of size 256.0 KiB (31.7 MiB/32.0 MiB used)" at the INSERT of a
#: slice after replace's DELETE) where two runs before it and five local runs passed: the
#: margin was a few hundred kB.
BULK_MEMORY_LIMIT_BYTES = max(32 << 20, 3 * len(SAMPLE_TABLE_COLUMNS) * _DUCKDB_BLOCK_BYTES)
#: ``memory_limit`` for the COMMIT of a :class:`BulkAppend` transaction. The commit moves the
#: transaction's last, partial row group into the table, and cannot spill it: under
#: a bulk limit of 32 MiB the commit of a new store failed ("could not
#: allocate block of size 256.0 KiB") whenever the import had fewer rows than one row group
#: (122,880) and more than some 30,000 (30,000 committed; a 5 or 10 MB iostat log, 34,353 and
#: 68,706 rows, did not). Measured with DuckDB 2.0 on the worst case, a row group's worth
#: (122,000 rows of the benchmark log, 244-character source and 44-46-character device names)
#: pending at the commit of a new store: it failed under 48 MiB and committed under 56 MiB;
#: this limit is more than twice that.
BULK_COMMIT_MEMORY_LIMIT_BYTES = 128 << 20  # (4 x the 32 MiB bulk limit it was set with)
#: DuckDB settings while a :class:`BulkAppend` transaction is open, restored when it ends.
#: Same log, peak RSS of a script inserting the importer's SampleFrames as they come: 624 MiB
#: with DuckDB's defaults; 316 MiB with
#: ``write_buffer_row_group_count = 1`` (DuckDB otherwise keeps five 122,880-row row groups of
#: the transaction in memory before writing them out: here nearly the whole import) and one
#: thread; then the memory limit above. One thread, because every inserting thread pins its
#: own blocks (32 MB was enough for one thread, not for two); the parser and DuckDB take turns
#: anyway (a batch is inserted before the next is parsed). ``preserve_insertion_order`` stays
#: on: :meth:`Store.read` returns rows in insertion order, and turning it off saved nothing
#: measurable.
BULK_SETTINGS: tuple[tuple[str, str], ...] = (
    ("memory_limit", f"'{BULK_MEMORY_LIMIT_BYTES}B'"),
    ("threads", "1"),
    ("write_buffer_row_group_count", "1"),
)
#: Largest slice of a batch that :meth:`BulkAppend.add` hands DuckDB in one statement (a row
#: group at DuckDB's default size): the DELETE of ``replace`` builds a hash table of the
#: slice's keys within the memory limit (3 million rows, as from a file read whole, ran out of
#: memory under it in one statement; 2 million did not). Slices cost little: DuckDB pushes each
#: slice's key range into its scan of the stored rows (row groups outside it are skipped).
BULK_SLICE_ROWS = 122_880


def _ddl(table: str, columns: Sequence[tuple[str, str, bool]]) -> str:
    body = ", ".join(f"{_q(n)} {t}{' NOT NULL' if req else ''}" for n, t, req in columns)
    return f"CREATE TABLE IF NOT EXISTS {table} ({body})"


def _replace_sql(batch: str, *, before_rowid: bool = False) -> str:
    """DELETE of the stored samples whose key (:data:`SAMPLE_KEY`) a row of ``batch`` has.

    ``before_rowid`` adds ``s.rowid <= ?``: only rows up to a row id -- those in the table
    when the transaction began, or those earlier files of it added (see
    :class:`BulkAppend`).
    """
    on = " AND ".join(f"s.{_q(k)} = b.{_q(k)}" for k in SAMPLE_KEY)
    guard = " AND s.rowid <= ?" if before_rowid else ""
    return (f"DELETE FROM {SAMPLES_TABLE} s USING (SELECT DISTINCT "
            f"{', '.join(_q(k) for k in SAMPLE_KEY)} FROM {batch}) b WHERE {on}{guard}")


_INSERT_BATCH_SQL = f"INSERT INTO {SAMPLES_TABLE} BY NAME SELECT * FROM {_BATCH_VIEW}"


# ---- paths and times -----------------------------------------------------------------------
def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/iogauge/iogauge.duckdb``, else ``~/.local/share/iogauge/iogauge.duckdb``.

    As the XDG base directory spec says, a relative ``XDG_DATA_HOME`` is ignored.
    """
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share"
    return root / "iogauge" / DB_FILENAME


def parse_time(value: TimeArg) -> datetime | None:
    """An aware UTC datetime from a datetime or ISO-8601 text; naive values are taken as UTC.

    Raises:
        ValueError: text that is not ISO-8601, with the accepted forms in the message.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO-8601 time; use e.g. 2024-05-01T02:10:00Z "
                             "or '2024-05-01 02:10' (no offset = UTC)") from None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


# ---- Arrow plumbing ------------------------------------------------------------------------
class _ArrowStream:
    """Exposes only ``__arrow_c_stream__``: of a polars frame (``df``) or of a capsule.

    DuckDB recognises a polars DataFrame by type and converts it through pyarrow (which
    iogauge does not depend on); an object that only speaks the Arrow PyCapsule interface is
    scanned directly. In the other direction polars accepts the capsule of a relation.

    A writable store registers one instance for its whole life and points ``df`` at each
    batch: registering per batch costs a third of the insert of a 5 s batch.
    """

    __slots__ = ("_capsule", "df")

    def __init__(self, df: pl.DataFrame | None = None, capsule: object = None) -> None:
        self.df = df
        self._capsule = capsule

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        if self.df is not None:
            return self.df.__arrow_c_stream__(requested_schema)
        capsule, self._capsule = self._capsule, None
        if capsule is None:
            raise RuntimeError("no batch to read (an Arrow capsule can be read once)")
        return capsule


# ---- errors --------------------------------------------------------------------------------
_LOCK_RE = re.compile(r"Conflicting lock is held in (?P<prog>.*?) \(PID (?P<pid>\d+)\)")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return re.sub(r"^(IO|Invalid Input|Catalog|Serialization) Error: ", "", text)


def _open_error(path: Path, exc: BaseException, *, read_only: bool) -> StoreError:
    """A StoreError naming the path and the reason DuckDB refused to open it."""
    msg = str(exc)
    if "Could not set lock" in msg or "Conflicting lock" in msg:
        m = _LOCK_RE.search(msg)
        holder = f" (PID {m['pid']}, {m['prog']})" if m else ""
        return StoreBusyError(
            f"{path}: the database is locked by another process{holder}. DuckDB lets one "
            "process open a database file for writing and no other process open it "
            "meanwhile; `iogauge record` and `guarantee` hold it only while starting, "
            "`iogauge import` for the whole import: wait for it or use another --db.")
    if "not a valid DuckDB database" in msg:
        return StoreError(f"{path}: not a DuckDB database (the file exists but does not start "
                          "with a DuckDB header); check --db")
    if "Is a directory" in msg:
        return StoreError(f"{path}: is a directory; --db takes a file, e.g. "
                          f"{path / DB_FILENAME}")
    if "Permission denied" in msg:
        return StoreError(f"{path}: permission denied ({'reading' if read_only else 'writing'}"
                          " the database or its .wal file)")
    if "version" in msg.lower() and ("newer" in msg.lower() or "storage" in msg.lower()):
        return StoreError(f"{path}: written by a different DuckDB storage version than the "
                          f"installed duckdb {duckdb.__version__}: {_first_line(exc)}")
    return StoreError(f"{path}: cannot open the database: {_first_line(exc)}")


# ---- the store -----------------------------------------------------------------------------
class Store:
    """An open iogauge DuckDB store. Create with :meth:`Store.open`; use as a context manager.

    One process may hold the DuckDB file open for writing (an import); DuckDB's file lock keeps
    any other process out meanwhile, :meth:`open` retries for a while and then says so by
    name. Live writers (``record``, ``guarantee``) do not hold it: they append segments
    (:class:`~iogauge.store.live.LiveStore`), which every read here includes.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, *, read_only: bool) -> None:
        self._con: duckdb.DuckDBPyConnection | None = con
        self.path = path
        self.read_only = read_only
        self._sample_present: set[str] = set()
        self._device_present: set[str] = set()
        self._bulk: BulkAppend | None = None
        # Registered once with the model's (empty) frame: DuckDB reads the schema now.
        self._idle = SampleFrame.empty().df
        self._batch = _ArrowStream(self._idle)
        if not read_only:
            con.register(_BATCH_VIEW, self._batch)

    # ---- opening --------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path | None = None, *, read_only: bool = False,
             threads: int | None = None) -> Store:
        """Open (creating if needed) the store at ``path`` (default: :func:`default_db_path`).

        Args:
            path: database file; parent directories are created when writing.
            read_only: open without write access (never creates, never migrates). A file
                that another process holds for writing (an import; a live writer for the
                moment it starts) is retried for :data:`READ_RETRY_S` seconds.
            threads: DuckDB worker threads (None: DuckDB's default, one per core).

        Raises:
            StoreError: naming the path and why — missing (read-only), a directory, not a
                DuckDB file, locked by another process (with its PID), permissions, or a
                store written by a newer iogauge.
        """
        p = (default_db_path() if path is None else Path(path)).expanduser()
        if p.is_dir():
            raise StoreError(f"{p}: is a directory; --db takes a file, e.g. {p / DB_FILENAME}")
        if not p.exists():
            if read_only:
                raise StoreError(f"{p}: no such database; record into it first "
                                 f"(`iogauge record --db {p}`)")
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{p}: cannot create directory {p.parent}: "
                                 f"{exc.strerror or exc}") from exc
            _create_atomically(p, threads)
        con = _connect_retrying(p, read_only=read_only, threads=threads)
        try:
            store = cls(con, p, read_only=read_only)
        except duckdb.Error as exc:
            con.close()
            raise StoreError(f"{p}: cannot prepare the connection: {_first_line(exc)}") from exc
        try:
            store._prepare_schema()
        except BaseException:
            store.close()
            raise
        return store

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._con is None else ("read-only" if self.read_only else "open")
        return f"Store({str(self.path)!r}, {state})"

    def close(self) -> None:
        """Checkpoint (when writable) and release the file lock. Idempotent."""
        con, self._con = self._con, None
        if con is None:
            return
        try:
            con.close()
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: closing the database failed: "
                             f"{_first_line(exc)}") from exc

    @property
    def closed(self) -> bool:
        return self._con is None

    # ---- writing --------------------------------------------------------------------------
    def append(self, frame: SampleFrame, *, replace: bool = False) -> int:
        """Insert every row of ``frame`` in one transaction (all or nothing); returns rows.

        The frame is handed to DuckDB as one Arrow stream; nothing is inserted row by row.
        With ``replace``, stored rows with the same (source, host, device, ts) are deleted in
        the same transaction first, so importing a file twice does not double its data.
        """
        if not isinstance(frame, SampleFrame):
            raise TypeError(f"Store.append takes a SampleFrame, not {type(frame).__name__}")
        n = len(frame)
        if n == 0:
            return 0
        con = self._writable()
        self._batch.df = frame.df  # exactly the model's columns, which the table has
        try:
            con.execute("BEGIN TRANSACTION")
            if replace:
                con.execute(_replace_sql(_BATCH_VIEW))
            con.execute(_INSERT_BATCH_SQL)
            con.execute("COMMIT")
        except duckdb.Error as exc:
            _rollback(con)
            raise StoreError(f"{self.path}: cannot append {n} rows: {_first_line(exc)}") from exc
        finally:
            self._batch.df = self._idle
        return n

    def bulk_append(self, *, replace: bool = False) -> BulkAppend:
        """A transaction that takes sample rows batch by batch (see :class:`BulkAppend`).

        For an import too large to hold: each :meth:`BulkAppend.add` inserts a batch at
        once, nothing is visible to other transactions before :meth:`BulkAppend.commit`,
        and leaving the ``with`` block without committing rolls every batch back.

        Raises:
            StoreError: the store is read-only or closed, or another bulk append is open.
        """
        self._writable()
        self._bulk = BulkAppend(self, replace=replace)
        return self._bulk

    def append_store(self, other: str | Path, *, replace: bool = False) -> int:
        """Copy every sample row (and wait event) of the store file ``other`` into this one,
        in one transaction; returns the sample rows copied.

        With ``replace``, rows here with the key of a copied row are deleted first, as
        :meth:`append` does. DuckDB reads ``other`` (attached read-only) and writes here
        directly: the rows never pass through Python.
        """
        con = self._writable()
        src = str(Path(other)).replace("'", "''")
        alias = "_iogauge_src"
        try:
            con.execute(f"ATTACH '{src}' AS {alias} (READ_ONLY)")
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot read the store {other}: "
                             f"{_first_line(exc)}") from exc
        try:
            tables = {r[0] for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_catalog = ? "
                "AND table_schema = 'main'", [alias]).fetchall()}
            if SAMPLES_TABLE not in tables:
                raise StoreError(f"{other}: not an iogauge store (no {SAMPLES_TABLE} table)")
            samples = f"{alias}.main.{SAMPLES_TABLE}"
            rows = int(con.execute(f"SELECT count(*) FROM {samples}").fetchall()[0][0])
            if WAITS_TABLE in tables:
                con.execute(_ddl(WAITS_TABLE, WAIT_TABLE_COLUMNS))
            con.execute("BEGIN TRANSACTION")
            if replace:
                con.execute(_replace_sql(samples))
            con.execute(f"INSERT INTO {SAMPLES_TABLE} BY NAME SELECT * FROM {samples}")
            if WAITS_TABLE in tables:
                for sql in _replace_waits_sql(f"{alias}.main.{WAITS_TABLE}"):
                    con.execute(sql)
            con.execute("COMMIT")
        except duckdb.Error as exc:
            _rollback(con)
            raise StoreError(f"{self.path}: cannot copy the rows of {other}: "
                             f"{_first_line(exc)}") from exc
        finally:
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DETACH {alias}")
        return rows

    def append_waits(self, frame: WaitEventFrame) -> int:
        """Store database wait events, replacing rows with the same key; returns rows.

        The ``wait_events`` table is created on first use from the model's columns.
        """
        n = len(frame)
        if n == 0:
            return 0
        con = self._writable()
        stream = _ArrowStream(frame.df)
        try:
            con.execute(_ddl(WAITS_TABLE, WAIT_TABLE_COLUMNS))
            con.register(_WAITS_VIEW, stream)
            con.execute("BEGIN TRANSACTION")
            for sql in _replace_waits_sql(_WAITS_VIEW):
                con.execute(sql)
            con.execute("COMMIT")
        except duckdb.Error as exc:
            _rollback(con)
            raise StoreError(f"{self.path}: cannot append {n} wait events: "
                             f"{_first_line(exc)}") from exc
        finally:
            with contextlib.suppress(duckdb.Error):
                con.unregister(_WAITS_VIEW)
        return n

    def read_waits(self) -> WaitEventFrame:
        """Every stored wait event (empty when none was imported)."""
        con = self._connection()
        try:
            exists = con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'main' "
                "AND table_catalog = current_database() AND table_name = ?", [WAITS_TABLE]
                ).fetchall()[0][0]
            if not exists:
                return WaitEventFrame.empty()
            cols = ", ".join(_q(n) for n, _t, _r in WAIT_TABLE_COLUMNS)
            capsule = con.sql(f"SELECT {cols} FROM {WAITS_TABLE}").__arrow_c_stream__()
            df = pl.DataFrame(_ArrowStream(capsule=capsule))
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot read wait events: {_first_line(exc)}") from exc
        if df.width == 0:
            return WaitEventFrame.empty()
        return WaitEventFrame(df.with_columns(pl.col("ts").dt.convert_time_zone("UTC")))

    def append_guarantee(self, frame: GuaranteeFrame) -> int:
        """Store guarantee-controller decisions in one transaction; returns rows.

        The ``guarantee_decisions`` table is created on first use from the model's columns
        (and gains any column the model added since, like the samples table).
        """
        n = len(frame)
        if n == 0:
            return 0
        con = self._writable()
        stream = _ArrowStream(frame.df)
        view = "_iogauge_guarantee_batch"
        try:
            con.execute(_ddl(GUARANTEE_TABLE, GUARANTEE_TABLE_COLUMNS))
            self._reconcile(GUARANTEE_TABLE, GUARANTEE_TABLE_COLUMNS)
            con.register(view, stream)
            con.execute("BEGIN TRANSACTION")
            con.execute(f"INSERT INTO {GUARANTEE_TABLE} BY NAME SELECT * FROM {view}")
            con.execute("COMMIT")
        except duckdb.Error as exc:
            _rollback(con)
            raise StoreError(f"{self.path}: cannot append {n} guarantee decisions: "
                             f"{_first_line(exc)}") from exc
        finally:
            with contextlib.suppress(duckdb.Error):
                con.unregister(view)
        return n

    def read_guarantee(self, run_id: str | None = None) -> GuaranteeFrame:
        """Stored guarantee decisions (of one run, or all), in time order; empty if none."""
        con = self._connection()
        try:
            exists = con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'main' "
                "AND table_catalog = current_database() AND table_name = ?",
                [GUARANTEE_TABLE]).fetchall()[0][0]
            source = self._with_segments(
                GUARANTEE_TABLE, f"SELECT * FROM {GUARANTEE_TABLE}" if exists else None)
            if source is None:
                return GuaranteeFrame.empty()
            cols = ", ".join(_q(n) for n, _t, _r in GUARANTEE_TABLE_COLUMNS)
            where, params = ("", []) if run_id is None else (" WHERE run_id = ?", [run_id])
            capsule = con.sql(f"SELECT {cols} FROM {source} AS g{where} ORDER BY ts",
                              params=params).__arrow_c_stream__()
            df = pl.DataFrame(_ArrowStream(capsule=capsule))
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot read guarantee decisions: "
                             f"{_first_line(exc)}") from exc
        if df.width == 0:
            return GuaranteeFrame.empty()
        return GuaranteeFrame(df.with_columns(pl.col("ts").dt.convert_time_zone("UTC")))

    def append_devices(self, host: str, devices: Iterable[DeviceInfo] | Mapping[str, DeviceInfo],
                       *, seen: TimeArg = None) -> int:
        """Upsert device metadata of ``host`` in one transaction; returns rows inserted/changed.

        A device not yet known is inserted with ``first_seen = changed = seen`` (default: now);
        a known one whose facts differ is updated in place (``first_seen`` kept, ``changed`` =
        ``seen``); an unchanged one is left alone, so calling this often is cheap.
        """
        infos = list(devices.values() if isinstance(devices, Mapping) else devices)
        if not infos:
            return 0
        con = self._writable()
        when = parse_time(seen) or datetime.now(UTC)
        fields = ", ".join(_q(f) for f in DEVICE_FIELDS)
        try:
            rows = con.execute(f"SELECT name, {fields} FROM {DEVICES_TABLE} WHERE host = ?",
                               [host]).fetchall()
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot read devices: {_first_line(exc)}") from exc
        known = {r[0]: tuple(r[1:]) for r in rows}
        inserts: list[list[object]] = []
        updates: list[list[object]] = []
        for info in infos:
            d = info.to_dict()
            values = tuple(d[f] for f in DEVICE_FIELDS)
            old = known.get(info.name)
            if old is None:
                inserts.append([host, info.name, when, when, *values])
            elif _normalise(old) != _normalise(values):
                updates.append([when, *values, host, info.name])
            known[info.name] = values
        if not inserts and not updates:
            return 0
        ins_cols = ", ".join(_q(n) for n, _t, _r in DEVICE_TABLE_COLUMNS)
        marks = ", ".join("?" for _ in DEVICE_TABLE_COLUMNS)
        sets = ", ".join(f"{_q(f)} = ?" for f in DEVICE_FIELDS)
        try:
            con.execute("BEGIN TRANSACTION")
            if inserts:
                con.executemany(f"INSERT INTO {DEVICES_TABLE} ({ins_cols}) VALUES ({marks})",
                                inserts)
            if updates:
                con.executemany(f"UPDATE {DEVICES_TABLE} SET changed = ?, {sets} "
                                "WHERE host = ? AND name = ?", updates)
            con.execute("COMMIT")
        except duckdb.Error as exc:
            _rollback(con)
            raise StoreError(f"{self.path}: cannot write device metadata: "
                             f"{_first_line(exc)}") from exc
        return len(inserts) + len(updates)

    # ---- reading --------------------------------------------------------------------------
    def read(self, device: str | Sequence[str] | None = None, start: TimeArg = None,
             end: TimeArg = None, host: str | None = None) -> SampleFrame:
        """Rows matching every given filter, in insertion order, as a validated SampleFrame.

        Args:
            device: one kernel name or several.
            start, end: inclusive bounds on ``ts`` (the interval end); datetimes or ISO-8601
                text, naive = UTC.
            host: only this host.
        """
        con = self._connection()
        sql, params = self._select(device, start, end, host)
        try:
            capsule = con.sql(sql, params=params).__arrow_c_stream__()
            df = pl.DataFrame(_ArrowStream(capsule=capsule))
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot read samples: {_first_line(exc)}") from exc
        if df.width == 0:
            return SampleFrame.empty()
        ts = df.schema["ts"]
        if isinstance(ts, pl.Datetime) and ts.time_zone not in (None, "UTC"):
            df = df.with_columns(pl.col("ts").dt.convert_time_zone("UTC"))
        return SampleFrame(df)

    def read_devices(self, host: str | None = None) -> pl.DataFrame:
        """The devices table (optionally one host's rows) as a polars DataFrame."""
        con = self._connection()
        cols = ", ".join(_q(n) if n in self._device_present else
                         f"CAST(NULL AS {t}) AS {_q(n)}" for n, t, _r in DEVICE_TABLE_COLUMNS)
        where, params = (" WHERE host = ?", [host]) if host is not None else ("", [])
        names = ", ".join(_q(n) for n, _t, _r in DEVICE_TABLE_COLUMNS)
        source = self._with_segments(
            DEVICES_TABLE, f"SELECT {cols} FROM {DEVICES_TABLE}" if self._device_present else None)
        # A live writer appends a device's whole row again when it changes: the last wins.
        sql = (f"SELECT {names} FROM {source} AS d{where} QUALIFY row_number() OVER (PARTITION "
               "BY host, name ORDER BY changed DESC) = 1 ORDER BY host, name"
               if source is not None else f"SELECT {cols} LIMIT 0")
        try:
            capsule = con.sql(sql, params=params if source is not None else []
                              ).__arrow_c_stream__()
            return pl.DataFrame(_ArrowStream(capsule=capsule))
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot read devices: {_first_line(exc)}") from exc

    def count(self) -> int:
        """Number of sample rows."""
        row = self._scalar(f"SELECT count(*) FROM ({self._select(None, None, None, None)[0]})")
        return int(str(row)) if row is not None else 0

    def schema_version(self) -> int:
        """The store schema version recorded in ``meta``."""
        row = self._scalar(f"SELECT value FROM {META_TABLE} WHERE key = 'schema_version'")
        return int(str(row)) if row is not None else 0

    def export_parquet(self, path: str | Path, *, device: str | Sequence[str] | None = None,
                       start: TimeArg = None, end: TimeArg = None,
                       host: str | None = None) -> int:
        """Write matching rows to a Parquet file (zstd) that reads back as a SampleFrame.

        DuckDB streams the rows to a temporary file next to ``path``, which then replaces
        ``path`` atomically: a failed export never leaves a truncated file. Returns the rows
        written.
        """
        con = self._connection()
        out = Path(path).expanduser()
        if out.is_dir():
            raise StoreError(f"{out}: is a directory; --parquet takes a file name")
        if not out.parent.is_dir():
            raise StoreError(f"{out}: directory {out.parent} does not exist")
        tmp = out.with_name(f".{out.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        sql, params = self._select(device, start, end, host)
        target = str(tmp).replace("'", "''")
        try:
            rows = con.execute(f"COPY ({sql}) TO '{target}' (FORMAT parquet, COMPRESSION zstd)",
                               params).fetchall()
            tmp.replace(out)
        except (duckdb.Error, OSError) as exc:
            tmp.unlink(missing_ok=True)
            raise StoreError(f"{out}: cannot export from {self.path}: "
                             f"{_first_line(exc)}") from exc
        return int(rows[0][0]) if rows else 0

    # ---- internals ------------------------------------------------------------------------
    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise StoreError(f"{self.path}: the store is closed")
        return self._con

    def _writable(self, *, bulk: bool = False) -> duckdb.DuckDBPyConnection:
        """The connection, for a write; ``bulk``: the write of the open :class:`BulkAppend`.

        Any other write waits for the bulk append to end: its BEGIN would fail inside the
        bulk transaction, and the ROLLBACK that follows would take the bulk's rows with it.
        """
        con = self._connection()
        if self.read_only:
            raise StoreError(f"{self.path}: opened read-only")
        if not bulk and self._bulk is not None and self._bulk.active:
            raise StoreError(f"{self.path}: a bulk append is already in progress; commit or "
                             "roll it back first")
        return con

    def _scalar(self, sql: str) -> object:
        try:
            rows = self._connection().execute(sql).fetchall()
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: query failed: {_first_line(exc)}") from exc
        return rows[0][0] if rows else None

    def _select(self, device: str | Sequence[str] | None, start: TimeArg, end: TimeArg,
                host: str | None) -> tuple[str, list[object]]:
        cols = ", ".join(_q(n) if n in self._sample_present else
                         f"CAST(NULL AS {t}) AS {_q(n)}" for n, t, _r in SAMPLE_TABLE_COLUMNS)
        where: list[str] = []
        params: list[object] = []
        if device is not None:
            names = [device] if isinstance(device, str) else list(device)
            where.append(f"device IN ({', '.join('?' for _ in names)})" if names else "false")
            params.extend(names)
        if host is not None:
            where.append("host = ?")
            params.append(host)
        lo, hi = parse_time(start), parse_time(end)
        if lo is not None:
            where.append("ts >= ?")
            params.append(lo)
        if hi is not None:
            where.append("ts <= ?")
            params.append(hi)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        columns = ", ".join(_q(n) for n, _t, _r in SAMPLE_TABLE_COLUMNS)
        source = self._with_segments(SAMPLES_TABLE, f"SELECT {cols} FROM {SAMPLES_TABLE}")
        if source is None:  # not reached: every store has a samples table
            raise StoreError(f"{self.path}: no {SAMPLES_TABLE} table")
        return f"SELECT {columns} FROM {source} AS s{clause}", params

    def _with_segments(self, table: str, table_sql: str | None) -> str | None:
        """A parenthesised query of ``table``'s rows (``table_sql``; None: no such table)
        followed by those of its live segments (:mod:`iogauge.store.segments`), listed now:
        a reader sees everything up to the writer's last flush."""
        files = [str(s.path) for s in live_segments(live_dir(self.path), table)]
        parts = [] if table_sql is None else [table_sql]
        if files:
            names = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
            parts.append(f"SELECT * FROM read_parquet([{names}], union_by_name = true)")
        if not parts:
            return None
        return "(" + " UNION ALL BY NAME ".join(parts) + ")"

    def _prepare_schema(self) -> None:
        """Check (and, when writable, create or extend) the tables against the model."""
        con = self._connection()
        try:
            tables = {r[0] for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
                "AND table_catalog = current_database() AND table_type = 'BASE TABLE'"
                ).fetchall()}
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot read the catalog: {_first_line(exc)}") from exc
        ours = {SAMPLES_TABLE, DEVICES_TABLE, META_TABLE}
        if not tables:
            if self.read_only:
                raise StoreError(f"{self.path}: an empty DuckDB database, not an iogauge store")
            _create_schema(con)
            tables = set(ours)
        elif META_TABLE not in tables or SAMPLES_TABLE not in tables:
            raise StoreError(f"{self.path}: a DuckDB database but not an iogauge store (tables: "
                             f"{', '.join(sorted(tables))}); use another --db")
        version = self.schema_version()
        if version > STORE_SCHEMA_VERSION:
            raise StoreError(f"{self.path}: written by a newer iogauge (store schema {version}; "
                             f"this iogauge {__version__} knows up to {STORE_SCHEMA_VERSION}); "
                             "upgrade iogauge")
        if DEVICES_TABLE not in tables and not self.read_only:
            con.execute(_ddl(DEVICES_TABLE, DEVICE_TABLE_COLUMNS))
            tables.add(DEVICES_TABLE)
        self._sample_present = self._reconcile(SAMPLES_TABLE, SAMPLE_TABLE_COLUMNS)
        self._device_present = (self._reconcile(DEVICES_TABLE, DEVICE_TABLE_COLUMNS)
                                if DEVICES_TABLE in tables else set())

    def _reconcile(self, table: str, model: Sequence[tuple[str, str, bool]]) -> set[str]:
        """Columns of ``table`` that the model knows; adds missing ones when writable."""
        con = self._connection()
        stored = {r[0]: r[1] for r in con.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema "
            "= 'main' AND table_catalog = current_database() AND table_name = ?", [table]
            ).fetchall()}
        present: set[str] = set()
        for name, typ, required in model:
            have = stored.get(name)
            if have is None:
                if self.read_only:
                    continue
                if required:
                    raise StoreError(f"{self.path}: table {table} lacks required column {name!r} "
                                     "and existing rows cannot be given a value; export and "
                                     "re-import into a new store")
                try:
                    con.execute(f"ALTER TABLE {table} ADD COLUMN {_q(name)} {typ}")
                except duckdb.Error as exc:
                    raise StoreError(f"{self.path}: cannot add column {name!r} to {table}: "
                                     f"{_first_line(exc)}") from exc
            elif have != typ:
                raise StoreError(f"{self.path}: column {table}.{name} is {have} in the file but "
                                 f"{typ} in this iogauge's model")
            present.add(name)
        return present


# ---- streaming imports ---------------------------------------------------------------------
class BulkAppend:
    """Sample rows added batch by batch in ONE transaction: :meth:`Store.bulk_append`.

    :meth:`add` hands a batch to DuckDB at once (as Arrow, like :meth:`Store.append`), so
    the caller need not hold the rows of the whole transaction: DuckDB writes each full row
    group to the database file before the commit and, under :data:`BULK_SETTINGS`, spills the
    rest past a small memory limit. :meth:`commit` makes every batch visible at once; leaving
    the ``with`` block (or calling :meth:`rollback`) without committing, or an :meth:`add`
    that fails, rolls every batch back: the store is exactly as before.

    ``replace``: stored rows with the (source, host, device, ts) of an added row are deleted,
    in the same transaction -- the rows that were in the table when the transaction began
    and, once :meth:`next_source` has said that the rows now come from another file, the
    rows the earlier files added; never rows the same file added before. So an import of
    several files stores what importing them one after the other would (the same data in
    two files -- a log and its compressed copy, overlapping rotations -- is stored once, the
    later file's), and rows that repeat a key within one file are all kept, as they are
    within one append. (DuckDB numbers the rows a transaction appends after every row stored
    before it -- from 2**55 while uncommitted -- so "was there before" is ``rowid <=
    max(rowid)`` taken at the start, and "an earlier file's" a row id between that and
    ``max(rowid)`` taken when the file began.)

    Attributes:
        rows: rows added so far; batches: non-empty batches added.
        replaced_earlier: rows of earlier files of this transaction deleted because a later
            file had their key (not counted out of ``rows``).
    """

    def __init__(self, store: Store, *, replace: bool) -> None:
        self._store = store
        self.replace = replace
        self.rows = 0
        self.batches = 0
        self._state = "new"  # new -> open -> done
        self._stored_max_rowid: int | None = None
        #: Highest row id an earlier file of this transaction added (None: no such rows).
        self._earlier_max_rowid: int | None = None
        self.replaced_earlier = 0
        self._threads: int | None = None

    @property
    def active(self) -> bool:
        """True until committed or rolled back."""
        return self._state != "done"

    def __enter__(self) -> BulkAppend:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._state != "done":
            self.rollback()

    def add(self, frame: SampleFrame) -> int:
        """Insert the rows of ``frame`` into the open transaction; returns them.

        Raises:
            StoreError: DuckDB refused the batch; the whole transaction is rolled back.
        """
        if not isinstance(frame, SampleFrame):
            raise TypeError(f"BulkAppend.add takes a SampleFrame, not {type(frame).__name__}")
        store = self._store
        if self._state == "done":
            raise StoreError(f"{store.path}: this bulk append has already ended")
        n = len(frame)
        if n == 0:
            return 0
        con = store._writable(bulk=True)
        if self._state == "new":
            self._begin(con)
        df = frame.df  # exactly the model's columns, which the table has
        try:
            for offset in range(0, n, BULK_SLICE_ROWS):
                store._batch.df = df if n <= BULK_SLICE_ROWS else df.slice(offset,
                                                                             BULK_SLICE_ROWS)
                if self._stored_max_rowid is not None:
                    con.execute(_replace_sql(_BATCH_VIEW, before_rowid=True),
                                [self._stored_max_rowid])
                if self._earlier_max_rowid is not None:
                    # The stored rows with these keys went just above, so what this takes
                    # is earlier files' rows only.
                    gone = con.execute(_replace_sql(_BATCH_VIEW, before_rowid=True),
                                       [self._earlier_max_rowid]).fetchall()
                    self.replaced_earlier += int(gone[0][0]) if gone else 0
                con.execute(_INSERT_BATCH_SQL)
        except duckdb.Error as exc:
            self._end(con, "ROLLBACK")
            raise StoreError(f"{store.path}: cannot append {n} rows (batch {self.batches + 1};"
                             f" the {self.rows:,} rows of the batches before it are rolled "
                             f"back too): {_first_line(exc)}") from exc
        finally:
            store._batch.df = store._idle
        self.rows += n
        self.batches += 1
        return n

    def next_source(self) -> None:
        """The rows added from now on come from another file: with ``replace`` they also
        replace the rows earlier files of this transaction added with the same key.

        Raises:
            StoreError: the query of the rows added so far failed (the transaction is rolled
                back).
        """
        if not self.replace or self._state != "open" or self.rows == 0:
            return
        con = self._store._writable(bulk=True)
        try:
            row = con.execute(f"SELECT max(rowid) FROM {SAMPLES_TABLE}").fetchall()
        except duckdb.Error as exc:
            self._end(con, "ROLLBACK")
            raise StoreError(f"{self._store.path}: cannot read the import's rows (the "
                             f"{self.rows:,} rows added are rolled back): "
                             f"{_first_line(exc)}") from exc
        top = row[0][0] if row else None
        self._earlier_max_rowid = None if top is None else int(top)

    def commit(self) -> int:
        """Make every added row visible at once; returns the rows added.

        Raises:
            StoreError: the commit failed (nothing of this transaction is stored).
        """
        store = self._store
        if self._state == "done":
            raise StoreError(f"{store.path}: this bulk append has already ended")
        if self._state == "new":
            self._state = "done"
            return 0
        con = store._connection()
        try:
            self._end(con, "COMMIT")
        except duckdb.Error as exc:
            self._end(con, "ROLLBACK")
            raise StoreError(f"{store.path}: cannot commit {self.rows:,} rows: "
                             f"{_first_line(exc)}") from exc
        return self.rows

    def rollback(self) -> None:
        """Undo every batch added (nothing was visible yet). Idempotent."""
        if self._state == "open" and self._store._con is not None:
            self._end(self._store._con, "ROLLBACK")
        self._state = "done"

    def _begin(self, con: duckdb.DuckDBPyConnection) -> None:
        store = self._store
        try:
            self._threads = int(str(con.execute(
                "SELECT current_setting('threads')").fetchall()[0][0]))
            for name, value in BULK_SETTINGS:
                con.execute(f"SET {name} = {value}")
            con.execute("BEGIN TRANSACTION")
            self._state = "open"
            if self.replace:
                row = con.execute(f"SELECT max(rowid) FROM {SAMPLES_TABLE}").fetchall()
                top = row[0][0] if row else None
                # None: the table was empty, no stored row can share a key.
                self._stored_max_rowid = None if top is None else int(top)
        except duckdb.Error as exc:
            self._end(con, "ROLLBACK")
            raise StoreError(f"{store.path}: cannot start the import transaction: "
                             f"{_first_line(exc)}") from exc

    def _end(self, con: duckdb.DuckDBPyConnection, how: str) -> None:
        """COMMIT or ROLLBACK, then put the connection's settings back (even if it failed).

        A COMMIT that raises leaves the state open, so that the caller rolls back.
        """
        try:
            if how == "COMMIT":
                con.execute(f"SET memory_limit = '{BULK_COMMIT_MEMORY_LIMIT_BYTES}B'")
                con.execute("COMMIT")
            else:
                _rollback(con)
            self._state = "done"
        finally:
            if self._state == "done":
                self._restore(con)

    def _restore(self, con: duckdb.DuckDBPyConnection) -> None:
        # The store never sets these otherwise: back to DuckDB's defaults, and to the thread
        # count the store was opened with.
        with contextlib.suppress(duckdb.Error):
            for name, _value in BULK_SETTINGS:
                if name == "threads":
                    if self._threads is not None:
                        con.execute(f"SET threads = {self._threads}")
                else:
                    con.execute(f"RESET {name}")


class StoreImport:
    """An import into the store file ``path`` that either stores every row or nothing.

    Rows arrive batch by batch (:meth:`add`) into one :class:`BulkAppend` transaction with
    ``replace``. Into an existing store that is all. A store that does not exist yet is
    built under a temporary name in the same directory and linked to ``path`` only after
    :meth:`commit`: an import that fails (a bad file, an interrupt) leaves no file at
    ``path``, as when nothing at all was written. Should another process create ``path``
    meanwhile, the committed rows are copied into that store (:meth:`Store.append_store`,
    same replace rule) instead.

    Use as a context manager: leaving it without :meth:`commit` rolls back and removes the
    temporary store.

    Attributes:
        path: the target store file (``--db``, default :func:`default_db_path`).
    """

    def __init__(self, path: str | Path | None = None, *, replace: bool = True) -> None:
        self.path = (default_db_path() if path is None else Path(path)).expanduser()
        self.replace = replace
        self._tmp: Path | None = None
        #: Directories above a new store that did not exist (created for it, removed with it).
        self._made_dirs: list[Path] = []
        self._store: Store | None = None
        self._bulk: BulkAppend | None = None

    @property
    def rows(self) -> int:
        """Rows added so far."""
        return self._bulk.rows if self._bulk is not None else 0

    @property
    def replaced_earlier(self) -> int:
        """Rows of earlier files of this import that a later file's rows replaced."""
        return self._bulk.replaced_earlier if self._bulk is not None else 0

    def __enter__(self) -> StoreImport:
        if not self.path.exists() and not self.path.is_symlink():
            self._tmp = self.path.with_name(
                f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.import")
            self._made_dirs = [d for d in self.path.parents if not d.exists()]
        try:
            self._store = Store.open(self._tmp or self.path)
        except StoreError as exc:
            self._discard()
            if self._tmp is None:
                raise
            # Name the file the user asked for, not the temporary one.
            raise StoreError(str(exc).replace(str(self._tmp), str(self.path))) from exc
        self._bulk = self._store.bulk_append(replace=self.replace)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._bulk is not None:
                self._bulk.rollback()
            if self._store is not None:
                self._store.close()
        finally:
            self._discard()

    def add(self, frame: SampleFrame) -> int:
        """Insert one batch (see :meth:`BulkAppend.add`)."""
        if self._bulk is None:
            raise StoreError(f"{self.path}: the import is not open")
        return self._bulk.add(frame)

    def next_source(self) -> None:
        """The next batches come from another file (see :meth:`BulkAppend.next_source`)."""
        if self._bulk is None:
            raise StoreError(f"{self.path}: the import is not open")
        self._bulk.next_source()

    def commit(self, waits: WaitEventFrame | None = None) -> int:
        """Commit the rows, store ``waits`` (replacing same-key rows, as
        :meth:`Store.append_waits`), close, and put a new store in place. Returns the rows
        stored: those added less those a later file of the import replaced.
        """
        if self._bulk is None or self._store is None:
            raise StoreError(f"{self.path}: the import is not open")
        rows = self._bulk.commit() - self._bulk.replaced_earlier
        if waits is not None and len(waits):
            self._store.append_waits(waits)
        self._store.close()
        if self._tmp is not None:
            self._publish(self._tmp)
        return rows

    def _publish(self, tmp: Path) -> None:
        try:
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                self._merge(tmp)
            except OSError:
                # No hard links on this filesystem: rename, unless someone created it meanwhile.
                if self.path.exists():
                    self._merge(tmp)
                else:
                    tmp.replace(self.path)
            fsync_dir(self.path.parent)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot put the new store in place: "
                             f"{exc.strerror or exc}") from exc

    def _merge(self, tmp: Path) -> None:
        with Store.open(self.path) as target:
            target.append_store(tmp, replace=self.replace)

    def _discard(self) -> None:
        if self._tmp is None:
            return
        for p in (self._tmp, self._tmp.with_name(self._tmp.name + ".wal")):
            p.unlink(missing_ok=True)
        if not self.path.exists():
            for d in self._made_dirs:  # deepest first; stops at one that is not empty
                try:
                    d.rmdir()
                except OSError:
                    break


def latest_waits(frames: Sequence[WaitEventFrame]) -> tuple[WaitEventFrame, list[int]]:
    """The wait events of several files as one frame, as storing them one file after the
    other leaves them: a key (:data:`WAIT_KEY`, nulls equal) that a later file has too is
    kept from the last such file only; within one file every row is kept.

    Returns the frame and, per file, the rows of earlier files that its rows replaced.
    """
    if sum(1 for f in frames if len(f)) < 2:
        return WaitEventFrame.concat([f for f in frames if len(f)]), [0] * len(frames)
    src, last = "_iogauge_file", "_iogauge_last"
    df = pl.concat([f.df.with_columns(pl.lit(i, pl.UInt32).alias(src))
                    for i, f in enumerate(frames) if len(f)], how="vertical")
    # A window over the key groups nulls together, as IS NOT DISTINCT FROM does in SQL.
    df = df.with_columns(pl.col(src).max().over(list(WAIT_KEY)).alias(last))
    latest = pl.col(src) == pl.col(last)
    counts = [0] * len(frames)
    for i, n in df.filter(~latest).get_column(last).value_counts().iter_rows():
        counts[int(i)] = int(n)
    return WaitEventFrame(df.filter(latest).drop(src, last)), counts


# ---- module helpers ------------------------------------------------------------------------
def _replace_waits_sql(rows: str) -> tuple[str, str]:
    """SQL that replaces stored wait events by those of the table or view ``rows``: delete
    the stored rows with the same key (NULL-safe: db_name and instance may be unknown), then
    insert."""
    on = " AND ".join(f"w.{_q(k)} IS NOT DISTINCT FROM b.{_q(k)}" for k in WAIT_KEY)
    keys = ", ".join(_q(k) for k in WAIT_KEY)
    delete = f"DELETE FROM {WAITS_TABLE} w USING (SELECT DISTINCT {keys} FROM {rows}) b WHERE {on}"
    return delete, f"INSERT INTO {WAITS_TABLE} BY NAME SELECT * FROM {rows}"


def _connect(path: Path, *, read_only: bool, threads: int | None) -> duckdb.DuckDBPyConnection:
    config: dict[str, Any] = {}
    if threads is not None:
        config["threads"] = int(threads)
    try:
        con = duckdb.connect(str(path), read_only=read_only, config=config)
    except duckdb.Error as exc:
        raise _open_error(path, exc, read_only=read_only) from exc
    try:
        # TimeZone needs the ICU extension, which is loaded only after connect's config.
        con.execute("SET TimeZone = 'UTC'")
    except duckdb.Error as exc:
        con.close()
        raise StoreError(f"{path}: cannot set the session time zone to UTC: "
                         f"{_first_line(exc)}") from exc
    return con


#: Seconds a reader (read-only open) retries while another process holds the DuckDB file
#: (a live writer starting, about 0.1 s; an import, for its length); a writer retries
#: :data:`WRITE_RETRY_S` (a reader reading, usually well under a second).
READ_RETRY_S = 10.0
WRITE_RETRY_S = 3.0


def _connect_retrying(path: Path, *, read_only: bool,
                      threads: int | None) -> duckdb.DuckDBPyConnection:
    """:func:`_connect`, retried every 20 ms while the file is held by another process."""
    deadline = time.monotonic() + (READ_RETRY_S if read_only else WRITE_RETRY_S)
    while True:
        try:
            return _connect(path, read_only=read_only, threads=threads)
        except StoreBusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def _create_schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("BEGIN TRANSACTION")
    con.execute(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key VARCHAR NOT NULL, "
                "value VARCHAR NOT NULL)")
    con.execute(_ddl(SAMPLES_TABLE, SAMPLE_TABLE_COLUMNS))
    con.execute(_ddl(DEVICES_TABLE, DEVICE_TABLE_COLUMNS))
    con.executemany(f"INSERT INTO {META_TABLE} VALUES (?, ?)", [
        ["schema_version", str(STORE_SCHEMA_VERSION)],
        ["created_by", f"iogauge {__version__}"],
        ["created_at", datetime.now(UTC).isoformat(timespec="seconds")],
    ])
    con.execute("COMMIT")


def _create_atomically(path: Path, threads: int | None) -> None:
    """Build an initialised store under a temporary name, then link it to ``path``.

    The link is atomic and fails if ``path`` appeared meanwhile (another process won the
    race: its store is used). A crash leaves at most a stray temporary file, never a
    half-written database at ``path``.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    wal = tmp.with_name(tmp.name + ".wal")
    try:
        con = _connect(tmp, read_only=False, threads=threads)
        try:
            _create_schema(con)
        finally:
            con.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:
            # No hard links on this filesystem: rename, unless someone created it meanwhile.
            if not path.exists():
                tmp.replace(path)
        fsync_dir(path.parent)
    except duckdb.Error as exc:
        raise StoreError(f"{path}: cannot create the database: {_first_line(exc)}") from exc
    except OSError as exc:
        raise StoreError(f"{path}: cannot create the database: {exc.strerror or exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
        wal.unlink(missing_ok=True)


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    with contextlib.suppress(duckdb.Error):  # no transaction was open (BEGIN itself failed)
        con.execute("ROLLBACK")


def _normalise(values: Sequence[object]) -> tuple[object, ...]:
    return tuple(tuple(v) if isinstance(v, list | tuple) else v for v in values)
