"""The exporter's loop: sample, keep a sliding window, judge it, publish the judgement.

Scrapes never analyse. One thread samples /proc/diskstats every ``interval_s`` with the live
collector, drops the samples older than ``window_s`` and, every ``judge_every_s``, runs the
analysis engine over what is left and swaps in the new
:class:`~iogauge.exporter.judgement.Judgement`; a scrape (or the
textfile writer) only turns the latest judgement into text. So a scrape costs the same with
a 15-minute window as with a 1-minute one, and a slow analysis delays the next judgement,
never a scrape.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile
from prometheus_client.process_collector import ProcessCollector

from iogauge.errors import IogaugeError, StoreError
from iogauge.exporter.guarantee_figures import read_latest
from iogauge.exporter.judgement import GuaranteeFigures, Judgement, judgement_from
from iogauge.exporter.metrics import JudgementCollector

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from iogauge.analysis.service_model import ServiceModel
    from iogauge.collector.linux import IntervalResult, LinuxCollector
    from iogauge.model.device import DeviceInfo
    from iogauge.model.sampleframe import SampleFrame

#: File the textfile collector reads in ``--textfile DIR`` (node_exporter reads ``*.prom``).
TEXTFILE_NAME = "iogauge.prom"
#: Longest analysis window inside the sliding window (the engine's default window).
ENGINE_WINDOW_S = 60.0


class ListenError(IogaugeError):
    """``--listen`` is not HOST:PORT, or the port cannot be bound."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9595`` for IPv6) to (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ListenError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9595")
    return host.strip("[]"), int(port)


@dataclass
class ExporterOptions:
    """What ``iogauge exporter`` was asked to do.

    Attributes:
        interval_s: seconds between samples.
        window_s: the sliding window judged (s).
        judge_every_s: seconds between judgements (each analyses the whole window: ~0.3 s
            of CPU for 180 samples of 9 devices, so judging at every 5 s sample would cost
            ~6 % of a core); 0 = after every sample.
        media: device -> service model (``--media``), beats the samples.
        guarantee_db: the guarantee's decision store; None: no guarantee figures.
        textfile_dir: write ``iogauge.prom`` here after every judgement; None: don't.
    """

    interval_s: float = 5.0
    window_s: float = 900.0
    judge_every_s: float = 0.0
    media: Mapping[str, ServiceModel] = field(default_factory=dict)
    guarantee_db: Path | None = None
    textfile_dir: Path | None = None


class SampleWindow:
    """The collector's samples of the last ``window_s`` seconds."""

    def __init__(self, collector: LinuxCollector, window_s: float) -> None:
        self.collector = collector
        self.window_s = window_s
        self._results: deque[IntervalResult] = deque()

    def prime(self) -> list[str]:
        return self.collector.prime()

    def take(self) -> list[str]:
        """One sample into the window (the oldest leave it); the collector's messages."""
        res = self.collector.sample()
        self._results.append(res)
        oldest_us = res.ts_us - round(self.window_s * 1e6)
        while self._results and self._results[0].ts_us <= oldest_us:
            self._results.popleft()
        return res.messages

    @property
    def samples(self) -> int:
        return len(self._results)

    @property
    def span_s(self) -> float:
        """Time the window's samples cover (each sample covers its interval)."""
        if not self._results:
            return 0.0
        first = self._results[0]
        lead = float(first.interval_s.max()) if len(first) else 0.0
        return (self._results[-1].ts_us - first.ts_us) / 1e6 + lead

    def results(self) -> list[IntervalResult]:
        return list(self._results)

    def frame(self) -> tuple[SampleFrame, dict[str, DeviceInfo]]:
        """The window's samples as one SampleFrame, and the devices' metadata."""
        from iogauge.collector.linux import frame_from_results  # noqa: PLC0415

        col = self.collector
        return frame_from_results(self.results(), host=col.host), col.device_info()


class StoreWindow:
    """The samples ``iogauge record`` commits to a store (its live segments are read while it
    runs), of this host, over the last ``window_s`` seconds: the exporter then samples
    nothing itself. ``take`` does nothing; the store is read when a judgement is made."""

    def __init__(self, db: Path, window_s: float, devices: Sequence[str] | None = None,
                 host: str | None = None) -> None:
        self.db = db
        self.window_s = window_s
        self.devices = list(devices) if devices else None
        self.host = host or socket.gethostname()
        self.samples = 0
        self.span_s = 0.0

    def prime(self) -> list[str]:
        if not self.db.is_file():
            raise StoreError(f"{self.db}: no such store; start `iogauge record --db "
                             f"{self.db}` first")
        return []

    def take(self) -> list[str]:
        return []

    def frame(self) -> tuple[SampleFrame, dict[str, DeviceInfo]]:
        from iogauge.model.device import DeviceInfo  # noqa: PLC0415
        from iogauge.store.duckdb_store import Store  # noqa: PLC0415 - DuckDB when used

        since = datetime.now(UTC) - timedelta(seconds=self.window_s)
        with Store.open(self.db, read_only=True, threads=1) as store:
            frame = store.read(device=self.devices, start=since, host=self.host)
            rows = store.read_devices(self.host).to_dicts()
        fields = set(DeviceInfo.__dataclass_fields__)
        infos = {str(r["name"]): DeviceInfo(**{k: v for k, v in r.items() if k in fields}
                                            | {"slaves": tuple(r.get("slaves") or ())})
                 for r in rows}
        import polars as pl  # noqa: PLC0415

        span_us, interval_s, n = frame.df.select(
            span=(pl.col("ts").max() - pl.col("ts").min()).dt.total_microseconds(),
            interval=pl.col("interval_s").median(), n=pl.col("ts").n_unique()).row(0)
        self.samples = int(n)
        self.span_s = 0.0 if not n else float(span_us or 0) / 1e6 + float(interval_s or 0.0)
        return frame, infos


