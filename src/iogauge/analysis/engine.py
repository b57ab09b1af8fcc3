"""The analysis engine: SampleFrame (+ waits, device metadata) -> verdicts and findings.

Order of work ([Yuge]: attributes first, then capability for those attributes, then
judgement):

1. select rows (time range, devices), leave out since-boot and reset rows;
2. aggregate parts into the parents the source did not report (``aggregate``: volumes →
   rank, partitions → disk, LogicalDisk → PhysicalDisk, datafiles → tablespace);
3. per device: application attributes (``attributes``), capability for those attributes
   (``catalog``), capacity and headroom (``capacity``: [Oe]'s util-vs-IOPS fit, or the
   latency knee on parallel devices);
4. every rule under ``rules/`` reads the context and returns explained findings;
5. a verdict per device from its findings and headroom, the worst windows named.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl

from iogauge.analysis import aggregate, attributes, capacity, catalog, latency_standard
from iogauge.analysis.context import UTC, AnalysisContext, DeviceContext, LatencyTarget
from iogauge.analysis.points import device_points
from iogauge.analysis.rules import Rule, all_rules
from iogauge.analysis.service_model import ServiceDecision, ServiceModel, decide
from iogauge.analysis.types import (
    SEVERITY_RANK,
    VERDICTS,
    AnalysisResult,
    Attributes,
    DeviceReport,
    Finding,
    WindowRef,
)
from iogauge.analysis.verdict import blame_parents, verdict
from iogauge.analysis.windows import window_label
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.timeline import NO_INTERVAL
from iogauge.model.waitevents import WaitEventFrame

log = logging.getLogger(__name__)

#: Below this mean IOPS a device is called idle (and not judged further).
IDLE_IOPS = 1.0
WORST_WINDOWS = 3


@dataclass
class AnalysisOptions:
    """What ``iogauge analyze`` was asked to do.

    Attributes:
        start, end: keep intervals ending in [start, end] (UTC-aware datetimes), None = open.
        devices: fnmatch patterns of devices to keep (device name or host:device); empty =
            all. Parents and children of kept devices are not added implicitly.
        profiles: device -> catalog profile id (``--profile D=NAME``).
        catalog_paths: user TOML catalogs added to the built-in one.
        targets: response-time targets (``--target``).
        window_s: analysis window; None = 60 s or the data's interval when longer.
        tz: zone for the targets' wall-clock windows.
        strict: a rule that raises stops the analysis (tests); otherwise it is reported in
            the notes and the other rules still run.
        media: device -> service model given with ``--media`` (beats the samples).
        storage_map: a tablespace or datafile (Statspack/AWR rows) -> the device under it
            (``--map TABLESPACE=DEV``), whose capability its reads are judged against.
    """

    start: datetime | None = None
    end: datetime | None = None
    devices: Sequence[str] = ()
    profiles: Mapping[str, str] = field(default_factory=dict)
    catalog_paths: Sequence[Path] = ()
    targets: Sequence[LatencyTarget] = ()
    window_s: float | None = None
    tz: ZoneInfo = UTC
    strict: bool = False
    media: Mapping[str, ServiceModel] = field(default_factory=dict)
    storage_map: Mapping[str, str] = field(default_factory=dict)


def _select(df: pl.DataFrame, opts: AnalysisOptions) -> pl.DataFrame:
    if opts.start is not None:
        df = df.filter(pl.col("ts") >= opts.start)
    if opts.end is not None:
        df = df.filter(pl.col("ts") <= opts.end)
    if opts.devices:
        names = df.select(pl.col("device"), pl.col("host")).unique()
        keep = {
            (str(r["host"]), str(r["device"])) for r in names.iter_rows(named=True)
            if any(fnmatchcase(str(r["device"]), p)
                   or fnmatchcase(f"{r['host']}:{r['device']}", p) for p in opts.devices)
        }
        if keep:
            keys = pl.DataFrame({"host": [k[0] for k in keep], "device": [k[1] for k in keep]})
            df = df.join(keys, on=["host", "device"], how="semi")
        else:
            df = df.clear()
    return df


def build_context(frame: SampleFrame | pl.DataFrame,
                  waits: WaitEventFrame | pl.DataFrame | None = None,
                  infos: Mapping[str, DeviceInfo] | None = None,
                  options: AnalysisOptions | None = None) -> AnalysisContext:
    """Steps 1-3: the context the rules read, with attributes, capability and capacity."""
    opts = options or AnalysisOptions()
    df = frame.df if isinstance(frame, SampleFrame) else frame
    df = _select(df, opts)
    # A device known only from since-boot reports (a single `iostat -x` quoted in a ticket
    # or a paper, [Goodus]) is analysed from them rather than dropped: an average since
    # boot is still a measurement, just a long one; the note says so.
    notes: list[str] = []
    skipped = 0
    bad = pl.col("reset") | pl.col("since_boot")
    if df.height and df.select(bad.any()).item():
        measured = df.filter(~bad).select("host", "device").unique()
        only_boot = (df.filter(pl.col("since_boot") & ~pl.col("reset"))
                     .join(measured, on=["host", "device"], how="anti"))
        if only_boot.height:
            n_dev = only_boot.select("host", "device").unique().height
            notes.append(f"{n_dev} device(s) have only since-boot averages (a single "
                         "report): analysed from them; peaks within that time cannot be "
                         "seen")
        skipped = df.filter(bad).height - only_boot.height
        df = pl.concat([df.filter(~bad),
                        only_boot.with_columns(since_boot=pl.lit(value=False))])
    reported = set(df.select("host", "device").unique().iter_rows())
    df, agg_notes = aggregate.add_aggregates(df, infos)
    ctx = AnalysisContext.build(df, waits=waits, infos=infos, targets=opts.targets,
                                window_s=opts.window_s, tz=opts.tz)
    ctx.storage_map = dict(opts.storage_map)
    if skipped:
        ctx.notes.append(f"{skipped} row(s) left out: since-boot averages or counter resets")
    ctx.notes.extend(notes)
    ctx.notes.extend(agg_notes)
    cat = catalog.load_catalog(opts.catalog_paths)
    devs = list(ctx.devices.values())
    for dev in devs:
        dev.synthetic = (dev.host, dev.device) not in reported

    # One group-by over every device's rows (attributes.compute_all), not a query each.
    attributes.compute_all(devs, ctx)
    for key in ctx.devices:
        attributes.inherit_counted_sequential(ctx, key)
    for dev in devs:
        override = opts.profiles.get(dev.key) or opts.profiles.get(dev.device)
        dev.capability = catalog.capability_for(dev, dev.attributes or Attributes(), override,
                                                cat, infos=infos)

    # Per-device fits are independent: polars and numpy release the GIL while they
    # compute, so a thread per core overlaps one device's Python with another's numbers.
    _each(lambda d: _judge(d, opts, ctx), devs)
    # A partition is served by its disk: it takes the disk's decision (its own rows are a
    # share of the disk's load, too little to decide on).
    for dev in devs:
        disk = _parent_disk(ctx, dev)
        if disk is not None and disk.service is not None:
            dev.service = _as_part_of(disk)
            dev.capacity = capacity.estimate(dev)
    for dev in devs:
        dev.expectation = latency_standard.expect(dev, _profile_kind(cat, dev))
    return ctx


def _profile_kind(cat: catalog.Catalog, dev: DeviceContext) -> str | None:
    """The kind (hdd, ssd, array, cloud) of the catalog profile matched to ``dev``."""
    if dev.capability is None:
        return None
    pid = dev.capability.profile
    found = cat.by_id.get(pid)
    if found is None:
        found = next((t for fam in cat.families.values() for t in fam.tiers if t.id == pid),
                     None)
    return found.kind if found is not None else None


def _parent_disk(ctx: AnalysisContext, dev: DeviceContext) -> DeviceContext | None:
    if dev.kind != "partition" or dev.parent is None:
        return None
    key = f"{dev.host}:{dev.parent}" if f"{dev.host}:{dev.parent}" in ctx.devices else dev.parent
    disk = ctx.devices.get(key)
    return disk if disk is not None and disk.host == dev.host else None


def _as_part_of(disk: DeviceContext) -> ServiceDecision:
    d = disk.service_decision()
    return ServiceDecision(d.model, d.decided_by, d.label, list(d.signals), d.conflict,
                           f"as its disk {disk.device}: {d.summary}")


def _judge(dev: DeviceContext, opts: AnalysisOptions, ctx: AnalysisContext) -> None:
    """Service model, then capacity, of one device (one gathering of its points)."""
    if _parent_disk(ctx, dev) is not None:
        return  # decided with its disk, after the disks
    pts = device_points(dev)
    override = opts.media.get(dev.key) or opts.media.get(dev.device)
    seq = dev.attributes.seq_pct if dev.attributes is not None else None
    dev.service = decide(dev.device, dev.kind, dev.info, dev.capability, pts, seq, override)
    cap = dev.capability
    if dev.service.conflict and cap is not None and "--profile" not in cap.matched_by:
        cap.notes.append(f"the samples contradict this profile's service model: "
                         f"{dev.service.summary}")
    dev.capacity = capacity.estimate(dev, pts)


def _each(fn: Callable[[DeviceContext], None], devs: Sequence[DeviceContext]) -> None:
    """``fn`` for every device, on a thread per CPU when there are many devices."""
    workers = min(os.cpu_count() or 1, 8)
    if len(devs) < 4 or workers < 2:
        for d in devs:
            fn(d)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="iogauge-analysis") as ex:
        for _ in ex.map(fn, devs):
            pass


def run_rules(ctx: AnalysisContext, rules: Sequence[Rule] | None = None, *,
              strict: bool = False) -> list[Finding]:
    """Step 4: every rule's findings, most severe first, then by device and time."""
    findings: list[Finding] = []
    for rule in rules if rules is not None else all_rules():
        try:
            findings.extend(rule.check(ctx))
        except Exception as exc:
            if strict:
                raise
            log.exception("rule %s failed", rule.rule_id)
            ctx.notes.append(f"rule {rule.rule_id} could not run: {exc!r} (please report "
                             "this with the input that caused it)")
    findings.sort(key=lambda f: (-f.rank, f.device or "", f.window_start, f.rule))
    return findings


