"""What a guarantee run cost and delivered, from its recorded decisions.

One :class:`GuaranteeFigures` per run: B's throughput while A was idle against B alone, the
IOPS A's floor held back from B that A did not use, and every A wake-up with its time to
floor. ``iogauge guarantee show``, the report's guarantee view and the exporter read these
figures (:func:`figures_from_store` / :func:`guarantee_figures`), so all three say the same.

Definitions (per decision row, i.e. per interval of ``interval_s``):

* **A idle**: A completed less than half an I/O in the interval (none).
* **B alone**: B's median IOPS in intervals with A idle and no limit on B (measured), or,
  when B was never left unlimited (``--reserve-idle``, the paper's policy), the policy's
  capacity estimate for those intervals (the device's IOPS at 100 % busy for the mix, by
  [Oe] §4's ``100 / busy_per_iops``; estimated).
* **Reserved but unused**: in every interval in which A's floor was reserved (all but the
  adaptive policy's ``open`` ones), ``max(0, floor - A's IOPS)``.
* **Wake-up**: an interval with A's I/O after one without. Its **time to floor** runs from
  the start of that interval to the start of the first interval (from it on) in which A got
  >= 95 % of its floor, allowing one I/O per direction either side of the interval's edges
  (the lab evaluation's own rule); None if A went idle again first or the run ended.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from iogauge.guarantee import GuaranteeError

#: A's floor counts as met at this share of it (as in the lab evaluation).
FLOOR_MET_SHARE = 0.95


@dataclass(frozen=True)
class WakeUp:
    """One return of A's demand: when, and how long until A had its floor (s, or None)."""

    ts: datetime
    time_to_floor_s: float | None


