"""Oracle I/O wait averages against what the storage should give.

[Insight-SSD9] reads Statspack wait events next to ``iostat``: the average wait per
event (Time Waited / Waits) is what the database saw of the device. On its hard disk a
``db file scattered read`` (multi-block, full scans) averaged 0.74 / 1.11 cs (7.4 / 11.1 ms)
against 0.37 / 0.25 cs on SSD, and the full scans made single-block ``db file sequential
read`` waits far longer (538 ms on average in config 5-1-1): "heavy full scans slow
single-block reads".

Per report interval (``ctx.waits``, a WaitEventFrame; an event met in several sections of one
report is taken once: the wait events section first, then background, then top timed
events) the average is recomputed from Time Waited / Waits, or taken as printed when the
printed figure is the more precise one (reports round Time Waited to 1/100 s or to whole
seconds, and the average to whole ms or 0.01 ms), and compared with an expectation *E* per
kind of event:

* single-block reads (``db file sequential read``, ``cell single block physical read``)
  and redo writes (``log file parallel write``, ``log file sync``):
  E = the typical latency of the host's devices (``capability.latency_ms_typical``, the
  slowest of them when several: the data files may be on any), else 10 ms — Oracle
  Enterprise Manager's I/O guidance, "most systems are performing satisfactorily if
  latency [of synchronous single block reads] is fewer than 10 milliseconds" (EM 11g
  online help, Performance: I/O, Latency for Synchronous Single Block Reads), which is also
  [MS-Azure-JP]'s guidance for demanding SQL Server (<= 10 ms);
* multi-block reads (``db file scattered read``, ``direct path read``, ``direct path read
  temp``, ``cell multiblock physical read``): E = single-block E + the transfer of 1 MB
  (Oracle Database Reference, DB_FILE_MULTIBLOCK_READ_COUNT: the default corresponds to
  "the maximum I/O size that can be performed efficiently", 1 MB on most platforms) at the
  device's sequential read rate (``capability.seq_read_MBps``), else 20 ms (10 ms + 1 MB at
  ~100 MB/s of one hard disk).

An average above :data:`WARN_FACTOR` x E (2x: well outside normal variation) is a
**warning**, above :data:`CRITICAL_FACTOR` x E (5x; generic: 50 ms for single-block reads,
[Goodus] §3.4's "svc_t >= 50 ms = bottleneck") **critical**. Intervals with fewer than
:data:`MIN_WAITS` waits of the event are not judged (a mean of a handful of waits says
little). When multi-block reads take at least :data:`SCAN_TIME_SHARE_PCT` (25 %) of the
read wait time and the single-block average is flagged, the finding says that heavy full
scans slow the single-block reads ([Insight-SSD9], quoting insight-tec's wait-event series: "full
scans causing a disk I/O bottleneck often make single-block index access slow").

Where the report has AWR's IOStat by Filetype summary (11.2+), a finding on single-block
(multi-block) reads also gives the data files' small (large) read service time the
database's I/O layer measured: the same slowness seen without the wait's CPU and queues.

Waits are not device statistics: findings are host-wide (``device`` None), at most
:data:`~iogauge.analysis.rules._common.MAX_FINDINGS_PER_DEVICE` per database instance (the
worst runs of consecutive report intervals).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.rules._common import (
    MAX_FINDINGS_PER_DEVICE,
    Matches,
    Run,
    find_runs,
    fmt_ms,
    level_expr,
    matched_evidence,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole, Severity

RULE_ID = "oracle_waits"
ROLE = RuleRole.LOAD
DESCRIPTION = ("Oracle I/O wait averages (Statspack/AWR) above 2x (warning) / 5x (critical) "
               "what the device should give: its typical latency, else 10 ms single-block "
               "(Oracle EM guidance) and 20 ms multi-block ([Insight-SSD9]).")

SINGLE_EVENTS = ("db file sequential read", "cell single block physical read")
MULTI_EVENTS = ("db file scattered read", "direct path read", "direct path read temp",
                "cell multiblock physical read")
REDO_EVENTS = ("log file parallel write", "log file sync")
GENERIC_SINGLE_MS = 10.0
GENERIC_MULTI_MS = 20.0
MULTIBLOCK_MB = 1.0
WARN_FACTOR = 2.0
CRITICAL_FACTOR = 5.0
MIN_WAITS = 20.0
SCAN_TIME_SHARE_PCT = 25.0
#: the section of the Wait Event Histogram's rows (shares of waits by time bucket)
HIST_SECTION = "wait event histogram"
#: the section of IOStat by Filetype's rows (``Data File small read`` ... : service times)
FILETYPE_SECTION = "iostat by filetype"
#: Section preference when one report lists an event more than once (lower first).
SECTION_RANK: dict[str, int] = {"wait events": 0, "foreground wait events": 0,
                                "background wait events": 1, "top timed events": 2}
#: Kinds that are not storage a database file lives on.
_NOT_STORAGE = frozenset({"datafile", "tablespace", "lcu", "port", "ram", "loop"})
SOURCE = ("[Insight-SSD9] (Statspack avg wait per event, HDD 0.74/1.11 cs vs SSD "
          "0.37/0.25 cs per db file scattered read; full scans slow single-block reads); "
          "Oracle Enterprise Manager 11g online help, I/O: Latency for Synchronous Single "
          "Block Reads (< 10 ms satisfactory); Oracle Database Reference, "
          "DB_FILE_MULTIBLOCK_READ_COUNT (1 MB); [Goodus] §3.4 (>= 50 ms bottleneck)")

_KEYS = ("host", "db_name", "instance")


def event_averages(waits: pl.DataFrame) -> pl.DataFrame:
    """One row per (host, db_name, instance, ts, event): waits, time waited, average (ms).

    ``avg_ms`` = time_waited_s x 1000 / waits, or the printed ``avg_wait_ms`` when that is
    the more precise of the two (see the rounding note in the code). ``kind`` is
    ``single``, ``multi``, ``redo`` or null (not an I/O event this rule judges).
    """
    hist, filetype = _histogram(waits), _filetype(waits)
    waits = waits.filter(~pl.col("section").str.to_lowercase().is_in(
        [HIST_SECTION, FILETYPE_SECTION]))
    df = waits.with_columns(
        _rank=pl.col("section").str.to_lowercase()
        .replace_strict(SECTION_RANK, default=9, return_dtype=pl.Int64),
        event=pl.col("event").str.strip_chars())
    df = (df.sort(["_rank"]).unique(subset=[*_KEYS, "ts", "event"], keep="first",
                                    maintain_order=True))
    computed = (pl.when((pl.col("waits") > 0) & pl.col("time_waited_s").is_not_null())
                .then(pl.col("time_waited_s") * 1000.0 / pl.col("waits")).otherwise(None))
    # Both figures are rounded in the reports: Time Waited to 1/100 s (8i/9i Statspack) or
    # to whole seconds (10g+ Statspack, AWR), the printed average to whole ms (or to 0.01 ms
    # in 12c+ AWR). Take the one with the smaller rounding error: half the last digit of
    # Time Waited spread over the waits, against half the last digit of the printed mean.
    tw = pl.col("time_waited_s")
    tw_res_s = pl.when((tw - tw.round(0)).abs() < 1e-9).then(1.0).otherwise(0.01)
    err_computed = tw_res_s * 1000.0 / (2.0 * pl.col("waits"))
    p = pl.col("avg_wait_ms")
    err_printed = (pl.when((p - p.round(0)).abs() < 1e-9).then(0.5)
                   .when((p - p.round(1)).abs() < 1e-9).then(0.05).otherwise(0.005))
    best = (pl.when(computed.is_null()).then(p)
            .when(p.is_null() | (err_computed <= err_printed)).then(computed)
            .otherwise(p))
    kind = (pl.when(pl.col("event").is_in(SINGLE_EVENTS)).then(pl.lit("single"))
            .when(pl.col("event").is_in(MULTI_EVENTS)).then(pl.lit("multi"))
            .when(pl.col("event").is_in(REDO_EVENTS)).then(pl.lit("redo"))
            .otherwise(pl.lit(None, dtype=pl.String())))
    return (df.with_columns(avg_ms=best, kind=kind)
            .select(*_KEYS, "ts", "interval_s", "section", "event", "kind", "waits",
                    "time_waited_s", "avg_ms")
            .join(hist, on=[*_KEYS, "ts", "event"], how="left", nulls_equal=True)
            .join(filetype, on=[*_KEYS, "ts"], how="left", nulls_equal=True)
            .sort([*_KEYS, "ts", "event"], nulls_last=True))


def _histogram(waits: pl.DataFrame) -> pl.DataFrame:
    """The Wait Event Histogram's shares per (instance, interval, event): the percentage
    of waits of 32 ms or more and of 1 s or more (AWR/Statspack, what iostat lacks)."""
    return (waits.filter(pl.col("section").str.to_lowercase() == HIST_SECTION)
            .select(*_KEYS, "ts", pl.col("event").str.strip_chars(),
                    hist_ge_32ms_pct="waits_ge_32ms_pct", hist_ge_1s_pct="waits_ge_1s_pct")
            .unique(subset=[*_KEYS, "ts", "event"], keep="first"))


def _filetype(waits: pl.DataFrame) -> pl.DataFrame:
    """AWR's IOStat by Filetype per (instance, interval): the data files' small and large
    read service times (ms), as the database's I/O layer timed them."""
    ft = waits.filter(pl.col("section").str.to_lowercase() == FILETYPE_SECTION)
    keys = [*_KEYS, "ts"]
    small = ft.filter(pl.col("event") == "Data File small read").select(
        *keys, datafile_small_read_ms="avg_wait_ms").unique(subset=keys, keep="first")
    large = ft.filter(pl.col("event") == "Data File large read").select(
        *keys, datafile_large_read_ms="avg_wait_ms").unique(subset=keys, keep="first")
    return small.join(large, on=keys, how="full", coalesce=True, nulls_equal=True)


