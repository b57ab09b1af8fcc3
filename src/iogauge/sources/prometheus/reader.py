"""node_exporter's disk counters, through a PromQL engine, to SampleFrames.

One row per (host, device, window): the window ends on a grid ``start + k x W`` and covers
``(t - W, t]``. Hosts are read in batches (``hosts_per_batch``), one batch's frame at a
time, so memory follows the batch, not the fleet; each batch's span is cut into queries of
at most ``max_points`` steps, under the API's 11,000 points per series (Prometheus refuses
more: "exceeded maximum resolution of 11,000 points per timeseries").

A device's rows run from its first window with data to its last; a window inside that span
where the engine has no increase (fewer than two samples: the exporter or the scrape was
down) is a row of nulls, never a value carried over the gap.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from iogauge.collector.sysfs import guess_parent, kind_from_name
from iogauge.errors import SourceError
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame
from iogauge.sources.prometheus import promql
from iogauge.sources.prometheus.client import PromClient
from iogauge.sources.prometheus.promql import Matcher

SOURCE_ID = "prometheus"
#: Steps per query: under the 11,000 points per series Prometheus allows, with a margin.
MAX_POINTS = 10_000


@dataclass(frozen=True)
class PromSelection:
    """What to read.

    Attributes:
        start, end: the span (UTC-aware); the first window ends at ``start + window_s``.
        window_s: W, the window every increase is taken over (and the grid step).
        matchers: ``--match``, added to every disk series' selector.
        host_label: the label that names a host (``instance``, or ``--host-label``).
        hosts_per_batch: hosts read (and analysed) together.
        max_points: steps per query_range call.
    """

    start: datetime
    end: datetime
    window_s: float = 60.0
    matchers: tuple[Matcher, ...] = ()
    host_label: str = "instance"
    hosts_per_batch: int = 50
    max_points: int = MAX_POINTS

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise SourceError(f"--from {self.start.isoformat()} is not before --to "
                              f"{self.end.isoformat()}")
        if self.window_s <= 0:
            raise SourceError("--window must be > 0 s")
        if (self.end - self.start).total_seconds() < self.window_s:
            raise SourceError(f"--from/--to span {self.end - self.start} is shorter than "
                              f"one {self.window_s:g} s window")

    @property
    def first_end_s(self) -> float:
        return self.start.timestamp() + self.window_s

    def chunks(self) -> list[tuple[float, float]]:
        """(first, last) window ends of each query, ``max_points`` steps at most."""
        w = self.window_s
        n = math.floor((self.end.timestamp() - self.first_end_s) / w + 1e-9) + 1
        out = []
        for k in range(0, n, self.max_points):
            last = min(k + self.max_points, n) - 1
            out.append((self.first_end_s + k * w, self.first_end_s + last * w))
        return out


@dataclass
class PromRead:
    """What reading a fleet found: the hosts, queries made, and notes for the user."""

    hosts: list[str] = field(default_factory=list)
    batches: int = 0
    rows: int = 0
    null_rows: int = 0
    notes: list[str] = field(default_factory=list)


def discover_hosts(client: PromClient, sel: PromSelection) -> list[str]:
    """Every value of the host label among the disk series ``--match`` selects."""
    match = promql.selector(promql.PRESENCE, sel.matchers)
    hosts = sorted(client.label_values(sel.host_label, match, sel.start.timestamp(),
                                       sel.end.timestamp()))
    if not hosts:
        raise SourceError(f"{client.url}: no series {match} between {sel.start.isoformat()} "
                          f"and {sel.end.isoformat()} (does --match select node_exporter "
                          f"targets, and do they carry the label {sel.host_label!r}?)")
    return hosts


def host_batches(hosts: list[str], size: int) -> list[list[str]]:
    """``hosts`` in batches of at most ``size``, as even as possible: no batch is left with a
    single host when there are several (a lone host would be keyed by device name alone in
    the analysis, the others by host:device)."""
    n = max(1, math.ceil(len(hosts) / max(size, 2)))
    per, extra = divmod(len(hosts), n)
    out, i = [], 0
    for b in range(n):
        k = per + (1 if b < extra else 0)
        out.append(hosts[i:i + k])
        i += k
    return out


def _batch_matchers(sel: PromSelection, hosts: list[str]) -> tuple[Matcher, ...]:
    regex = "|".join(promql.regex_escape(h) for h in hosts)
    return (*sel.matchers, Matcher(sel.host_label, "=~", regex))


def _long(series: list[dict[str, object]], keys: tuple[str, ...], column: str) -> pl.DataFrame:
    """A query's matrix as rows (keys..., ts_ms, column)."""
    cols: dict[str, list[object]] = {k: [] for k in (*keys, "ts_ms", column)}
    for s in series:
        labels = s.get("metric")
        values = s.get("values")
        if not isinstance(labels, dict) or not isinstance(values, list) or not values:
            continue
        ident = [labels.get(k) for k in keys]
        if any(v is None for v in ident):
            continue
        for k, v in zip(keys, ident, strict=True):
            cols[k].extend([v] * len(values))
        cols["ts_ms"].extend(round(float(p[0]) * 1000) for p in values)
        cols[column].extend(float(p[1]) for p in values)
    schema: dict[str, pl.DataType] = {k: pl.String() for k in keys}
    schema["ts_ms"] = pl.Int64()
    schema[column] = pl.Float64()
    return pl.DataFrame(cols, schema=schema).unique(subset=[*keys, "ts_ms"], keep="first")


