"""Imports too large to hold: sample rows added batch by batch in one transaction, under a
small DuckDB memory limit."""

# SQL here is assembled only from module constants and identifiers quoted by _q(); every
# value travels as a bound parameter, so the S608 pattern match does not apply.
# ruff: noqa: S608

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import duckdb

from iogauge.errors import StoreError
from iogauge.model.sampleframe import SampleFrame
from iogauge.store.connection import _first_line, _rollback
from iogauge.store.schema import (
    _BATCH_VIEW,
    _INSERT_BATCH_SQL,
    SAMPLE_TABLE_COLUMNS,
    SAMPLES_TABLE,
    _replace_sql,
)

if TYPE_CHECKING:
    from iogauge.store.core import StoreCore

# ---- bulk imports (BulkAppend) -------------------------------------------------------------
# The figures behind these settings (peak RSS and failures at other values) are in
# benchmarks/README.md, "The store's bulk-import settings".
#: DuckDB's block size; a column being appended to keeps one block pinned.
_DUCKDB_BLOCK_BYTES = 256 << 10
#: ``memory_limit`` while a :class:`BulkAppend` transaction is open: three blocks per samples
#: column (at least 32 MiB). Past it DuckDB spills the transaction's partial row group to its
#: temporary directory instead of holding it; the limit adds to the peak about one to one,
#: and two blocks a column left a margin of a few hundred kB (a CI run ran out).
BULK_MEMORY_LIMIT_BYTES = max(32 << 20, 3 * len(SAMPLE_TABLE_COLUMNS) * _DUCKDB_BLOCK_BYTES)
#: ``memory_limit`` for the COMMIT, which moves the last, partial row group into the table
#: and cannot spill it: a row group's worth pending needed 48-56 MiB; this is twice that.
BULK_COMMIT_MEMORY_LIMIT_BYTES = 128 << 20
#: DuckDB settings while a :class:`BulkAppend` transaction is open, restored when it ends:
#: the limit above; one row group buffered before it is written out (DuckDB's default of
#: five held nearly the whole 100 MB benchmark import in memory); one thread, since every
#: inserting thread pins its own blocks and the parser and DuckDB take turns anyway.
#: ``preserve_insertion_order`` stays on: :meth:`Store.read` returns rows in insertion
#: order, and turning it off saved nothing measurable.
BULK_SETTINGS: tuple[tuple[str, str], ...] = (
    ("memory_limit", f"'{BULK_MEMORY_LIMIT_BYTES}B'"),
    ("threads", "1"),
    ("write_buffer_row_group_count", "1"),
)
#: Largest slice of a batch that :meth:`BulkAppend.add` hands DuckDB in one statement (a row
#: group at DuckDB's default size): the DELETE of ``replace`` builds a hash table of the
#: slice's keys within the memory limit (millions of rows in one statement ran out). Slices
#: cost little: DuckDB pushes each slice's key range into its scan of the stored rows.
BULK_SLICE_ROWS = 122_880


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

    def __init__(self, store: StoreCore, *, replace: bool) -> None:
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


