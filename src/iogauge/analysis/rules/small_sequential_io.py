"""Small sequential I/O: a sequential stream cut into small requests ([Goodus] §4.3-4.6).

[Goodus]: read-ahead and write-behind let the file system move a sequential
stream in large transfers instead of many small ones. With UFS ``maxcontig`` 6 (clusters of
6 x 8 KB blocks = 48 KB) a 500 MB ``cp`` read at 492.4 r/s of 21 kB each (10,543.8 kB/s, 48 %
busy) and ``mkfile`` wrote 141 w/s of 48 kB (6,743.3 kB/s at 100 % busy, svc_t 1,246 ms);
with ``maxcontig`` 128 (1 MB clusters) the same work ran in ~160 kB reads / ~660 kB writes
and over 3x faster (mkfile 1m26s -> 0m28s). Larger transfers also need ``maxphys`` (the
SCSI transfer cap) to allow them (§4.5). But read-ahead is *harmful* for small random files
(web, mail: §4.6): it reads data nobody asked for.

Per window (only windows with at least :data:`MIN_IOPS`):

* small: mean request size below :data:`SMALL_KB` = 64 kB. [Goodus]'s slow runs moved
  21-48 kB per request against 160-660 kB after tuning; from 64 kB the attributes' estimate
  counts a request as sequential evidence (the block layer builds requests that large only
  from contiguous data), 64 kB is half of Linux's default 128 kB read-ahead window and SQL
  Server's extent read - not small;
* many: at least :data:`MIN_IOPS` = 100 IO/s - [Goodus]'s cases ran 141 and 492 IO/s;
  below 100 IO/s per-request overhead costs a disk little whatever the size;
* sequential: share of sequential operations >= :data:`SEQ_MIN_PCT` = 50 % (most of them),
  from, in order: the controller's counts (RMF cache ``seq_read_ps + seq_write_ps``, per
  window), the block layer's merges (``(r_merged + w_merged) / IOPS``, per window, an
  estimate: a merge only happens to contiguous requests), or the device-level
  ``attributes.seq_pct`` with its method.

Severity: **warning** when the sequential share is known (at most
:data:`MAX_FINDINGS_PER_DEVICE` runs per device). **info** (one per device) when the source
cannot tell sequential from random (Solaris ``iostat``, perfmon, sar without merges; the
attributes' size-only estimate is not used: it calls small requests random by construction)
but the requests are cluster-sized - above :data:`CLUSTER_MIN_KB` = 16 kB, larger than a
random database page or file-system block, as [Goodus]'s 21 kB and 48 kB were - and keep
the device busy (>= :data:`BUSY_PCT` = 40 %, [Goodus]'s cp ran at 48 %): the operator knows
whether the workload is a copy, a backup or a scan. No sustained requirement, since [Goodus]
judges single iostat reports.
"""

from __future__ import annotations

