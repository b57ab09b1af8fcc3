"""The wait_events table: database wait events imported beside the samples (Statspack,
AWR), replaced by key."""

# SQL here is assembled only from module constants and identifiers quoted by _q(); every
# value travels as a bound parameter, so the S608 pattern match does not apply.
# ruff: noqa: S608

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import polars as pl

from iogauge.errors import StoreError
from iogauge.model.waitevents import WaitEventFrame
from iogauge.store.connection import (
    _ArrowStream,
    _first_line,
)
from iogauge.store.core import StoreCore
from iogauge.store.schema import (
    _WAITS_VIEW,
    WAIT_KEY,
    WAIT_TABLE_COLUMNS,
    WAITS_TABLE,
    _ddl,
    _q,
)


class WaitsMixin(StoreCore):
    """Wait events (see :class:`~iogauge.store.duckdb_store.Store`)."""

    def append_waits(self, frame: WaitEventFrame) -> int:
        """Store database wait events, replacing rows with the same key; returns rows.

        The ``wait_events`` table is created on first use from the model's columns.
        """
        n = len(frame)
        if n == 0:
            return 0
        self._write_frame(frame.df, _WAITS_VIEW, _replace_waits_sql(_WAITS_VIEW),
                          f"append {n} wait events",
                          prepare=lambda con: con.execute(_ddl(WAITS_TABLE, WAIT_TABLE_COLUMNS)))
        return n

    def read_waits(self) -> WaitEventFrame:
        """Every stored wait event (empty when none was imported)."""
        con = self._connection()
        try:
            if not self._has_table(WAITS_TABLE):
                return WaitEventFrame.empty()
            cols = ", ".join(_q(n) for n, _t, _r in WAIT_TABLE_COLUMNS)
            capsule = con.sql(f"SELECT {cols} FROM {WAITS_TABLE}").__arrow_c_stream__()
            df = pl.DataFrame(_ArrowStream(capsule=capsule))
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot read wait events: {_first_line(exc)}") from exc
        if df.width == 0:
            return WaitEventFrame.empty()
        return WaitEventFrame(df.with_columns(pl.col("ts").dt.convert_time_zone("UTC")))


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



def _replace_waits_sql(rows: str) -> tuple[str, str]:
    """SQL that replaces stored wait events by those of the table or view ``rows``: delete
    the stored rows with the same key (NULL-safe: db_name and instance may be unknown), then
    insert."""
    on = " AND ".join(f"w.{_q(k)} IS NOT DISTINCT FROM b.{_q(k)}" for k in WAIT_KEY)
    keys = ", ".join(_q(k) for k in WAIT_KEY)
    delete = f"DELETE FROM {WAITS_TABLE} w USING (SELECT DISTINCT {keys} FROM {rows}) b WHERE {on}"
    return delete, f"INSERT INTO {WAITS_TABLE} BY NAME SELECT * FROM {rows}"


