"""``--prometheus URL`` of analyze, import and report: read a fleet from its PromQL engine.

The options are defined here once and shared by the three commands; so are the reading
(:func:`fleet_batches`) and the fleet analysis (:func:`analyze_prometheus`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from iogauge.errors import IogaugeError

if TYPE_CHECKING:
    from iogauge.analysis.engine import AnalysisOptions
    from iogauge.analysis.fleet import Batch, FleetResult
    from iogauge.analysis.types import AnalysisResult
    from iogauge.model.sampleframe import SampleFrame
    from iogauge.sources.prometheus import PromClient, PromRead, PromSelection

PROMETHEUS_OPTION = typer.Option(
    None, "--prometheus", help="Read node_exporter's node_disk_* counters from this "
    "Prometheus or VictoriaMetrics query API (e.g. http://localhost:9090) instead of files; "
    "needs --from and --to. Credentials only from $IOGAUGE_PROMETHEUS_BEARER_TOKEN or "
    "$IOGAUGE_PROMETHEUS_USERNAME/$IOGAUGE_PROMETHEUS_PASSWORD.")
MATCH_OPTION = typer.Option(
    None, "--match", help="With --prometheus: label matchers added to every node_exporter "
    "series, e.g. '{job=\"node\",instance=~\"db.*\"}'.")
HOST_LABEL_OPTION = typer.Option(
    "instance", "--host-label", help="With --prometheus: the label naming a host "
    "(default instance).")
HEADER_OPTION = typer.Option(
    None, "--header", help="With --prometheus: an HTTP header sent with every query, "
    "NAME=VALUE (repeatable), e.g. X-Scope-OrgID=tenant1 for Mimir.")
BATCH_OPTION = typer.Option(
    50, "--hosts-per-batch", min=2, help="With --prometheus: hosts read and analysed "
    "together (memory follows the batch, not the fleet).")


@dataclass(frozen=True)
class PromArgs:
    """The ``--prometheus`` options as given."""

    url: str
    match: str | None = None
    host_label: str = "instance"
    headers: tuple[str, ...] = ()
    hosts_per_batch: int = 50

    @classmethod
    def of(cls, url: str | None, match: str | None, host_label: str,
           headers: list[str] | None, hosts_per_batch: int, *,
           files: list[str] | None = None, db: Path | None = None) -> PromArgs | None:
        """The options, None without --prometheus; refuses files or --db beside it."""
        if url is None:
            for name, given in (("--match", match), ("--header", headers)):
                if given:
                    raise IogaugeError(f"{name} goes with --prometheus URL")
            return None
        if files or db is not None:
            raise IogaugeError("give files, --db or --prometheus, not several")
        return cls(url, match, host_label, tuple(headers or ()), hosts_per_batch)

    def open(self, start: datetime | None, end: datetime | None, window_s: float | None
             ) -> tuple[PromClient, PromSelection]:
        from iogauge.sources.prometheus import (
            PromClient,
            PromSelection,
            parse_headers,
            parse_selector,
        )

        start, end = require_span(start, end)
        try:
            matchers = parse_selector(self.match)
        except ValueError as exc:
            raise IogaugeError(f"--match {self.match!r}: {exc}") from None
        client = PromClient(self.url, headers=parse_headers(self.headers))
        sel = PromSelection(start=start, end=end, window_s=window_s or 60.0,
                            matchers=matchers, host_label=self.host_label,
                            hosts_per_batch=self.hosts_per_batch)
        return client, sel

    def described(self) -> str:
        return f"{self.url}" + (f" {self.match}" if self.match else "")


def require_span(start: datetime | None, end: datetime | None) -> tuple[datetime, datetime]:
    if start is None or end is None:
        raise IogaugeError("--prometheus needs --from and --to (the span to read)")
    return start, end


def fleet_batches(client: PromClient, sel: PromSelection, read: PromRead) -> Iterator[Batch]:
    """Each batch of hosts: its SampleFrame and node_disk_info metadata."""
    from iogauge.sources.prometheus import iter_batches, read_infos

    for hosts, frame in iter_batches(client, sel, read):
        yield frame, read_infos(client, sel, hosts)


def frames(client: PromClient, sel: PromSelection, read: PromRead) -> Iterator[SampleFrame]:
    """Only the SampleFrames (for ``import``)."""
    from iogauge.sources.prometheus import iter_batches

    for _, frame in iter_batches(client, sel, read):
        yield frame


def analyze_prometheus(args: PromArgs, opts: AnalysisOptions,
                       on_batch: Callable[[SampleFrame, AnalysisResult], None] | None = None
                       ) -> tuple[FleetResult, PromRead]:
    """Read and analyse the fleet batch by batch; the ranking and what reading found."""
    from iogauge.analysis.fleet import analyze_fleet
    from iogauge.sources.prometheus import PromRead

    client, sel = args.open(opts.start, opts.end, opts.window_s)
    read = PromRead()
    batches = fleet_batches(client, sel, read)
    first = next(batches, None)
    if first is None:  # pragma: no cover - iter_batches raises when there is no host
        raise IogaugeError(f"{args.url}: no host")

    def every() -> Iterator[Batch]:
        yield first
        yield from batches

    fleet = analyze_fleet(every(), opts, multi_host=len(read.hosts) > 1, on_batch=on_batch)
    fleet.result.notes[:0] = read.notes
    return fleet, read