def _fetch(client: PromClient, sel: PromSelection, query: str, keys: tuple[str, ...],
           column: str) -> pl.DataFrame:
    parts = [_long(client.query_range(query, a, b, sel.window_s), keys, column)
             for a, b in sel.chunks()]
    return pl.concat(parts) if len(parts) > 1 else parts[0]


def _clean(df: pl.DataFrame, column: str, idle_zero: bool) -> pl.DataFrame:
    """NaN/Inf from 0/0 or x/0: 0.0 where sysstat prints 0.00 for an idle window, else null;
    nothing below zero survives (an engine's increase never is)."""
    c = pl.col(column)
    bad = c.is_nan() | c.is_infinite()
    fixed = pl.when(bad).then(pl.lit(0.0 if idle_zero else None)).otherwise(c)
    return df.with_columns(pl.when(fixed < 0).then(None).otherwise(fixed).alias(column))


def read_batch(client: PromClient, sel: PromSelection, hosts: list[str]) -> SampleFrame:
    """The SampleFrame of ``hosts`` over the selection."""
    hl = sel.host_label
    keys = (hl, "device")
    m = _batch_matchers(sel, hosts)
    got = {}
    for measure in promql.MEASURES:
        df = _fetch(client, sel, promql.disk_expression(measure, m, sel.window_s), keys,
                    measure.column)
        got[measure.column] = _clean(df, measure.column, measure.idle_zero)
    presence = got["r_iops"]
    if presence.height == 0:
        return SampleFrame.empty()
    grid = _grid(presence, keys, sel.window_s)
    frame = grid
    for df in got.values():
        frame = frame.join(df, on=[*keys, "ts_ms"], how="left")
    inflight = _fetch(client, sel, promql.inflight_expression(m), keys, "inflight")
    # the gauge's last value is carried by the engine's lookback: kept only where the
    # window itself has data
    frame = (frame.join(inflight, on=[*keys, "ts_ms"], how="left")
             .with_columns(pl.when(pl.col("r_iops").is_null()).then(None)
                           .otherwise(pl.col("inflight")).alias("inflight")))
    frame = frame.join(_cpu(client, sel, m), on=[hl, "ts_ms"], how="left")
    return _to_sampleframe(frame, hl, sel.window_s)


def _grid(presence: pl.DataFrame, keys: tuple[str, ...], window_s: float) -> pl.DataFrame:
    """Every window end from each device's first to its last window with data."""
    step_ms = round(window_s * 1000)
    spans = presence.group_by(list(keys)).agg(pl.col("ts_ms").min().alias("lo"),
                                              pl.col("ts_ms").max().alias("hi"))
    return (spans.with_columns(pl.int_ranges("lo", pl.col("hi") + 1, step_ms).alias("ts_ms"))
            .drop("lo", "hi").explode("ts_ms"))


