"""The live Linux collector: /proc/diskstats (+ /proc/stat for CPU) -> SampleFrame rows.

Design points (each one a way iostat falls short):

* Intervals come from the monotonic clock read right after each snapshot, per device, so a
  device whose line was unreadable for one sample is derived over the longer interval (its
  counters are cumulative) instead of being lost, and wall-clock jumps cannot make a
  negative or huge interval. Sub-second intervals (0.1 s) work; iostat's minimum is 1 s.
* A device that appears is announced and baselined; one that vanishes is announced and the
  others keep being collected; one that re-appears, changes major:minor, or whose counters
  go backwards yields a ``reset`` row with null measures, never a negative rate.
* Metadata (sysfs) is read once per device appearance, not every sample.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from iogauge.collector.derive import DERIVED_COLUMNS, counter_deltas, derive_metrics
from iogauge.collector.diskstats import IDX, N_FIELDS, DiskstatsSnapshot, parse_text
from iogauge.collector.sysfs import kind_from_name, read_device_info, read_dm_name
from iogauge.errors import CollectorError
from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import TS_DTYPE, SampleFrame

SOURCE = "linux-diskstats"

CPU_COLUMNS: tuple[str, ...] = ("cpu_user_pct", "cpu_nice_pct", "cpu_system_pct",
                                "cpu_iowait_pct", "cpu_steal_pct", "cpu_idle_pct")
#: I/O pressure stall shares of the interval (/proc/pressure/io "some" and "full").
PSI_COLUMNS: tuple[str, ...] = ("psi_io_some_pct", "psi_io_full_pct")
#: Host context columns the collector fills (the same value on every device's row).
HOST_COLUMNS: tuple[str, ...] = CPU_COLUMNS + PSI_COLUMNS


def parse_pressure(text: str) -> tuple[int, int] | None:
    """The ``total=`` stall microseconds of the ``some`` and ``full`` lines of a
    ``/proc/pressure/io`` (PSI, kernel 4.20+: ``Documentation/accounting/psi.rst``), or
    None when either line is missing. Kernels before 5.13 have no ``full`` line for the
    CPU file, but the io file always has both."""
    totals: dict[str, int] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        for field_ in rest.split():
            key, _, value = field_.partition("=")
            if key == "total" and value.isdigit():
                totals[kind] = int(value)
    if "some" not in totals or "full" not in totals:
        return None
    return totals["some"], totals["full"]


def pressure_shares(prev: tuple[int, int], cur: tuple[int, int], dt_s: float
                    ) -> dict[str, float | None]:
    """Stall shares (%) of an interval from two ``/proc/pressure/io`` totals."""
    if not dt_s > 0:
        return dict.fromkeys(PSI_COLUMNS)
    out: dict[str, float | None] = {}
    for name, a, b in zip(PSI_COLUMNS, prev, cur, strict=True):
        # A total that went back (a restarted PSI group, never seen) gives no value.
        out[name] = None if b < a else min(100.0, (b - a) / (dt_s * 1e6) * 100.0)
    return out


def iso_utc(ts_us: int) -> str:
    """ISO-8601 UTC text of a microsecond timestamp, as the JSON outputs spell ``ts``."""
    return datetime.fromtimestamp(ts_us / 1_000_000, tz=UTC).isoformat(timespec="microseconds")


@dataclass
class IntervalResult:
    """Derived statistics of one collector sample (one row per reported device).

    Attributes:
        ts_us: wall-clock end of the interval, UTC microseconds since the epoch.
        devices: kernel names, one per row.
        kinds, parents: device kind and parent per row (from sysfs).
        interval_s: float64 per row (per device: a device skipped once covers longer).
        metrics: SampleFrame column -> float64 array (NaN = null).
        reset: bool per row.
        since_boot: True for the since-boot report (counters since boot / uptime).
        cpu: host context over the interval: CPU shares (None where /proc/stat was
            unreadable) and I/O pressure stall shares (None without /proc/pressure/io).
        messages: what went wrong or changed this sample, for the operator.
    """

    ts_us: int
    devices: list[str]
    kinds: list[str]
    parents: list[str | None]
    interval_s: npt.NDArray[np.float64]
    metrics: dict[str, npt.NDArray[np.float64]]
    reset: npt.NDArray[np.bool_]
    since_boot: bool = False
    cpu: dict[str, float | None] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.devices)

    def to_records(self, *, host: str, source: str = SOURCE) -> list[dict[str, object]]:
        """One dict per device with SampleFrame column names (null measures omitted)."""
        out: list[dict[str, object]] = []
        for i, dev in enumerate(self.devices):
            rec: dict[str, object] = {
                "source": source, "host": host, "device": dev, "device_kind": self.kinds[i],
                "parent": self.parents[i], "ts": iso_utc(self.ts_us),
                "interval_s": float(self.interval_s[i]), "since_boot": self.since_boot,
                "reset": bool(self.reset[i]),
            }
            for name, arr in self.metrics.items():
                v = float(arr[i])
                if not np.isnan(v):
                    rec[name] = v
            for name, cv in self.cpu.items():
                if cv is not None:
                    rec[name] = cv
            out.append(rec)
        return out


def frame_from_results(results: Sequence[IntervalResult], *, host: str,
                       source: str = SOURCE, validate: bool = False) -> SampleFrame:
    """Concatenate interval results into one SampleFrame with a single vectorised build."""
    results = [r for r in results if len(r)]
    if not results:
        return SampleFrame.empty()
    cols: dict[str, object] = {
        "source": [source] * sum(len(r) for r in results),
        "host": [host] * sum(len(r) for r in results),
        "device": [d for r in results for d in r.devices],
        "device_kind": [k for r in results for k in r.kinds],
        "parent": [p for r in results for p in r.parents],
        "ts": np.concatenate([np.full(len(r), r.ts_us, dtype=np.int64) for r in results]),
        "interval_s": np.concatenate([r.interval_s for r in results]),
        "since_boot": np.concatenate([np.full(len(r), r.since_boot) for r in results]),
        "reset": np.concatenate([r.reset for r in results]),
    }
    for name in DERIVED_COLUMNS:
        cols[name] = np.concatenate([r.metrics[name] for r in results])
    for name in HOST_COLUMNS:
        cols[name] = np.concatenate([
            np.full(len(r), np.nan if r.cpu.get(name) is None else r.cpu[name],
                    dtype=np.float64) for r in results])
    df = pl.DataFrame(cols, nan_to_null=True, strict=False).with_columns(
        pl.col("ts").cast(pl.Datetime("us")).dt.replace_time_zone("UTC").cast(TS_DTYPE))
    # No re-validation: derive_metrics cannot produce a negative, NaN or infinite value
    # from counter_deltas output and a positive interval (property-tested in
    # tests/unit/test_derive.py), and validating every batch was ~half the recorder's CPU.
    return SampleFrame(df, validate=validate)


@dataclass
class _DevState:
    values: npt.NDArray[np.int64]
    present: npt.NDArray[np.bool_]
    old_layout: bool
    major: int
    minor: int
    mono: float
    info: DeviceInfo


def _parse_cpu(text: str) -> list[int] | None:
    for line in text.splitlines():
        if line.startswith("cpu "):
            try:
                return [int(x) for x in line.split()[1:]]
            except ValueError:
                return None
    return None


def cpu_shares(prev: list[int], cur: list[int]) -> dict[str, float | None]:
    """iostat's avg-cpu shares from two ``/proc/stat`` ``cpu`` lines.

    Fields: user nice system idle iowait irq softirq steal guest guest_nice. The kernel
    counts guest time inside user (and guest_nice inside nice), so the total leaves guest
    out (sysstat ``get_per_cpu_interval``) while %user and %nice keep it, as iostat and
    ``sar -u`` print them; %system includes irq and softirq; %idle is 0 if idle went
    backwards (sysstat's guard for tickless CPUs).
    """
    def get(v: list[int], i: int) -> int:
        return v[i] if i < len(v) else 0

    d = [get(cur, i) - get(prev, i) for i in range(10)]
    if any(x < 0 for x in (d[0], d[1], d[2], d[4], d[5], d[6], d[7])):
        return dict.fromkeys(CPU_COLUMNS)
    user, nice, system, idle, iowait, irq, softirq, steal, _guest, _guest_nice = d
    total = user + nice + system + idle + iowait + irq + softirq + steal
    if total <= 0:
        return dict.fromkeys(CPU_COLUMNS)

    def pct(x: int) -> float:
        return max(x, 0) / total * 100.0

    return {
        "cpu_user_pct": pct(user),
        "cpu_nice_pct": pct(nice),
        "cpu_system_pct": pct(system + irq + softirq),
        "cpu_iowait_pct": pct(iowait),
        "cpu_steal_pct": pct(steal),
        "cpu_idle_pct": pct(idle),
    }


class LinuxCollector:
    """Samples /proc/diskstats and derives iostat -x metrics per device.

    Args:
        procfs_root: where ``diskstats``, ``stat`` and ``uptime`` are read (tests pass a
            fixture tree).
        sysfs_root: where device metadata is read.
        devices: report only these kernel names (partitions included if named); None: all.
        partitions: also report partitions when ``devices`` is None (iostat -p ALL).
        include_idle: also report devices with no I/O since boot (iostat hides them).
        monotonic, wall: clocks, injectable for tests.
    """

    def __init__(self, procfs_root: str | Path = "/proc", sysfs_root: str | Path = "/sys", *,
                 devices: Sequence[str] | None = None, partitions: bool = False,
                 include_idle: bool = False, monotonic: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.procfs_root = Path(procfs_root)
        self.sysfs_root = Path(sysfs_root)
        self.wanted = None if devices is None else [d.removeprefix("/dev/") for d in devices]
        self._wanted_set = None if self.wanted is None else frozenset(self.wanted)
        self.partitions = partitions
        self.include_idle = include_idle
        self._monotonic = monotonic
        self._wall = wall
        self._state: dict[str, _DevState] = {}
        self._vanished: set[str] = set()
        self._cpu_prev: list[int] | None = None
        self._psi_prev: tuple[int, int] | None = None
        self._primed = False
        self._last_mono: float | None = None  # monotonic time of the previous snapshot
        self._reported_missing: set[str] = set()

    # ---- public -------------------------------------------------------------------------
    @property
    def host(self) -> str:
        try:
            name = (self.procfs_root / "sys" / "kernel" / "hostname").read_text().strip()
        except OSError:
            name = ""
        return name or socket.gethostname()

    def device_info(self) -> dict[str, DeviceInfo]:
        """Metadata of every device currently known (with a device filter: of the devices
        it selects)."""
        return {n: s.info for n, s in self._state.items() if self._selected(n, s.info)}

    def prime(self) -> list[str]:
        """Take the baseline snapshot; returns messages (malformed lines, missing devices)."""
        snap, mono, _ts = self._read()
        self._cpu_prev = self._read_cpu()
        self._psi_prev = self._read_psi()
        messages = [*snap.problems, *snap.notes]
        idx = snap.index()
        for name, i in idx.items():
            self._state[name] = self._new_state(snap, i, mono)
        messages.extend(self._check_wanted(idx))
        self._primed = True
        self._last_mono = mono
        return messages

    def since_boot(self) -> IntervalResult:
        """iostat's first report: counters since boot averaged over the uptime."""
        snap, _mono, ts_us = self._read()
        try:
            uptime = float((self.procfs_root / "uptime").read_text().split()[0])
        except (OSError, ValueError, IndexError) as exc:
            raise CollectorError(f"cannot read {self.procfs_root / 'uptime'}: {exc}") from exc
        if not uptime > 0:
            raise CollectorError(f"{self.procfs_root / 'uptime'}: uptime {uptime} s is not "
                                 "positive; no since-boot report")
        n = len(snap)
        zeros = np.zeros_like(snap.values)
        deltas = counter_deltas(zeros, snap.values, snap.present, snap.present, snap.old_layout)
        metrics = derive_metrics(deltas.delta, np.full(n, uptime))
        infos = [self._state[nm].info if nm in self._state else self._device_info(snap, i)
                 for i, nm in enumerate(snap.names)]
        keep = [i for i, nm in enumerate(snap.names)
                if self._reportable(nm, infos[i], snap.values[i])]
        return self._result(ts_us, snap.names, infos, keep, np.full(n, uptime), metrics,
                            deltas.reset, [*snap.problems, *snap.notes], since_boot=True, cpu={})

    def sample(self) -> IntervalResult:
        """Read a snapshot and derive every device's interval since its previous one."""
        if not self._primed:
            self.prime()
        snap, mono, ts_us = self._read()
        cpu = self._host_shares(mono)
        messages = [*snap.problems, *snap.notes]
        bad_names = snap.bad_names

        names = snap.names
        n = len(names)
        prev_vals = np.zeros((n, N_FIELDS), dtype=np.int64)
        prev_pres = np.zeros((n, N_FIELDS), dtype=np.bool_)
        dt = np.full(n, np.nan)
        paired = np.zeros(n, dtype=np.bool_)
        forced_reset = np.zeros(n, dtype=np.bool_)
        infos: list[DeviceInfo] = []
        emit = np.zeros(n, dtype=np.bool_)
        for i, name in enumerate(names):
            st = self._state.get(name)
            major, minor = int(snap.major[i]), int(snap.minor[i])
            if st is None:
                new = self._new_state(snap, i, mono)
                infos.append(new.info)
                self._state[name] = new
                if name in self._vanished:
                    self._vanished.discard(name)
                    messages.append(f"device {name} re-appeared; its counters restart "
                                    "(reset row)")
                    forced_reset[i] = emit[i] = True
                    # A reset row carries no measure; it covers the time since the
                    # previous snapshot, when the device was last seen absent.
                    last = mono - 1.0 if self._last_mono is None else self._last_mono
                    dt[i] = max(mono - last, 1e-9)
                else:
                    messages.append(f"device {name} appeared; baselined, reported from the "
                                    "next sample")
                continue
            if (st.major, st.minor) != (major, minor):
                messages.append(f"device {name} changed from {st.major}:{st.minor} to "
                                f"{major}:{minor}; counters restart (reset row)")
                new = self._new_state(snap, i, mono)
                self._state[name] = new
                infos.append(new.info)
                forced_reset[i] = emit[i] = True
                dt[i] = max(mono - st.mono, 1e-9)
                continue
            infos.append(st.info)
            prev_vals[i] = st.values
            prev_pres[i] = st.present
            dt[i] = mono - st.mono
            paired[i] = emit[i] = dt[i] > 0
            st.values = snap.values[i].copy()
            st.present = snap.present[i].copy()
            st.old_layout = bool(snap.old_layout[i])
            st.mono = mono

        self._last_mono = mono
        self._forget_vanished(set(names), bad_names, messages)

        safe_dt = np.where(np.isnan(dt) | (dt <= 0), 1.0, dt)
        deltas = counter_deltas(prev_vals, snap.values, prev_pres & paired[:, None],
                                snap.present, snap.old_layout)
        reset = (deltas.reset & paired) | forced_reset
        delta = deltas.delta
        delta[reset] = np.nan
        metrics = derive_metrics(delta, safe_dt)
        for j in np.flatnonzero(deltas.reset & paired):
            messages.append(f"device {names[int(j)]}: counters went backwards (statistics reset); "
                            "interval reported as reset with no values")
        keep = [i for i in range(n) if emit[i]
                and self._reportable(names[i], infos[i], snap.values[i],
                                     is_reset=bool(reset[i]))]
        return self._result(ts_us, names, infos, keep, safe_dt, metrics, reset, messages,
                            since_boot=False, cpu=cpu)

    # ---- internals ----------------------------------------------------------------------
    def _host_shares(self, mono: float) -> dict[str, float | None]:
        """The host's CPU and pressure (PSI) shares since the previous sample (None on the
        first sample, or where the kernel does not provide them)."""
        cpu_now = self._read_cpu()
        cpu: dict[str, float | None] = dict.fromkeys(CPU_COLUMNS)
        if cpu_now is not None and self._cpu_prev is not None:
            cpu = cpu_shares(self._cpu_prev, cpu_now)
        self._cpu_prev = cpu_now
        psi_now = self._read_psi()
        cpu.update(dict.fromkeys(PSI_COLUMNS))
        if psi_now is not None and self._psi_prev is not None and self._last_mono is not None:
            cpu.update(pressure_shares(self._psi_prev, psi_now, mono - self._last_mono))
        self._psi_prev = psi_now
        return cpu

    def _forget_vanished(self, current: set[str], bad_names: set[str] | frozenset[str],
                         messages: list[str]) -> None:
        """Devices no longer listed: forgotten, and reset when they come back."""
        for name in list(self._state):
            if name not in current and name not in bad_names:
                del self._state[name]
                self._vanished.add(name)
                messages.append(f"device {name} disappeared; the other devices are still "
                                "collected")

    def _read(self) -> tuple[DiskstatsSnapshot, float, int]:
        path = self.procfs_root / "diskstats"
        try:
            text = path.read_text(encoding="ascii", errors="replace")
        except OSError as exc:
            raise CollectorError(f"cannot read {path}: {exc.strerror or exc}; is /proc "
                                 "mounted and readable?") from exc
        mono = self._monotonic()
        ts_us = round(self._wall() * 1_000_000)
        return parse_text(text.splitlines(), path=str(path)), mono, ts_us

    def _read_psi(self) -> tuple[int, int] | None:
        try:
            return parse_pressure((self.procfs_root / "pressure" / "io").read_text())
        except OSError:  # no PSI (kernel < 4.20, or psi=0 on the command line)
            return None

    def _read_cpu(self) -> list[int] | None:
        try:
            return _parse_cpu((self.procfs_root / "stat").read_text())
        except OSError:
            return None

    def _device_info(self, snap: DiskstatsSnapshot, i: int) -> DeviceInfo:
        """sysfs metadata of the snapshot's row ``i``.

        With a device filter only the devices it can select are read in full: a dozen sysfs
        files a device took 0.3-0.5 s at start-up with a thousand devices in /proc/diskstats
        (multipath and loop-heavy hosts) when one was asked for. A dm device may be named by
        its dm name, so a dm device's name file is read first. The others get a name-only
        record (kind from the name), never reported and left out of :meth:`device_info`.
        """
        name = snap.names[i]
        major, minor = int(snap.major[i]), int(snap.minor[i])
        wanted = self._wanted_set
        dm_name = None
        if wanted is not None and name not in wanted:
            dm_name = read_dm_name(name, self.sysfs_root) if name.startswith("dm-") else None
            if dm_name is None or dm_name not in wanted:
                return DeviceInfo(name=name, kind=kind_from_name(name), major=major,
                                  minor=minor, dm_name=dm_name)
        return read_device_info(name, self.sysfs_root, major=major, minor=minor,
                                old_layout=bool(snap.old_layout[i]))

    def _new_state(self, snap: DiskstatsSnapshot, i: int, mono: float) -> _DevState:
        info = self._device_info(snap, i)
        return _DevState(snap.values[i].copy(), snap.present[i].copy(),
                         bool(snap.old_layout[i]), int(snap.major[i]), int(snap.minor[i]),
                         mono, info)

    def _check_wanted(self, idx: dict[str, int]) -> list[str]:
        if self.wanted is None:
            return []
        dm_names = {s.info.dm_name for s in self._state.values() if s.info.dm_name}
        out = []
        for d in self.wanted:
            if d not in idx and d not in dm_names and d not in self._reported_missing:
                self._reported_missing.add(d)
                out.append(f"device {d} is not in {self.procfs_root / 'diskstats'}; it will "
                           "be reported if it appears")
        return out

    def _reportable(self, name: str, info: DeviceInfo, values: npt.NDArray[np.int64], *,
                    is_reset: bool = False) -> bool:
        if self._wanted_set is not None:
            return self._selected(name, info)
        if info.kind == "partition" and not self.partitions:
            return False
        if self.include_idle or is_reset:
            # A reset row must never be hidden, even when the new counters are still zero.
            return True
        # iostat hides devices that never did any I/O since boot.
        used = (values[IDX["rd_ios"]] + values[IDX["wr_ios"]] + values[IDX["dc_ios"]]
                + values[IDX["fl_ios"]])
        return bool(used > 0)

    def _selected(self, name: str, info: DeviceInfo) -> bool:
        """Whether the device filter (if any) selects this device."""
        wanted = self._wanted_set
        # A dm device may be asked for by its dm name (vg0-root) as iostat -N shows it.
        return wanted is None or name in wanted or (info.dm_name is not None
                                                    and info.dm_name in wanted)

    def _result(self, ts_us: int, names: list[str], infos: list[DeviceInfo], keep: list[int],
                dt: npt.NDArray[np.float64], metrics: dict[str, npt.NDArray[np.float64]],
                reset: npt.NDArray[np.bool_], messages: list[str], *, since_boot: bool,
                cpu: dict[str, float | None]) -> IntervalResult:
        k = np.array(keep, dtype=np.int64)
        return IntervalResult(
            ts_us=ts_us,
            devices=[names[i] for i in keep],
            kinds=[infos[i].kind for i in keep],
            parents=[infos[i].parent for i in keep],
            interval_s=dt[k].astype(np.float64),
            metrics={m: v[k] for m, v in metrics.items()},
            reset=reset[k].astype(np.bool_),
            since_boot=since_boot,
            cpu=cpu,
            messages=messages,
        )
