"""`iogauge iostat` against sysstat's `iostat -x` on a real loop device under a steady fio load.

Both programs read the same kernel counters (iostat: /sys/block/<dev>/stat, iogauge:
/proc/diskstats) over the same ~15 s window; their medians must agree within the issue's
thresholds: 3 % for r/s, w/s, rkB/s, wkB/s and 5 % for r_await, w_await, aqu-sz, %util,
rareq-sz, wareq-sz.

Windows are aligned: iostat is launched just before one of iogauge's paced reads, so
iostat's report i and the iogauge report ending nearest to it cover the same second give or
take a millisecond or two (start-up of iostat, its alarm() re-arming drift). Remaining
legitimate differences: those ms, and iostat's interval, which it takes from /proc/uptime
in 1/100 s (its rates can be off by up to ~1 % in one interval; iogauge uses the monotonic
clock).
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.system import (
    CAPACITY_LOAD,
    CAPACITY_READ_IOPS,
    CAPACITY_WRITE_IOPS,
    DISK_MIXED_LOAD,
    FioRun,
    LoopDevice,
    run_fio,
    throttle_mechanism,
)

pytestmark = [pytest.mark.slow, pytest.mark.root]

#: Seconds of load before measuring (fio's jobs ramp and the rate limiter settles).
SETTLE_S = 2.0
#: One-second reports compared.
N_REPORTS = 15
#: fork+exec of iostat up to its first read of the counters (measured 1-2 ms).
IOSTAT_STARTUP_S = 0.002

#: iostat -x JSON key -> (iogauge key, relative tolerance); the issue's thresholds.
COMPARED: tuple[tuple[str, str, float], ...] = (
    ("r/s", "r_iops", 0.03),
    ("w/s", "w_iops", 0.03),
    ("rkB/s", "r_kBps", 0.03),
    ("wkB/s", "w_kBps", 0.03),
    ("r_await", "r_await_ms", 0.05),
    ("w_await", "w_await_ms", 0.05),
    ("aqu-sz", "aqu_sz", 0.05),
    ("util", "util_pct", 0.05),
    ("rareq-sz", "r_areq_kB", 0.05),
    ("wareq-sz", "w_areq_kB", 0.05),
)

#: iostat prints 2 decimals: its value is only known to +-0.005. Every comparison allows
#: that much on top of the relative tolerance; it matters only when iostat's value is tiny
#: (0.005 is 0.5 % of 1.0). A median below MIN_MEANINGFUL, where rounding alone would be
#: >= 5 % of the value, fails the capacity load (whose regime is known) and warns on the
#: disk load (whose latencies are the machine's).
IOSTAT_ROUNDING = 0.005
MIN_MEANINGFUL = 0.1


def _within(ours: float, theirs: float, rel: float) -> bool:
    return abs(ours - theirs) <= rel * abs(theirs) + IOSTAT_ROUNDING


def _epoch(ts: str) -> float:
    return datetime.fromisoformat(ts).timestamp()


@dataclass
class JsonLines:
    """A process printing one JSON object per line, read on threads as lines arrive."""

    proc: subprocess.Popen[str]
    records: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    first: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> JsonLines:
        def pump_out() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                if line.strip():
                    self.records.append(json.loads(line))
                    self.first.set()
            self.first.set()

        def pump_err() -> None:
            assert self.proc.stderr is not None
            self.stderr.extend(self.proc.stderr)

        self.threads = [threading.Thread(target=f, daemon=True) for f in (pump_out, pump_err)]
        for t in self.threads:
            t.start()
        return self

    def finish(self, timeout: float) -> str:
        """Wait for exit and for every line to be read; returns stderr. Raises on failure."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for t in self.threads:
            t.join(timeout=10)
        err = "".join(self.stderr)
        assert self.proc.returncode == 0, f"{self.proc.args} exited {self.proc.returncode}:\n{err}"
        return err


def _iogauge(iogauge_bin: Path, dev: str, interval: float, count: int) -> JsonLines:
    cmd = [str(iogauge_bin), "iostat", "--json", "--interval", str(interval), "--count",
           str(count), dev]
    return JsonLines(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)).start()


