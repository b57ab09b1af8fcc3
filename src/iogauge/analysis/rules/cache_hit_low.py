"""Controller cache hit ratio low for a read-heavy, random workload.

[Yuge] reads the cache hit ratio from the RMF CACHE SUBSYSTEM
ACTIVITY report as one of the workload's "application attributes": it decides what the
storage can deliver. A read hit is served from controller cache (DS8000: a few tenths of a
millisecond); a read miss stages the track from the rank's disks (seek + rotation, several
milliseconds on HDD ranks) and shows as DISC time in the volume's response. Writes are
DASD fast writes into NVS and count as hits (WRITE H/R 1.000 in [Yuge]), so the TOTAL
H/R that RMF prints — the figure the importer keeps (``cache_hit_pct``) — overstates the
read hit ratio of a mixed workload. Where the window has the read/write split (``r_iops``,
``w_iops`` of the cache device activity), the rule estimates the read hit ratio assuming
write hits of 100 %: ``read_hit = 100 - (100 - total_hit) / read_share``.

Thresholds (on the read hit ratio where it can be estimated, else on the total):

* **warning** below :data:`HIT_WARN_PCT` (80 %): with hits at ~0.3 ms and misses at ~8 ms,
  80 % hits already put 87 % of the mean read time into misses (0.2 x 8 = 1.6 ms against
  0.8 x 0.3 = 0.24 ms), a mean read ~3x slower than a cache-friendly workload;
* **critical** below :data:`HIT_CRITICAL_PCT` (50 %): the mean read is dominated by disk
  access (~4 ms, ~10x a hit workload).

[Yuge]'s DB2 batch ran at ~100 % (TOTAL H/R 0.998): not flagged. The rule applies to
windows that are read-heavy (reads at least :data:`READ_HEAVY_PCT` of the operations) and
mostly random (sequential reads, counted by the controller, under
:data:`SEQ_READ_MAX_PCT` of the reads): sequential reads are prestaged, and a write-heavy
workload's hit ratio says little about read latency. Where the source lacks the split, the
window is judged on its total hit ratio and the evidence says the mix is unknown. LCU/SSID
summaries are skipped when the host's volumes carry their own hit ratios.

Oracle buffer cache: the Statspack/AWR importers keep wait events and file I/O statistics
but no "Buffer Hit %" (the WaitEventFrame has no such column), so database cache hit
ratios cannot be judged here.
"""

from __future__ import annotations

