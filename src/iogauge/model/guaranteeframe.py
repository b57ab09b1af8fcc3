"""GuaranteeFrame: one row per decision of the IOPS guarantee controller.

Every interval the controller (``iogauge guarantee``) observes the device and its cgroups,
lets the policy decide, and records here what it saw and what it did, so a run can be
judged afterwards: did A get its floor, what did B get, how did X move and why ([Oe]'s
Figs. 10-15 are plots of exactly these columns). The store keeps them in the
``guarantee_decisions`` table (:meth:`iogauge.store.duckdb_store.Store.append_guarantee`).

Conventions as :mod:`~iogauge.model.sampleframe`: null = not known (never 0), ``ts`` = end of
the interval in UTC, names carry units. Limits are whole IOPS; a null limit means "no limit".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from iogauge.errors import SchemaError
from iogauge.model.sampleframe import TS_DTYPE, Column


def _f(name: str, unit: str, doc: str) -> Column:
    return Column(name, pl.Float64(), unit, doc, False, "measure")


GUARANTEE_COLUMNS: tuple[Column, ...] = (
    Column("run_id", pl.String(), "", "Identifies one controller run (host, pid, start time)."
           , True, "identity"),
    Column("host", pl.String(), "", "Host the controller ran on.", True, "identity"),
    Column("device", pl.String(), "", "Kernel name of the disk the limits apply to (a "
           "partition given on the command line resolves to its disk).", True, "identity"),
    Column("ts", TS_DTYPE, "UTC", "End of the observed interval (UTC, microseconds).", True,
           "identity"),
    Column("interval_s", pl.Float64(), "s", "Length of the observed interval.", True,
           "identity"),
    Column("policy", pl.String(), "", "'paper' ([Oe] §4) or 'adaptive'.", True,
           "identity"),
    Column("actuator", pl.String(), "", "'cgroup-v1', 'cgroup-v2' or 'dry-run'.", True,
           "identity"),
    _f("util_pct", "%", "Device %util over the interval (iostat -x)."),
    _f("r_iops", "1/s", "Device reads completed per second (all users)."),
    _f("w_iops", "1/s", "Device writes completed per second (all users)."),
    _f("iops", "1/s", "Device reads + writes per second (the paper's r/s + w/s)."),
    _f("await_ms", "ms", "Device average latency (iostat await)."),
    _f("aqu_sz", "", "Device average queue size (iostat aqu-sz)."),
    _f("a_iops", "1/s", "Reads + writes per second of the protected groups (A), summed."),
    _f("a_floor_iops", "1/s", "Sum of the protected groups' floors (the paper's a)."),
    _f("b_iops", "1/s", "Reads + writes per second of the throttled groups (B), summed."),
    _f("busy_per_iops", "%/(1/s)", "%util per IOPS the decision used ([Oe]: %util / "
       "(r/s + w/s); adaptive: the cost per I/O at the device's read/write mix)."),
    _f("x_pct", "%", "Target total busy rate X after the decision."),
    _f("capacity_iops", "1/s", "Estimated IOPS at 100 % busy for the current mix."),
    Column("b_riops_limit", pl.Int64(), "1/s", "Sum of the throttled groups' read limits "
           "after the decision; null when any is unlimited.", False, "measure"),
    Column("b_wiops_limit", pl.Int64(), "1/s", "Sum of the throttled groups' write limits "
           "after the decision; null when any is unlimited.", False, "measure"),
    Column("a_miss", pl.Boolean(), "", "A protected group with demand got less than its "
           "floor in the interval.", True, "flag"),
    Column("state", pl.String(), "", "Policy state after the decision (paper: compute, "
           "counting, cut, update, reset, idle; adaptive: warmup, hold, protect, knee, "
           "knee-undone, recover, probe, stretch, a-limited, infeasible, open, wake).", True,
           "identity"),
    Column("reason", pl.String(), "", "The decision's arithmetic in one sentence.", True,
           "identity"),
    Column("warnings", pl.String(), "", "Warnings raised by this decision (infeasible floor "
           "with its numbers), '; '-joined; null when none.", False, "identity"),
    Column("groups_json", pl.String(), "", "Per group: role, r/w IOPS, stall %, floor or "
           "riops/wiops limits after the decision (a JSON object keyed by cgroup directory)."
           , True, "identity"),
)

GUARANTEE_SCHEMA: dict[str, pl.DataType] = {c.name: c.dtype for c in GUARANTEE_COLUMNS}
_REQUIRED = tuple(c.name for c in GUARANTEE_COLUMNS if c.required)
_NON_NEGATIVE = ("interval_s", "util_pct", "r_iops", "w_iops", "iops", "await_ms", "aqu_sz",
                 "a_iops", "a_floor_iops", "b_iops", "busy_per_iops", "x_pct",
                 "capacity_iops", "b_riops_limit", "b_wiops_limit")


class GuaranteeFrame:
    """A validated polars DataFrame with exactly the :data:`GUARANTEE_COLUMNS` schema."""

    __slots__ = ("df",)

    def __init__(self, df: pl.DataFrame) -> None:
        unknown = [c for c in df.columns if c not in GUARANTEE_SCHEMA]
        if unknown:
            raise SchemaError(f"unknown GuaranteeFrame column(s): {', '.join(unknown)}")
        exprs = [pl.col(n).cast(t) if n in df.columns else pl.lit(None, dtype=t).alias(n)
                 for n, t in GUARANTEE_SCHEMA.items()]
        try:
            self.df = df.select(exprs)
        except pl.exceptions.PolarsError as exc:
            raise SchemaError(f"frame does not fit the GuaranteeFrame schema: {exc}") from exc
        for name in _REQUIRED:
            if self.df[name].null_count():
                raise SchemaError(f"GuaranteeFrame column {name!r} is required but null")
        for name in _NON_NEGATIVE:
            col = pl.col(name)
            bad = self.df.filter((col < 0) | (col.is_nan() if GUARANTEE_SCHEMA[name]
                                             == pl.Float64() else pl.lit(False)))
            if bad.height:
                raise SchemaError(f"GuaranteeFrame column {name!r} must be >= 0 and not NaN; "
                                  f"got {bad[name][0]} at {bad['ts'][0]}")

    @classmethod
    def empty(cls) -> GuaranteeFrame:
        return cls(pl.DataFrame(schema=GUARANTEE_SCHEMA))

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> GuaranteeFrame:
        """Rows as dicts; ``ts`` as an aware datetime or ISO-8601 text (UTC)."""
        rows = [dict(r) for r in records]
        if not rows:
            return cls.empty()
        schema = dict(GUARANTEE_SCHEMA)
        schema["ts"] = pl.String() if isinstance(rows[0].get("ts"), str) else TS_DTYPE
        df = pl.DataFrame(rows, schema_overrides={k: v for k, v in schema.items()
                                                  if any(k in r for r in rows)},
                          strict=False)
        if schema["ts"] == pl.String():
            df = df.with_columns(pl.col("ts").str.to_datetime(time_unit="us",
                                                                time_zone="UTC"))
        return cls(df)

    @classmethod
    def concat(cls, frames: Sequence[GuaranteeFrame]) -> GuaranteeFrame:
        if not frames:
            return cls.empty()
        return cls(pl.concat([f.df for f in frames], how="vertical"))

    def __len__(self) -> int:
        return self.df.height


__all__ = ["GUARANTEE_COLUMNS", "GUARANTEE_SCHEMA", "GuaranteeFrame"]
