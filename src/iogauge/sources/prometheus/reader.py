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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import polars as pl

from iogauge.collector.derive import DERIVED_COLUMNS, derive_metrics
from iogauge.collector.diskstats import IDX, N_FIELDS
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
        parallel_queries: query_range calls in flight at once.
    """

    start: datetime
    end: datetime
    window_s: float = 60.0
    matchers: tuple[Matcher, ...] = ()
    host_label: str = "instance"
    hosts_per_batch: int = 50
    max_points: int = MAX_POINTS
    parallel_queries: int = 2

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
    match = promql.selector(promql.PRESENCE.metric, sel.matchers)
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


def batch_matchers(sel: PromSelection, hosts: list[str]) -> tuple[Matcher, ...]:
    regex = "|".join(promql.regex_escape(h) for h in hosts)
    return (*sel.matchers, Matcher(sel.host_label, "=~", regex))


def _long(series: list[dict[str, object]], keys: tuple[str, ...], column: str) -> pl.DataFrame:
    """A query's matrix as rows (keys..., ts_ms, column)."""
    cols: dict[str, list[object]] = {k: [] for k in (*keys, "ts_ms")}
    values_text: list[str] = []
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
        values_text.extend(p[1] for p in values)
    schema: dict[str, pl.DataType] = {k: pl.String() for k in keys}
    schema["ts_ms"] = pl.Int64()
    df = pl.DataFrame(cols, schema=schema).with_columns(
        # the API writes sample values as strings ("NaN", "+Inf" included): one vectorised
        # cast instead of a float() per point
        pl.Series(column, values_text, dtype=pl.String()).cast(pl.Float64()))
    return df.unique(subset=[*keys, "ts_ms"], keep="first")


def _fetch_all(client: PromClient, sel: PromSelection, queries: list[tuple[str, str]],
               keys: tuple[str, ...]) -> dict[str, pl.DataFrame]:
    """Each (column, query) over the span's chunks, ``sel.parallel_queries`` at a time: the
    engine evaluates one query while iogauge decodes the answer to the one before."""
    jobs = [(col, q, a, b) for col, q in queries for a, b in sel.chunks()]

    def one(job: tuple[str, str, float, float]) -> pl.DataFrame:
        col, q, a, b = job
        return _long(client.query_range(q, a, b, sel.window_s), keys, col)

    if sel.parallel_queries > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(sel.parallel_queries) as pool:
            parts = list(pool.map(one, jobs))
    else:
        parts = [one(j) for j in jobs]
    out: dict[str, list[pl.DataFrame]] = {}
    for (col, *_), df in zip(jobs, parts, strict=True):
        out.setdefault(col, []).append(df)
    return {c: pl.concat(dfs) if len(dfs) > 1 else dfs[0] for c, dfs in out.items()}


def disk_queries(sel: PromSelection, m: tuple[Matcher, ...]) -> list[tuple[str, str]]:
    """(column, PromQL) of every disk query of a batch: one increase per counter, the
    in-flight gauge."""
    out = [(c.field, promql.counter_expression(c, m, sel.window_s)) for c in promql.COUNTERS]
    out.append(("in_flight", promql.inflight_expression(m)))
    return out


def read_batch(client: PromClient, sel: PromSelection, hosts: list[str]) -> SampleFrame:
    """The SampleFrame of ``hosts`` over the selection."""
    hl = sel.host_label
    keys = (hl, "device")
    m = batch_matchers(sel, hosts)
    got = _fetch_all(client, sel, disk_queries(sel, m), keys)
    presence = got[promql.PRESENCE.field]
    if presence.height == 0:
        return SampleFrame.empty()
    frame = _grid(presence, keys, sel.window_s)
    for df in got.values():
        frame = frame.join(df, on=[*keys, "ts_ms"], how="left")
    frame = _derived(frame, keys, sel.window_s)
    frame = frame.join(_cpu(client, sel, m), on=[hl, "ts_ms"], how="left")
    return _to_sampleframe(frame, hl, sel.window_s)


