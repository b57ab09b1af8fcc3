"""Peak-preserving reduction of long time series and dense scatter plots for the HTML report.

A day of 1 s samples is 86,400 points per metric per device; a chart is ~1,200 pixels wide.
Averaging samples into pixels would erase exactly what an operator looks for — the 1 s
spike of latency, the minute at 100 % busy — so every reduction here keeps the extremes:

* :func:`minmax_envelope` (time series): samples are put into equal-width time buckets (one
  per pixel column) and each bucket keeps the **minimum and maximum** of every series plus
  the time of its first and last sample and the sample count. Drawn as a band from min to max
  per column, it is pixel-identical to plotting every point (the M4 idea of Jugel et al.,
  "M4: A Visualization-Oriented Time Series Data Aggregation", PVLDB 7(10), 2014, which adds
  first/last values; with one bucket per column the min-max band covers the same pixels).
* :func:`grid_thin` (scatter plots): one representative point per occupied cell of a pixel
  grid (the highest point of the cell) with the cell's count, so outliers — the few
  intervals at the knee of a util-vs-IOPS curve — always survive.

Both run as a single polars ``group_by`` over all devices at once (vectorised, no Python
loop over samples) and bound their output: at most ``n_buckets`` rows per group for the
envelope, at most ``nx * ny`` for the grid.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from iogauge.errors import IogaugeError


class DownsampleError(IogaugeError):
    """A reduction was asked for with an impossible size (zero buckets, missing column)."""


def _check_columns(df: pl.DataFrame, names: Sequence[str]) -> None:
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise DownsampleError(f"downsampling needs column(s) {', '.join(missing)}")


def bucket_expr(t: str, n_buckets: int, by: str | None = None) -> pl.Expr:
    """Bucket index 0..n_buckets-1 of each row: equal-width slices of ``[min(t), max(t)]``.

    Computed per ``by`` group when given, so each device's own span fills the chart. The last
    sample falls in the last bucket (clipped), and a group whose samples all share one time
    has a single bucket 0.
    """
    col = pl.col(t)
    t0 = col.min() if by is None else col.min().over(by)
    t1 = col.max() if by is None else col.max().over(by)
    span = t1 - t0
    idx = ((col - t0) / span * n_buckets).floor().clip(0, n_buckets - 1)
    return pl.when(span > 0).then(idx).otherwise(0).cast(pl.Int32)


def minmax_envelope(df: pl.DataFrame, *, t: str, columns: Sequence[str], n_buckets: int,
                    by: str | None = None) -> pl.DataFrame:
    """Per (group, bucket): first and last time, sample count, min and max of each column.

    Args:
        df: rows in any order; ``t`` numeric (e.g. seconds), ``columns`` numeric, nulls
            allowed (a bucket where a column is all null gets null for it).
        t: the time column.
        columns: the series to reduce.
        n_buckets: buckets per group (the chart's width in pixels).
        by: group column (device id); None = one group.

    Returns:
        Columns ``[by], bucket, t_first, t_last, n, <c>_lo, <c>_hi`` for every column ``c``,
        sorted by group and bucket; only buckets holding at least one row appear.
    """
    if n_buckets < 1:
        raise DownsampleError(f"n_buckets must be >= 1, got {n_buckets}")
    keys = [by] if by is not None else []
    _check_columns(df, [t, *columns, *keys])
    aggs: list[pl.Expr] = [pl.col(t).min().alias("t_first"), pl.col(t).max().alias("t_last"),
                           pl.len().cast(pl.Int64).alias("n")]
    for c in columns:
        aggs.append(pl.col(c).min().alias(f"{c}_lo"))
        aggs.append(pl.col(c).max().alias(f"{c}_hi"))
    return (df.lazy()
            .filter(pl.col(t).is_not_null())
            .with_columns(bucket_expr(t, n_buckets, by).alias("bucket"))
            .group_by([*keys, "bucket"])
            .agg(aggs)
            .sort([*keys, "bucket"])
            .collect())


def grid_thin(df: pl.DataFrame, *, x: str, y: str, nx: int, ny: int,
              by: str | None = None) -> pl.DataFrame:
    """One point per occupied cell of an ``nx`` x ``ny`` grid over ``[0, max]`` of each axis.

    The representative of a cell is its point with the largest ``y`` (a real sample, not a
    mean), and ``n`` counts the samples in the cell, so density can still be shown. Rows with
    a null ``x`` or ``y`` are left out. Axes start at 0 because the report's scatter plots do
    (IOPS, %util and latency are never negative).

    Returns:
        Columns ``[by], x, y, n`` (names as given), sorted by group then ``x``.
    """
    if nx < 1 or ny < 1:
        raise DownsampleError(f"grid must be at least 1 x 1, got {nx} x {ny}")
    keys = [by] if by is not None else []
    _check_columns(df, [x, y, *keys])

    def cell(col: str, n: int) -> pl.Expr:
        top = pl.col(col).max() if by is None else pl.col(col).max().over(by)
        idx = (pl.col(col) / top * n).floor().clip(0, n - 1)
        return pl.when(top > 0).then(idx).otherwise(0).cast(pl.Int32)

    return (df.lazy()
            .filter(pl.col(x).is_not_null() & pl.col(y).is_not_null())
            .with_columns(cell(x, nx).alias("_cx"), cell(y, ny).alias("_cy"))
            .group_by([*keys, "_cx", "_cy"])
            .agg(pl.col(x).sort_by(pl.col(y)).last(), pl.col(y).max(),
                 pl.len().cast(pl.Int64).alias("n"))
            .drop("_cx", "_cy")
            .sort([*keys, x, y])
            .collect())
