"""What a rule sees: every device's rows, windows and derived facts, plus the run's options.

:class:`AnalysisContext` is built once per analysis (``AnalysisContext.build``) from a
SampleFrame, optional database waits and device metadata; the engine then fills each
:class:`DeviceContext`'s ``attributes``, ``capability`` and ``capacity`` before the rules run.
Rules read the context and return findings; they never change it. Tests build a context
directly from a fixture frame.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, time
from fnmatch import fnmatchcase
from zoneinfo import ZoneInfo

import polars as pl

from iogauge.analysis import latency_standard
from iogauge.analysis.latency_standard import Expectation
from iogauge.analysis.service_model import ServiceDecision, decide
from iogauge.analysis.types import Attributes, Capability, CapacityEstimate
from iogauge.analysis.windows import aggregate_windows_by_device, choose_window_s
from iogauge.errors import IogaugeError
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.timeline import RelativeTimeline
from iogauge.model.waitevents import WaitEventFrame

UTC = ZoneInfo("UTC")

#: Kinds that are aggregates or parts of another device: judged with their parent in mind.
PART_KINDS = frozenset({"partition", "datafile"})


class AnalysisOptionError(IogaugeError):
    """An analysis option (``--target``, ``--profile``) cannot be understood."""


@dataclass(frozen=True)
class LatencyTarget:
    """A response-time target for some devices, optionally only in a daily time window.

    [MS-Azure-JP]: expectations depend on the system's requirements — a nightly backup reaching
    100 ms may be fine in its window while 10 ms is the goal for SQL Server by day.

    Attributes:
        device_glob: which devices (fnmatch pattern on the device key or name; ``*`` = all).
        ms: the target mean response time in milliseconds.
        start, end: local wall-clock window (``end`` < ``start`` wraps midnight); both None
            for all day.
        text: the option as the user wrote it (cited in findings).
    """

    device_glob: str
    ms: float
    start: time | None = None
    end: time | None = None
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> LatencyTarget:
        """Parse ``DEVICE=MS`` or ``DEVICE=MS@HH:MM-HH:MM`` (DEVICE may be a glob)."""
        m = re.fullmatch(r"\s*([^=\s]+)\s*=\s*([0-9]+(?:\.[0-9]+)?)\s*(?:ms)?"
                         r"(?:\s*@\s*([0-2]?[0-9]):([0-5][0-9])\s*-\s*([0-2]?[0-9]):([0-5][0-9]))?"
                         r"\s*", text)
        if not m:
            raise AnalysisOptionError(f"--target {text!r}: expected DEVICE=MS or "
                                      "DEVICE=MS@HH:MM-HH:MM, e.g. sdb=10 or "
                                      "sdb=100@01:00-04:00")
        ms = float(m.group(2))
        if ms <= 0:
            raise AnalysisOptionError(f"--target {text!r}: the target must be > 0 ms")
        start = end = None
        if m.group(3) is not None:
            h1, m1, h2, m2 = (int(m.group(i)) for i in range(3, 7))
            if h1 > 23 or h2 > 24 or (h2 == 24 and m2):
                raise AnalysisOptionError(f"--target {text!r}: not a time of day")
            start = time(h1, m1)
            end = time(0, 0) if h2 == 24 else time(h2, m2)
        return cls(m.group(1), ms, start, end, text.strip())

    def matches(self, device: str) -> bool:
        return fnmatchcase(device, self.device_glob) or (
            ":" in device and fnmatchcase(device.split(":", 1)[1], self.device_glob))

    def covers(self, local: time) -> bool:
        """Whether a local wall-clock time falls in the target's daily window."""
        if self.start is None or self.end is None:
            return True
        if self.start <= self.end:
            return self.start <= local < self.end
        return local >= self.start or local < self.end


