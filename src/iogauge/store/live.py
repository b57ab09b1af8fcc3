"""The live writer: ``record`` and ``guarantee`` append segments, never holding the DuckDB file.

:meth:`LiveStore.open` opens the DuckDB file once, briefly, to create or check it (and to
create the ``*_live`` views a user's own DuckDB session reads), takes the writer lock of its
*family* (``samples``: samples and devices, written by ``record``; ``guarantee``: the
decisions), and closes the DuckDB file again. From then on every append is one segment file
(:mod:`iogauge.store.segments`), so readers can open the store at any moment.
"""

# The views' SQL is built from module constants, table names and a quoted path only.
# ruff: noqa: S608

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from iogauge.errors import StoreBusyError, StoreError
from iogauge.model.device import DeviceInfo
from iogauge.model.guaranteeframe import GuaranteeFrame
from iogauge.model.sampleframe import SampleFrame
from iogauge.store.connection import _first_line
from iogauge.store.devices import _normalise
from iogauge.store.duckdb_store import Store
from iogauge.store.importing import import_lock
from iogauge.store.schema import (
    DEVICE_FIELDS,
    DEVICE_TABLE_COLUMNS,
    DEVICES_TABLE,
    GUARANTEE_TABLE,
    GUARANTEE_TABLE_COLUMNS,
    SAMPLES_TABLE,
    TimeArg,
    _ddl,
    default_db_path,
    parse_time,
)
from iogauge.store.segments import (
    SegmentLog,
    WriterLock,
    all_segments,
    glob_sql,
    live_dir,
    write_empty,
)

#: Seconds the writer tries to open the DuckDB file for writing at start-up while readers
#: hold it; after that it checks the file read-only and starts without refreshing the views.
START_RETRY_S = 2.0

_POLARS_TYPES: dict[str, pl.DataType] = {
    "VARCHAR": pl.String(), "BIGINT": pl.Int64(), "BOOLEAN": pl.Boolean(),
    "DOUBLE": pl.Float64(), "VARCHAR[]": pl.List(pl.String()),
    "TIMESTAMP WITH TIME ZONE": pl.Datetime("us", "UTC"),
}
#: polars schema of a devices segment (the devices table's columns).
DEVICE_SCHEMA: dict[str, pl.DataType] = {n: _POLARS_TYPES[t]
                                         for n, t, _r in DEVICE_TABLE_COLUMNS}


class Family(enum.Enum):
    """What a live writer writes; one writer per family and store."""

    SAMPLES = "samples"
    GUARANTEE = "guarantee"


def live_view_sql(db: Path, table: str) -> str:
    """``CREATE OR REPLACE VIEW <table>_live``: the table and its live segments, for a plain
    DuckDB session (``duckdb.connect(db, read_only=True)``). Superseded segments (a merge
    done, its inputs not yet deleted) are told apart by file name within one scan, so a
    count never doubles; it reads every segment whole, which a quick look can afford."""
    seg = glob_sql(live_dir(db), table)
    rng = r"'\.(\d+)-(\d+)\.parquet$'"
    return (
        f"CREATE OR REPLACE VIEW {table}_live AS WITH seg AS MATERIALIZED (SELECT * FROM "
        f"read_parquet({seg}, union_by_name = true, filename = true)), "
        f"f AS (SELECT DISTINCT filename, CAST(regexp_extract(filename, {rng}, 1) AS BIGINT) "
        f"AS a, CAST(regexp_extract(filename, {rng}, 2) AS BIGINT) AS b FROM seg), "
        "live AS (SELECT filename FROM f WHERE NOT EXISTS (SELECT 1 FROM f AS o WHERE "
        "o.a <= f.a AND f.b <= o.b AND (o.a, o.b) <> (f.a, f.b))) "
        f"SELECT * FROM {table} UNION ALL BY NAME SELECT * EXCLUDE (filename) FROM seg "
        "WHERE filename IN (SELECT filename FROM live)")