def _iostat_reports(stdout: str, dev: str) -> list[dict[str, float]]:
    doc = json.loads(stdout)
    stats = doc["sysstat"]["hosts"][0]["statistics"]
    out = []
    for st in stats:
        disks = [d for d in st["disk"] if d["disk_device"] == dev]
        assert disks, f"iostat report without {dev}: {st}"
        out.append(disks[0])
    return out


def _series_table(pairs: Sequence[tuple[dict[str, float], dict[str, Any]]],
                  keys: Sequence[tuple[str, str, float]]) -> str:
    head = "  #  " + "".join(f"{k:>22}" for k, _o, _t in keys)
    lines = [head, "     " + "".join(f"{'iostat / iogauge':>22}" for _ in keys)]
    for i, (theirs, ours) in enumerate(pairs):
        cells = "".join(f"{theirs[k]:>10.2f} /{float(ours[o]):>10.3f}"
                        for k, o, _t in keys)
        lines.append(f"{i:>3}  {cells}")
    return "\n".join(lines)


@dataclass
class Loaded:
    """A loop device under a settled steady fio load."""

    kind: str
    dev: LoopDevice
    fio: FioRun
    what: str


@pytest.fixture(params=["capacity", "disk"])
def loaded(request: pytest.FixtureRequest) -> Iterator[Loaded]:
    """The device under load, one at a time (never both: they would share the 2 CPUs).

    capacity: CAPACITY_LOAD saturating a kernel-throttled loop device (exact rates,
        await 6.7/10 ms, aqu-sz 3, %util 100). disk: DISK_MIXED_LOAD on a direct-I/O loop
        over a file on the real disk (%util mid-range, the disk's own latencies).
        best: capacity where a kernel I/O throttle is usable, else disk.
    """
    kind = request.param
    if kind == "best":  # the capacity load where the kernel can throttle, else the disk
        kind = "capacity" if throttle_mechanism() else "disk"
    if kind == "capacity":
        tl = request.getfixturevalue("throttled_loop")
        dev, load, cgroup = tl.top, CAPACITY_LOAD, tl.cgroup
        where = f"{dev.path} over {tl.lower.path} ({tl.mechanism})"
    else:
        dev = request.getfixturevalue("loop_dev")
        load, cgroup = DISK_MIXED_LOAD, None
        where = f"{dev.path} (direct_io={dev.direct_io}, backing {dev.backing})"
    with run_fio(dev.path, load, runtime_s=600, settle_s=SETTLE_S, cgroup=cgroup) as run:
        what = f"{load.describe()}\n  on {where}"
        print(f"\nload: {what}")
        yield Loaded(kind, dev, run, what)


def test_table_mode_prints_iostat_header(loop_dev: LoopDevice, iogauge_bin: Path) -> None:
    """`iogauge iostat` (text) prints iostat -x's column header and a full row per device."""
    ours = subprocess.run([str(iogauge_bin), "iostat", "--interval", "0.2", "--count", "1",
                           loop_dev.name], capture_output=True, text=True, timeout=60,
                          check=False)
    assert ours.returncode == 0, ours.stderr
    ref = subprocess.run(["iostat", "-x", "-y", "1", "1", loop_dev.name], capture_output=True,
                         text=True, timeout=60, check=True)
    iostat_head = next(ln.split() for ln in ref.stdout.splitlines() if ln.startswith("Device"))
    lines = ours.stdout.splitlines()
    heads = [ln.split() for ln in lines if ln.startswith("Device")]
    assert heads == [iostat_head], f"iostat -x header:\n{iostat_head}\niogauge:\n{ours.stdout}"
    rows = [ln.split() for ln in lines if ln.split()[:1] == [loop_dev.name]]
    assert len(rows) == 1, ours.stdout
    assert len(rows[0]) == len(iostat_head), ours.stdout
    for cell in rows[0][1:]:
        float(cell)  # every column is a number, as in iostat