def _filetype_evidence(kind: str, worst: dict[str, object]) -> tuple[list[Evidence], str]:
    """IOStat by Filetype's data file read time for the size of this event's reads, as
    evidence and a sentence (none for redo, or when the report has no such table)."""
    size = {"single": "small", "multi": "large"}.get(kind)
    value = worst.get(f"datafile_{size}_read_ms") if size else None
    if not isinstance(value, (int, float)):
        return [], ""
    ms = float(value)
    note = f"IOStat by Filetype: Data File {size} reads took {fmt_ms(ms)} on average"
    return ([Evidence(f"datafile_{size}_read_ms", ms, "ms", note=note)],
            f" {note} -- the database's own I/O timing, without its CPU and queues.")


@dataclass(frozen=True)
class Expectation:
    """What one kind of wait should average on this host's storage.

    Attributes:
        single_ms, multi_ms: expected averages (ms) of single-block and multi-block reads.
        basis: where they come from (device capabilities or the generic figures).
    """

    single_ms: float
    multi_ms: float
    basis: str

    def for_kind(self, kind: str) -> float:
        return self.multi_ms if kind == "multi" else self.single_ms


def expectation(ctx: AnalysisContext, host: str) -> Expectation:
    """Expected wait averages from the capabilities of the host's devices, else generic."""
    cands = [d for d in ctx.devices.values()
             if d.kind not in _NOT_STORAGE and d.capability is not None
             and d.capability.latency_ms_typical is not None]
    same = [d for d in cands if d.host == host]
    note = ""
    if not same and cands and len({d.host for d in cands}) == 1:
        same = cands
        note = f" (devices of host {cands[0].host}; the waits' host {host} has none)"
    if not same:
        return Expectation(GENERIC_SINGLE_MS, GENERIC_MULTI_MS,
                           "generic: no device capability in this analysis (Oracle EM "
                           "< 10 ms single-block; 10 ms + 1 MB at ~100 MB/s multi-block)")
    return expectation_of(same, note)