def _worst_windows(dev: DeviceContext) -> list[WindowRef]:
    w = dev.windows
    out: list[WindowRef] = []
    if w.height == 0:
        return out
    busy = w.filter(pl.col("iops") > 0) if "iops" in w.columns else w.clear()
    if "await_ms" in w.columns:
        for r in busy.drop_nulls("await_ms").sort("await_ms", descending=True).head(
                WORST_WINDOWS).iter_rows(named=True):
            out.append(WindowRef(r["window_start"], r["window_end"], "await_ms",
                                 float(r["await_ms"]), "ms"))
    if "iops" in w.columns:
        for r in busy.sort("iops", descending=True).head(WORST_WINDOWS).iter_rows(named=True):
            out.append(WindowRef(r["window_start"], r["window_end"], "iops",
                                 float(r["iops"]), "IO/s"))
    return out


def analyze(frame: SampleFrame | pl.DataFrame,
            waits: WaitEventFrame | pl.DataFrame | None = None,
            infos: Mapping[str, DeviceInfo] | None = None,
            options: AnalysisOptions | None = None) -> AnalysisResult:
    """Analyse a SampleFrame: verdict per device, explained findings, worst windows."""
    opts = options or AnalysisOptions()
    ctx = build_context(frame, waits, infos, opts)
    findings = run_rules(ctx, strict=opts.strict)
    by_dev: dict[str | None, list[Finding]] = {}
    for f in findings:
        by_dev.setdefault(f.device, []).append(f)
    reports: list[DeviceReport] = []
    for key, dev in ctx.devices.items():
        fs = by_dev.get(key, [])
        v, why, basis = verdict(dev, fs)
        counts = {s: sum(1 for f in fs if f.severity == s) for s in SEVERITY_RANK}
        reports.append(DeviceReport(
            device=key, host=dev.host, kind=dev.kind, parent=dev.parent, source=dev.source,
            verdict=v, verdict_reason=why, verdict_basis=basis, service=dev.service,
            expectation=dev.expectation,
            attributes=dev.attributes or Attributes(),
            capability=dev.capability, capacity=dev.capacity,
            worst_windows=_worst_windows(dev), finding_count=counts))
    blame_parents(reports, ctx)
    order = {v: i for i, v in enumerate(VERDICTS)}
    reports.sort(key=lambda r: (order[r.verdict], -(r.attributes.iops_mean or 0.0)))
    starts = [d.start for d in ctx.devices.values() if d.start is not None]
    ends = [d.end for d in ctx.devices.values() if d.end is not None]
    notes = list(ctx.notes)
    notes.append(f"analysis windows: {window_label(ctx.window_s)}" if ctx.timeline is None
                 else f"analysis windows: {ctx.timeline.windows_text(ctx.window_s)} (reports "
                 f"without time stamps, {NO_INTERVAL})")
    return AnalysisResult(devices=reports, findings=findings, window_s=ctx.window_s,
                          interval_s=ctx.interval_s, start=min(starts) if starts else None,
                          end=max(ends) if ends else None, notes=notes,
                          timeline=ctx.timeline)
