"""Work conservation on the lab's emulated devices: what A's floor costs B while A is idle,
and how fast A gets its floor back when it wakes.

One run, on an emulated device (:func:`iogauge.lab.device.create_device`) with fio in two
cgroup v1 blkio groups (:mod:`iogauge.lab.cgroup_rig`):

1. **B alone**: B (4 KiB random reads, ``depth`` in flight, on the device's second half)
   runs with nothing else and no controller for ``alone_s``; its IOPS after a warm-up are
   *B alone* (measured again at the end, the controller stopped; the figure is the mean of
   the two, since the emulated device's speed follows the machine's load). A's floor is
   ``floor_share`` of the first (whole IOPS).
2. **A idle**: the guarantee controller starts (in-process, 1 s decisions) with A's floor;
   A does no I/O for ``idle_s``. B's IOPS over that whole time (controller warm-up and
   opening included) against B alone is **B's share while A is idle** (goal >= 90 %).
3. **Wake-ups**: A wakes ``wakeups`` times, each a burst of ``burst_s`` at its floor
   (4 KiB random reads on the first half, fio ``rate_iops`` = floor with ``a_depth`` in
   flight) after ``rest_s`` idle.
   A's **time to floor** for a burst is the first offset tau (at ``watch_s`` steps) from
   the burst's start such that in ``[start + tau, start + tau + window_s]`` A completed at
   least ``ceil(0.95 x floor x window_s) - 1`` I/Os (one I/O may land either side of the
   window's edges, as in :func:`iogauge.lab.guarantee_eval.floor_met`). A burst measures
   tau up to ``burst_s - window_s``; a burst whose A never reached its floor within that
   counts as not reached (None). Goals: median <= 2 s, worst <= 4 s.

Controllers: ``adaptive`` (the default policy: work conserving), ``reserve-idle`` (the
adaptive policy keeping A's floor reserved) and ``paper`` ([Oe] §4).
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from iogauge.guarantee.actuators import resolve_device
from iogauge.guarantee.actuators.cgroup_v1 import CgroupV1
from iogauge.lab.cgroup_rig import (
    BLKIO_ROOT,
    ControllerThread,
    cgroup_pair,
    first_io,
    preflight,
    start_fio,
)

IdleController = Literal["adaptive", "reserve-idle", "paper"]
IDLE_CONTROLLERS: tuple[IdleController, ...] = ("adaptive", "reserve-idle", "paper")
#: The issue's goals.
B_IDLE_GOAL = 0.90
WAKE_MEDIAN_GOAL_S = 2.0
WAKE_WORST_GOAL_S = 4.0


@dataclass(frozen=True)
class IdleConfig:
    """How one work-conservation run goes (see the module docstring).

    Attributes:
        model: emulated device model (``hdd``, ``ssd``, ...); size: its size (None: the
            model's).
        controller: which controller.
        capacity_model: the controller's ``capacity_model`` (``latency`` for the ssd).
        floor_share: A's floor as a share of B alone.
        alone_s, alone_warmup_s: B-alone run and the part of it left out.
        idle_s: A idle under the controller.
        wakeups, burst_s, rest_s: A's bursts at its floor and the idle time before each.
        window_s: the window A's floor is judged over; watch_s: sampling of the counters.
        interval_s, sample_s: the controller's decision interval and its look at A's
            counters while B is open.
        depth: B's I/Os in flight.
        a_depth: A's I/Os in flight, enough for its rate to be its floor whatever the
            latency (its offered load, not its queue, is what is asked for): cgroup v1 has
            no PSI, so a shallow A that its own latency holds below its floor shows the
            controller no demand (on the lab ssd, 4 in flight at ~1 ms gave ~2,700 of a
            3,935 floor with the device "healthy").
    """

    model: str = "hdd"
    size: str | None = None
    controller: IdleController = "adaptive"
    capacity_model: str = "auto"
    floor_share: float = 0.5
    alone_s: float = 8.0
    alone_warmup_s: float = 2.0
    idle_s: float = 60.0
    wakeups: int = 10
    burst_s: float = 6.0
    rest_s: float = 4.0
    window_s: float = 1.0
    watch_s: float = 0.1
    interval_s: float = 1.0
    sample_s: float = 0.2
    depth: int = 8
    a_depth: int = 32
    backing_dir: str = "/var/tmp"  # noqa: S108 (the lab makes a fresh mkdtemp dir in it)

    def __post_init__(self) -> None:
        if self.controller not in IDLE_CONTROLLERS:
            raise ValueError(f"controller must be one of {', '.join(IDLE_CONTROLLERS)}")
        if not 0 < self.floor_share < 1 or self.burst_s <= self.window_s:
            raise ValueError("need 0 < floor_share < 1 and burst_s > window_s")
        if self.alone_warmup_s >= self.alone_s or self.wakeups < 0:
            raise ValueError("need alone_warmup_s < alone_s and wakeups >= 0")


@dataclass
class IdleResult:
    """What one run measured.

    Attributes:
        config: the run's configuration; device: its path.
        b_alone_iops: B alone: the mean of the runs before and after the controller
            (``b_alone_before_iops``, ``b_alone_after_iops``); floor_iops: A's floor (from
            the run before).
        b_idle_iops: B's IOPS while A was idle (the whole ``idle_s``).
        wake_s: time to floor per burst (None: not reached within the burst).
        a_burst_iops: A's mean IOPS over each burst.
        b_during_bursts_iops: B's mean IOPS while A's bursts ran.
        controller_lines: what the controller printed.
    """

    config: IdleConfig
    device: str
    b_alone_iops: float = math.nan
    b_alone_before_iops: float = math.nan
    b_alone_after_iops: float = math.nan
    floor_iops: int = 0
    b_idle_iops: float = math.nan
    wake_s: list[float | None] = field(default_factory=list)
    a_burst_iops: list[float] = field(default_factory=list)
    b_during_bursts_iops: float = math.nan
    controller_lines: list[str] = field(default_factory=list)

    @property
    def b_idle_share(self) -> float:
        return self.b_idle_iops / self.b_alone_iops if self.b_alone_iops > 0 else math.nan

    @property
    def wake_median_s(self) -> float:
        """Median time to floor; a burst that never reached it counts as infinitely late."""
        xs = sorted(math.inf if w is None else w for w in self.wake_s)
        if not xs:
            return math.nan
        n = len(xs)
        return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2

    @property
    def wake_worst_s(self) -> float:
        return max((math.inf if w is None else w for w in self.wake_s), default=math.nan)

    def verdicts(self) -> list[str]:
        """The issue's goals, one line each ("meets" / "MISSES")."""
        def ok(good: bool) -> str:
            return "meets" if good else "MISSES"
        out = [(f"B while A idle {self.b_idle_share:.0%} of B alone "
               f"({ok(self.b_idle_share >= B_IDLE_GOAL)} >= {B_IDLE_GOAL:.0%})")]
        if self.wake_s:
            out.append(f"A's time to floor: median {_secs(self.wake_median_s)} "
                       f"({ok(self.wake_median_s <= WAKE_MEDIAN_GOAL_S)} <= "
                       f"{WAKE_MEDIAN_GOAL_S:g} s), worst {_secs(self.wake_worst_s)} "
                       f"({ok(self.wake_worst_s <= WAKE_WORST_GOAL_S)} <= "
                       f"{WAKE_WORST_GOAL_S:g} s)")
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(b_idle_share=self.b_idle_share, wake_median_s=self.wake_median_s,
                 wake_worst_s=self.wake_worst_s)
        return d