class Exporter:
    """Samples, judges and publishes; :attr:`current` is the latest judgement."""

    def __init__(self, window: SampleWindow | StoreWindow, options: ExporterOptions, *,
                 say: Callable[[str], None] = print) -> None:
        self.window = window
        self.options = options
        self.say = say
        #: The latest judgement (None until the first analysis): swapped whole, so a scrape
        #: on another thread always reads one consistent judgement.
        self.current: Judgement | None = None
        self._guarantee_warned = False
        self._judged_at: float | None = None  # monotonic time of the last judgement
        #: Judgements made so far.
        self.judgements = 0

    def step(self) -> Judgement | None:
        """Take a sample; when ``judge_every_s`` has passed since the last judgement, judge
        the window and publish it (textfile). Returns the current judgement (None: none
        could be made yet)."""
        from iogauge.analysis.engine import AnalysisOptions, analyze  # noqa: PLC0415

        for m in self.window.take():
            self.say(f"warning: {m}")
        t0 = time.perf_counter()
        if (self.current is not None and self._judged_at is not None
                and time.monotonic() - self._judged_at < self.options.judge_every_s):
            return self.current
        self._judged_at = time.monotonic()
        try:
            frame, infos = self.window.frame()
        except StoreError as exc:
            # A store briefly held by another writer (an import): the last judgement stays.
            self.say(f"warning: window not read, the last judgement stays: {exc}")
            if self.current is not None:
                return self.current
            raise
        try:
            result = analyze(frame, None, infos, AnalysisOptions(
                window_s=min(ENGINE_WINDOW_S, self.options.window_s),
                media=self.options.media))
        except Exception as exc:  # noqa: BLE001 - a daemon: the last judgement stays
            self.say(f"warning: the window could not be judged, the last judgement stays: "
                     f"{exc!r} (please report this)")
            return self.current
        self.judgements += 1
        j = judgement_from(result, samples=self.window.samples, span_s=self.window.span_s,
                           analysis_s=time.perf_counter() - t0,
                           guarantees=self._guarantees())
        self.current = j
        if self.options.textfile_dir is not None:
            self.write_textfile(self.options.textfile_dir)
        return j

    def _guarantees(self) -> tuple[GuaranteeFigures, ...]:
        db = self.options.guarantee_db
        if db is None:
            return ()
        try:
            figures = read_latest(db, now=datetime.now(UTC))
        except IogaugeError as exc:
            if not self._guarantee_warned:
                self.say(f"warning: guarantee figures left out: {exc}")
                self._guarantee_warned = True
            return ()
        self._guarantee_warned = False
        return figures

    def write_textfile(self, directory: Path) -> Path:
        """The latest judgement as ``DIR/iogauge.prom``, replaced atomically (written to a
        temporary name in the same directory, then renamed): the textfile collector never
        reads half a file."""
        reg = CollectorRegistry()
        reg.register(JudgementCollector(lambda: self.current))
        path = directory / TEXTFILE_NAME
        try:
            write_to_textfile(str(path), reg)
        except OSError as exc:
            raise IogaugeError(f"{path}: cannot write the textfile: "
                               f"{exc.strerror or exc}") from exc
        return path

    def run(self, stop: threading.Event, duration_s: float | None = None) -> int:
        """Step every ``interval_s`` until ``stop`` is set (or ``duration_s`` passed);
        returns the samples taken."""
        for m in self.window.prime():
            self.say(f"warning: {m}")
        start = time.monotonic()
        steps = 0
        # Deadlines on the monotonic clock (a late judgement does not push the next), waited
        # on the stop event: SIGTERM ends the wait at once, not after an interval.
        while not stop.wait(max(0.0, start + (steps + 1) * self.options.interval_s
                                - time.monotonic())):
            self.step()
            steps += 1
            if duration_s and time.monotonic() - start >= duration_s:
                break
        return steps


def serve_http(listen: str, current: Callable[[], Judgement | None]
               ) -> tuple[WSGIServer, threading.Thread]:
    """``/metrics`` on ``listen``: the judgement, and the exporter's own process figures
    (``process_cpu_seconds_total``: what a scrape costs shows there)."""
    host, port = parse_listen(listen)
    reg = CollectorRegistry()
    reg.register(JudgementCollector(current))
    ProcessCollector(registry=reg)
    try:
        server, thread = start_http_server(port, addr=host, registry=reg)
    except OSError as exc:
        raise ListenError(f"--listen {listen}: cannot listen: {exc.strerror or exc}") from exc
    return server, thread


def make_exporter(devices: Sequence[str] | None, options: ExporterOptions, *,
                  procfs_root: Path = Path("/proc"), sysfs_root: Path = Path("/sys"),
                  say: Callable[[str], None] = print) -> Exporter:
    """An exporter over this machine's disks (``devices``: kernel names; None: every whole
    device that has done I/O, as iostat shows them)."""
    from iogauge.collector.linux import LinuxCollector  # noqa: PLC0415 - polars, numpy

    col = LinuxCollector(procfs_root, sysfs_root, devices=devices or None)
    return Exporter(SampleWindow(col, options.window_s), options, say=say)


def store_exporter(db: Path, devices: Sequence[str] | None, options: ExporterOptions, *,
                   say: Callable[[str], None] = print) -> Exporter:
    """An exporter judging what ``iogauge record --db DB`` writes (this host's rows)."""
    return Exporter(StoreWindow(db, options.window_s, devices), options, say=say)


__all__ = ["TEXTFILE_NAME", "Exporter", "ExporterOptions", "ListenError", "SampleWindow",
           "StoreWindow", "make_exporter", "parse_listen", "serve_http", "store_exporter"]