class DeviceContext:
    """One device as the rules see it.

    Attributes:
        key: unique name in the analysis: the device name, or ``host:device`` when the data
            has several hosts.
        host, device, kind, parent, source: identity from the SampleFrame (first row).
        rows: the device's interval rows, time order, reset and since-boot rows removed.
            Built by ``AnalysisContext.build`` they are gathered from the shared frame on
            each access (a day of 1 s samples for 100 devices must not be held twice:
            ``benchmarks/analysis_scale.py``); read them once per use.
        windows: ``rows`` aggregated into analysis windows (``windows.aggregate_windows``).
        info: sysfs metadata when the data was collected live; else None.
        attributes, capability, capacity: filled by the engine before rules run.
        synthetic: True for a device the engine aggregated from its parts (a rank from its
            volumes, a disk from its partitions) rather than one the source reported.
        service: how it serves requests, decided by the engine from the samples
            (``service_model.decide``); None until then.
        timeline: the relative time line of reports without time stamps (their windows are
            named by report, not by clock time); None on the clock.
        expectation: the response time it should answer within (``latency_standard``);
            None for kinds no response time is expected of, or before the engine sets it.
    """

    def __init__(self, key: str, host: str, device: str, kind: str, parent: str | None,
                 source: str, rows: pl.DataFrame | None = None,
                 windows: pl.DataFrame | None = None, info: DeviceInfo | None = None,
                 attributes: Attributes | None = None, capability: Capability | None = None,
                 capacity: CapacityEstimate | None = None, synthetic: bool = False,
                 service: ServiceDecision | None = None, *,
                 frame: pl.DataFrame | None = None, index: pl.Series | None = None) -> None:
        self.key = key
        self.host = host
        self.device = device
        self.kind = kind
        self.parent = parent
        self.source = source
        self._rows = rows
        self._frame = frame
        self._index = index
        self.windows = windows if windows is not None else pl.DataFrame()
        self.info = info
        self.attributes = attributes
        self.capability = capability
        self.capacity = capacity
        self.synthetic = synthetic
        self.service = service
        self.timeline: RelativeTimeline | None = None
        self._expectation: Expectation | None = None

    @property
    def rows(self) -> pl.DataFrame:
        if self._rows is not None:
            return self._rows
        if self._frame is not None and self._index is not None:
            return self._frame[self._index]
        return pl.DataFrame()

    @rows.setter
    def rows(self, value: pl.DataFrame) -> None:
        self._rows = value
        self._frame = self._index = None

    def select_rows(self, *columns: str) -> pl.DataFrame:
        """Only some columns of :attr:`rows` (those the frame has), cheaper to gather."""
        if self._rows is not None:
            return self._rows.select([c for c in columns if c in self._rows.columns])
        if self._frame is not None and self._index is not None:
            have = [c for c in columns if c in self._frame.columns]
            return self._frame.select(have)[self._index]
        return pl.DataFrame()

    def __repr__(self) -> str:
        return (f"DeviceContext(key={self.key!r}, kind={self.kind!r}, "
                f"parent={self.parent!r}, source={self.source!r})")

    @property
    def expectation(self) -> Expectation | None:
        """The expectation the engine chose (with the catalog profile's kind), else one
        from what the device carries now."""
        if self._expectation is not None:
            return self._expectation
        return latency_standard.expect(self)

    @expectation.setter
    def expectation(self, value: Expectation | None) -> None:
        self._expectation = value

    def service_decision(self) -> ServiceDecision:
        """How this device serves requests (``service_model``): the engine's decision from
        the samples, or, before it ran (a context built by hand), the labels' alone."""
        if self.service is not None:
            return self.service
        return decide(self.device, self.kind, self.info, self.capability, None, None)

    @property
    def util_is_capacity(self) -> bool | None:
        """Whether %util measures capacity here (one-at-a-time device), None if undetermined.

        [sysstat] iostat(1): %util does not reflect the limits of devices serving requests
        in parallel. Which one a device is comes from :meth:`service_decision`.
        """
        return self.service_decision().util_is_capacity

    @property
    def start(self) -> datetime | None:
        if self.windows.height == 0:
            return None
        return self.windows["window_start"].min()  # type: ignore[return-value]

    @property
    def end(self) -> datetime | None:
        if self.windows.height == 0:
            return None
        return self.windows["window_end"].max()  # type: ignore[return-value]


