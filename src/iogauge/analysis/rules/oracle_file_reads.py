"""Tablespaces and datafiles judged by their read time (AWR/Statspack ``Av Rd(ms)``).

A tablespace or datafile row of a Statspack/AWR report carries the average time of its
reads (``Av Rd(ms)``, SampleFrame ``r_await_ms``) and the blocks per read (``Av Blks/Rd``,
``r_areq_kB`` / block size). With about one block a read, that time is a single-block read,
the random read of one device: Oracle Enterprise Manager's I/O guidance counts "fewer than
10 milliseconds" as satisfactory for synchronous single-block reads (EM 11g online help,
Performance: I/O, Latency for Synchronous Single Block Reads), and no disk that is not
overloaded takes much more: a 7,200 rpm disk's random read is some 8-12 ms ([Goodus] §3.4
counts up to 30 ms of response time as normal, >= 50 ms busy as a bottleneck). Multi-block
reads add the transfer of up to 1 MB (Oracle Database Reference,
DB_FILE_MULTIBLOCK_READ_COUNT): 20 ms at ~100 MB/s.

Expectation *E* per row: the typical latency of the device ``--map TABLESPACE=DEV`` puts
under it (a datafile follows its tablespace's entry unless it has its own); without one,
of the devices of the same host when the analysis has their capability
(``oracle_waits.expectation``: the data files may be on any of them), else 10 ms for
single-block reads; the
multi-block E (device latency + 1 MB at its sequential rate, else 20 ms) when the row
averages more than :data:`MULTI_BLOCKS` blocks a read. An average above
:data:`WARN_FACTOR` x E (2x) is a **warning**, above :data:`CRITICAL_FACTOR` x E (5x: 50 ms
single-block, [Goodus]'s bottleneck line) **critical** -- the factors of ``oracle_waits``,
so the tablespace and the wait event that measure the same reads are judged alike (the SOE
case of issue 38: 177.6 ms at 103 reads/s is 17.8x the 10 ms single-block E: critical).
Rows with fewer than :data:`MIN_READS_PER_S` reads/s (a mean of a handful of reads says
little: SYSAUX's 12 ms over 288 reads in ten minutes) are not judged.

The report's Operating System Statistics (the rows' host CPU columns) say whether the host
waited on I/O or was CPU-bound in the same window ([Insight-SSD9]'s busy-or-bottleneck
question): evidence ``cpu_iowait_pct`` and a sentence.

Both the tablespace and its datafiles are judged (the report prints both, and each gets a
verdict of its own); the engine's verdict follows these findings like any load rule's.
"""

from __future__ import annotations

import polars as pl