def expectation_of(devices: list[DeviceContext], note: str = "") -> Expectation:
    """Expected averages from these devices' capabilities (the slowest of them: the data
    may be on any)."""
    single = 0.0
    multi = 0.0
    names = []
    for d in devices:
        cap = d.capability
        if cap is None or cap.latency_ms_typical is None:  # pragma: no cover - filtered above
            continue
        typ = cap.latency_ms_typical
        transfer = (MULTIBLOCK_MB / cap.seq_read_MBps * 1000.0 if cap.seq_read_MBps
                    else typ)
        single = max(single, typ)
        multi = max(multi, typ + transfer)
        names.append(f"{d.key} ({cap.profile}: {typ:g} ms typical)")
    return Expectation(single, multi, "device capability: " + ", ".join(names) + note)


def check(ctx: AnalysisContext) -> list[Finding]:
    if ctx.waits is None or ctx.waits.height == 0:
        return []
    avg = event_averages(ctx.waits)
    out: list[Finding] = []
    for keys, inst in avg.group_by(list(_KEYS), maintain_order=True):
        host = str(keys[0])
        exp = expectation(ctx, host)
        out.extend(_instance(ctx, inst, exp, keys))
    return out


def _scan_share(inst: pl.DataFrame) -> pl.DataFrame:
    """Per report interval: multi-block share (%) of the read wait time."""
    return (inst.filter(pl.col("kind").is_in(["single", "multi"]))
            .group_by("ts")
            .agg(multi=pl.col("time_waited_s").filter(pl.col("kind") == "multi").sum(),
                 total=pl.col("time_waited_s").sum())
            .select("ts", scan_share_pct=pl.when(pl.col("total") > 0)
                    .then(100.0 * pl.col("multi") / pl.col("total")).otherwise(None)))


