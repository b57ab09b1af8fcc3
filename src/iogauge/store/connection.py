"""Opening DuckDB files: connections in UTC, retried while another process holds the
file, errors that name the path and the reason, stores created atomically, and the Arrow
stream through which frames pass."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from iogauge.errors import StoreBusyError, StoreError
from iogauge.fsutil import fsync_dir
from iogauge.store.schema import (
    DB_FILENAME,
    _create_schema,
)


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
            "`iogauge import` only to fold in a WAL a killed writer left (it imports into "
            "a copy); another program may hold it longer: wait for it or use another --db.")
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
#: (a live writer starting, about 0.1 s; a user's own DuckDB session); a writer retries
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