from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.rules._common import (
    Matches,
    Run,
    c,
    find_runs,
    fmt_ms,
    fmt_num,
    level_expr,
    run_finding,
)
from iogauge.analysis.rules.oracle_waits import (
    CRITICAL_FACTOR,
    WARN_FACTOR,
    Expectation,
    expectation,
    expectation_of,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole

RULE_ID = "oracle_file_reads"
ROLE = RuleRole.LOAD
DESCRIPTION = ("Oracle tablespace/datafile read time (AWR/Statspack Av Rd(ms)) above 2x "
               "(warning) / 5x (critical) what the device should give: its typical latency, "
               "else 10 ms single-block (Oracle EM guidance) and 20 ms multi-block "
               "([Goodus] §3.4: >= 50 ms is a bottleneck).")

KINDS = frozenset({"tablespace", "datafile"})
#: Av Blks/Rd above which a row's reads are mostly multi-block (full scans)
MULTI_BLOCKS = 2.0
#: reads/s below which a row is not judged
MIN_READS_PER_S = 1.0
#: the block size when the rows do not say (r_areq_kB / block = Av Blks/Rd)
BLOCK_KB = 8.0
#: host I/O wait (%) at or above which (and above CPU busy) the host is said to wait on I/O
HOST_IOWAIT_PCT = 20.0
#: host CPU busy (%) at or above which it is said to be CPU-bound ([Insight-SSD9]'s SELECT
#: case: %user about 90)
HOST_BUSY_PCT = 80.0
SOURCE = ("Oracle Enterprise Manager 11g online help, I/O: Latency for Synchronous Single "
          "Block Reads (< 10 ms satisfactory); Oracle Database Reference, "
          "DB_FILE_MULTIBLOCK_READ_COUNT (1 MB); [Goodus] §3.4 (<= 30 ms normal, >= 50 ms "
          "bottleneck); AWR/Statspack Tablespace and File IO Stats (Av Rd(ms), Av Blks/Rd)")


def check(ctx: AnalysisContext) -> list[Finding]:
    out: list[Finding] = []
    for dev in ctx.devices.values():
        if dev.kind not in KINDS or dev.windows.height == 0 or "r_await_ms" not in \
                dev.windows.columns:
            continue
        out.extend(_check_device(ctx, dev))
    return out


def _check_device(ctx: AnalysisContext, dev: DeviceContext) -> list[Finding]:
    w = dev.windows
    exp = _expectation(ctx, dev)
    blocks = c(w, "r_areq_kB") / BLOCK_KB
    multi = blocks.fill_null(1.0) > MULTI_BLOCKS
    expected = pl.when(multi).then(pl.lit(exp.multi_ms)).otherwise(pl.lit(exp.single_ms))
    rd = c(w, "r_await_ms")
    judged = c(w, "r_iops").fill_null(0.0) >= MIN_READS_PER_S
    ratio = rd / pl.col("_expected")
    wt = (w.lazy()
          .with_columns(_expected=expected, _blocks=blocks, _multi=multi)
          .with_columns(_ratio=pl.when(judged).then(ratio).otherwise(None))
          .with_columns(_level=level_expr(
              critical=(pl.col("_ratio") > CRITICAL_FACTOR).fill_null(value=False),
              warning=(pl.col("_ratio") > WARN_FACTOR).fill_null(value=False)))
          .collect())
    found = find_runs(wt, "_level", "_ratio", window_s=ctx.window_s)
    return [_finding(dev, run, found, exp.basis) for run in found.runs]


def _mapped(ctx: AnalysisContext, dev: DeviceContext) -> tuple[str, str] | None:
    """(name, device) of the ``--map`` entry that places this row: its own name, or for a
    datafile its tablespace's."""
    names = [dev.key, dev.device] + ([dev.parent] if dev.kind == "datafile" and dev.parent
                                     else [])
    for name in names:
        if name in ctx.storage_map:
            return name, ctx.storage_map[name]
    return None


def _expectation(ctx: AnalysisContext, dev: DeviceContext) -> Expectation:
    """The capability of the device ``--map`` puts under this row, else of the host's
    devices (oracle_waits.expectation)."""
    mapped = _mapped(ctx, dev)
    if mapped is None:
        return expectation(ctx, dev.host)
    name, target = mapped
    under = [d for d in ctx.devices.values()
             if target in (d.key, d.device, f"{d.host}:{d.device}") and d.kind not in KINDS]
    known = [d for d in under
             if d.capability is not None and d.capability.latency_ms_typical is not None]
    if known:
        return expectation_of(known[:1], f" (--map {name}={target})")
    fallback = expectation(ctx, dev.host)
    why = "not in this analysis" if not under else "of no known capability"
    return Expectation(fallback.single_ms, fallback.multi_ms,
                       f"--map {name}={target}: {target} is {why}; {fallback.basis}")


def _host_cpu(worst: dict[str, object]) -> tuple[list[Evidence], str]:
    """The report's Operating System Statistics for its window (the rows' host CPU
    columns): whether the host waited on I/O or was CPU-bound -- [Insight-SSD9]'s
    question, busy disk or CPU-bound database, answered from the report alone."""
    def pct(col: str) -> float:
        value = worst.get(col)
        return float(value) if isinstance(value, (int, float)) else 0.0

    if not isinstance(worst.get("cpu_iowait_pct"), (int, float)):
        return [], ""
    iowait = pct("cpu_iowait_pct")
    busy = pct("cpu_user_pct") + pct("cpu_nice_pct") + pct("cpu_system_pct")
    note = (f"Operating System Statistics of the report: CPUs {busy:.1f} % busy, "
            f"{iowait:.1f} % waiting on I/O")
    if iowait >= HOST_IOWAIT_PCT and iowait >= busy:
        text = (f" The host's CPUs waited on I/O {iowait:.1f} % of the window and were busy "
                f"{busy:.1f} %: the database was held up by its reads, not by CPU.")
    elif busy >= HOST_BUSY_PCT:
        text = (f" The host's CPUs were {busy:.1f} % busy ({iowait:.1f} % I/O wait): a "
                "CPU-bound host also stretches the time the database measures for a read "
                "([Insight-SSD9]: a disk at 88 % util under a CPU-bound SELECT was busy, not "
                "the bottleneck).")
    else:
        text = f" Host CPU in the window: {busy:.1f} % busy, {iowait:.1f} % I/O wait."
    return [Evidence("cpu_iowait_pct", iowait, "%", note=note)], text


def _finding(dev: DeviceContext, run: Run, found: Matches, basis: str) -> Finding:
    worst = run.worst
    rd = float(worst["r_await_ms"])
    expected = float(worst["_expected"])
    multi = bool(worst["_multi"])
    factor = CRITICAL_FACTOR if run.severity == "critical" else WARN_FACTOR
    what = "multi-block" if multi else "single-block"
    kind = "tablespace" if dev.kind == "tablespace" else "datafile"
    r_iops = worst.get("r_iops")
    title = (f"{kind} {dev.device}: reads take {fmt_ms(rd)} on average at "
             f"{fmt_num(None if r_iops is None else float(r_iops))} reads/s "
             f"(expected ~{fmt_ms(expected)} for {what} reads)")
    blocks = worst.get("_blocks")
    evidence = [
        Evidence("r_await_ms", rd, "ms", threshold=factor * expected, op=">",
                 note="Av Rd(ms) of the worst report interval"),
        Evidence("expected_ms", expected, "ms", note=basis),
        Evidence("ratio_to_expected", float(worst["_ratio"]), "x", threshold=factor, op=">"),
        Evidence("r_iops", None if r_iops is None else float(r_iops), "IO/s",
                 threshold=MIN_READS_PER_S, op=">=", note="Av Reads/s"),
        Evidence("blocks_per_read", None if blocks is None else float(blocks), "",
                 note=f"Av Blks/Rd ({BLOCK_KB:g} KB blocks assumed unless the report "
                      "stated its block size)"),
    ]
    cpu_evidence, cpu_text = _host_cpu(worst)
    evidence += cpu_evidence
    explanation = (f"Each read of this {kind} took {fmt_ms(rd)} on average, "
                   f"{rd / expected:.1f}x what a device gives for {what} reads ({basis}). "
                   "Reads that slow are queued behind other I/O or served by an overloaded "
                   "or failing device; every session reading this data waits that long."
                   + cpu_text)
    suggestion = ("Find the device under this tablespace (iostat of the same window, or "
                  "--map TABLESPACE=DEV) and compare its r_await: slow there too means the "
                  "device is overloaded; fast there means queueing above it (full scans, "
                  "backups, a shared LUN). Reduce physical reads (buffer cache, indexes).")
    return run_finding(RULE_ID, dev, run, found, title=title, evidence=evidence,
                       explanation=explanation, suggestion=suggestion, source=SOURCE)
