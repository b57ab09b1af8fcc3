"""The guarantee controller: monitor -> policy -> actuator, every interval, safely.

Order of a run (each step's failure restores what was written and exits non-zero):

1. Not root and not a dry run: refuse (writing cgroup limits needs root).
2. Lock the state file, then restore whatever a crashed previous run left (its limits are
   put back before anything else happens on this machine).
3. Resolve the device (a partition -> its disk), find the cgroup hierarchy of every group
   (all in one: v1 blkio or v2 io), check each directory, refuse layouts that would
   throttle A or mix A's counters with B's.
4. Build the policy; with a known capacity, check the floors up front.
5. Loop on the monotonic clock (no drift; a late interval does not push the next): sample,
   ``policy.step``, write only the limits that changed (through the
   :class:`~iogauge.guarantee.safety.LimitGuard`: recorded, then written), record a
   :class:`~iogauge.model.guaranteeframe.GuaranteeFrame` row, report one line.
6. On stop (the ``stop`` event: SIGTERM/SIGINT in the CLI; ``duration_s``; an error):
   restore every limit, commit the remaining decisions, unlock.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from iogauge.guarantee import GuaranteeError, InfeasibleFloorError, ProtectedWriteError
from iogauge.guarantee.actuators import (
    IO_KEYS,
    BlockDevice,
    Hierarchy,
    check_layout,
    detect,
    read_mounts,
    resolve_device,
)
from iogauge.guarantee.actuators.dry_run import DryRun
from iogauge.guarantee.config import GuaranteeConfig
from iogauge.guarantee.monitor import GroupHandle, Monitor, MonitorSample
from iogauge.guarantee.policy import (
    Decision,
    GroupLimit,
    Policy,
    State,
    Targets,
    make_policy,
)
from iogauge.guarantee.safety import LimitGuard, RestoreReport, StateFile, restore_state
from iogauge.model.guaranteeframe import GuaranteeFrame

if TYPE_CHECKING:
    from iogauge.store.live import LiveStore

#: Most decisions kept in memory while the store cannot be written (about a day at 1 s).
MAX_BUFFERED = 100_000
#: cgroup v1 ``blkio.throttle.*_iops_device`` and v2 ``io.max`` are both enforced by
#: blk-throttle, which gives a backlogged group ``10·floor(L/10)`` IOPS for a limit L >= 10
#: (whole I/Os per 100 ms slice; :attr:`iogauge.guarantee.policy.Targets.limit_grid_iops`
#: has the kernel source and the measurements): limits are written on that grid.
KERNEL_LIMIT_GRID_IOPS = 10


@dataclass
class RunSummary:
    """How a run went.

    Attributes:
        run_id: the ``run_id`` of its GuaranteeFrame rows.
        decisions: intervals decided.
        writes: limit writes (or would-be writes in a dry run).
        misses: intervals in which A missed its floor with demand.
        recorded: rows committed to the store.
        stopped_by: ``signal``, ``duration`` or ``error``.
        recovered: what was restored from a crashed earlier run at start.
        restored: what was restored at the end.
    """

    run_id: str
    decisions: int = 0
    writes: int = 0
    misses: int = 0
    recorded: int = 0
    stopped_by: str = "signal"
    recovered: RestoreReport | None = None
    restored: RestoreReport | None = None
    states: dict[State, int] = field(default_factory=dict)

    def line(self) -> str:
        states = ", ".join(f"{k.value} {v}" for k, v in sorted(self.states.items()))
        return (f"guarantee stopped ({self.stopped_by}): {self.decisions} decisions "
                f"[{states or 'none'}], {self.writes} limit writes, A missed its floor in "
                f"{self.misses}, {self.recorded} rows recorded; every limit restored"
                if self.restored is None or self.restored.ok else
                f"guarantee stopped ({self.stopped_by}) but {len(self.restored.failed)} "
                "limit(s) could not be restored: run `iogauge guarantee release`")


@dataclass
class _Setup:
    device: BlockDevice
    hierarchy: Hierarchy
    groups: list[GroupHandle]
    policy: Policy


class Controller:
    """One controller run for ``cfg``.

    Args:
        cfg: the configuration.
        say: receives every line for the operator (decisions, warnings, restores).
        procfs_root, sysfs_root, mounts_file: where the kernel is read (tests: fixtures).
        monotonic, wall: clocks.
        geteuid: the effective uid (injectable for tests).
        reload_floors: called after :meth:`request_reload` (SIGHUP in the CLI) to get new
            floors (cgroup directory -> IOPS), e.g. re-read from the TOML file.
    """

    def __init__(self, cfg: GuaranteeConfig, *, say: Callable[[str], None] = print,
                 procfs_root: str | Path = "/proc", sysfs_root: str | Path = "/sys",
                 mounts_file: str | Path = "/proc/self/mounts",
                 monotonic: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 geteuid: Callable[[], int] = os.geteuid,
                 reload_floors: Callable[[], Mapping[str, float]] | None = None) -> None:
        self.cfg = cfg
        self.say = say
        self.procfs_root = Path(procfs_root)
        self.sysfs_root = Path(sysfs_root)
        self.mounts_file = Path(mounts_file)
        self._monotonic = monotonic
        self._wall = wall
        self._geteuid = geteuid
        started = datetime.fromtimestamp(wall(), UTC).strftime("%Y%m%dT%H%M%SZ")
        self.host = socket.gethostname()
        self.run_id = f"{self.host}-{os.getpid()}-{started}"
        self.state = StateFile(cfg.state)
        self.guard: LimitGuard | None = None
        self._applied: dict[tuple[str, str], int | None] = {}
        self._buffer: list[dict[str, object]] = []
        self._last_flush = monotonic()
        self._warned_store = False
        self._live: LiveStore | None = None
        self._reload_floors = reload_floors
        self._reload = threading.Event()
        self._floors_lock = threading.Lock()
        self._pending_floors: dict[str, float] | None = None

    # -- changing floors while running -------------------------------------------------
    def set_floors(self, floors: Mapping[str, float] | Mapping[Path, float]) -> None:
        """New floors for the protected groups, applied before the next decision.

        [Oe]'s evaluations change A's target mid-run (Tables 4-6); a benchmark running
        the controller in-process calls this, the CLI calls it on SIGHUP. The groups must be
        exactly the protected ones.
        """
        new = {str(k): float(v) for k, v in floors.items()}
        known = {str(s.cgroup) for s in self.cfg.protect}
        if set(new) != known:
            raise GuaranteeError(f"new floors must name exactly the protected cgroups "
                                 f"{sorted(known)}, got {sorted(new)}")
        if any(not (v > 0) for v in new.values()):
            raise GuaranteeError(f"floors must be positive IOPS, got {new}")
        with self._floors_lock:
            self._pending_floors = new

    def request_reload(self) -> None:
        """Ask for :attr:`reload_floors` to be called before the next decision (signal-safe:
        only sets an event)."""
        self._reload.set()

    def _take_floors(self, policy: Policy) -> None:
        if self._reload.is_set():
            self._reload.clear()
            if self._reload_floors is not None:
                try:
                    self.set_floors(self._reload_floors())
                except GuaranteeError as exc:
                    self.say(f"warning: floors not reloaded, the old ones stay: {exc}")
        with self._floors_lock:
            floors, self._pending_floors = self._pending_floors, None
        if floors is not None and floors != dict(policy.targets.protected):
            policy.set_floors(floors)
            self.say("floors changed: " + ", ".join(f"{g} >= {v:g} IOPS"
                                                    for g, v in floors.items()))

    # -- setup -------------------------------------------------------------------------
    def setup(self) -> _Setup:
        """Steps 3-4: resolve, detect, check, build the policy (no writes)."""
        cfg = self.cfg
        device = resolve_device(cfg.device, self.sysfs_root)
        if device.partition:
            self.say(f"{device.partition} is a partition: limits and statistics apply to its "
                     f"disk {device.disk} ({device.devnum})")
        mounts = read_mounts(self.mounts_file)
        protected = [s.cgroup for s in cfg.protect]
        throttled = list(cfg.throttle)
        check_layout(protected, throttled)
        hier: Hierarchy | None = None
        for path in (*protected, *throttled):
            h = detect(path, mounts)
            if hier is None:
                hier = h
            elif (h.kind, h.root) != (hier.kind, hier.root):
                raise GuaranteeError(f"{path} is in {h.kind} at {h.root} but the other groups "
                                     f"are in {hier.kind} at {hier.root}: all groups must be "
                                     "in the hierarchy that has the I/O controller")
            h.check_group(path)
        if hier is None:  # pragma: no cover - GuaranteeConfig requires groups
            raise GuaranteeError("no cgroups configured")
        parallel = (cfg.capacity_model == "latency"
                    or (cfg.capacity_model == "auto" and device.parallel))
        targets = Targets(protected={str(s.cgroup): s.iops for s in cfg.protect},
                          throttled=tuple(str(p) for p in throttled),
                          b_min_iops=cfg.b_min_iops, device_parallel=parallel,
                          capacity_hint_iops=cfg.capacity_iops,
                          limit_grid_iops=KERNEL_LIMIT_GRID_IOPS)
        adaptive = (dataclasses.replace(cfg.adaptive, reserve_idle=True) if cfg.reserve_idle
                    else cfg.adaptive)
        policy = make_policy(cfg.policy, targets, paper=cfg.paper, adaptive=adaptive)
        groups = ([GroupHandle(str(p), p, "protected") for p in protected]
                  + [GroupHandle(str(p), p, "throttled") for p in throttled])
        self._check_capacity(targets)
        return _Setup(device, hier, groups, policy)

    def _check_capacity(self, t: Targets) -> None:
        cap = self.cfg.capacity_iops
        if cap is None:
            return
        x = (self.cfg.paper.x_initial_pct if self.cfg.policy == "paper"
             else self.cfg.adaptive.x_top_pct(t.device_parallel)) / 100
        need = t.floor_iops + 2 * t.b_min_iops * len(t.throttled)
        if need > cap * x:
            msg = (f"infeasible floor: A's floors total {t.floor_iops:g} IOPS (+ B's minimum "
                   f"{2 * t.b_min_iops * len(t.throttled)}) but the device gives about "
                   f"{cap:g} IOPS at 100 % busy, {cap * x:.0f} at the target {x:.0%}")
            if self.cfg.on_infeasible == "refuse":
                raise InfeasibleFloorError(msg)
            self.say(f"warning: {msg}")

    # -- the run -----------------------------------------------------------------------
    def run(self, stop: threading.Event | None = None) -> RunSummary:
        """Run until ``stop`` is set or ``duration_s`` passes; always restores."""
        cfg = self.cfg
        stop = stop or threading.Event()
        summary = RunSummary(self.run_id)
        if not cfg.dry_run and self._geteuid() != 0:
            raise GuaranteeError(f"iogauge guarantee writes cgroup limits and needs root "
                                 f"(running as uid {self._geteuid()}); --dry-run shows what it "
                                 "would do without writing")
        if cfg.dry_run:
            doc = self.state.load() if self.state.path.exists() else None
            if doc is not None and doc.entries:
                self.say(f"warning: {self.state.path} names {len(doc.entries)} limit(s) of an "
                         f"earlier run (pid {doc.pid}); a real run or `iogauge guarantee "
                         "release` would restore them")
        else:
            self.state.lock()
        try:
            if not cfg.dry_run:
                summary.recovered = self._recover()
            s = self.setup()
            writer: Hierarchy = (DryRun(s.hierarchy, self.say) if cfg.dry_run
                                 else s.hierarchy)
            self.guard = LimitGuard(None if cfg.dry_run else self.state, writer,
                                    [g.path for g in s.groups if g.role == "protected"],
                                    procfs_root=self.procfs_root)
            monitor = Monitor(s.device, s.groups, s.hierarchy, procfs_root=self.procfs_root,
                              sysfs_root=self.sysfs_root, monotonic=self._monotonic,
                              wall=self._wall)
            for m in monitor.prime():
                self.say(f"warning: {m}")
            self.say(self._banner(s, writer))
            summary.stopped_by = self._loop(s, writer, monitor, stop, summary)
        except BaseException:
            summary.stopped_by = "error"
            raise
        finally:
            try:
                if self.guard is not None:
                    summary.writes = self.guard.writes
                    summary.restored = self.guard.restore()
                    for line in summary.restored.lines():
                        self.say(line)
                summary.recorded += self._flush(force=True)
            finally:
                if self._live is not None:
                    self._live.close()
                self.state.unlock()
        return summary

    def _recover(self) -> RestoreReport:
        """Step 2: restore a crashed run's limits before anything else."""
        rep = restore_state(self.state, procfs_root=self.procfs_root)
        if rep.restored or rep.left or rep.failed or rep.gone or rep.unchanged \
                or "earlier boot" in " ".join(rep.notes):
            for line in rep.lines():
                self.say(f"stale state: {line}")
        if not rep.ok:
            raise GuaranteeError(f"could not restore the stale limits in {self.state.path}; "
                                 "fix the cause and run `iogauge guarantee release`")
        return rep

    def _banner(self, s: _Setup, writer: Hierarchy) -> str:
        t = s.policy.targets
        prot = ", ".join(f"{g} >= {f:g} IOPS" for g, f in t.protected.items())
        mode = ("latency knee (parallel device)" if t.device_parallel
                else "%util (one request at a time)")
        return (f"guaranteeing {prot} on {s.device.disk} ({s.device.devnum}) by throttling "
                f"{', '.join(t.throttled)}; policy {s.policy.name}, capacity from {mode}, "
                f"every {self.cfg.interval_s:g} s via {writer.kind}"
                + ("" if self.cfg.dry_run else f"; state {self.state.path}")
                + "; SIGTERM/Ctrl-C restores every limit")

    def _loop(self, s: _Setup, writer: Hierarchy, monitor: Monitor, stop: threading.Event,
              summary: RunSummary) -> str:
        cfg = self.cfg
        start = self._monotonic()
        end = None if cfg.duration_s is None else start + cfg.duration_s + 1e-9
        k = 0
        watch = False
        while True:
            k += 1
            deadline = start + k * cfg.interval_s
            if end is not None and deadline > end:
                return "duration"
            woke = self._wait(deadline, stop, monitor if watch else None)
            if stop.is_set():
                return "signal"
            if woke:
                # A's I/O is back while B was open: decide now, and count the next
                # interval from here.
                start, k = self._monotonic(), 0
            self._take_floors(s.policy)
            sample = monitor.sample()
            for m in sample.messages:
                self.say(f"warning: {m}")
            if sample.interval_s <= 0:
                continue
            decision = s.policy.step(sample.obs)
            watch = decision.state is State.OPEN
            summary.decisions += 1
            summary.states[decision.state] = summary.states.get(decision.state, 0) + 1
            summary.misses += decision.a_miss
            for w in decision.warnings:
                self.say(f"warning: {w}")
                if cfg.on_infeasible == "refuse" and decision.infeasible:
                    raise InfeasibleFloorError(f"{w} (--on-infeasible refuse)")
            self._apply(s, decision)
            self._record(s, writer, sample, decision)
            summary.recorded += self._flush()

    def _wait(self, deadline: float, stop: threading.Event, watch: Monitor | None) -> bool:
        """Wait for ``deadline`` (or ``stop``); with ``watch``, look at A's counters every
        ``sample_s`` meanwhile: True if A's I/O came back before the deadline."""
        step = min(self.cfg.sample_s, self.cfg.interval_s)
        while True:
            now = self._monotonic()
            left = deadline - now
            if watch is None or left <= step:
                stop.wait(max(left, 0.0))
                return False
            if stop.wait(step):
                return False
            if watch.protected_active():
                return True

    # -- applying and recording ---------------------------------------------------------
    def _apply(self, s: _Setup, d: Decision) -> None:
        if self.guard is None:  # pragma: no cover - run() creates it before the loop
            raise RuntimeError("no limit guard")
        for g in s.groups:
            if g.role != "throttled":
                continue
            lim = d.limits.get(g.name)
            if lim is None:
                continue
            for key in IO_KEYS:
                value = getattr(lim, key)
                ident = (g.name, key)
                if ident not in self._applied and value is None:
                    continue  # never touched and still unlimited: nothing to write
                if self._applied.get(ident, -1) == value:
                    continue
                try:
                    self.guard.set(g.path, s.device.devnum, key, value)
                    self._applied[ident] = value
                except ProtectedWriteError:
                    raise
                except GuaranteeError as exc:
                    self.say(f"warning: {exc}")

    def _record(self, s: _Setup, writer: Hierarchy, sample: MonitorSample,
                d: Decision) -> None:
        obs = sample.obs
        t = s.policy.targets
        a_iops = sum(obs.group(g).iops for g in t.protected)
        b_iops = sum(obs.group(g).iops for g in t.throttled)
        lims = [d.limits.get(g) or GroupLimit(None, None) for g in t.throttled]
        r_lims = [x.riops for x in lims]
        w_lims = [x.wiops for x in lims]
        groups: dict[str, dict[str, object]] = {}
        for g in s.groups:
            go = obs.group(g.name)
            entry: dict[str, object] = {"role": g.role, "r_iops": round(go.r_iops, 3),
                                        "w_iops": round(go.w_iops, 3)}
            if go.stall_pct is not None:
                entry["stall_pct"] = round(go.stall_pct, 2)
            if g.role == "protected":
                entry["floor_iops"] = t.protected[g.name]
            else:
                lim = d.limits.get(g.name) or GroupLimit(None, None)
                entry["riops"], entry["wiops"] = lim.riops, lim.wiops
            groups[g.name] = entry
        row: dict[str, object] = {
            "run_id": self.run_id, "host": self.host, "device": s.device.disk,
            "ts": datetime.fromtimestamp(sample.ts_us / 1e6, UTC),
            "interval_s": sample.interval_s, "policy": s.policy.name,
            "actuator": writer.kind, "util_pct": obs.util_pct, "r_iops": obs.r_iops,
            "w_iops": obs.w_iops, "iops": obs.iops, "await_ms": obs.await_ms,
            "aqu_sz": obs.aqu_sz, "a_iops": a_iops, "a_floor_iops": t.floor_iops,
            "b_iops": b_iops, "busy_per_iops": d.busy_per_iops, "x_pct": d.x_pct,
            "capacity_iops": d.capacity_iops,
            "b_riops_limit": None if None in r_lims else sum(x or 0 for x in r_lims),
            "b_wiops_limit": None if None in w_lims else sum(x or 0 for x in w_lims),
            "a_miss": d.a_miss, "state": d.state.value, "reason": d.reason,
            "warnings": "; ".join(d.warnings) or None,
            "groups_json": json.dumps(groups, sort_keys=True),
        }
        if len(self._buffer) < MAX_BUFFERED:
            self._buffer.append(row)
        self.say(_line(row, d))

    def _flush(self, *, force: bool = False) -> int:
        if not self.cfg.record or not self._buffer:
            return 0
        now = self._monotonic()
        if not force and now - self._last_flush < self.cfg.flush_s:
            return 0
        self._last_flush = now
        from iogauge.store import live  # noqa: PLC0415 - duckdb only when recording

        try:
            frame = GuaranteeFrame.from_records(self._buffer)
            # Opened once and kept: the writer lock of the decisions, and no DuckDB file
            # held, so `guarantee show` reads while the run goes on.
            if self._live is None:
                self._live = live.LiveStore.open(self.cfg.db, family=live.Family.GUARANTEE)
                if self._live.note:
                    self.say(f"note: {self._live.note}")
            n = self._live.append_guarantee(frame)
        except Exception as exc:  # noqa: BLE001 - the guarantee must go on without its log
            if not self._warned_store or force:
                self.say(f"warning: decisions not recorded yet ({len(self._buffer)} kept in "
                         f"memory): {exc}")
                self._warned_store = True
            return 0
        self._buffer.clear()
        self._warned_store = False
        return n


def _fmt_limit(v: object) -> str:
    return "-" if v is None else f"{v}"


def _line(row: dict[str, object], d: Decision) -> str:
    ts = row["ts"]
    clock = ts.strftime("%H:%M:%S") if isinstance(ts, datetime) else str(ts)
    util = row["util_pct"]
    bpi = row["busy_per_iops"]
    x = row["x_pct"]
    return (f"{clock} util {'-' if util is None else f'{util:5.1f}'}% "
            f"iops {row['iops']:7.1f} A {row['a_iops']:7.1f}/{row['a_floor_iops']:g} "
            f"B {row['b_iops']:7.1f} bpi {'-' if bpi is None else f'{bpi:.4f}'} "
            f"X {'-' if x is None else f'{x:.1f}'}% "
            f"B<= r {_fmt_limit(row['b_riops_limit'])} w {_fmt_limit(row['b_wiops_limit'])} "
            f"[{d.state.value}]" + ("" if d.state in (State.HOLD, State.COMPUTE)
                                    else f" {d.reason}"))


__all__ = ["KERNEL_LIMIT_GRID_IOPS", "MAX_BUFFERED", "Controller", "RunSummary"]
