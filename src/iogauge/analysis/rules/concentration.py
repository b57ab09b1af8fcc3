"""Several volumes, partitions or dm/md devices concentrated on one rank or disk.

[Yuge]: z/OS volumes are spread over the disks of a DS8000 RAID rank,
so "the I/O performance of the volumes of one rank affects each other"; [Yuge]'s DB2 batch
ran eight busy volumes on one RAID-5 rank, which moved 203.8 MB/s read + 238.3 MB/s write
(~440 MB/s) against a published ~600 MB/s sequential maximum — and the authors judged the
rank at its limit because the published figure needs a margin and mixed read/write plus some
random I/O lower it (write RTIME/OP 141.4 ms confirmed it). Moving half the data to a second
rank cut the volumes' response from 1.5 to 0.6 ms. The same holds on any host: partitions of
one disk, LogicalDisks of one PhysicalDisk, dm/md devices built on the same disks.

For each device with at least two *consumers* — its children (``parent`` links: volumes of
a rank, partitions of a disk, LogicalDisks of a PhysicalDisk, via ``ctx.children``) and the
dm/md devices built on it (``aggregate.members`` over the devices' sysfs metadata), keeping
only the topmost of stacked consumers (a partition under an LVM volume counts once, as the
volume) — the rule judges the combined load per window:

* with a capability for the workload's mix (``dev.capability.expected_MBps`` /
  ``expected_iops`` from the catalog): used = max(MB/s / expected MB/s, IO/s / expected IO/s);
  **warning** from :data:`USED_WARN_PCT` (70 %: [Yuge]'s rank was at its limit at
  440 / 600 MB/s = 73 % of the published sequential maximum), **critical** from 100 %;
* else, on a device that serves one request at a time (``util_is_capacity``), %util:
  **warning** from :data:`UTIL_WARN_PCT` (80 %: [Oe] finds the proportional-limit busy
  rate, beyond which response climbs non-linearly, at 80-95 %), **critical** from
  :data:`UTIL_CRITICAL_PCT` (95 %);
* else it cannot tell whether the load is high and says so once (``info``).

A matched run is reported only when at least two consumers each carry
:data:`SHARE_MIN_PCT` (10 %) of the consumers' load over the run — otherwise the load is one
consumer's, not a concentration, and ``capability_exceeded`` speaks for it. Shares are of
the consumers' summed MB/s where all report it, else of their IO/s (RMF volumes report I/O
rates only; a rank's own figures are back-end operations, so the shares are relative among
the volumes).
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from iogauge.analysis import aggregate
from iogauge.analysis.context import AnalysisContext, DeviceContext
from iogauge.analysis.rules._common import (
    ACTIVE_IOPS,
    Matches,
    Run,
    c,
    find_runs,
    fmt_num,
    has,
    iops_expr,
    kBps_expr,
    level_expr,
    run_finding,
    span_finding,
    subject,
    whole_span,
)
from iogauge.analysis.types import Evidence, Finding, RuleRole
from iogauge.model.device import DeviceInfo

RULE_ID = "concentration"
ROLE = RuleRole.LOAD
DESCRIPTION = ("Several volumes/partitions/dm devices on one rank or disk with a high combined "
               "load ([Yuge] §5.1: volumes of one rank interfere; 70 % of the rank's "
               "capability for the mix, or 80 % busy on one-at-a-time disks, [Oe]).")

USED_WARN_PCT = 70.0
USED_CRITICAL_PCT = 100.0
UTIL_WARN_PCT = 80.0
UTIL_CRITICAL_PCT = 95.0
SHARE_MIN_PCT = 10.0
#: Consumers listed by name in the evidence (the rest are counted).
MAX_LISTED = 8
#: Kinds that are not physical resources shared by consumers.
NOT_A_RESOURCE = frozenset({"lcu", "tablespace", "datafile", "port"})
_WORDS: dict[str, str] = {"volume": "volumes", "partition": "partitions",
                          "logical_disk": "LogicalDisks", "dm": "dm devices",
                          "md": "md arrays"}
SOURCE = ("[Yuge] (volumes on one DS8000 rank interfere; ~440 of "
          "~600 MB/s with mixed R/W was the rank limit; spreading over two ranks: 1.5 -> "
          "0.6 ms); [Oe] (proportional-limit busy rate 80-95 %)")


def check(ctx: AnalysisContext) -> list[Finding]:
    out: list[Finding] = []
    for key, consumers in consumers_by_device(ctx).items():
        dev = ctx.devices[key]
        if len(consumers) < 2 or dev.windows.height == 0:
            continue
        out.extend(_device(ctx, dev, consumers))
    return out


def consumers_by_device(ctx: AnalysisContext) -> dict[str, list[DeviceContext]]:
    """Device key -> its topmost consumers: children by ``parent`` plus dm/md built on it."""
    by_name: dict[tuple[str, str], DeviceContext] = {
        (d.host, d.device): d for d in ctx.devices.values()}
    out: dict[str, list[DeviceContext]] = {}
    for d in ctx.devices.values():
        if d.parent is None or d.kind == "datafile":
            continue
        parent = by_name.get((d.host, d.parent))
        if parent is not None and parent.key != d.key and parent.kind not in NOT_A_RESOURCE:
            out.setdefault(parent.key, []).append(d)
    # dm/md on top of disks, per host (kernel names are per host)
    hosts = {d.host for d in ctx.devices.values() if d.info is not None}
    for host in sorted(hosts):
        infos: dict[str, DeviceInfo] = {d.device: d.info for d in ctx.devices.values()
                                        if d.host == host and d.info is not None}
        chains = _chains(infos)
        for top, disks in aggregate.members(infos).items():
            top_dev = by_name.get((host, top))
            if top_dev is None:
                continue
            for disk in disks:
                parent = by_name.get((host, disk))
                if parent is not None and parent.key != top_dev.key:
                    out.setdefault(parent.key, []).append(top_dev)
        # keep the topmost: drop a consumer that lies in another consumer's slave chain
        for key, cons in list(out.items()):
            if ctx.devices[key].host != host:
                continue
            names = {x.device for x in cons}
            under = {n for x in cons for n in chains.get(x.device, set())} & names
            out[key] = [x for x in cons if x.device not in under]
    return {k: _unique(v) for k, v in out.items()}


def _unique(devs: list[DeviceContext]) -> list[DeviceContext]:
    seen: set[str] = set()
    out = []
    for d in devs:
        if d.key not in seen:
            seen.add(d.key)
            out.append(d)
    return out


def _chains(infos: dict[str, DeviceInfo]) -> dict[str, set[str]]:
    """dm/md -> every device below it (slaves, their slaves, ...), partitions included."""
    out: dict[str, set[str]] = {}
    for name, info in infos.items():
        if info.kind not in ("dm", "md"):
            continue
        below: set[str] = set()
        stack = list(info.slaves)
        while stack:
            s = stack.pop()
            if s in below or s == name:
                continue
            below.add(s)
            si = infos.get(s)
            if si is not None and si.kind in ("dm", "md"):
                stack.extend(si.slaves)
        out[name] = below
    return out


def _device(ctx: AnalysisContext, dev: DeviceContext,
            consumers: list[DeviceContext]) -> list[Finding]:
    w = dev.windows
    iops = iops_expr(w)
    mbps = kBps_expr(w) / 1024.0
    cap = dev.capability
    exp_mb = cap.expected_MBps if cap is not None and cap.expected_MBps else None
    exp_io = cap.expected_iops if cap is not None and cap.expected_iops else None
    if exp_mb is not None or exp_io is not None:
        ratios = []
        if exp_mb is not None:
            ratios.append(100.0 * mbps / exp_mb)
        if exp_io is not None:
            ratios.append(100.0 * iops / exp_io)
        score = pl.max_horizontal(ratios)
        level = level_expr(critical=score >= USED_CRITICAL_PCT, warning=score >= USED_WARN_PCT)
        basis = "capability"
    elif dev.util_is_capacity and has(w, "util_pct"):
        score = c(w, "util_pct")
        level = level_expr(critical=score >= UTIL_CRITICAL_PCT, warning=score >= UTIL_WARN_PCT)
        basis = "util"
    else:
        return _cannot_judge(dev, consumers)
    found = find_runs(w, level, score=score, window_s=ctx.window_s)
    out: list[Finding] = []
    for run in found.runs:
        shares = _shares(consumers, run.start, run.end)
        if shares is None:
            continue
        table, unit = shares
        big = table.filter(pl.col("share_pct") >= SHARE_MIN_PCT)
        if big.height < 2:
            continue
        out.append(_finding(dev, run, found, table, unit, basis, float(run.score)))
    return out


def _shares(consumers: list[DeviceContext], start: datetime,
            end: datetime) -> tuple[pl.DataFrame, str] | None:
    """Each consumer's time-weighted load over (start, end] and its share, largest first."""
    parts = []
    for d in consumers:
        rows = d.select_rows("ts", "interval_s", "iops", "r_iops", "w_iops", "d_iops",
                             "kBps", "r_kBps", "w_kBps", "d_kBps").filter(
            (pl.col("ts") > start) & (pl.col("ts") <= end))
        if rows.height:
            parts.append(rows.select(
                pl.lit(d.key).alias("key"), pl.lit(d.kind).alias("kind"),
                pl.col("interval_s"), iops_expr(rows).alias("io"),
                kBps_expr(rows).alias("kb")))
    if not parts:
        return None
    df = pl.concat(parts, how="vertical")
    unit = "MB/s" if df["kb"].null_count() == 0 else "IO/s"
    load = (pl.col("kb") / 1024.0) if unit == "MB/s" else pl.col("io")
    table = (df.group_by("key", "kind")
             .agg(((load * pl.col("interval_s")).sum() / pl.col("interval_s").sum())
                  .alias("load"))
             .with_columns(share_pct=100.0 * pl.col("load") / pl.col("load").sum())
             .sort(["load", "key"], descending=[True, False]))
    if float(table["load"].sum() or 0.0) <= 0:
        return None
    return table, unit