def _secs(x: float) -> str:
    return "never" if math.isinf(x) else f"{x:.1f} s"


def time_to_floor(t_s: list[float], a_ios: list[int], start_s: float, floor_iops: float,
                  burst_s: float, window_s: float, step_s: float) -> float | None:
    """First offset from ``start_s`` at which A's next ``window_s`` held its floor (the
    module docstring's rule), from cumulative counts ``a_ios`` sampled at times ``t_s``;
    None if no offset up to ``burst_s - window_s`` did."""
    need = math.ceil(0.95 * floor_iops * window_s - 1e-9) - 1

    def count_at(t: float) -> float:
        # Linear between samples (they are ``watch_s`` apart).
        for i in range(1, len(t_s)):
            if t_s[i] >= t:
                t0, t1 = t_s[i - 1], t_s[i]
                f = 0.0 if t1 <= t0 else (t - t0) / (t1 - t0)
                return a_ios[i - 1] + f * (a_ios[i] - a_ios[i - 1])
        return float(a_ios[-1])

    tau = 0.0
    while tau <= burst_s - window_s + 1e-9:
        t = start_s + tau
        if count_at(t + window_s) - count_at(t) >= need:
            return round(tau, 3)
        tau += step_s
    return None


def _fio_jobs(dev: str, cfg: IdleConfig, b_runtime_s: float, floor: int) -> tuple[str, str]:
    """(B's job file, A's job file): 4 KiB random reads, B on the second half, A's bursts
    on the first half at ``rate_iops`` = its floor."""
    head = (f"[global]\nfilename={dev}\ndirect=1\nioengine=libaio\nrw=randread\nbs=4k\n"
            "norandommap\nrandrepeat=0\nthread\ntime_based=1\n")
    b = head + (f"\n[b]\noffset=50%\nsize=50%\niodepth={cfg.depth}\n"
                f"runtime={b_runtime_s:g}\n")
    period = cfg.rest_s + cfg.burst_s
    a = head + "".join(
        f"\n[a{k}]\noffset=0\nsize=50%\niodepth={cfg.a_depth}\nrate_iops={floor}\n"
        f"startdelay={k * period:g}\nruntime={cfg.burst_s:g}\n"
        for k in range(cfg.wakeups))
    return b, a


