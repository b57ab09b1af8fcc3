"""Recorder: the live collector into the embedded store, in batched transactions.

Per sample the recorder only calls ``collector.sample()`` and appends the result to a list
(plain Python and numpy: no polars, no DuckDB), because recording at a 1 s interval must cost
well under 0.5 % of one core. Every ``flush_s`` seconds of *data* (at most
:data:`MAX_FLUSH_S`) the buffered results become one SampleFrame in a single vectorised build
and one store write (with ``iogauge record``: one segment file of
:class:`~iogauge.store.live.LiveStore`, renamed into place whole). So a ``kill -9`` loses at
most the samples of the batch in progress, and the store stays readable.

SIGINT, SIGTERM and SIGHUP only set a flag. A sample in progress is finished; a signal that arrives
while the recorder sleeps until the next sample ends the sleep at once. Then the buffer is
flushed, the store closed, and :meth:`Recorder.run` returns a :class:`RecordSummary`.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Protocol

from iogauge.collector.linux import IntervalResult, frame_from_results, iso_utc
from iogauge.errors import StoreError
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SampleFrame
from iogauge.timing import paced

#: Longest span of samples the recorder keeps uncommitted (the loss bound of a kill -9).
MAX_FLUSH_S = 5.0
#: Consecutive failed flushes tolerated (each retried flush_s later) before giving up.
MAX_FLUSH_FAILURES = 3


class SampleSource(Protocol):
    """What the recorder needs of a collector (:class:`~iogauge.collector.linux.LinuxCollector`)."""

    @property
    def host(self) -> str: ...

    def prime(self) -> list[str]: ...

    def sample(self) -> IntervalResult: ...

    def device_info(self) -> dict[str, DeviceInfo]: ...


class SampleSink(Protocol):
    """Where the recorder commits: a :class:`~iogauge.store.live.LiveStore` (``record``) or a
    writable :class:`~iogauge.store.duckdb_store.Store`."""

    path: Path

    @property
    def closed(self) -> bool: ...

    def append(self, frame: SampleFrame) -> int: ...

    def append_devices(self, host: str, devices: dict[str, DeviceInfo]) -> int: ...

    def close(self) -> None: ...


@dataclass
class RecordSummary:
    """What a recording wrote, for the one-line summary and for tests.

    Attributes:
        db_path: the store file.
        rows: rows committed to the store.
        samples: collector samples taken.
        devices: device names that produced rows.
        first_ts_us, last_ts_us: ``ts`` of the first and last committed row (UTC µs).
        flushes: committed transactions of sample rows.
        flush_seconds: wall time of each of those transactions (frame build + commit).
        stopped_by: ``SIGINT``, ``SIGTERM``, ``duration``, ``request`` or ``error``.
    """

    db_path: Path
    rows: int = 0
    samples: int = 0
    devices: set[str] = field(default_factory=set)
    first_ts_us: int | None = None
    last_ts_us: int | None = None
    flushes: int = 0
    flush_seconds: list[float] = field(default_factory=list)
    stopped_by: str = ""

    def line(self) -> str:
        """One line: rows, devices, time span, db path (and how the recording ended)."""
        why = f"; stopped by {self.stopped_by}" if self.stopped_by else ""
        if not self.rows or self.first_ts_us is None or self.last_ts_us is None:
            return (f"recorded 0 rows ({self.samples} samples, no device reported) into "
                    f"{self.db_path}{why}")
        names = sorted(self.devices)
        shown = ", ".join(names[:8]) + (f", +{len(names) - 8} more" if len(names) > 8 else "")
        span = (self.last_ts_us - self.first_ts_us) / 1e6
        worst = max(self.flush_seconds, default=0.0) * 1e3
        return (f"recorded {self.rows} rows for {len(names)} device"
                f"{'' if len(names) == 1 else 's'} ({shown}) from {iso_utc(self.first_ts_us)} "
                f"to {iso_utc(self.last_ts_us)} ({span:.1f} s) in {self.flushes} "
                f"transaction{'' if self.flushes == 1 else 's'} (slowest {worst:.0f} ms) into "
                f"{self.db_path}{why}")


class _Interrupted(BaseException):
    """Raised by the signal handler only while the recorder sleeps between samples."""


class Recorder:
    """Samples ``collector`` every ``interval_s`` and commits to ``store`` in batches.

    Args:
        collector: the sample source (its ``prime`` is called by :meth:`run`).
        store: an open, writable store; :meth:`run` closes it when it returns or raises.
        interval_s: seconds between samples (> 0).
        flush_s: commit whenever this many seconds of samples are buffered (0 < flush_s <=
            :data:`MAX_FLUSH_S`); with ``interval_s >= flush_s`` every sample is committed.
        duration_s: stop after this many seconds; None or 0: until a signal or
            :meth:`request_stop`.
        on_message: receives collector messages (device appeared/vanished, malformed line)
            and store problems that do not stop the recording.
        on_start: called once the collector is primed and the signal handlers are in place.
        monotonic: clock for pacing and flush timing (injectable for tests).
    """

    def __init__(self, collector: SampleSource, store: SampleSink, *, interval_s: float = 1.0,
                 flush_s: float = MAX_FLUSH_S, duration_s: float | None = None,
                 on_message: Callable[[str], None] | None = None,
                 on_start: Callable[[], None] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if not interval_s > 0 or not math.isfinite(interval_s):
            raise ValueError(f"interval_s must be > 0, not {interval_s}")
        if not 0 < flush_s <= MAX_FLUSH_S:
            raise ValueError(f"flush_s must be in (0, {MAX_FLUSH_S}] so that at most "
                             f"{MAX_FLUSH_S:g} s of samples are at risk, not {flush_s}")
        if duration_s is not None and duration_s < 0:
            raise ValueError(f"duration_s must be >= 0, not {duration_s}")
        self._collector = collector
        self._store = store
        self._interval = float(interval_s)
        self._flush_s = float(flush_s)
        self._duration = duration_s or None
        self._on_message = on_message or (lambda _m: None)
        self._on_start = on_start
        self._mono = monotonic
        self._host = collector.host
        self._buffer: list[IntervalResult] = []
        self._buffer_rows = 0
        self._buffer_devices: set[str] = set()
        self._buffer_last_mono = 0.0
        self._committed_mono = 0.0
        self._failures = 0
        self._retry_mono = -math.inf
        self._synced: dict[str, DeviceInfo] = {}
        self._stop_reason: str | None = None
        self._interruptible = False
        self.summary = RecordSummary(db_path=store.path)

    # ---- control --------------------------------------------------------------------------
    def request_stop(self, reason: str = "request") -> None:
        """Ask the loop to stop after the sample in progress (safe from a signal handler)."""
        if self._stop_reason is None:
            self._stop_reason = reason

    @property
    def buffered_rows(self) -> int:
        """Rows sampled but not yet committed (what a kill -9 now would lose)."""
        return self._buffer_rows

    def run(self, *, handle_signals: bool = True) -> RecordSummary:
        """Record until the duration ends or a stop is requested; flush; close the store.

        Args:
            handle_signals: install SIGINT/SIGTERM handlers for the run (main thread only);
                the previous handlers are restored afterwards.

        Raises:
            StoreError: the store refused writes :data:`MAX_FLUSH_FAILURES` times in a row,
                or the final flush failed (buffered rows are then lost, and said so).
            CollectorError: the collector cannot read its source at all. What was buffered
                is flushed first.
        """
        with self._signals(handle_signals):
            try:
                with suppress(_Interrupted):
                    self._loop()
                self._final_flush()
            except BaseException:
                self.summary.stopped_by = self.summary.stopped_by or "error"
                self._salvage()
                raise
            finally:
                self._store.close()
        return self.summary

    def flush(self) -> int:
        """Commit the buffered samples in one transaction; returns the rows committed.

        On a StoreError the samples stay buffered (and are retried by the next flush).
        """
        if not self._buffer:
            return 0
        t0 = time.perf_counter()
        frame = frame_from_results(self._buffer, host=self._host)
        n = self._store.append(frame)
        elapsed = time.perf_counter() - t0
        s = self.summary
        s.rows += n
        s.devices |= self._buffer_devices
        if s.first_ts_us is None:
            s.first_ts_us = self._buffer[0].ts_us
        s.last_ts_us = self._buffer[-1].ts_us
        s.flushes += 1
        s.flush_seconds.append(elapsed)
        self._buffer.clear()
        self._buffer_rows = 0
        self._buffer_devices = set()
        self._committed_mono = self._buffer_last_mono
        self._sync_devices()
        return n

    # ---- the loop -------------------------------------------------------------------------
    def _loop(self) -> None:
        for m in self._collector.prime():
            self._on_message(m)
        self._committed_mono = self._mono()
        self._sync_devices()
        if self._on_start is not None:
            self._on_start()
        count = None
        if self._duration is not None:
            count = max(1, math.floor(self._duration / self._interval + 1e-9))
        ticks = paced(self._interval, count, self._mono)
        # A batch is the most samples whose span fits in flush_s; it is judged half an
        # interval early so that sampling jitter cannot push a flush one interval late.
        per_batch = max(1, math.floor(self._flush_s / self._interval + 1e-9))
        due = (per_batch - 0.5) * self._interval
        while True:
            # Only this window (sleeping until the next sample) may be cut short by a signal:
            # no sample or store state is touched in it.
            self._interruptible = True
            if self._stop_reason is not None:
                self._interruptible = False
                return
            try:
                next(ticks)
            except StopIteration:
                self._interruptible = False
                self.summary.stopped_by = "duration"
                return
            self._interruptible = False
            res = self._collector.sample()
            mono = self._mono()
            self.summary.samples += 1
            for m in res.messages:
                self._on_message(m)
            if len(res):
                self._buffer.append(res)
                self._buffer_rows += len(res)
                self._buffer_devices.update(res.devices)
                self._buffer_last_mono = mono
            if mono - self._committed_mono >= due and mono >= self._retry_mono:
                if self._buffer:
                    self._periodic_flush(mono)
                else:
                    self._committed_mono = mono
            if self._stop_reason is not None:
                return

    def _periodic_flush(self, mono: float) -> None:
        try:
            self.flush()
            self._failures = 0
        except StoreError as exc:
            self._failures += 1
            if self._failures >= MAX_FLUSH_FAILURES:
                raise
            self._retry_mono = mono + self._flush_s
            self._on_message(f"{exc}; keeping {self._buffer_rows} rows and retrying in "
                             f"{self._flush_s:g} s")

    def _final_flush(self) -> None:
        if self._stop_reason and not self.summary.stopped_by:
            self.summary.stopped_by = self._stop_reason
        self.flush()

    def _salvage(self) -> None:
        """Best effort after an error: commit what is buffered, say what was lost."""
        if not self._buffer or self._store.closed:
            return
        try:
            self.flush()
        except Exception as exc:  # noqa: BLE001 - the original error is re-raised by run()
            self._on_message(f"{self._buffer_rows} buffered rows could not be saved: {exc}")

    def _sync_devices(self) -> None:
        """Store device metadata that is new or changed since the last call."""
        try:
            current = self._collector.device_info()
            changed = {n: i for n, i in current.items() if self._synced.get(n) != i}
            if changed:
                self._store.append_devices(self._host, changed)
                self._synced.update(changed)
        except StoreError as exc:
            self._on_message(f"device metadata not saved (retried later): {exc}")

    # ---- signals --------------------------------------------------------------------------
    @contextmanager
    def _signals(self, enabled: bool) -> Iterator[None]:
        if not enabled:
            yield
            return

        def handler(signum: int, _frame: FrameType | None) -> None:
            self.request_stop(signal.Signals(signum).name)
            if self._interruptible:
                self._interruptible = False
                raise _Interrupted

        # SIGHUP too: closing the terminal of a foreground `record` must not lose a batch.
        previous = {s: signal.signal(s, handler)
                    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
