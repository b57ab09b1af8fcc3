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
(:meth:`Store.bulk_append`, :class:`~iogauge.store.importing.StoreImport` for ``iogauge
import``), under a small DuckDB memory limit (:data:`~iogauge.store.bulk.BULK_SETTINGS`).

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

The code is a module per table family -- :mod:`~iogauge.store.samples`,
:mod:`~iogauge.store.waits`, :mod:`~iogauge.store.decisions`, :mod:`~iogauge.store.devices` --
on a shared :mod:`~iogauge.store.core` (connection, schema check, live segments), with the
tables' definitions in :mod:`~iogauge.store.schema` and opening in
:mod:`~iogauge.store.connection`; :class:`Store` puts them together.
"""

from __future__ import annotations

from iogauge.store.bulk import (
    BULK_COMMIT_MEMORY_LIMIT_BYTES,
    BULK_MEMORY_LIMIT_BYTES,
    BULK_SETTINGS,
    BULK_SLICE_ROWS,
    BulkAppend,
)
from iogauge.store.connection import READ_RETRY_S, WRITE_RETRY_S
from iogauge.store.decisions import DecisionsMixin
from iogauge.store.devices import DevicesMixin
from iogauge.store.samples import SamplesMixin
from iogauge.store.schema import (
    DB_FILENAME,
    DEVICE_FIELDS,
    DEVICE_TABLE_COLUMNS,
    DEVICES_TABLE,
    GUARANTEE_TABLE,
    GUARANTEE_TABLE_COLUMNS,
    META_TABLE,
    SAMPLE_KEY,
    SAMPLE_TABLE_COLUMNS,
    SAMPLES_TABLE,
    STORE_SCHEMA_VERSION,
    WAIT_KEY,
    WAIT_TABLE_COLUMNS,
    WAITS_TABLE,
    TimeArg,
    default_db_path,
    duckdb_type,
    parse_time,
)
from iogauge.store.waits import WaitsMixin, latest_waits

__all__ = [
    "BULK_COMMIT_MEMORY_LIMIT_BYTES", "BULK_MEMORY_LIMIT_BYTES", "BULK_SETTINGS",
    "BULK_SLICE_ROWS", "DB_FILENAME", "DEVICES_TABLE", "DEVICE_FIELDS", "DEVICE_TABLE_COLUMNS",
    "GUARANTEE_TABLE", "GUARANTEE_TABLE_COLUMNS", "META_TABLE", "READ_RETRY_S", "SAMPLES_TABLE",
    "SAMPLE_KEY", "SAMPLE_TABLE_COLUMNS", "STORE_SCHEMA_VERSION", "WAITS_TABLE", "WAIT_KEY",
    "WAIT_TABLE_COLUMNS", "WRITE_RETRY_S", "BulkAppend", "Store", "TimeArg", "default_db_path",
    "duckdb_type", "latest_waits", "parse_time",
]


class Store(SamplesMixin, WaitsMixin, DecisionsMixin, DevicesMixin):
    """An open iogauge DuckDB store. Create with :meth:`Store.open`; use as a context manager.

    One process at a time holds the DuckDB file open for writing, briefly: a live writer
    (``record``, ``guarantee``) while it starts, never afterwards (it appends segments,
    :class:`~iogauge.store.live.LiveStore`, which every read here includes); an import
    works on a copy and swaps it in (:class:`~iogauge.store.importing.StoreImport`).
    DuckDB's file lock keeps other processes out meanwhile; :meth:`open` retries for a
    while and then says so by name.
    """