def run_idle(cfg: IdleConfig, *, dev: str | None = None,
             say: Callable[[str], None] = lambda _m: None) -> IdleResult:
    """One run (module docstring) on ``dev``, or on a fresh emulated ``cfg.model``."""
    preflight()
    with contextlib.ExitStack() as stack:
        if dev is None:
            from iogauge.lab.device import create_device  # noqa: PLC0415

            say(f"creating the emulated device (model {cfg.model})")
            dev = stack.enter_context(create_device(cfg.model, cfg.size,
                                                    backing_dir=cfg.backing_dir))
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="iogauge-idle-")))
        return _run(dev, cfg, workdir, say)


def _run(dev: str, cfg: IdleConfig, workdir: Path, say: Callable[[str], None]) -> IdleResult:
    devnum = resolve_device(dev).devnum
    hier = CgroupV1(BLKIO_ROOT)
    res = IdleResult(cfg, dev)
    period = cfg.rest_s + cfg.burst_s
    # B runs through both B-alone runs, the idle phase and the wake-ups (and a margin).
    total_s = 2 * cfg.alone_s + cfg.idle_s + cfg.rest_s + cfg.wakeups * period + 10.0
    with contextlib.ExitStack() as stack:
        a_cg, b_cg = stack.enter_context(cgroup_pair(f"idle-{cfg.controller}"))

        def counts(cg: Path) -> int:
            return sum(hier.read_counts(cg, devnum))

        b_job, _ = _fio_jobs(dev, cfg, total_s, 1)
        fio_b = stack.enter_context(start_fio(b_job, workdir, "b", b_cg))
        first_io(hier, b_cg, devnum, fio_b)
        time.sleep(cfg.alone_warmup_s)
        b0, m0 = counts(b_cg), time.monotonic()
        time.sleep(cfg.alone_s - cfg.alone_warmup_s)
        res.b_alone_iops = (counts(b_cg) - b0) / (time.monotonic() - m0)
        res.b_alone_before_iops = res.b_alone_iops
        res.floor_iops = max(1, round(cfg.floor_share * res.b_alone_iops))
        say(f"{cfg.model}: B alone {res.b_alone_iops:.1f} IOPS; A's floor "
            f"{res.floor_iops} IOPS; controller {cfg.controller}")
        state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="iogauge-idle-state-")))
        ctl = ControllerThread(
            "paper" if cfg.controller == "paper" else "adaptive", dev, a_cg, b_cg,
            res.floor_iops, cfg.interval_s, state_dir, res.controller_lines.append,
            reserve_idle=cfg.controller == "reserve-idle", sample_s=cfg.sample_s,
            capacity_model=cfg.capacity_model)
        ctl.start()
        stack.callback(ctl.stop)  # restores the limits before fio and cgroups go
        b0, m0 = counts(b_cg), time.monotonic()
        _sleep_checked(cfg.idle_s, ctl, fio_b)
        res.b_idle_iops = (counts(b_cg) - b0) / (time.monotonic() - m0)
        say(f"  A idle {cfg.idle_s:g} s: B {res.b_idle_iops:.1f} IOPS = "
            f"{res.b_idle_share:.0%} of B alone")
        if cfg.wakeups:
            _wakeups(cfg, res, hier, devnum, a_cg, b_cg, workdir, ctl, fio_b, total_s, say)
        # B alone once more, the controller gone (its limits restored): the emulated
        # device's speed follows the machine's load, so B alone is the mean of both.
        ctl.stop()
        before = res.b_alone_iops
        time.sleep(cfg.alone_warmup_s)
        b0, m0 = counts(b_cg), time.monotonic()
        time.sleep(cfg.alone_s - cfg.alone_warmup_s)
        res.b_alone_after_iops = (counts(b_cg) - b0) / (time.monotonic() - m0)
        res.b_alone_iops = (before + res.b_alone_after_iops) / 2
        say(f"  B alone again {res.b_alone_after_iops:.1f} IOPS (before: {before:.1f}); "
            f"B while A idle {res.b_idle_share:.0%} of their mean")
    return res


