"""A device's non-idle intervals as numpy arrays: what the service model and the capacity
fits read.

Gathered once per device (``device_points``) and shared: the service-model decision and the
capacity estimate both run over every interval of a device (a day of 1 s samples is 86,400
points), so the rows are converted to float arrays a single time. Unknown values are NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import polars as pl

from iogauge.analysis.attributes import await_expr, iops_expr, kbps_expr

if TYPE_CHECKING:
    from iogauge.analysis.context import DeviceContext

F64 = npt.NDArray[np.float64]

#: Below this an interval counts as idle (one operation a day is 1.2e-5 IO/s).
MIN_IOPS = 1e-9


@dataclass
class Points:
    """Non-idle intervals of one device.

    Attributes:
        iops: operations per second (reads + writes + discards).
        util: %util.
        await_ms: response time of all operations; r_await_ms of reads alone.
        r_iops: reads per second.
        areq_kb: mean request size (kB).
        kbps: throughput (kB/s).
        weight: the interval's length (s).
        aqu_sz: mean requests outstanding.
    """

    iops: F64
    util: F64
    await_ms: F64
    areq_kb: F64
    weight: F64
    aqu_sz: F64
    r_iops: F64
    r_await_ms: F64
    kbps: F64

    @property
    def size(self) -> int:
        return int(self.iops.size)


_COLUMNS = ("interval_s", "iops", "r_iops", "w_iops", "d_iops", "util_pct", "await_ms",
            "r_await_ms", "w_await_ms", "d_await_ms", "kBps", "r_kBps", "w_kBps", "d_kBps",
            "areq_kB", "aqu_sz")


def device_points(dev: DeviceContext) -> Points:
    """The device's non-idle intervals (IOPS >= MIN_IOPS) as numpy arrays, NaN = unknown."""
    rows = dev.select_rows(*_COLUMNS)  # only these columns are gathered
    missing = [c for c in _COLUMNS if c not in rows.columns]
    if missing:
        rows = rows.with_columns([pl.lit(None, dtype=pl.Float64).alias(c) for c in missing])
    names = ("x", "u", "lat", "sz", "w", "q", "rx", "rlat", "kb")
    df = (rows.lazy()
          .select(x=iops_expr(), u=pl.col("util_pct"), lat=await_expr(),
                  sz=pl.coalesce(pl.col("areq_kB"), kbps_expr() / iops_expr()),
                  w=pl.col("interval_s"), q=pl.col("aqu_sz"), rx=pl.col("r_iops"),
                  rlat=pl.col("r_await_ms"), kb=kbps_expr())
          .filter(pl.col("x").is_not_null() & (pl.col("x") >= MIN_IOPS) & pl.col("x").is_finite())
          .select([pl.col(c).cast(pl.Float64) for c in names])
          .collect())
    # One conversion of the whole frame (nulls become NaN in a float matrix).
    m = df.to_numpy().astype(np.float64, copy=False).reshape(df.height, len(names))
    arrays = [np.ascontiguousarray(m[:, i]) for i in range(len(names))]
    return Points(*arrays)
