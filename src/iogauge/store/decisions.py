"""The guarantee_decisions table: one row per interval of the guarantee controller."""

# SQL here is assembled only from module constants and identifiers quoted by _q(); every
# value travels as a bound parameter, so the S608 pattern match does not apply.
# ruff: noqa: S608

from __future__ import annotations

import duckdb
import polars as pl

from iogauge.errors import StoreError
from iogauge.model.guaranteeframe import GuaranteeFrame
from iogauge.store.connection import (
    _ArrowStream,
    _first_line,
)
from iogauge.store.core import StoreCore
from iogauge.store.schema import (
    GUARANTEE_TABLE,
    GUARANTEE_TABLE_COLUMNS,
    _ddl,
    _q,
)


class DecisionsMixin(StoreCore):
    """Guarantee decisions (see :class:`~iogauge.store.duckdb_store.Store`)."""

    def append_guarantee(self, frame: GuaranteeFrame) -> int:
        """Store guarantee-controller decisions in one transaction; returns rows.

        The ``guarantee_decisions`` table is created on first use from the model's columns
        (and gains any column the model added since, like the samples table).
        """
        n = len(frame)
        if n == 0:
            return 0
        view = "_iogauge_guarantee_batch"

        def table(con: duckdb.DuckDBPyConnection) -> None:
            con.execute(_ddl(GUARANTEE_TABLE, GUARANTEE_TABLE_COLUMNS))
            self._reconcile(GUARANTEE_TABLE, GUARANTEE_TABLE_COLUMNS)

        insert = f"INSERT INTO {GUARANTEE_TABLE} BY NAME SELECT * FROM {view}"
        self._write_frame(frame.df, view, [insert], f"append {n} guarantee decisions",
                          prepare=table)
        return n

    def read_guarantee(self, run_id: str | None = None) -> GuaranteeFrame:
        """Stored guarantee decisions (of one run, or all), in time order; empty if none."""
        con = self._connection()
        try:
            exists = self._has_table(GUARANTEE_TABLE)
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