def _finding(dev: DeviceContext, run: Run, found: Matches, table: pl.DataFrame, unit: str,
             basis: str, score: float) -> Finding:
    cap = dev.capability
    worst = run.worst
    n = table.height
    kinds = table["kind"].unique().to_list()
    word = _WORDS.get(kinds[0], "devices") if len(kinds) == 1 else "devices"
    listed = ", ".join(f"{r['key']} {r['share_pct']:.1f} %" for r in
                       table.head(MAX_LISTED).iter_rows(named=True))
    if n > MAX_LISTED:
        rest = float(table["share_pct"].slice(MAX_LISTED).sum())
        listed += f", {n - MAX_LISTED} more {rest:.1f} %"
    mb = run.max(kBps_expr(run.part) / 1024.0)
    io = run.max(iops_expr(run.part))
    evidence: list[Evidence] = []
    if basis == "capability" and cap is not None:
        load_txt = (f"{fmt_num(mb)} MB/s" if mb is not None and cap.expected_MBps
                    else f"{fmt_num(io)} IO/s")
        exp_txt = (f"~{fmt_num(cap.expected_MBps, 0)} MB/s" if mb is not None and
                   cap.expected_MBps else f"~{fmt_num(cap.expected_iops, 0)} IO/s")
        title = (subject(dev) + f"{n} {word} share this {_kind_word(dev)} at {load_txt}, "
                 f"{score:.0f} % of the {exp_txt} it does for this mix")
        evidence.append(Evidence("used_pct", score, "%", USED_WARN_PCT, ">=",
                                 "worst window: max of MB/s and IO/s over the expected "
                                 "capability for the mix"))
        if mb is not None:
            evidence.append(Evidence("MBps", mb, "MB/s", cap.expected_MBps,
                                     _op(mb, cap.expected_MBps),
                                     "worst window mean; threshold = expected MB/s"))
        if io is not None:
            evidence.append(Evidence("iops", io, "IO/s", cap.expected_iops,
                                     _op(io, cap.expected_iops),
                                     "worst window mean; threshold = expected IO/s"))
        evidence.append(Evidence("capability_profile", cap.profile, "",
                                 note=f"{cap.title}; matched by {cap.matched_by}"))
    else:
        util = worst.get("util_pct")
        title = (subject(dev) + f"{n} {word} share this {_kind_word(dev)}, "
                 f"{fmt_num(score)} % busy")
        evidence.append(Evidence("util_pct", None if util is None else float(util), "%",
                                 UTIL_WARN_PCT, ">=", "worst window mean"))
        if io is not None:
            evidence.append(Evidence("iops", io, "IO/s", note="worst window mean"))
    for col, label in (("r_await_ms", "read"), ("w_await_ms", "write")):
        v = worst.get(col)
        if v is not None and dev.kind == "rank":
            evidence.append(Evidence(col, float(v), "ms",
                                     note=f"ESS rank {label} RTIME/OP of the worst window"))
    evidence.append(Evidence("consumers", listed, "",
                             note=f"share of the {word}' {unit} over the run"))
    evidence.append(Evidence("consumer_count", float(n), word))
    top = ", ".join(table.head(min(3, n))["key"].to_list())
    target = "ranks" if dev.kind == "rank" else "disks"
    explanation = (f"{n} {word} place their I/O on {dev.key}; their requests compete for the "
                   f"same {'disk drives of the rank' if dev.kind == 'rank' else 'device'}, "
                   "so each one's response grows with the others' load. [Yuge]'s DB2 batch "
                   "ran its volumes on one RAID-5 rank at ~440 of ~600 MB/s (mixed "
                   "read/write lowers the published sequential maximum) and the rank was "
                   "already the limit: write RTIME/OP 141.4 ms.")
    if cap is not None and cap.notes:
        explanation += " Capability notes: " + "; ".join(cap.notes) + "."
    suggestion = (f"Spread the busiest {word} ({top}) over other {target}; [Yuge] moved "
                  "half the data to a second rank: volume response 1.5 -> 0.6 ms, batch "
                  "elapsed 2:41 -> 2:25. Re-measure with intervals of 5 min or less.")
    return run_finding(RULE_ID, dev, run, found, title=title, evidence=evidence,
                       explanation=explanation, suggestion=suggestion, source=SOURCE)