def test_iostat_json_matches_sysstat(loaded: Loaded, iogauge_bin: Path) -> None:
    """Medians over the same ~15 s agree with `iostat -x -y -o JSON 1 N` (issue thresholds)."""
    dev = loaded.dev.name
    ours = _iogauge(iogauge_bin, dev, 1.0, N_REPORTS + 4)
    assert ours.first.wait(60), "iogauge printed no report within 60 s"
    assert ours.records, "iogauge exited without a report"
    # iogauge reads /proc/diskstats at ts_first + k (paced on the monotonic clock, its `ts`
    # is the wall clock right after the read). Launch iostat IOSTAT_STARTUP_S before the
    # next read, so its first read -- and so every window [t0+i, t0+i+1] -- coincides with
    # iogauge's to about a millisecond: both then see the same I/Os in each interval.
    next_read = _epoch(str(ours.records[0]["ts"])) + 1.0
    time.sleep(max(0.0, next_read - IOSTAT_STARTUP_S - time.time()))
    t0 = time.time()
    iostat = subprocess.Popen(["iostat", "-x", "-y", "-o", "JSON", "1", str(N_REPORTS), dev],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = iostat.communicate(timeout=N_REPORTS + 60)
    assert iostat.returncode == 0, err
    ours.finish(timeout=60)
    loaded.fio.check_alive()

    theirs = _iostat_reports(out, dev)
    assert len(theirs) == N_REPORTS
    recs = [r for r in ours.records if r["device"] == dev and not r["reset"]]
    pairs: list[tuple[dict[str, float], dict[str, Any]]] = []
    offsets: list[float] = []
    for i, rep in enumerate(theirs):
        target = t0 + i + 1
        best = min(recs, key=lambda r: abs(_epoch(str(r["ts"])) - target))
        off = _epoch(str(best["ts"])) - target
        assert abs(off) < 0.5, f"no iogauge report within 0.5 s of iostat report {i}"
        assert all(best is not p[1] for p in pairs), "two iostat reports matched one of ours"
        offsets.append(off)
        pairs.append((rep, best))

    rows, failures, too_small = [], [], []
    medians: dict[str, float] = {}
    for ikey, okey, rel in COMPARED:
        m_theirs = statistics.median(p[0][ikey] for p in pairs)
        m_ours = statistics.median(float(p[1][okey]) for p in pairs)
        medians[ikey] = m_theirs
        worst = max(abs(float(o[okey]) - t[ikey]) / max(abs(t[ikey]), IOSTAT_ROUNDING)
                    for t, o in pairs)
        ok = _within(m_ours, m_theirs, rel)
        diff = (m_ours - m_theirs) / m_theirs * 100 if m_theirs else math.nan
        rows.append(f"  {ikey:>9} {m_theirs:>12.2f} {m_ours:>14.4f} {diff:>+8.2f} %"
                    f"  (<= {rel * 100:.0f} % + {IOSTAT_ROUNDING}) {'ok' if ok else 'FAIL':4}"
                    f"  worst interval {worst * 100:.2f} %")
        if not ok:
            failures.append(ikey)
        if m_theirs < MIN_MEANINGFUL:
            too_small.append(f"{ikey}={m_theirs}")
    report = ("[{}] medians over {} aligned 1 s windows (iogauge's reads {:+.1f} ms from "
              "iostat's launch + k s, median)\n  {:>9} {:>12} {:>14} {:>10}\n".format(
                  loaded.kind, len(pairs), statistics.median(offsets) * 1000, "metric",
                  "iostat", "iogauge", "diff") + "\n".join(rows))
    print("\n" + report)
    series = _series_table(pairs, COMPARED)
    assert not failures, (f"iogauge differs from iostat -x on {failures}\n{report}\n"
                          f"per-interval series:\n{series}")
    if loaded.kind == "capacity":
        # The load's own regime: if the kernel throttle did not take effect, the comparison
        # would run on a near-idle device and prove little.
        regime = {"r/s": abs(medians["r/s"] / CAPACITY_READ_IOPS - 1) < 0.05,
                  "w/s": abs(medians["w/s"] / CAPACITY_WRITE_IOPS - 1) < 0.05,
                  "r_await": medians["r_await"] >= 1.0, "w_await": medians["w_await"] >= 1.0,
                  "aqu-sz": medians["aqu-sz"] >= 0.5, "util": medians["util"] >= 10.0}
        off = [k for k, good in regime.items() if not good]
        assert not off, (f"the throttled device is not in its intended regime ({off}): was "
                         f"the throttle applied? {loaded.what}\n{report}")
    elif too_small:
        warnings.warn(f"[{loaded.kind}] load light on this machine: {too_small} below "
                      f"{MIN_MEANINGFUL}, where iostat's rounding (0.005) alone is >= 5 %; "
                      "the comparison of those metrics is weak", stacklevel=1)


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


@pytest.mark.parametrize("loaded", ["best"], indirect=True)
def test_subsecond_samples_consistent_with_one_second(loaded: Loaded, iogauge_bin: Path) -> None:
    """0.1 s samples (which iostat cannot take) add up to iogauge's own 1 s samples.

    Two iogauge processes run side by side (0.1 s and 1 s). For each 1 s window, the 0.1 s
    samples inside it are summed, the two at its edges pro rata of their overlap. Counts
    and kB must agree within 3 %, the count-weighted awaits, aqu-sz and %util within 5 %.
    Each 0.1 s sample must also hold whole numbers of I/Os, sectors and milliseconds.

    The pro-rata split assumes I/O spread evenly over an edge sample, but the throttled
    load completes in bursts (blk-throttle dispatches per 100 ms slice), so an edge sample's
    share can be off by up to its whole content (seen once in CI: r, w, kB and aqu-sz all
    ~5 % low in one window, the others exact). A count, kB or queue total that misses the
    pro-rata tolerance therefore passes if it lies between what the window holds with the
    edge samples left out and with them counted in full (each bound widened by the same
    tolerance): nothing but the edges' placement is given that slack.
    """
    dev = loaded.dev.name
    fast = _iogauge(iogauge_bin, dev, 0.1, 90)
    slow = _iogauge(iogauge_bin, dev, 1.0, 8)
    slow.finish(timeout=90)
    fast.finish(timeout=90)
    loaded.fio.check_alive()

    def windows(recs: list[dict[str, Any]]) -> list[tuple[float, float, dict[str, float]]]:
        out = []
        for r in recs:
            if r["device"] != dev or r["reset"]:
                continue
            end = _epoch(str(r["ts"]))
            vals = {k: float(v) for k, v in r.items() if isinstance(v, int | float)}
            out.append((end - vals["interval_s"], end, vals))
        return out

    fw, sw = windows(fast.records), windows(slow.records)
    assert len(fw) >= 60, f"only {len(fw)} sub-second samples"
    dts = [v["interval_s"] for _a, _b, v in fw]
    assert 0.09 < statistics.median(dts) < 0.11, f"0.1 s samples have median dt {dts}"

    # Whole numbers: rate x interval gives back the integer counter delta.
    def whole(x: float) -> bool:
        return abs(x - round(x)) < 1e-6 * max(1.0, abs(x))

    for _a, _b, v in fw:
        dt = v["interval_s"]
        for key in ("r_iops", "w_iops"):
            assert whole(v[key] * dt), f"{key}*dt not an integer: {v}"
        for key in ("r_kBps", "w_kBps"):
            assert whole(v[key] * dt * 2), f"{key}*dt*2 not whole sectors: {v}"
        assert whole(v["r_await_ms"] * v["r_iops"] * dt), f"read ticks not whole ms: {v}"

    def extensive(v: dict[str, float]) -> dict[str, float]:
        """Interval totals: counts, kB, ms of latency, ms in queue, ms busy."""
        dt = v["interval_s"]
        r, w = v["r_iops"] * dt, v["w_iops"] * dt
        return {"r": r, "w": w, "rkB": v["r_kBps"] * dt, "wkB": v["w_kBps"] * dt,
                "rticks": v["r_await_ms"] * r, "wticks": v["w_await_ms"] * w,
                "queue_ms": v["aqu_sz"] * dt * 1000, "busy_ms": v["util_pct"] * dt * 10}

    #: Totals of whole intervals (bounded by the edge samples); the others are ratios.
    additive = {"r_count", "w_count", "r_kB", "w_kB", "aqu_sz"}
    derived: dict[str, Callable[[dict[str, float], float], float]] = {
        "r_count": lambda t, _dt: t["r"], "w_count": lambda t, _dt: t["w"],
        "r_kB": lambda t, _dt: t["rkB"], "w_kB": lambda t, _dt: t["wkB"],
        "r_await": lambda t, _dt: t["rticks"] / t["r"] if t["r"] else 0.0,
        "w_await": lambda t, _dt: t["wticks"] / t["w"] if t["w"] else 0.0,
        "aqu_sz": lambda t, dt: t["queue_ms"] / (dt * 1000),
        "util": lambda t, dt: t["busy_ms"] / (dt * 10),
    }
    tol = {"r_count": 0.03, "w_count": 0.03, "r_kB": 0.03, "w_kB": 0.03, "r_await": 0.05,
           "w_await": 0.05, "aqu_sz": 0.05, "util": 0.05}

    lines, failures, compared = [], [], 0
    for a, b, sv in sw:
        inside = [(fa, fb, fv) for fa, fb, fv in fw if _overlap(fa, fb, a, b) > 0]
        if not inside or inside[0][0] > a + 1e-3 or inside[-1][1] < b - 1e-3:
            continue  # not fully covered by the 0.1 s process (start-up or end)
        total: dict[str, float] = dict.fromkeys(extensive(inside[0][2]), 0.0)
        lo, hi = dict(total), dict(total)  # edges left out / counted in full
        for fa, fb, fv in inside:
            share = _overlap(fa, fb, a, b) / (fb - fa)
            for k, x in extensive(fv).items():
                total[k] += x * share
                lo[k] += x if share >= 1 - 1e-9 else 0.0
                hi[k] += x
        dt = b - a
        one_s = extensive(sv)
        compared += 1
        cells = []
        at_edges: set[str] = set()  # counts that matched only with the edge samples' I/Os
        for name, fn in derived.items():
            mine, ref = fn(total, dt), fn(one_s, dt)
            ok = abs(mine - ref) <= tol[name] * abs(ref) + 1e-9
            edge = ""
            if not ok and name in additive:
                low, high = fn(lo, dt), fn(hi, dt)
                ok = low * (1 - tol[name]) - 1e-9 <= ref <= high * (1 + tol[name]) + 1e-9
                edge = f" (edges: {low:.2f}-{high:.2f})"
                at_edges.add(name)
            elif not ok and name in ("r_await", "w_await") and (
                    f"{name[0]}_count" in at_edges
                    or abs(total[name[0]] - one_s[name[0]]) > 0.01 * one_s[name[0]]):
                # The two samplers' windows hold different I/Os (the counts matched only
                # with the edge samples' I/Os, or differ by more than 1 %: the samples were
                # taken late, as when the VM is not given a CPU; CI 2026-12-07: 301 against
                # 310 reads, r_await 6.63 against 7.04 ms), so their mean latencies are of
                # different I/Os; the latency totals must still lie within the edges.
                ticks = f"{name[0]}ticks"
                ok = (lo[ticks] * (1 - tol[name]) - 1e-9 <= one_s[ticks]
                      <= hi[ticks] * (1 + tol[name]) + 1e-9)
                edge = (f" (other I/Os: latency total {one_s[ticks]:.0f} ms within "
                        f"{lo[ticks]:.0f}-{hi[ticks]:.0f})")
            cells.append(f"{name} {mine:.2f}/{ref:.2f}{edge}{'' if ok else ' FAIL'}")
            if not ok:
                failures.append(f"window ending {b:.3f}: {name} sum of 0.1 s = {mine:.3f}, "
                                f"1 s = {ref:.3f}")
        lines.append(f"  [{a:.3f}, {b:.3f}] {len(inside)} sub-samples: " + ", ".join(cells))
    report = "0.1 s sums vs 1 s samples (sum/1s):\n" + "\n".join(lines)
    print("\n" + report)
    assert compared >= 4, f"only {compared} 1 s windows fully covered by 0.1 s samples"
    assert not failures, "\n".join(failures) + "\n" + report