def _instance(ctx: AnalysisContext, inst: pl.DataFrame, exp: Expectation,
              keys: tuple[object, ...]) -> list[Finding]:
    # report intervals of the instance, in order: consecutive ones form runs
    order = (inst.select("ts").unique().sort("ts")
             .with_row_index("window").with_columns(pl.col("window").cast(pl.Int64)))
    scans = _scan_share(inst)
    cands: list[tuple[int, float, Finding]] = []
    for (event,), ev in inst.filter(pl.col("kind").is_not_null()).group_by(
            ["event"], maintain_order=True):
        kind = str(ev["kind"][0])
        e = exp.for_kind(kind)
        w = (ev.join(order, on="ts").join(scans, on="ts", how="left").sort("ts")
             .with_columns(
                 window_start=pl.col("ts") - pl.duration(
                     microseconds=(pl.col("interval_s") * 1e6).cast(pl.Int64)),
                 window_end=pl.col("ts"), intervals=pl.lit(1, dtype=pl.Int64),
                 span_s=pl.col("interval_s"), ratio=pl.col("avg_ms") / e))
        enough = pl.col("waits") >= MIN_WAITS
        level = level_expr(critical=enough & (pl.col("ratio") > CRITICAL_FACTOR),
                           warning=enough & (pl.col("ratio") > WARN_FACTOR))
        median = w["interval_s"].median()
        found = find_runs(w, level, score=pl.col("ratio"),
                          window_s=float(median) if isinstance(median, (int, float)) else 0.0)
        for run in found.runs:
            f = _finding(str(event), kind, e, exp, run, found, keys)
            cands.append((run.level, run.score, f))
    cands.sort(key=lambda t: (-t[0], -t[1]))
    return [f for _, _, f in cands[:MAX_FINDINGS_PER_DEVICE]]


