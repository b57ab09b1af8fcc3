"""CPU cost of the live collector per sample, against sysstat's iostat, measured side by side.

Runs, at the same time and on the same devices:

* ``iogauge record --db <tmp> --interval 1``    (the target: < 0.5 % of one core)
* ``iogauge record --db <tmp> --interval 0.1``
* ``iogauge iostat --json --interval 1 > /dev/null``  (collector + JSON, no store)
* ``iostat -x 1 > /dev/null``  (sysstat; 1 s is also iostat's minimum interval: it takes
  whole seconds only, so there is no faster iostat to compare the 0.1 s recorder with)

Start-up is excluded: each process's CPU time (utime+stime of /proc/<pid>/stat, every
thread, clock ticks) is read after ``--warmup`` seconds and again ``--seconds`` later; the
difference divided by the samples taken in between is the CPU time per sample. The same
window is also measured from /proc/<pid>/task/*/schedstat (nanoseconds, live threads only),
which resolves iostat's sub-tick cost; ratios use it when both readings agree.

Usage::

    .venv/bin/python benchmarks/collector_overhead.py              # ~65 s
    .venv/bin/python benchmarks/collector_overhead.py --seconds 300 sda nvme0n1
    .venv/bin/python benchmarks/collector_overhead.py --baseline /work/main/.venv/bin/iogauge

Prints one row per command: CPU ms in the window, ms per sample, % of one core, and the
ratio to ``iostat -x 1`` (per sample and per second). ``--check`` exits 1 when ``iogauge
record`` at 1 s uses 0.5 % of one core or more.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGET_PCT = 0.5  # record at 1 s must use less than this % of one core


@dataclass
class Proc:
    """One measured command."""

    label: str
    interval_s: float
    cmd: list[str]
    popen: subprocess.Popen[bytes] | None = None
    stderr_path: Path | None = None
    ticks: list[int] = field(default_factory=list)
    ns: list[int | None] = field(default_factory=list)


def stat_ticks(pid: int) -> int:
    """utime + stime of the whole process (all threads, dead ones included), clock ticks."""
    text = Path(f"/proc/{pid}/stat").read_text()
    # The command name may contain spaces and parentheses: split after the last ')'.
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def schedstat_ns(pid: int) -> int | None:
    """CPU time of the process's live threads in ns (/proc/<pid>/task/*/schedstat)."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int((task / "schedstat").read_text().split()[0])
    except OSError:
        return None
    return total


def find_iogauge(explicit: str | None) -> str:
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "iogauge"
    if beside.exists():
        return str(beside)
    found = shutil.which("iogauge")
    if not found:
        raise SystemExit("iogauge not found next to this python nor on PATH; use --iogauge")
    return found


def record_available(iogauge: str) -> bool:
    res = subprocess.run([iogauge, "record", "--help"], capture_output=True, check=False,
                         timeout=60)
    return res.returncode == 0


def build(iogauge: str, tmp: Path, devices: list[str], run_s: float,
          have_record: bool, baseline: str | None = None) -> list[Proc]:
    procs: list[Proc] = []
    if have_record:
        for iv, tag in ((1.0, "1"), (0.1, "0.1")):
            procs.append(Proc(
                f"iogauge record -i {tag}", iv,
                [iogauge, "record", "--db", str(tmp / f"record-{tag}.duckdb"),
                 "--interval", tag, "--duration", f"{run_s:.0f}", *devices]))
            if baseline:  # another build's record (e.g. main's), same devices, same window
                procs.append(Proc(
                    f"baseline record -i {tag}", iv,
                    [baseline, "record", "--db", str(tmp / f"baseline-{tag}.duckdb"),
                     "--interval", tag, "--duration", f"{run_s:.0f}", *devices]))
    procs.append(Proc("iogauge iostat --json -i 1" + ("" if have_record else
                                                      "  [STAND-IN for record]"), 1.0,
                      [iogauge, "iostat", "--json", "--interval", "1", *devices]))
    # iostat takes whole seconds only: 1 s is its minimum interval.
    procs.append(Proc("iostat -x 1", 1.0, ["iostat", "-x", "1", *devices]))
    return procs


def stop(p: Proc) -> None:
    if p.popen is None or p.popen.poll() is not None:
        return
    p.popen.send_signal(signal.SIGTERM)  # record commits and exits 0 on SIGTERM
    try:
        p.popen.wait(timeout=15)
    except subprocess.TimeoutExpired:
        p.popen.kill()
        p.popen.wait(timeout=15)


