"""`iogauge analyze`: verdict per device and explained findings for stored or imported data."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from iogauge.cli import prometheus_source as prom_opts
from iogauge.cli.common import out, user_errors, warn
from iogauge.cli.inputs import (
    DEVICE_OPTION,
    FIRST_REPORT_OPTION,
    FROM_OPTION,
    TO_OPTION,
    TZ_OPTION,
    WINDOW_OPTION,
    Inputs,
    load_inputs,
    parse_start,
    parse_time,
    parse_zone,
)
from iogauge.cli.options import LenientOption, MediaOption
from iogauge.cli.prometheus_source import PromArgs
from iogauge.importers.first_report import FirstReport

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from iogauge.analysis.engine import AnalysisOptions
    from iogauge.analysis.service_model import ServiceModel


def parse_profiles(texts: list[str] | None) -> dict[str, str]:
    """``--profile D=NAME`` options to a mapping, names checked against the catalog."""
    from iogauge.analysis.catalog import parse_profile_overrides

    return parse_profile_overrides(texts or [])


def parse_media(texts: list[str] | None) -> dict[str, ServiceModel]:
    """``--media D=MEDIA`` options to {device: service model}."""
    from iogauge.analysis.service_model import parse_media_overrides

    return parse_media_overrides(tuple(texts or ()))


def parse_storage_map(texts: list[str] | None) -> dict[str, str]:
    """``--map TABLESPACE=DEV`` options to {tablespace or datafile: device}."""
    from iogauge.errors import IogaugeError

    pairs = [(k.strip(), sep, v.strip()) for k, sep, v in (t.partition("=") for t in texts or [])]
    bad = next((f"{k}{sep}{v}" for k, sep, v in pairs if not (k and sep and v)), None)
    if bad is not None:
        raise IogaugeError(f"--map {bad!r}: use TABLESPACE=DEV, e.g. --map SOE=sdb")
    names = [k for k, _, _ in pairs]
    twice = next((k for k in names if names.count(k) > 1), None)
    if twice is not None:
        raise IogaugeError(f"--map: {twice!r} is mapped twice")
    return {k: v for k, _, v in pairs}


_FilesArgument = Annotated[list[str] | None, typer.Argument(
    help="Files to import and analyse (any format `iogauge import` reads; globs allowed). "
    "Default: the store.")]
_DbOption = Annotated[Path | None, typer.Option("--db", help="Analyse this store instead of "
                                                "files (default store: "
                                                "$XDG_DATA_HOME/iogauge/iogauge.duckdb).")]
_ProfileOption = Annotated[list[str] | None, typer.Option(
    "--profile", help="Capability profile for a device, DEVICE=NAME (repeatable), e.g. "
    "sdb=hdd-7200; see docs/catalog.md.")]
_MapOption = Annotated[list[str] | None, typer.Option(
    "--map", help="The device under an Oracle tablespace or datafile, TABLESPACE=DEV "
    "(repeatable), e.g. SOE=sdb: its Av Rd(ms) is judged against that device's capability.")]
_CatalogOption = Annotated[list[Path] | None, typer.Option(
    "--catalog", help="Extra capability catalog TOML file(s) with your own profiles.")]
_TargetOption = Annotated[list[str] | None, typer.Option(
    "--target", help="Response-time target, DEVICE=MS or DEVICE=MS@HH:MM-HH:MM for a daily "
    "window (repeatable), e.g. 'sdb=100@01:00-04:00'.")]
_StartOption = Annotated[str | None, typer.Option(
    "--start", help="When the collection started, for files without time stamps (iostat "
    "without -t/-T), as in `iogauge import`.")]
_IntervalOption = Annotated[float | None, typer.Option(
    "--interval", min=0.001, help="Sampling interval (s) for files that do not print it.")]
_AllOption = Annotated[bool, typer.Option("--all", help="Show every finding, not only the "
                                          "top ones.")]
_JsonOption = Annotated[bool, typer.Option("--json", help="Print the analysis as JSON "
                                           "(schema: docs/analysis.md).")]


def analyze_cmd(
    files: _FilesArgument = None,
    db: _DbOption = None,
    start: str | None = FROM_OPTION,
    end: str | None = TO_OPTION,
    device: list[str] = DEVICE_OPTION,
    profile: _ProfileOption = None,
    media: MediaOption = None,
    storage_map: _MapOption = None,
    catalog: _CatalogOption = None,
    target: _TargetOption = None,
    tz: str | None = TZ_OPTION,
    window: float | None = WINDOW_OPTION,
    collected: _StartOption = None,
    interval: _IntervalOption = None,
    first_report: FirstReport = FIRST_REPORT_OPTION,
    lenient: LenientOption = False,
    all_findings: _AllOption = False,
    as_json: _JsonOption = False,
    prometheus: str | None = prom_opts.PROMETHEUS_OPTION,
    match: str | None = prom_opts.MATCH_OPTION,
    host_label: str = prom_opts.HOST_LABEL_OPTION,
    header: list[str] = prom_opts.HEADER_OPTION,
    hosts_per_batch: int = prom_opts.BATCH_OPTION,
) -> None:
    """Judge every device: bottleneck or not, why, and how much headroom is left.

    Attributes of the workload (random/sequential, size, read/write, concurrency) are set
    against the device's capability for them; [Oe]'s util-vs-IOPS fit (or the latency
    knee on SSD/NVMe/RAID) gives the headroom; rules explain findings with evidence.

    With --prometheus, a fleet is read from its node_exporter series and the devices are
    ranked: worst verdict first, then least headroom, then longest time over --target.

    Example: `iogauge analyze iostat.log --target 'sdb=100@01:00-04:00' --profile
    sdb=hdd-7200`, or `iogauge analyze --db web1.duckdb --from 2026-11-22T08:00 --json`, or
    `iogauge analyze --prometheus http://prom:9090 --from 2026-11-22T00:00 --to
    2026-11-23T00:00`.
    """
    with user_errors():
        zone = parse_zone(tz)
        opts = _analysis_options(
            zone, start=start, end=end, devices=device, profiles=profile, media=media,
            storage_map=storage_map, catalog=catalog, targets=target, window_s=window)
        prom = PromArgs.of(prometheus, match, host_label, header, hosts_per_batch,
                           files=files, db=db)
        if prom is not None:
            _analyze_fleet(prom, opts, as_json=as_json, all_rows=all_findings)
            return
        inputs = load_inputs(files, db, zone=zone, lenient=lenient,
                             start=parse_start(collected),
                             interval_s=interval, first_report=first_report)
        _analyze_inputs(inputs, opts, as_json=as_json, all_findings=all_findings)


def _analysis_options(zone: ZoneInfo | None, *, start: str | None, end: str | None,
                      devices: list[str] | None, profiles: list[str] | None,
                      media: list[str] | None, storage_map: list[str] | None,
                      catalog: list[Path] | None, targets: list[str] | None,
                      window_s: float | None) -> AnalysisOptions:
    """The command's options, parsed and checked, as the engine takes them."""
    # imported here, not at start-up: the engine pulls in polars, the catalog and every rule
    from iogauge.analysis.context import UTC, LatencyTarget
    from iogauge.analysis.engine import AnalysisOptions

    return AnalysisOptions(
        start=parse_time(start, "--from", zone), end=parse_time(end, "--to", zone),
        devices=tuple(devices or ()), profiles=parse_profiles(profiles),
        media=parse_media(media), storage_map=parse_storage_map(storage_map),
        catalog_paths=tuple(catalog or ()),
        targets=tuple(LatencyTarget.parse(t) for t in targets or ()),
        window_s=window_s, tz=zone or UTC)