def _finding(event: str, kind: str, e: float, exp: Expectation, run: Run, found: Matches,
             keys: tuple[object, ...]) -> Finding:
    worst = run.worst
    avg = float(worst["avg_ms"])
    severity: Severity = "critical" if run.level >= 2 else "warning"
    threshold = e * (CRITICAL_FACTOR if severity == "critical" else WARN_FACTOR)
    host, db, inst = (str(k) if k is not None else None for k in keys)
    where = "/".join(x for x in (db, inst) if x) or "the database"
    scan = worst.get("scan_share_pct")
    full_scans = kind == "single" and scan is not None and scan >= SCAN_TIME_SHARE_PCT
    what = {"single": "single-block reads", "multi": "multi-block reads",
            "redo": "redo writes"}[kind]
    title = (f"{event} averages {fmt_ms(avg)} per wait on {where} (expected ~{e:g} ms for "
             f"{what})")
    if full_scans:
        title += ": heavy full scans slow single-block reads"
    evidence = [
        Evidence("avg_wait_ms", avg, "ms", threshold, ">",
                 "Time Waited / Waits of the worst report interval"),
        Evidence("expected_ms", e, "ms", note=exp.basis),
        Evidence("ratio_to_expected", avg / e, "x",
                 CRITICAL_FACTOR if severity == "critical" else WARN_FACTOR, ">"),
        Evidence("waits", float(worst["waits"]), "", MIN_WAITS, ">=",
                 "waits in the interval"),
    ]
    tw = worst.get("time_waited_s")
    if tw is not None:
        evidence.append(Evidence("time_waited_s", float(tw), "s"))
    if scan is not None and kind == "single":
        evidence.append(Evidence("multiblock_time_share_pct", float(scan), "%",
                                 SCAN_TIME_SHARE_PCT, ">=" if full_scans else "<",
                                 "multi-block read time / all read wait time"))
    slow, very = worst.get("hist_ge_32ms_pct"), worst.get("hist_ge_1s_pct")
    spread = ""
    if slow is not None:
        mid = float(slow) - float(very or 0.0)
        spread = (f" The Wait Event Histogram shows where they fell: {mid:.1f} % of the "
                  f"'{event}' waits took 32 ms-1 s and {float(very or 0.0):.1f} % 1 s or "
                  "more -- the slow reads are the rule, not a few outliers.")
        evidence.append(Evidence("waits_ge_32ms_pct", float(slow), "%",
                                 note=f"Wait Event Histogram: {mid:.1f} % in 32 ms-1 s, "
                                      f"{float(very or 0.0):.1f} % >= 1 s"))
    ft_evidence, ft_text = _filetype_evidence(kind, worst)
    evidence += ft_evidence
    evidence.append(Evidence("host", host, "", note=f"report section: {worst['section']}"))
    evidence.append(matched_evidence(found, run))
    explanation = (f"The database waited {fmt_ms(avg)} per '{event}' on average, "
                   f"{avg / e:.1f}x what the storage should give for {what} ({exp.basis}).")
    explanation += spread + ft_text
    if kind == "single":
        explanation += (" Single-block reads are random (index and rowid access): each "
                        "should cost about one random read of the device.")
    if full_scans:
        explanation += (f" Multi-block reads (full scans) took {scan:.0f} % of the read wait "
                        "time: they keep the device busy and single-block reads queue "
                        "behind them ([Insight-SSD9]: 538 ms per single-block read on the busy "
                        "hard disk, 60 ms on SSD).")
    if kind == "redo":
        explanation += " Redo writes set commit latency (log file sync waits for them)."
    suggestion = {
        "single": "Compare with the device's read latency (r_await) over the same "
                  "interval: if the device is slow, see its capability and load; if the "
                  "device is fast, look for queuing behind other I/O (full scans, "
                  "backups) and reduce physical reads (buffer cache, indexes).",
        "multi": "Check the device's sequential throughput and load in the interval; reduce "
                 "full scans (indexes, partition pruning) or move the scanned segments to "
                 "faster storage ([Insight-SSD9]: SSD halved the scattered-read wait).",
        "redo": "Put the online redo logs on the fastest, least shared device (write "
                "cache, SSD), away from data files; check commit frequency.",
    }[kind]
    if full_scans:
        suggestion = ("Reduce the full scans first (indexes, SQL, partition pruning): "
                      "they slow the single-block reads. " + suggestion)
    return Finding(rule=RULE_ID, severity=severity, device=None, window_start=run.start,
                   window_end=run.end, title=title, evidence=evidence,
                   explanation=explanation, suggestion=suggestion, source=SOURCE)