import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.rules._common import (
    ACTIVE_IOPS,
    c,
    find_runs,
    fmt_pct,
    has,
    iops_expr,
    level_expr,
    run_finding,
    subject,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole

RULE_ID = "cache_hit_low"
ROLE = RuleRole.ADVICE
DESCRIPTION = ("Controller cache hit ratio (RMF) below 80 % (critical below 50 %) for a "
               "read-heavy random workload: read misses go to the rank's disks ([Yuge] "
               "§5.1 step 2).")

HIT_WARN_PCT = 80.0
HIT_CRITICAL_PCT = 50.0
READ_HEAVY_PCT = 50.0
SEQ_READ_MAX_PCT = 50.0
SOURCE = ("[Yuge] (cache hit ratio as an application attribute, "
          "RMF Cache Subsystem Activity); IBM z/OS RMF Report Analysis SC34-2665, Cache "
          "Subsystem Activity (READ/WRITE/TOTAL H/R); thresholds: iogauge, from the cost of "
          "a read miss (~8 ms disk access) against a hit (~0.3 ms)")


def check(ctx: AnalysisContext) -> list[Finding]:
    hosts_with_volumes = {d.host for d in ctx.devices.values()
                          if d.kind != "lcu" and has(d.windows, "cache_hit_pct")}
    out: list[Finding] = []
    for dev in ctx.devices.values():
        w = dev.windows
        if w.height == 0 or not has(w, "cache_hit_pct"):
            continue
        if dev.kind == "lcu" and dev.host in hosts_with_volumes:
            continue
        out.extend(_device(ctx, dev))
    return out


def _columns(w: pl.DataFrame) -> pl.DataFrame:
    r, wr = c(w, "r_iops"), c(w, "w_iops")
    read_pct = pl.when((r + wr) > 0).then(100.0 * r / (r + wr)).otherwise(None)
    seq_pct = (pl.when(r > 0).then((100.0 * c(w, "seq_read_ps") / r).clip(0.0, 100.0))
               .otherwise(None))
    hit = c(w, "cache_hit_pct")
    read_hit = (pl.when(read_pct > 0)
                .then((100.0 - (100.0 - hit) * 100.0 / read_pct).clip(0.0, 100.0))
                .otherwise(None))
    return w.with_columns(_read_pct=read_pct, _seq_read_pct=seq_pct,
                          _read_hit=read_hit, _judged_hit=pl.coalesce(read_hit, hit),
                          _io=iops_expr(w))


def _device(ctx: AnalysisContext, dev: DeviceContext) -> list[Finding]:
    w = _columns(dev.windows)
    active = (pl.col("_io") >= ACTIVE_IOPS) | (pl.col("_io").is_null()
                                                & (c(w, "r_iops") >= ACTIVE_IOPS))
    read_heavy = pl.col("_read_pct").is_null() | (pl.col("_read_pct") >= READ_HEAVY_PCT)
    random = (pl.col("_seq_read_pct").is_null()
              | (pl.col("_seq_read_pct") < SEQ_READ_MAX_PCT))
    applies = active.fill_null(value=False) & read_heavy & random
    hit = pl.col("_judged_hit")
    level = level_expr(critical=applies & (hit < HIT_CRITICAL_PCT),
                       warning=applies & (hit < HIT_WARN_PCT))
    found = find_runs(w, level, score=-hit, window_s=ctx.window_s)
    out: list[Finding] = []
    for run in found.runs:
        worst = run.worst
        total = float(worst["cache_hit_pct"])
        read_hit = worst.get("_read_hit")
        judged = float(worst["_judged_hit"])
        read_pct = worst.get("_read_pct")
        seq = worst.get("_seq_read_pct")
        threshold = HIT_CRITICAL_PCT if run.level >= 2 else HIT_WARN_PCT
        what = "read hit ratio" if read_hit is not None else "cache hit ratio"
        evidence = [Evidence("read_hit_pct" if read_hit is not None else "cache_hit_pct",
                             judged, "%", threshold, "<",
                             "estimated from TOTAL H/R and the read share, write hits taken "
                             "as 100 % (DASD fast write)" if read_hit is not None
                             else "TOTAL H/R; read/write split not in the data")]
        if read_hit is not None:
            evidence.append(Evidence("cache_hit_pct", total, "%", note="TOTAL H/R as reported"))
        evidence.append(Evidence("read_pct", None if read_pct is None else float(read_pct),
                                 "%", READ_HEAVY_PCT, ">=" if read_pct is not None else "",
                                 "share of operations that are reads" if read_pct is not None
                                 else "not in the data: read-heavy assumed"))
        if seq is not None:
            evidence.append(Evidence("seq_read_pct", float(seq), "%", SEQ_READ_MAX_PCT, "<",
                                     "sequential share of reads (controller count)"))
        r_iops = worst.get("r_iops")
        if r_iops is not None:
            evidence.append(Evidence("r_iops", float(r_iops), "IO/s"))
        miss = 100.0 - judged
        title = (subject(dev) + f"{what} {fmt_pct(judged)} for a read-heavy random workload: "
                 f"{fmt_pct(miss)} of reads go to the disks")
        explanation = (f"Reads that miss the controller cache are staged from the rank's "
                       f"disks (several ms each) instead of served from cache (a few tenths "
                       f"of a ms); at {fmt_pct(judged)} hits the misses dominate the mean read "
                       f"response and show as DISC time on the volume.")
        if read_pct is None:
            explanation += (" The data has no read/write split, so the total hit ratio "
                            "(writes count as hits) is judged: the read hit ratio is lower.")
        suggestion = ("Check the volume's DISC time and the rank's read response (ESS rank "
                      "statistics); a larger working set than the cache, or competing "
                      "workloads flushing it, lower the hit ratio: consider more cache, "
                      "moving the hottest data sets to faster (flash) ranks, or reducing "
                      "random reads in the application (buffer pools, indexes).")
        out.append(run_finding(RULE_ID, dev, run, found, title=title, evidence=evidence,
                               explanation=explanation, suggestion=suggestion,
                               source=SOURCE))
    return out