import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.rules._common import (
    MAX_FINDINGS_PER_DEVICE,
    Matches,
    Run,
    areq_kB_expr,
    c,
    devices_to_judge,
    find_runs,
    fmt_num,
    fmt_pct,
    fmt_rate,
    has,
    iops_expr,
    kBps_expr,
    level_expr,
    run_finding,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole
from iogauge.analysis.windows import window_label

RULE_ID = "small_sequential_io"
ROLE = RuleRole.ADVICE
DESCRIPTION = ("Sequential work in small requests (< 64 kB at >= 100 IO/s, >= 50 % "
               "sequential): read-ahead / write-behind would merge them ([Goodus] maxcontig); "
               "harmful for small random files.")

#: Mean request size below which requests are small (see docstring).
SMALL_KB = 64.0
#: Fewest operations per second for the request count to matter.
MIN_IOPS = 100.0
#: Sequential share from which a stream is sequential.
SEQ_MIN_PCT = 50.0
#: Busy from which small requests of unknown pattern are worth a note.
BUSY_PCT = 40.0
#: Unknown pattern: requests larger than this (and below SMALL_KB) look like file-system
#: clusters rather than random blocks (database pages and file-system blocks are 4-16 kB;
#: the attributes' estimate also counts <= 16 kB as random).
CLUSTER_MIN_KB = 16.0

EXCLUDED_KINDS = frozenset({"ram", "port", "lcu", "tablespace", "datafile"})

SOURCE = ("[Goodus] §4.3-4.6 (UFS maxcontig 6 -> 128: read-ahead/write-behind cut IOPS for "
          "sequential work, a 500 MB copy ~3x faster; maxphys caps the transfer; harmful for "
          "small random files)")

_SOLARIS = ("Solaris UFS: raise maxcontig (tunefs -a 128 /dev/rdsk/<slice>: 128 x 8 KB = 1 MB "
            "clusters, [Goodus] §4.3-4.4) and allow large transfers (set maxphys=1048576 in "
            "/etc/system; md_maxphys / vxio:vol_maxio for SVM / VxVM volumes, §4.5)")
_LINUX = ("Linux: raise read-ahead (blockdev --setra 2048 /dev/<dev>, or "
          "/sys/block/<dev>/queue/read_ahead_kb = 1024) and check max_sectors_kb allows large "
          "requests; for writes, let the page cache gather them (buffered I/O, no O_SYNC per "
          "small write) or write larger blocks from the application")
_DB = ("databases: read more per call (Oracle db_file_multiblock_read_count, SQL Server "
       "read-ahead / backup MAXTRANSFERSIZE, DB2 prefetch size)")
_AIX = "AIX JFS2: ioo -o j2_maxPageReadAhead / j2_nPagesPerWriteBehindCluster"
_WINDOWS = ("Windows: the application's transfer size (backup MAXTRANSFERSIZE, copy tools with "
            "large buffers such as robocopy /J for unbuffered large-file copies)")

_HINTS: dict[str, list[str]] = {
    "solaris-iostat": [_SOLARIS, _DB],
    "unix-sar": [_SOLARIS, _AIX, _DB],
    "aix-iostat": [_AIX, _DB],
    "perfmon": [_WINDOWS, _DB],
    "rmf": [_DB],
}


def check(ctx: AnalysisContext) -> list[Finding]:
    """Findings for devices moving sequential data in small requests."""
    return [f for dev in devices_to_judge(ctx, EXCLUDED_KINDS) for f in _check_device(ctx, dev)]


def _seq_expr(dev: DeviceContext, w: pl.DataFrame) -> tuple[pl.Expr, str] | None:
    """Per-window sequential share (0-100) and how it was obtained, or None if unknown."""
    iops = iops_expr(w)
    if has(w, "seq_read_ps") or has(w, "seq_write_ps"):
        seq = c(w, "seq_read_ps").fill_null(0.0) + c(w, "seq_write_ps").fill_null(0.0)
        return (pl.when(iops > 0).then((100.0 * seq / iops).clip(upper_bound=100.0)),
                "counted by the controller cache (RMF seq reads + writes / IOPS)")
    if has(w, "r_merged_ps") or has(w, "w_merged_ps"):
        merged = c(w, "r_merged_ps").fill_null(0.0) + c(w, "w_merged_ps").fill_null(0.0)
        return (pl.when(iops > 0).then((100.0 * merged / iops).clip(upper_bound=100.0)),
                ("estimate: merged requests / completed requests (only contiguous requests "
                 "merge)"))
    a = dev.attributes
    # The attributes' "estimate" without merge counts rests on request size alone (small =
    # random): circular for a rule about small requests, so only a counted share is used.
    if a is not None and a.seq_pct is not None and a.seq_method not in (None, "estimate"):
        return (pl.lit(float(a.seq_pct), dtype=pl.Float64),
                (f"device-level attribute ({a.seq_method}), the same for every window"))
    return None


def _check_device(ctx: AnalysisContext, dev: DeviceContext) -> list[Finding]:
    w = dev.windows
    seq = _seq_expr(dev, w)
    small_many = (pl.col("_iops") >= MIN_IOPS) & (pl.col("_areq") < SMALL_KB)
    if seq is not None:
        level = level_expr(warning=small_many & (pl.col("_seq") >= SEQ_MIN_PCT))
        limit = MAX_FINDINGS_PER_DEVICE
    else:
        level = level_expr(info=small_many & (pl.col("_areq") > CLUSTER_MIN_KB)
                           & (c(w, "util_pct") >= BUSY_PCT))
        limit = 1
    wt = (w.lazy()
          .with_columns(_iops=iops_expr(w), _kBps=kBps_expr(w), _areq=areq_kB_expr(w),
                        _seq=seq[0] if seq is not None else pl.lit(None, dtype=pl.Float64))
          .with_columns(_level=level).collect())
    # Worst = most operations spent on small requests.
    found = find_runs(wt, "_level", "_iops", window_s=ctx.window_s, limit=limit)
    return [_finding(ctx, dev, run, found, None if seq is None else seq[1])
            for run in found.runs]


def _direction(worst: dict[str, object]) -> tuple[str, float | None, float | None]:
    """('reads'|'writes', that direction's IO/s, its mean request size in kB)."""
    r = float(worst.get("r_iops") or 0.0)  # type: ignore[arg-type]
    wr = float(worst.get("w_iops") or 0.0)  # type: ignore[arg-type]
    if r >= wr:
        size = worst.get("r_areq_kB")
        kb = worst.get("r_kBps")
        name, ops = "reads", r
    else:
        size = worst.get("w_areq_kB")
        kb = worst.get("w_kBps")
        name, ops = "writes", wr
    if size is None and kb is not None and ops > 0:
        size = float(kb) / ops  # type: ignore[arg-type]
    return name, ops or None, None if size is None else float(size)  # type: ignore[arg-type]


def _finding(ctx: AnalysisContext, dev: DeviceContext, run: Run, found: Matches,
             seq_method: str | None) -> Finding:
    label = window_label(ctx.window_s, ctx.timeline)
    worst = run.worst
    note = f"worst {label} window" if run.windows > 1 else f"{label} window"
    iops = float(worst["_iops"])
    areq = float(worst["_areq"])
    direction, dir_iops, dir_kb = _direction(worst)
    evidence = [
        Evidence("areq_kB", areq, "kB", threshold=SMALL_KB, op="<",
                 note=f"mean request size, {note}"),
        Evidence("iops", iops, "IO/s", threshold=MIN_IOPS, op=">=", note=note),
    ]
    if dir_kb is not None:
        evidence.append(Evidence(f"{direction[0]}_areq_kB", dir_kb, "kB",
                                 note=f"{direction} ({fmt_rate(dir_iops)})"))
    if worst.get("_kBps") is not None:
        evidence.append(Evidence("MBps", float(worst["_kBps"]) / 1024.0, "MB/s", note=note))
    if seq_method is not None:
        evidence.append(Evidence("seq_pct", float(worst["_seq"]), "%", threshold=SEQ_MIN_PCT,
                                 op=">=", note=f"sequential share: {seq_method}"))
    else:
        evidence.append(Evidence("seq_pct", None, "%",
                                 note="not measured: this source cannot tell sequential "
                                      "from random requests"))
    if worst.get("util_pct") is not None:
        evidence.append(Evidence("util_pct", float(worst["util_pct"]), "%",
                                 threshold=None if seq_method else BUSY_PCT,
                                 op="" if seq_method else ">=", note=note))
    verb = "read-ahead" if direction == "reads" else "write-behind (write clustering)"
    if seq_method is not None:
        title = (f"Sequential {direction} in small requests: {fmt_num(areq)} kB at "
                 f"{fmt_rate(iops)} ({fmt_pct(float(worst['_seq']))} sequential)")
        explanation = (f"Most of these requests are sequential, yet each moves only "
                       f"{fmt_num(areq)} kB, so the device performs {fmt_rate(iops)} where a "
                       f"few large transfers would do. {verb.capitalize()} merges a sequential "
                       "stream into large transfers: [Goodus] cut a 500 MB copy to a third of "
                       "its time by raising UFS maxcontig from 6 (48 KB clusters) to 128 "
                       "(1 MB).")
    else:
        title = (f"Small requests keep the device busy: {fmt_num(areq)} kB at "
                 f"{fmt_rate(iops)}, {fmt_pct(float(worst['util_pct']))} busy")
        explanation = (f"The device spends its time on many small requests ({fmt_num(areq)} kB "
                       "each). This source does not say whether they are sequential; if the "
                       "workload is sequential (a copy, a backup, a full scan, a file being "
                       f"written), {verb} would merge them into large transfers - [Goodus]'s "
                       "500 MB copy ran ~3x faster with 1 MB clusters instead of 48 KB.")
    hints = _HINTS.get(dev.source, [_LINUX, _DB])
    suggestion = ("Enlarge transfers for the sequential work: " + "; ".join(hints) + ". Do "
                  "not do this for file systems holding many small random files (web, mail): "
                  "read-ahead then reads data nobody asked for and wastes the device "
                  "([Goodus] §4.6).")
    return run_finding(RULE_ID, dev, run, found,
                       severity="warning" if seq_method is not None else "info",
                       title=title, evidence=evidence, explanation=explanation,
                       suggestion=suggestion, source=SOURCE)
