"""The samples table: appends (one transaction, or batch by batch for imports), copies
between stores, reads, counts and Parquet exports, each including the live segments."""

# SQL here is assembled only from module constants and identifiers quoted by _q(); every
# value travels as a bound parameter, so the S608 pattern match does not apply.
# ruff: noqa: S608

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

import duckdb
import polars as pl

from iogauge.errors import StoreError
from iogauge.model.sampleframe import SampleFrame
from iogauge.store.bulk import BulkAppend
from iogauge.store.connection import (
    _ArrowStream,
    _first_line,
    _rollback,
)
from iogauge.store.core import StoreCore
from iogauge.store.schema import (
    _BATCH_VIEW,
    _INSERT_BATCH_SQL,
    SAMPLE_TABLE_COLUMNS,
    SAMPLES_TABLE,
    WAIT_TABLE_COLUMNS,
    WAITS_TABLE,
    TimeArg,
    _ddl,
    _q,
    _replace_sql,
    parse_time,
)
from iogauge.store.waits import _replace_waits_sql


class SamplesMixin(StoreCore):
    """Sample rows (see :class:`~iogauge.store.duckdb_store.Store`)."""

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

    def count(self) -> int:
        """Number of sample rows."""
        row = self._scalar(f"SELECT count(*) FROM ({self._select(None, None, None, None)[0]})")
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