def _cpu(client: PromClient, sel: PromSelection, m: tuple[Matcher, ...]) -> pl.DataFrame:
    hl = sel.host_label
    parts = [_clean(_fetch(client, sel, promql.cpu_expression(modes, m, hl, sel.window_s),
                           (hl,), column), column, idle_zero=False)
             for column, modes in promql.CPU_MODES.items()]
    frame = parts[0]
    for df in parts[1:]:
        frame = frame.join(df, on=[hl, "ts_ms"], how="full", coalesce=True)
    return frame


def _to_sampleframe(frame: pl.DataFrame, host_label: str, window_s: float) -> SampleFrame:
    names = frame["device"].unique().to_list()
    kinds = {n: ("partition" if guess_parent(n) else kind_from_name(n)) for n in names}
    parents = {n: guess_parent(n) for n in names}
    df = frame.with_columns(
        pl.lit(SOURCE_ID).alias("source"),
        pl.col(host_label).alias("host"),
        pl.col("device").replace_strict(kinds, return_dtype=pl.String()).alias("device_kind"),
        pl.col("device").replace_strict(parents, return_dtype=pl.String()).alias("parent"),
        pl.from_epoch(pl.col("ts_ms") * 1000, time_unit="us").dt.replace_time_zone("UTC")
        .alias("ts"),
        pl.lit(float(window_s)).alias("interval_s"),
    ).drop("ts_ms", *([host_label] if host_label != "host" else []))
    return SampleFrame(df.sort("host", "device", "ts"))


def read_infos(client: PromClient, sel: PromSelection, hosts: list[str]
               ) -> dict[str, DeviceInfo]:
    """Model from ``node_disk_info`` and rotational from
    ``node_disk_ata_rotation_rate_rpm`` where present [node_exporter], by ``host:device``."""
    span = (sel.end - sel.start).total_seconds()
    m = _batch_matchers(sel, hosts)
    at = sel.end.timestamp()

    def each(metric: str) -> Iterator[tuple[str, str, dict[str, str], str]]:
        for s in client.query(promql.info_expression(metric, m, span), at):
            labels = s.get("metric") or {}
            host, dev = labels.get(sel.host_label), labels.get("device")
            value = s.get("value") or [0, ""]
            if host and dev:
                yield host, dev, labels, str(value[1])

    models = {(h, d): (lab.get("model") or "").strip() or None
              for h, d, lab, _ in each(promql.DISK_INFO)}
    rpm = {(h, d): float(v) for h, d, _, v in each(promql.ROTATION)}
    out: dict[str, DeviceInfo] = {}
    for key in models.keys() | rpm.keys():
        host, dev = key
        out[f"{host}:{dev}"] = DeviceInfo(
            name=dev, kind="partition" if guess_parent(dev) else kind_from_name(dev),
            parent=guess_parent(dev), model=models.get(key),
            rotational=None if key not in rpm else rpm[key] > 0)
    return out


def iter_batches(client: PromClient, sel: PromSelection, read: PromRead
                 ) -> Iterator[tuple[list[str], SampleFrame]]:
    """Each batch of hosts with its SampleFrame; ``read`` is filled in as they go."""
    read.hosts = discover_hosts(client, sel)
    for hosts in host_batches(read.hosts, sel.hosts_per_batch):
        frame = read_batch(client, sel, hosts)
        read.batches += 1
        read.rows += len(frame)
        if len(frame):
            read.null_rows += int(frame.df["r_iops"].null_count())
        yield hosts, frame
    if read.rows == 0:
        raise SourceError(f"{client.url}: the series exist but no window between "
                          f"{sel.start.isoformat()} and {sel.end.isoformat()} has two samples "
                          "to take an increase from (a range with no data?)")
    if read.null_rows:
        read.notes.append(f"{read.null_rows:,} window(s) without samples (scrape gaps) are "
                          "null rows: nothing is carried across a gap")
