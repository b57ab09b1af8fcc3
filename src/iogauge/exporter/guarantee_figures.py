"""The guarantee controller's latest decision per device, from its decision store.

``iogauge guarantee`` records every decision as a GuaranteeFrame row in its store (live
segments beside the DuckDB file, readable while it runs). The exporter publishes the last
one per device while it is recent: a decision older than three of the controller's own
intervals (and at least a minute) means the controller stopped, and its figures are no
longer true.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from iogauge.exporter.judgement import GuaranteeFigures
from iogauge.guarantee.figures import guarantee_figures


def _num(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]


#: A decision is stale after this many of the controller's intervals ...
STALE_INTERVALS = 3
#: ... and never sooner than this (s).
MIN_STALE_S = 60.0


def latest_figures(df: pl.DataFrame, *, now: datetime) -> tuple[GuaranteeFigures, ...]:
    """The last decision per device of a GuaranteeFrame's rows, unless it is stale at
    ``now``."""
    if df.height == 0:
        return ()
    last = df.sort("ts").group_by("device", maintain_order=True).last().sort("device")
    age_s = (pl.lit(now) - pl.col("ts")).dt.total_microseconds() / 1e6
    recent = last.filter(age_s <= pl.max_horizontal(
        pl.lit(MIN_STALE_S), STALE_INTERVALS * pl.col("interval_s")))
    out = []
    for r in recent.iter_rows(named=True):
        x = _num(r["x_pct"])
        # what the run cost B and delivered A so far (the same figures as `guarantee show`)
        run = guarantee_figures(df.filter(pl.col("device") == r["device"]), str(r["run_id"]))
        out.append(GuaranteeFigures(
            device=str(r["device"]), floor_iops=_num(r["a_floor_iops"]),
            protected_iops=_num(r["a_iops"]), throttled_iops=_num(r["b_iops"]),
            read_limit_iops=_num(r["b_riops_limit"]),
            write_limit_iops=_num(r["b_wiops_limit"]),
            target_busy_ratio=None if x is None else x / 100.0,
            idle_share_ratio=run.b_share_idle,
            reserved_unused_iops=run.reserved_unused_iops,
            wakeups=float(len(run.wakeups)), wake_to_floor_seconds=run.wake_median_s))
    return tuple(out)


def read_latest(db: Path, *, now: datetime | None = None) -> tuple[GuaranteeFigures, ...]:
    """:func:`latest_figures` of the decisions stored in ``db`` (none when it does not
    exist). Raises :class:`~iogauge.errors.StoreError` when the store cannot be read."""
    if not db.exists():
        return ()
    from iogauge.store.duckdb_store import Store  # noqa: PLC0415 - DuckDB only when used

    with Store.open(db, read_only=True, threads=1) as store:
        df = store.read_guarantee().df
    return latest_figures(df, now=now or datetime.now(UTC))
