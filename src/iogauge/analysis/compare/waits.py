"""Oracle wait events before and after: the average wait per event ([Insight-SSD9]: Time
Waited / Waits), with idle events left out and truncated event names matched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from iogauge.analysis.compare.prepare import _names
from iogauge.analysis.compare.results import (
    _SECTION_RANK,
    ALPHA,
    IDLE_EVENTS,
    MIN_EFFECT_PCT,
    WaitChange,
)
from iogauge.analysis.compare.samples import _judge, _sample_stats, _test_groups
from iogauge.model.waitevents import WaitEventFrame

#: Reports cut event names to their column (AWR 11.2's wait lists: 28 characters, "control
#: file sequential re"); a name at least this long that begins exactly one other name is
#: taken for it.
_MIN_CUT_NAME = 20


def _canonical_events(names: set[str]) -> dict[str, str]:
    """Map names cut short by a report to the full name found elsewhere (either side)."""
    out: dict[str, str] = {}
    for n in names:
        if len(n) < _MIN_CUT_NAME:
            continue
        longer = [m for m in names if len(m) > len(n) and m.startswith(n)]
        if len(longer) == 1:
            out[n] = longer[0]
    return out


def _is_idle(name: str) -> bool:
    return name in IDLE_EVENTS or (len(name) >= _MIN_CUT_NAME
                                   and any(e.startswith(name) for e in IDLE_EVENTS))


def _wait_side(w: WaitEventFrame, canon: Mapping[str, str]) -> pl.DataFrame:
    """Per interval and event: waits, time and average wait (ms), one section per event."""
    idle = sorted({n for n in w.df["event"].unique().to_list() if _is_idle(n)})
    df = w.df.filter(pl.col("waits").is_not_null() & ~pl.col("event").is_in(idle)
                     & (pl.col("wait_class").is_null() | (pl.col("wait_class") != "Idle")))
    df = df.with_columns(pl.col("event").replace(dict(canon)))
    rank = (pl.col("section").replace_strict(_SECTION_RANK, default=len(_SECTION_RANK),
                                             return_dtype=pl.Int64))
    ident = ["host", "instance", "ts", "event"]
    df = (df.with_columns(_r=rank)
          .filter(pl.col("_r") == pl.col("_r").min().over(ident))
          .unique(subset=[*ident, "_r"], keep="first", maintain_order=True))
    # Two roundings of the same average: Time Waited / Waits, and the printed Avg wait. Use
    # the one whose rounding interval is narrower. 8i: 147.73 s / 20004 waits = 7.385 ms
    # (+-0.00025 ms) where "Avg wait (ms)" prints 7 (+-0.5); 10g: 0 s / 23 waits says nothing
    # (+-22 ms) where the printed average is good to 0.5 ms.
    waits = pl.col("waits")
    time_ms = pl.col("time_waited_s") * 1000.0 / waits
    width_time = _unit(pl.col("time_waited_s")) * 1000.0 / waits
    width_avg = _unit(pl.col("avg_wait_ms"))
    use_time = pl.col("time_waited_s").is_not_null() & (
        pl.col("avg_wait_ms").is_null() | (width_time <= width_avg))
    avg = (pl.when(waits <= 0).then(None)
           .when(use_time).then(time_ms).otherwise(pl.col("avg_wait_ms")))
    half_width = pl.when(use_time).then(width_time).otherwise(width_avg) / 2.0
    return df.select("event", "wait_class", "interval_s", "waits", "time_waited_s",
                     avg.alias("avg_ms"), half_width.alias("res_ms"))


def _unit(x: pl.Expr) -> pl.Expr:
    """The last printed digit's unit of a value read from a report (224.0 -> 1, 147.73 ->
    0.01): the width of its rounding interval. Six decimals at most."""
    expr: pl.Expr = pl.lit(1e-6)
    for d in range(5, -1, -1):
        scaled = x * 10.0**d
        expr = pl.when((scaled - scaled.round(0)).abs() < 1e-6 * (1.0 + scaled.abs()))\
            .then(pl.lit(10.0**-d)).otherwise(expr)
    return expr


def compare_waits(before: WaitEventFrame, after: WaitEventFrame, notes: list[str], *,
                  alpha: float = ALPHA,
                  min_effect_pct: float = MIN_EFFECT_PCT) -> list[WaitChange]:
    """Average wait per event, before vs after (idle events left out). Samples are the
    per-interval averages; one report per side is a single value."""
    canon = _canonical_events(set(before.df["event"].unique().to_list())
                              | set(after.df["event"].unique().to_list()))
    sb, sa = _wait_side(before, canon), _wait_side(after, canon)
    totals = (pl.concat([sb.with_columns(side=pl.lit(0, pl.Int8)),
                         sa.with_columns(side=pl.lit(1, pl.Int8))])
              .group_by("event", "side").agg(
                  pl.col("wait_class").drop_nulls().first(),
                  pl.col("waits").sum().alias("waits"),
                  pl.when(pl.col("time_waited_s").null_count() == 0)
                  .then(pl.col("time_waited_s").sum()).otherwise(None).alias("time_s"),
                  # = total time / total waits when every interval's time was the precise one
                  ((pl.col("avg_ms") * pl.col("waits")).sum()
                   / pl.col("waits").filter(pl.col("avg_ms").is_not_null()).sum())
                  .alias("avg_w"),
                  ((pl.col("res_ms") * pl.col("waits")).sum()
                   / pl.col("waits").filter(pl.col("res_ms").is_not_null()).sum())
                  .alias("res")))
    tot = {(r["event"], r["side"]): r for r in totals.iter_rows(named=True)}
    ev_b = {e for e, s in tot if s == 0 and tot[(e, s)]["waits"] > 0}
    ev_a = {e for e, s in tot if s == 1 and tot[(e, s)]["waits"] > 0}
    only_b, only_a = sorted(ev_b - ev_a), sorted(ev_a - ev_b)
    if only_b:
        notes.append(f"wait events before only: {_names(only_b)}")
    if only_a:
        notes.append(f"wait events after only: {_names(only_a)}")
    events = sorted(ev_b & ev_a)
    if not events:
        return []
    gid = {e: i for i, e in enumerate(events)}
    samples = pl.concat([
        sb.with_columns(side=pl.lit(0, pl.Int8)), sa.with_columns(side=pl.lit(1, pl.Int8))])
    samples = (samples.filter(pl.col("event").is_in(events) & pl.col("avg_ms").is_not_null())
               .select(pl.col("event").replace_strict(gid, return_dtype=pl.Int64).alias("g"),
                       "side", pl.col("avg_ms").alias("v")))
    stats = _sample_stats(samples)
    tested = _test_groups(samples, "per_op", stats)
    out: list[WaitChange] = []
    for e in events:
        g = gid[e]
        if g not in tested:
            continue
        tb, ta = tot[(e, 0)], tot[(e, 1)]
        b = _wait_avg(tb)
        a = _wait_avg(ta)
        if b is None or a is None:
            continue
        res = float(tb["res"] or 0.0) + float(ta["res"] or 0.0)
        v = _judge("lower", b, a, tested[g], alpha, min_effect_pct, resolution=res)
        out.append(WaitChange(
            e, tb["wait_class"] or ta["wait_class"], "ms", b, a, v.change_pct, v.ratio,
            v.direction, v.significant, tested[g].test, tested[g].p, stats[(g, 0)].n,
            stats[(g, 1)].n, float(tb["waits"]), float(ta["waits"]), tb["time_s"],
            ta["time_s"], v.note))
    out.sort(key=lambda w: -max(w.time_waited_s_before or 0.0, w.time_waited_s_after or 0.0,
                                w.before * w.waits_before / 1000.0,
                                w.after * w.waits_after / 1000.0))
    return out


def _wait_avg(row: Mapping[str, Any]) -> float | None:
    """The waits-weighted mean of the per-interval averages (ms)."""
    avg = row["avg_w"]
    return None if avg is None or not math.isfinite(avg) else float(avg)
