"""The store's tables as the model defines them: names, column types, DDL, key SQL,
and the paths and times every part of the store takes."""

# SQL here is assembled only from module constants and identifiers quoted by _q(); every
# value travels as a bound parameter, so the S608 pattern match does not apply.
# ruff: noqa: S608

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from iogauge import __version__
from iogauge.errors import SchemaError
from iogauge.model.device import DeviceInfo
from iogauge.model.guaranteeframe import GUARANTEE_COLUMNS
from iogauge.model.sampleframe import SAMPLE_COLUMNS
from iogauge.model.waitevents import WAIT_COLUMNS

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