def _op(value: float, limit: float | None) -> str:
    if limit is None:
        return ""
    return ">=" if value >= limit else "<"


def _kind_word(dev: DeviceContext) -> str:
    return {"rank": "rank", "physical_disk": "PhysicalDisk", "md": "array"}.get(dev.kind,
                                                                                 "disk")


def _cannot_judge(dev: DeviceContext, consumers: list[DeviceContext]) -> list[Finding]:
    span = whole_span(dev)
    if span is None:
        return []
    shares = _shares(consumers, span[0], span[1])
    if shares is None:
        return []
    table, unit = shares
    big = table.filter((pl.col("share_pct") >= SHARE_MIN_PCT)
                       & ((pl.col("load") >= ACTIVE_IOPS) if unit == "IO/s"
                          else pl.col("load") > 0))
    if big.height < 2:
        return []
    listed = ", ".join(f"{r['key']} {r['share_pct']:.1f} %"
                       for r in table.head(MAX_LISTED).iter_rows(named=True))
    why = ("no capability profile matched it and %util is not a capacity measure here"
           if dev.util_is_capacity is False else
           "no capability profile matched it and it is not known whether %util measures "
           "its capacity (one-at-a-time device)")
    return [span_finding(
        RULE_ID, dev.key, span, severity="info",
        title=(subject(dev) + f"{table.height} devices share it; cannot judge whether their "
               "combined load is high"),
        evidence=[Evidence("consumers", listed, "",
                           note=f"share of the consumers' {unit} over the data")],
        explanation=f"{dev.key} carries several consumers' I/O, but {why}.",
        suggestion=("Name the device's profile (--profile DEVICE=NAME) so its load can be "
                    "judged against what it does for this mix."),
        source=SOURCE)]