@dataclass
class AnalysisContext:
    """Everything the rules may read.

    Attributes:
        devices: device key -> :class:`DeviceContext`, in the data's order.
        window_s: analysis window length (seconds).
        interval_s: the data's median sampling interval (seconds), None when empty.
        waits: database wait events (WaitEventFrame columns), None when there are none.
        targets: user response-time targets (``--target``), first match wins.
        tz: zone for wall-clock windows of targets (the data is UTC).
        notes: facts about the input the report should state.
        frame: every analysed row (all devices; the frame the devices' rows are gathered
            from), for analyses that run once over all devices.
        timeline: the relative time line when the data are reports without time stamps
            (``model.timeline``); None when they are on the clock.
        storage_map: tablespace or datafile -> the device under it (``--map``).
    """

    devices: dict[str, DeviceContext]
    window_s: float
    interval_s: float | None
    waits: pl.DataFrame | None = None
    targets: list[LatencyTarget] = field(default_factory=list)
    tz: ZoneInfo = UTC
    notes: list[str] = field(default_factory=list)
    frame: pl.DataFrame | None = None
    timeline: RelativeTimeline | None = None
    storage_map: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, frame: SampleFrame | pl.DataFrame,
              waits: WaitEventFrame | pl.DataFrame | None = None,
              infos: Mapping[str, DeviceInfo] | None = None,
              targets: Iterable[LatencyTarget] = (),
              window_s: float | None = None, tz: ZoneInfo = UTC) -> AnalysisContext:
        """Split ``frame`` per device, drop reset/since-boot rows, aggregate windows.

        ``infos`` is keyed by kernel device name (as ``LinuxCollector.device_info``), or by
        ``host:device`` when the frame holds several hosts. ``window_s`` None chooses 60 s,
        or the data's interval when that is longer.
        """
        df = frame.df if isinstance(frame, SampleFrame) else frame
        notes: list[str] = []
        bad = pl.col("reset") | pl.col("since_boot")
        dropped = int(df.select(bad.sum()).item()) if df.height else 0
        if dropped:
            notes.append(f"{dropped} row(s) left out: since-boot averages or counter resets")
            df = df.filter(~bad)
        # Columns no row has a value in (null_count is metadata: free) are left out, so
        # gathering a device's rows moves only data that exists.
        df = df.select([c for c in df.columns if df[c].null_count() < df.height
                        or c in ("parent", "source", "host", "device", "device_kind", "ts",
                                 "interval_s", "since_boot", "reset")])
        interval = float(df["interval_s"].median()) if df.height else None  # type: ignore[arg-type]
        win = choose_window_s(interval, window_s)
        multi_host = df["host"].n_unique() > 1 if df.height else False
        infos = infos or {}
        devices: dict[str, DeviceContext] = {}
        # One index list per device, in time order: each device's rows are gathered from
        # the shared frame when needed instead of being copied once per device up front.
        groups = (df.select("host", "device", "ts").with_row_index("_i")
                  .sort(["ts", "_i"])
                  .group_by(["host", "device"], maintain_order=True)
                  .agg(pl.col("_i")))
        first = df.select("device_kind", "parent", "source")
        for host, device, idx in groups.iter_rows():
            host_s, dev_s = str(host), str(device)
            key = f"{host_s}:{dev_s}" if multi_host else dev_s
            index = pl.Series("_i", idx, dtype=pl.UInt32)
            head = first.row(int(idx[0]))
            dev = DeviceContext(key=key, host=host_s, device=dev_s, kind=str(head[0]),
                                parent=head[1], source=str(head[2]),
                                # several hosts: metadata keyed host:device (a fleet source)
                                info=infos.get(key) if multi_host else infos.get(dev_s),
                                frame=df, index=index)
            devices[key] = dev
        windows = aggregate_windows_by_device(df, win)
        line = RelativeTimeline.of(df["ts"].max() if df.height else None, interval)  # type: ignore[arg-type]
        for dev in devices.values():
            dev.windows = windows.get((dev.host, dev.device), pl.DataFrame())
            dev.timeline = line
        wdf: pl.DataFrame | None
        if waits is None:
            wdf = None
        else:
            wdf = waits.df if isinstance(waits, WaitEventFrame) else waits
            if wdf.height == 0:
                wdf = None
        return cls(devices=devices, window_s=win, interval_s=interval, waits=wdf,
                   targets=list(targets), tz=tz, notes=notes, frame=df, timeline=line)

    def children(self, key: str) -> list[DeviceContext]:
        """Devices whose ``parent`` is this device (same host): partitions of a disk,
        volumes of a rank, datafiles of a tablespace, LogicalDisks on a PhysicalDisk."""
        dev = self.devices[key]
        return [d for d in self.devices.values()
                if d.parent == dev.device and d.host == dev.host and d.key != key]

    def target_for(self, key: str) -> list[LatencyTarget]:
        """User targets that apply to a device, in the order given."""
        return [t for t in self.targets if t.matches(key)]

    def local_time(self, ts: datetime) -> time:
        """Wall-clock time of a UTC timestamp in the analysis zone."""
        return ts.astimezone(self.tz).time()
