"""The devices table: one row per (host, device) with its facts, updated when they change."""

# SQL here is assembled only from module constants and identifiers quoted by _q(); every
# value travels as a bound parameter, so the S608 pattern match does not apply.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

import duckdb
import polars as pl

from iogauge.errors import StoreError
from iogauge.model.device import DeviceInfo
from iogauge.store.connection import (
    _ArrowStream,
    _first_line,
    _rollback,
)
from iogauge.store.core import StoreCore
from iogauge.store.schema import (
    DEVICE_FIELDS,
    DEVICE_TABLE_COLUMNS,
    DEVICES_TABLE,
    TimeArg,
    _q,
    parse_time,
)


class DevicesMixin(StoreCore):
    """Device metadata (see :class:`~iogauge.store.duckdb_store.Store`)."""

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


def _normalise(values: Sequence[object]) -> tuple[object, ...]:
    return tuple(tuple(v) if isinstance(v, list | tuple) else v for v in values)