def _analyze_inputs(inputs: Inputs, opts: AnalysisOptions, *, as_json: bool,
                    all_findings: bool) -> None:
    """Files or a store: the verdicts and findings on the terminal, or the JSON document."""
    from iogauge.analysis.engine import analyze
    from iogauge.analysis.fleet import rank_hosts
    from iogauge.reporting.analysis_terminal import print_analysis

    for n in inputs.notes:
        warn(n)
    result = analyze(inputs.frame, inputs.waits, inputs.infos, opts)
    rank_hosts(result, inputs.frame, opts)  # several hosts: the fleet's order
    if as_json:
        # the import's notes too (first report since-boot or measured, and why)
        result.notes[:0] = inputs.notes
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
        return
    if not result.devices and not result.findings:
        out.print("no device with data in the selection")
        return
    # (an AWR RAC global report has wait events and no device: its findings are shown)
    print_analysis(out, result, f"iogauge analysis of {inputs.described}",
                   None if all_findings else 12)


def _analyze_fleet(prom: PromArgs, opts: AnalysisOptions, *, as_json: bool,
                   all_rows: bool) -> None:
    """``analyze --prometheus``: the fleet ranking on the terminal, or the JSON document."""
    from iogauge.cli.prometheus_source import analyze_prometheus
    from iogauge.reporting.fleet_terminal import print_fleet

    fleet, _ = analyze_prometheus(prom, opts)
    if as_json:
        sys.stdout.write(json.dumps(fleet.to_dict(), indent=2, default=str) + "\n")
        return
    for n in fleet.result.notes:
        warn(n)
    if not fleet.rows:
        out.print("no device with data in the selection")
        return
    print_fleet(out, fleet, f"iogauge fleet analysis of {prom.described()}",
                None if all_rows else 25)