@dataclass(frozen=True)
class GuaranteeFigures:
    """The honest figures of one guarantee run (see the module docstring).

    Attributes:
        run_id, device, policy: the run.
        intervals: decisions recorded.
        a_idle_s: seconds A did no I/O.
        b_idle_iops: B's mean IOPS while A was idle (None: A never idle).
        b_alone_iops: B alone (None: unknown); ``b_alone_measured`` says how it was got.
        b_share_idle: ``b_idle_iops / b_alone_iops`` (None when either is unknown).
        reserved_unused_iops: mean IOPS of A's floor held back from B but not used by A,
            over the whole run.
        reserved_unused_ios: the same, in I/Os.
        wakeups: every wake-up of A.
    """

    run_id: str
    device: str
    policy: str
    intervals: int
    a_idle_s: float
    b_idle_iops: float | None
    b_alone_iops: float | None
    b_alone_measured: bool
    b_share_idle: float | None
    reserved_unused_iops: float
    reserved_unused_ios: float
    wakeups: tuple[WakeUp, ...]

    @property
    def wake_median_s(self) -> float | None:
        """Median time to floor over the wake-ups that reached it."""
        got = sorted(w.time_to_floor_s for w in self.wakeups if w.time_to_floor_s is not None)
        if not got:
            return None
        n = len(got)
        return got[n // 2] if n % 2 else (got[n // 2 - 1] + got[n // 2]) / 2

    @property
    def wake_worst_s(self) -> float | None:
        """Longest time to floor (None if no wake-up reached it)."""
        got = [w.time_to_floor_s for w in self.wakeups if w.time_to_floor_s is not None]
        return max(got) if got else None

    def lines(self) -> list[str]:
        """The figures as sentences for a terminal."""
        alone = ("-" if self.b_alone_iops is None else
                 f"{self.b_alone_iops:.1f} IOPS ("
                 f"{'measured' if self.b_alone_measured else 'estimated'})")
        share = "-" if self.b_share_idle is None else f"{self.b_share_idle:.0%}"
        idle = "-" if self.b_idle_iops is None else f"{self.b_idle_iops:.1f} IOPS"
        out = [(f"while A was idle ({self.a_idle_s:.0f} s): B {idle} = {share} of B alone "
               f"({alone})"),
               (f"A's floor reserved but not used by A: {self.reserved_unused_iops:.1f} IOPS "
               f"on average ({self.reserved_unused_ios:.0f} I/Os held back from B)")]
        if self.wakeups:
            med, worst = self.wake_median_s, self.wake_worst_s
            out.append(f"A woke {len(self.wakeups)} times; time to >= "
                       f"{FLOOR_MET_SHARE:.0%} of its floor: median "
                       f"{'-' if med is None else f'{med:.1f} s'}, worst "
                       f"{'-' if worst is None else f'{worst:.1f} s'}, never reached "
                       f"{sum(w.time_to_floor_s is None for w in self.wakeups)}")
        return out


def _met(a_iops: float, floor: float, dt: float) -> bool:
    # Whole completions: one I/O per direction may land either side of the edges.
    return a_iops * dt >= math.ceil(FLOOR_MET_SHARE * floor * dt - 1e-9) - 2


def _a_idle(rows: list[dict[str, Any]]) -> list[bool]:
    return [r["a_iops"] * r["interval_s"] < 0.5 for r in rows]


def _wakeups(rows: list[dict[str, Any]], idle: list[bool]) -> tuple[WakeUp, ...]:
    out: list[WakeUp] = []
    for i in range(1, len(rows)):
        if idle[i] or not idle[i - 1]:
            continue
        start = rows[i]["ts"] - timedelta(seconds=rows[i]["interval_s"])
        took: float | None = None
        for j in range(i, len(rows)):
            if idle[j]:
                break
            r = rows[j]
            if _met(r["a_iops"], r["a_floor_iops"], r["interval_s"]):
                begin = r["ts"] - timedelta(seconds=r["interval_s"])
                took = max(0.0, (begin - start).total_seconds())
                break
        out.append(WakeUp(start, took))
    return tuple(out)


def guarantee_figures(decisions: pl.DataFrame, run_id: str | None = None) -> GuaranteeFigures:
    """The figures of ``run_id`` (default: the latest run) from GuaranteeFrame rows."""
    if decisions.height == 0:
        raise GuaranteeError("no guarantee decisions recorded")
    rid = run_id or str(decisions.sort("ts")["run_id"][-1])
    rows = decisions.filter(pl.col("run_id") == rid).sort("ts").to_dicts()
    if not rows:
        raise GuaranteeError(f"no decisions of run {rid!r}")
    idle = _a_idle(rows)
    idle_rows = [r for r, i in zip(rows, idle, strict=True) if i]
    a_idle_s = sum(r["interval_s"] for r in idle_rows)
    b_idle = (sum(r["b_iops"] * r["interval_s"] for r in idle_rows) / a_idle_s
              if a_idle_s > 0 else None)
    free = [r["b_iops"] for r in idle_rows
            if r["b_riops_limit"] is None and r["b_wiops_limit"] is None]
    caps = [r["capacity_iops"] for r in idle_rows if r["capacity_iops"] is not None]
    measured = bool(free)
    pool = free or caps
    alone = sorted(pool)[len(pool) // 2] if pool else None
    unused_ios = sum(max(0.0, r["a_floor_iops"] - r["a_iops"]) * r["interval_s"]
                     for r in rows if r["state"] != "open")
    total_s = sum(r["interval_s"] for r in rows)
    return GuaranteeFigures(
        run_id=rid, device=str(rows[0]["device"]), policy=str(rows[0]["policy"]),
        intervals=len(rows), a_idle_s=a_idle_s, b_idle_iops=b_idle, b_alone_iops=alone,
        b_alone_measured=measured,
        b_share_idle=(b_idle / alone if b_idle is not None and alone else None),
        reserved_unused_iops=unused_ios / total_s if total_s > 0 else 0.0,
        reserved_unused_ios=unused_ios, wakeups=_wakeups(rows, idle))


def figures_from_store(db: str | Path, run_id: str | None = None) -> GuaranteeFigures:
    """The figures of ``run_id`` (default: the latest run) in the decision store ``db``."""
    from iogauge.store.duckdb_store import Store  # noqa: PLC0415 - duckdb only when asked

    with Store.open(Path(db), read_only=True) as store:
        df = store.read_guarantee().df
    return guarantee_figures(df, run_id)


__all__ = ["FLOOR_MET_SHARE", "GuaranteeFigures", "WakeUp", "figures_from_store",
           "guarantee_figures"]