def run(args: argparse.Namespace) -> int:
    if shutil.which("iostat") is None:
        raise SystemExit("iostat not found (Debian/Ubuntu package sysstat)")
    iogauge = find_iogauge(args.iogauge)
    have_record = record_available(iogauge)
    run_s = args.warmup + args.seconds + 10  # they outlive the window; stopped after it
    with tempfile.TemporaryDirectory(prefix="iogauge-bench-") as tmpdir:
        tmp = Path(tmpdir)
        procs = build(iogauge, tmp, args.devices, run_s, have_record, args.baseline)
        try:
            t_start = time.monotonic()
            for i, p in enumerate(procs):
                p.stderr_path = tmp / f"stderr-{i}.txt"
                with p.stderr_path.open("wb") as err:
                    p.popen = subprocess.Popen(p.cmd, stdout=subprocess.DEVNULL, stderr=err,
                                               stdin=subprocess.DEVNULL)
            for t in (args.warmup, args.warmup + args.seconds):
                time.sleep(max(0.0, t_start + t - time.monotonic()))
                for p in procs:
                    assert p.popen is not None
                    if p.popen.poll() is not None:
                        msg = p.stderr_path.read_text(errors="replace") if p.stderr_path else ""
                        raise SystemExit(f"{p.label} exited early ({p.popen.returncode}) "
                                         f"before the window ended:\n{' '.join(p.cmd)}\n{msg}")
                    p.ticks.append(stat_ticks(p.popen.pid))
                    p.ns.append(schedstat_ns(p.popen.pid))
        finally:
            for p in procs:
                stop(p)
        return report(args, procs, have_record)


def report(args: argparse.Namespace, procs: list[Proc], have_record: bool) -> int:
    window = args.seconds
    devs = " ".join(args.devices) or "all with I/O since boot (iostat's default)"
    print(f"collector overhead: {window:.0f} s window after {args.warmup:.0f} s warm-up, "
          f"{os.cpu_count()} CPUs, devices: {devs}")
    print(f"CPU from /proc/<pid>/stat utime+stime ({1000 / CLK_TCK:.0f} ms ticks); "
          "'ns' columns from per-thread schedstat\n")
    rows = []
    for p in procs:
        samples = window / p.interval_s
        ms = (p.ticks[1] - p.ticks[0]) * 1000 / CLK_TCK
        ns0, ns1 = p.ns
        ms_ns = (ns1 - ns0) / 1e6 if ns0 is not None and ns1 is not None else None
        rows.append((p, samples, ms, ms_ns))
    base = next(r for r in rows if r[0].label == "iostat -x 1")

    def best(r: tuple[Proc, float, float, float | None]) -> float:
        # schedstat resolves sub-tick costs; trust it unless a thread vanished (then the
        # tick count is higher by more than a tick or two).
        _p, _s, ms, ms_ns = r
        tick = 1000 / CLK_TCK
        if ms_ns is not None and ms_ns >= ms - 2 * tick:
            return ms_ns
        return ms

    base_per_sample = best(base) / base[1]
    base_per_s = best(base) / window
    head = (f"{'command':<44} {'samples':>7} {'CPU ms':>8} {'ms/sample':>9} "
            f"{'ns: ms/sample':>13} {'% 1 core':>8} {'x iostat/sample':>15} "
            f"{'x iostat/s':>10}")
    print(head)
    print("-" * len(head))
    verdict_ok, verdict = True, ""
    for r in rows:
        p, samples, ms, ms_ns = r
        cpu = best(r)
        pct = cpu / (window * 1000) * 100
        per_sample = cpu / samples
        ratio_sample = per_sample / base_per_sample if base_per_sample > 0 else float("nan")
        ratio_s = (cpu / window) / base_per_s if base_per_s > 0 else float("nan")
        ns_txt = f"{ms_ns / samples:.3f}" if ms_ns is not None else "-"
        print(f"{p.label:<44} {samples:>7.0f} {ms:>8.0f} {ms / samples:>9.3f} {ns_txt:>13} "
              f"{pct:>8.3f} {ratio_sample:>15.1f} {ratio_s:>10.1f}")
        if p.label == "iogauge record -i 1":
            verdict_ok = pct < TARGET_PCT
            verdict = (f"\niogauge record at 1 s: {pct:.3f} % of one core "
                       f"({per_sample:.2f} ms CPU per sample); target < {TARGET_PCT} %: "
                       f"{'MET' if verdict_ok else 'NOT MET'}")
    print("\n% of one core and the ratios use the ns column when it agrees with the ticks.")
    print("iostat cannot sample faster than 1 s: `iostat -x 1` is also iostat at its "
          "minimum interval.")
    if have_record:
        print(verdict)
    else:
        print("\n`iogauge record` is not available in this build: the iogauge row is the "
              "stand-in `iogauge iostat --json -i 1 > /dev/null` (collector without store).")
    return 1 if args.check and not verdict_ok else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("devices", nargs="*", help="device names for every command "
                    "(default: all with I/O, as iostat)")
    ap.add_argument("--seconds", type=float, default=60.0,
                    help="measured window in seconds (default 60; a multiple of record's "
                         "5 s commit interval keeps commits in proportion)")
    ap.add_argument("--warmup", type=float, default=3.0,
                    help="seconds after start before the first reading (default 3)")
    ap.add_argument("--iogauge", help="iogauge executable (default: next to this python)")
    ap.add_argument("--baseline", help="another iogauge executable whose `record` runs beside "
                    "this one's (e.g. /work/main/.venv/bin/iogauge: before/after in one run)")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 if record at 1 s uses >= {TARGET_PCT} %% of one core")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.warmup < 0:
        ap.error("--seconds must be > 0 and --warmup >= 0")
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