class LiveStore:
    """A store open for live appends (see the module docstring). Use as a context manager.

    Same append methods as :class:`~iogauge.store.duckdb_store.Store`, for its family.
    """

    def __init__(self, path: Path, family: Family, lock: WriterLock,
                 known_devices: dict[tuple[str, str], tuple[object, ...]],
                 first_seen: dict[tuple[str, str], datetime]) -> None:
        self.path = path
        self.family = family
        self._lock: WriterLock | None = lock
        d = live_dir(path)
        if family is Family.SAMPLES:
            self._logs = {SAMPLES_TABLE: SegmentLog(d, SAMPLES_TABLE, SampleFrame.empty().df),
                          DEVICES_TABLE: SegmentLog(d, DEVICES_TABLE,
                                                    pl.DataFrame(schema=DEVICE_SCHEMA))}
        else:
            self._logs = {GUARANTEE_TABLE: SegmentLog(d, GUARANTEE_TABLE,
                                                      GuaranteeFrame.empty().df)}
        self._known = known_devices
        self._first_seen = first_seen
        #: Said once, when a store written by an earlier iogauge gets its live directory.
        self.note: str | None = None

    @classmethod
    def open(cls, path: str | Path | None = None, *, family: Family = Family.SAMPLES
             ) -> LiveStore:
        """Create or check the store at ``path``, take the writer lock of ``family``.

        Raises:
            StoreBusyError: another process writes this family to the store.
            StoreError: the path is not a usable store (as :meth:`Store.open` says).
        """
        p = (default_db_path() if path is None else Path(path)).expanduser()
        if p.is_dir():
            raise StoreError(f"{p}: is a directory; --db takes a file")
        d = live_dir(p)
        # Every live writer leaves the empty segments; an import leaves only its lock.
        upgraded = p.exists() and not all_segments(d, SAMPLES_TABLE)
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{d}: cannot create the live directory: "
                             f"{exc.strerror or exc}") from exc
        lock = WriterLock(d, family.value, p)
        try:
            # The empty segments first: the views' globs need something to match.
            write_empty(d, GUARANTEE_TABLE, GuaranteeFrame.empty().df)
            write_empty(d, SAMPLES_TABLE, SampleFrame.empty().df)
            store = cls(p, family, lock, {}, {})
            known, first = _prepare(p)
        except BaseException:
            lock.release()
            raise
        store._known, store._first_seen = known, first
        if upgraded:
            store.note = (f"{p}: live writes now go to segments in {d}/ beside the DuckDB "
                          "file, so analyze, report and export read while this runs; "
                          "everything stored before stays where it was (an iogauge from "
                          "before this change reads only that part)")
        return store

    def __enter__(self) -> LiveStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"LiveStore({str(self.path)!r}, {self.family.value}, {state})"

    @property
    def closed(self) -> bool:
        return self._lock is None

    def close(self) -> None:
        """Release the writer lock. Idempotent; every append is already durable."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    def _log(self, table: str) -> SegmentLog:
        if self._lock is None:
            raise StoreError(f"{self.path}: the store is closed")
        log = self._logs.get(table)
        if log is None:
            raise StoreError(f"{self.path}: this {self.family.value} writer does not write "
                             f"{table}")
        return log

    def append(self, frame: SampleFrame) -> int:
        """Write ``frame``'s rows as one segment (all or nothing); returns rows."""
        if not isinstance(frame, SampleFrame):
            raise TypeError(f"LiveStore.append takes a SampleFrame, not {type(frame).__name__}")
        log = self._log(SAMPLES_TABLE)
        if len(frame):
            log.write(frame.df)
        return len(frame)

    def append_guarantee(self, frame: GuaranteeFrame) -> int:
        """Write guarantee decisions as one segment; returns rows."""
        log = self._log(GUARANTEE_TABLE)
        if len(frame):
            log.write(frame.df)
        return len(frame)

    def append_devices(self, host: str, devices: Iterable[DeviceInfo] | Mapping[str, DeviceInfo],
                       *, seen: TimeArg = None) -> int:
        """Write the devices of ``host`` that are new or changed (as
        :meth:`Store.append_devices` decides) as one segment; returns those rows."""
        log = self._log(DEVICES_TABLE)
        infos = list(devices.values() if isinstance(devices, Mapping) else devices)
        when = parse_time(seen) or datetime.now(UTC)
        rows: list[dict[str, object]] = []
        for info in infos:
            d = info.to_dict()
            values = tuple(d[f] for f in DEVICE_FIELDS)
            key = (host, info.name)
            old = self._known.get(key)
            if old is not None and _normalise(old) == _normalise(values):
                continue
            first = self._first_seen.setdefault(key, when)
            rows.append({"host": host, "name": info.name, "first_seen": first,
                         "changed": when, **dict(zip(DEVICE_FIELDS, values, strict=True))})
            self._known[key] = values
        if rows:
            log.write(pl.DataFrame(rows, schema=DEVICE_SCHEMA))
        return len(rows)


def _prepare(path: Path) -> tuple[dict[tuple[str, str], tuple[object, ...]],
                                  dict[tuple[str, str], datetime]]:
    """Create or check the DuckDB file (refreshing the ``*_live`` views when it can have it
    for writing within :data:`START_RETRY_S`) and return the devices known so far."""
    try:
        # An import swaps a copy of the DuckDB file in when it commits: what is written
        # to the file meanwhile would be lost, so while one runs the file is only read.
        lock: WriterLock | None = import_lock(path, wait_s=0.0)
    except StoreBusyError:
        lock = None
    try:
        store = _open_at_start(path, writable=lock is not None)
        known, first = _refresh(store, path)
    finally:
        if lock is not None:
            lock.release()
    return known, first


def _open_at_start(path: Path, *, writable: bool) -> Store:
    """The store for writing when it is free within :data:`START_RETRY_S`, else read-only."""
    deadline = time.monotonic() + START_RETRY_S
    while writable:
        try:
            return Store.open(path, threads=1)
        except StoreBusyError:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
    return Store.open(path, read_only=True, threads=1)


def _refresh(store: Store, path: Path) -> tuple[dict[tuple[str, str], tuple[object, ...]],
                                                dict[tuple[str, str], datetime]]:
    """Create the views (when writable) and return the devices known so far."""
    with store:
        if not store.read_only:
            con = store._connection()
            try:
                con.execute(_ddl(GUARANTEE_TABLE, GUARANTEE_TABLE_COLUMNS))
                for table in (SAMPLES_TABLE, GUARANTEE_TABLE):
                    con.execute(live_view_sql(path, table))
            except duckdb.Error as exc:
                raise StoreError(f"{path}: cannot create the live views: "
                                 f"{_first_line(exc)}") from exc
        devices = store.read_devices()
    known: dict[tuple[str, str], tuple[object, ...]] = {}
    first: dict[tuple[str, str], datetime] = {}
    for row in devices.iter_rows(named=True):
        key = (str(row["host"]), str(row["name"]))
        known[key] = tuple(row[f] for f in DEVICE_FIELDS)
        with contextlib.suppress(KeyError, TypeError):
            first[key] = row["first_seen"]
    return known, first