def _sleep_checked(seconds: float, ctl: ControllerThread, *fios: Any) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))
        ctl.check()
        for f in fios:
            f.check()


def _wakeups(cfg: IdleConfig, res: IdleResult, hier: CgroupV1, devnum: Any, a_cg: Path,
             b_cg: Path, workdir: Path, ctl: ControllerThread, fio_b: Any, total_s: float,
             say: Callable[[str], None]) -> None:
    """A's bursts; counters sampled every ``watch_s``; each burst's time to floor."""
    _, a_job = _fio_jobs(res.device, cfg, total_s, res.floor_iops)
    period = cfg.rest_s + cfg.burst_s
    # fio's job k starts k periods after fio itself; the idle rest comes first.
    _sleep_checked(cfg.rest_s, ctl, fio_b)
    with start_fio(a_job, workdir, "a", a_cg) as fio_a:
        t0 = first_io(hier, a_cg, devnum, fio_a)
        ts: list[float] = []
        a_ios: list[int] = []
        b_ios: list[int] = []
        end = t0 + cfg.wakeups * period - cfg.rest_s + 0.5
        while (now := time.monotonic()) < end:
            ts.append(now - t0)
            a_ios.append(sum(hier.read_counts(a_cg, devnum)))
            b_ios.append(sum(hier.read_counts(b_cg, devnum)))
            ctl.check()
            fio_b.check()
            time.sleep(cfg.watch_s)
    # A's first completion is at its first burst's start to within one service time.
    for k in range(cfg.wakeups):
        start = k * period
        res.wake_s.append(time_to_floor(ts, a_ios, start, res.floor_iops, cfg.burst_s,
                                        cfg.window_s, cfg.watch_s))
        res.a_burst_iops.append(_rate(ts, a_ios, start, start + cfg.burst_s))
    bursts = [_rate(ts, b_ios, k * period, k * period + cfg.burst_s)
              for k in range(cfg.wakeups)]
    res.b_during_bursts_iops = sum(bursts) / len(bursts)
    say("  wake-ups, time to floor: " + ", ".join(
        "never" if w is None else f"{w:.1f} s" for w in res.wake_s))


def _rate(ts: list[float], ios: list[int], t_from: float, t_to: float) -> float:
    idx = [i for i, t in enumerate(ts) if t_from <= t <= t_to]
    if len(idx) < 2:
        return math.nan
    i, j = idx[0], idx[-1]
    return (ios[j] - ios[i]) / (ts[j] - ts[i]) if ts[j] > ts[i] else math.nan


def results_table(results: list[IdleResult]) -> str:
    """One row per run: device, controller, B alone, A's floor, B while A idle, wake-ups."""
    head = (f"{'device':8} {'controller':13} {'B alone':>8} {'(before/after)':>16} {'floor':>6} "
            f"{'B idle':>8} {'share':>6} {'wake med':>9} {'wake max':>9} {'A burst':>8} "
            f"{'B burst':>8}")
    rows = [head]
    for r in results:
        burst = [x for x in r.a_burst_iops if not math.isnan(x)]
        a_b = sum(burst) / len(burst) if burst else math.nan
        ba = f"{r.b_alone_before_iops:.0f}/{r.b_alone_after_iops:.0f}"
        rows.append(f"{r.config.model:8} {r.config.controller:13} {r.b_alone_iops:8.1f} "
                    f"{ba:>16} {r.floor_iops:6d} {r.b_idle_iops:8.1f} {r.b_idle_share:6.0%} "
                    f"{_secs(r.wake_median_s):>9} {_secs(r.wake_worst_s):>9} {a_b:8.1f} "
                    f"{r.b_during_bursts_iops:8.1f}")
    return "\n".join(rows)


__all__ = ["B_IDLE_GOAL", "IDLE_CONTROLLERS", "WAKE_MEDIAN_GOAL_S", "WAKE_WORST_GOAL_S",
           "IdleConfig", "IdleController", "IdleResult", "results_table", "run_idle",
           "time_to_floor"]
