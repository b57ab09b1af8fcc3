"""A report's Operating System Statistics as host CPU context of its window.

AWR (and Statspack from 10g) print V$OSSTAT's differences over the snapshot interval:
``BUSY_TIME``, ``IDLE_TIME``, ``USER_TIME``, ``SYS_TIME``, ``NICE_TIME``, ``IOWAIT_TIME``
(centiseconds summed over the CPUs) and ``LOAD``. They become the SampleFrame's host CPU
columns on every tablespace/datafile row of the report, as iostat's avg-cpu line does for
disks, so [Insight-SSD9]'s question -- busy disk or CPU-bound database? -- can be asked of an
AWR alone.

Percentages are of BUSY_TIME + IDLE_TIME (the report's own %User/%System/%WIO/%Idle in Host
CPU divide by that sum). IOWAIT_TIME is part of IDLE_TIME: the report's %Idle includes %WIO
(issue 38's report: %User 9.4 + %System 6.8 + %Idle 83.2 = 99.4, with %WIO 74.6), so
``cpu_idle_pct`` -- iostat's %idle, "idle without I/O outstanding" -- is (IDLE - IOWAIT) /
total and ``cpu_iowait_pct`` is IOWAIT / total.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

import polars as pl

from iogauge.model.sampleframe import TS_DTYPE

CPU_COLUMNS = ("cpu_user_pct", "cpu_nice_pct", "cpu_system_pct", "cpu_iowait_pct",
               "cpu_idle_pct")
CPU_SCHEMA: dict[str, pl.DataType] = {c: pl.Float64() for c in CPU_COLUMNS}
#: the section title (text): 'OS Statistics' in Statspack and AWR 10g
OS_RE = re.compile(r"^(Operating System Statistics|OS Statistics)"
                   r"(?=\s+for DB:|\s{2,}DB/Inst:|\s*$)")
_VALUE_RE = re.compile(r"[\d,]*\.?\d+")


def os_values(rows: list[tuple[str, str]]) -> dict[str, Decimal]:
    """(statistic, value cell) pairs -> the numbers of the statistics read here (cells that
    are not plain numbers are left out: the block is context, not measured I/O)."""
    out: dict[str, Decimal] = {}
    for name, cell in rows:
        key = name.strip().upper()
        if key in {"BUSY_TIME", "IDLE_TIME", "USER_TIME", "SYS_TIME", "NICE_TIME",
                   "IOWAIT_TIME"} and _VALUE_RE.fullmatch(cell.strip()):
            try:
                out[key] = Decimal(cell.strip().replace(",", ""))
            except InvalidOperation:  # pragma: no cover - the pattern is a number
                continue
    return out


def cpu_pcts(values: dict[str, Decimal]) -> dict[str, float]:
    """The host CPU columns from V$OSSTAT differences; empty without BUSY and IDLE time."""
    busy, idle = values.get("BUSY_TIME"), values.get("IDLE_TIME")
    if busy is None or idle is None or busy + idle <= 0:
        return {}
    total = busy + idle

    def pct(v: Decimal | None) -> float | None:
        return None if v is None else float(v * 100 / total)

    iowait = values.get("IOWAIT_TIME")
    return {k: v for k, v in {
        "cpu_user_pct": pct(values.get("USER_TIME")),
        "cpu_nice_pct": pct(values.get("NICE_TIME")),
        "cpu_system_pct": pct(values.get("SYS_TIME")),
        "cpu_iowait_pct": pct(iowait),
        "cpu_idle_pct": pct(idle - iowait if iowait is not None and iowait <= idle else idle),
    }.items() if v is not None}


def with_cpu(files: pl.DataFrame, cpu: list[tuple[str, object, dict[str, float]]]
             ) -> pl.DataFrame:
    """``files`` with the CPU columns of the report each row is from, by (host, ts)."""
    rows = [{"host": host, "ts": ts, **vals} for host, ts, vals in cpu if vals]
    if not rows:
        return files
    frame = pl.DataFrame(rows, schema={"host": pl.String(), "ts": TS_DTYPE, **CPU_SCHEMA})
    frame = frame.unique(subset=["host", "ts"], keep="first")
    return (files.with_row_index("_row")
            .join(frame, on=["host", "ts"], how="left")
            .sort("_row").drop("_row"))
