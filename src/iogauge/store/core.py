"""What every part of the store shares: the open connection, the schema check, and the
union of a table with its live segments."""

# SQL here is assembled only from module constants and identifiers quoted by _q(); every
# value travels as a bound parameter, so the S608 pattern match does not apply.
# ruff: noqa: S608

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Self

import duckdb

from iogauge import __version__
from iogauge.errors import StoreError
from iogauge.model.sampleframe import SampleFrame
from iogauge.store.connection import (
    _ArrowStream,
    _connect_retrying,
    _create_atomically,
    _first_line,
    _rollback,
)
from iogauge.store.schema import (
    _BATCH_VIEW,
    DB_FILENAME,
    DEVICE_TABLE_COLUMNS,
    DEVICES_TABLE,
    META_TABLE,
    SAMPLE_TABLE_COLUMNS,
    SAMPLES_TABLE,
    STORE_SCHEMA_VERSION,
    _create_schema,
    _ddl,
    _q,
    default_db_path,
)
from iogauge.store.segments import live_dir, live_segments

if TYPE_CHECKING:
    import polars as pl

    from iogauge.store.bulk import BulkAppend


class StoreCore:
    """The part of :class:`~iogauge.store.duckdb_store.Store` every table family uses."""

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
             threads: int | None = None) -> Self:
        """Open (creating if needed) the store at ``path`` (default: :func:`default_db_path`).

        Args:
            path: database file; parent directories are created when writing.
            read_only: open without write access (never creates, never migrates). A file
                that another process holds for writing (a live writer for the moment it
                starts) is retried for :data:`READ_RETRY_S` seconds.
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._con is None else ("read-only" if self.read_only else "open")
        return f"{type(self).__name__}({str(self.path)!r}, {state})"

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

    def checkpoint(self) -> None:
        """Write what the WAL holds into the database file (as closing does), so that the
        file alone is the whole store."""
        try:
            self._connection().execute("CHECKPOINT")
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: checkpoint failed: {_first_line(exc)}") from exc

    @property
    def closed(self) -> bool:
        return self._con is None


    def schema_version(self) -> int:
        """The store schema version recorded in ``meta``."""
        row = self._scalar(f"SELECT value FROM {META_TABLE} WHERE key = 'schema_version'")
        return int(str(row)) if row is not None else 0

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

    def _write_frame(self, df: pl.DataFrame, view: str, statements: Sequence[str], what: str,
                     *, prepare: Callable[[duckdb.DuckDBPyConnection], object] | None = None
                     ) -> None:
        """``prepare`` (the table's DDL), then ``df`` as the view ``view`` and
        ``statements`` in one transaction. Raises StoreError "cannot <what>": nothing of
        the transaction is stored."""
        con = self._writable()
        try:
            if prepare is not None:
                prepare(con)
            con.register(view, _ArrowStream(df))
            con.execute("BEGIN TRANSACTION")
            for sql in statements:
                con.execute(sql)
            con.execute("COMMIT")
        except duckdb.Error as exc:
            _rollback(con)
            raise StoreError(f"{self.path}: cannot {what}: {_first_line(exc)}") from exc
        finally:
            with contextlib.suppress(duckdb.Error):
                con.unregister(view)

    def _has_table(self, table: str) -> bool:
        """Whether this store has ``table`` (raises duckdb.Error for the caller to name)."""
        rows = self._connection().execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_catalog = current_database() AND table_name = ?", [table]).fetchall()
        return bool(rows[0][0])

    def _scalar(self, sql: str) -> object:
        try:
            rows = self._connection().execute(sql).fetchall()
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: query failed: {_first_line(exc)}") from exc
        return rows[0][0] if rows else None


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