def _derived(frame: pl.DataFrame, keys: tuple[str, ...], window_s: float) -> pl.DataFrame:
    """sysstat's formulas [sysstat] on the engine's increases, by the code the live
    collector uses (:func:`~iogauge.collector.derive.derive_metrics`): the increases are
    put back in the kernel's units (ms, sectors) first."""
    n = frame.height
    delta = np.full((n, N_FIELDS), np.nan)
    for c in promql.COUNTERS:
        delta[:, IDX[c.field]] = frame[c.field].cast(pl.Float64).to_numpy() * c.to_kernel
    # the gauge's last value is carried by the engine's lookback: kept only where the
    # window itself has data
    inflight = frame["in_flight"].cast(pl.Float64).to_numpy()
    delta[:, IDX["in_flight"]] = np.where(np.isnan(delta[:, IDX[promql.PRESENCE.field]]),
                                          np.nan, inflight)
    metrics = derive_metrics(delta, np.full(n, float(window_s)))
    return frame.select(*keys, "ts_ms").with_columns(
        pl.Series(name, metrics[name]).fill_nan(None) for name in DERIVED_COLUMNS)


def _grid(presence: pl.DataFrame, keys: tuple[str, ...], window_s: float) -> pl.DataFrame:
    """Every window end from each device's first to its last window with data."""
    step_ms = round(window_s * 1000)
    spans = presence.group_by(list(keys)).agg(
        pl.col("ts_ms").min().alias("lo"), pl.col("ts_ms").max().alias("hi"))
    return (spans.with_columns(pl.int_ranges("lo", pl.col("hi") + 1, step_ms).alias("ts_ms"))
            .drop("lo", "hi").explode("ts_ms"))


def _cpu(client: PromClient, sel: PromSelection, m: tuple[Matcher, ...]) -> pl.DataFrame:
    """iostat's avg-cpu shares per host and window [sysstat] from the seconds per mode."""
    hl = sel.host_label
    query = promql.cpu_expression(m, hl, sel.window_s)
    secs = _fetch_all(client, sel, [("s", query)], (hl, "mode"))["s"]
    total = pl.col("s").sum()
    shares = [
        pl.when(pl.col("mode").is_in(list(modes)).any())
        .then(100 * pl.col("s").filter(pl.col("mode").is_in(list(modes))).sum() / total)
        .alias(column)
        for column, modes in promql.CPU_MODES.items()]
    return secs.group_by(hl, "ts_ms").agg(shares).with_columns(
        pl.col(c).fill_nan(None) for c in promql.CPU_MODES)


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
    m = batch_matchers(sel, hosts)
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
    """Each batch of hosts with its SampleFrame; ``read`` is filled in as they go.

    The next batch is read while the caller analyses this one (the engine works on one
    core, the analysis on another); at most two batches are held at once.
    """
    read.hosts = discover_hosts(client, sel)
    batches = host_batches(read.hosts, sel.hosts_per_batch)
    pool = ThreadPoolExecutor(1)
    try:
        pending = pool.submit(read_batch, client, sel, batches[0])
        for i, hosts in enumerate(batches):
            frame = pending.result()
            if i + 1 < len(batches):
                pending = pool.submit(read_batch, client, sel, batches[i + 1])
            read.batches += 1
            read.rows += len(frame)
            if len(frame):
                read.null_rows += int(frame.df["r_iops"].null_count())
            yield hosts, frame
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    if read.rows == 0:
        raise SourceError(f"{client.url}: the series exist but no window between "
                          f"{sel.start.isoformat()} and {sel.end.isoformat()} has two samples "
                          "to take an increase from (a range with no data?)")
    if read.null_rows:
        read.notes.append(f"{read.null_rows:,} window(s) without samples (scrape gaps) are "
                          "null rows: nothing is carried across a gap")
