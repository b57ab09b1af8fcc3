"""CPU per scrape of `iogauge exporter`, beside node_exporter's, and the cost of a judgement.

1. Starts ``iogauge exporter --interval I --window 900`` and Debian's
   ``prometheus-node-exporter`` (default collectors: what a host runs anyway) on free
   127.0.0.1 ports. After a warm-up, each process's CPU (utime+stime, all threads, from
   /proc/<pid>/stat) is read over an idle phase (no scrapes: the exporter's background
   sampling and judging) and over a phase of N back-to-back scrapes of each; the CPU per
   scrape is the scrape phase's CPU minus the idle rate over the same time, divided by N.
2. Times one judgement of a full 15-minute window in this process: the live collector takes
   900 samples of this machine's disks (quickly, so the window holds them all) and the
   exporter's step (sample, analysis, figures) runs on that window.

Usage: .venv/bin/python benchmarks/exporter_scrape.py [--scrapes 300] [--idle 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from collector_overhead import stat_ticks

CLK_TCK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - our own http:// URL
        return len(r.read())


def wait_ready(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            body = urllib.request.urlopen(url, timeout=2).read()  # noqa: S310
            if b"_device_verdict" in body or b"node_" in body:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"{url} not ready in {timeout_s:.0f} s")
        time.sleep(0.2)


def cpu_s(pid: int) -> float:
    return stat_ticks(pid) / CLK_TCK


def measure(procs: dict[str, tuple[subprocess.Popen[bytes], str]], scrapes: int,
            idle_s: float) -> None:
    t0 = time.monotonic()
    c0 = {n: cpu_s(p.pid) for n, (p, _u) in procs.items()}
    time.sleep(idle_s)
    t1 = time.monotonic()
    c1 = {n: cpu_s(p.pid) for n, (p, _u) in procs.items()}
    idle_rate = {n: (c1[n] - c0[n]) / (t1 - t0) for n in procs}
    print(f"{'':28} {'idle CPU':>12} {'scrape wall':>12} {'CPU/scrape':>12} {'bytes':>8}")
    for name, (proc, url) in procs.items():
        before, t2 = cpu_s(proc.pid), time.monotonic()
        walls, size = [], 0
        for _ in range(scrapes):
            s0 = time.perf_counter()
            size = scrape(url)
            walls.append(time.perf_counter() - s0)
        after, t3 = cpu_s(proc.pid), time.monotonic()
        per = (after - before - idle_rate[name] * (t3 - t2)) / scrapes
        print(f"{name:28} {idle_rate[name] * 100:10.2f} % {statistics.median(walls) * 1e3:9.2f} ms"
              f" {per * 1e3:9.2f} ms {size:8d}")
    print("\nidle CPU: % of one core between scrapes (the exporter's sampling and judging of "
          "a window that holds only the run's first seconds: see the full-window line below); "
          f"CPU/scrape: what one scrape adds (ticks of 1/{CLK_TCK} s, averaged)")


def full_window_judgement(interval_s: float, judge_every_s: float) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from iogauge.exporter.service import ExporterOptions, make_exporter

    exp = make_exporter(None, ExporterOptions(interval_s=interval_s, window_s=900.0),
                        say=lambda _m: None)
    exp.window.prime()
    n = round(900 / interval_s)
    for _ in range(n - 1):
        exp.window.take()
        time.sleep(0.002)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        j = exp.step()
        times.append(time.perf_counter() - t0)
    print(f"\none judgement of a full window: {j.samples} samples x {len(j.devices)} devices "
          f"({n} samples at --interval {interval_s:g} over 900 s): median "
          f"{statistics.median(times) * 1e3:.0f} ms; judged every "
          f"{max(judge_every_s, interval_s):g} s that is "
          f"{statistics.median(times) / max(judge_every_s, interval_s) * 100:.1f} % of one core")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrapes", type=int, default=300)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--judge-every", type=float, default=15.0)
    args = ap.parse_args()
    node = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if node is None:
        raise SystemExit("needs prometheus-node-exporter (scripts/ensure-system-tools.sh)")
    iogauge = Path(sys.executable).parent / "iogauge"
    pi, pn = free_port(), free_port()
    procs = {
        f"iogauge exporter -i {args.interval:g} judge {args.judge_every:g}": (subprocess.Popen(
            [str(iogauge), "exporter", "--listen", f"127.0.0.1:{pi}", "--interval",
             str(args.interval), "--judge-every", str(args.judge_every), "--window", "900",
             "--guarantee-db", "/nonexistent.duckdb"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            f"http://127.0.0.1:{pi}/metrics"),
        "node_exporter (defaults)": (subprocess.Popen(
            [node, f"--web.listen-address=127.0.0.1:{pn}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            f"http://127.0.0.1:{pn}/metrics"),
    }
    try:
        for _p, url in procs.values():
            wait_ready(url)
        time.sleep(2 * args.interval)
        measure(procs, args.scrapes, args.idle)
    finally:
        for p, _u in procs.values():
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
    full_window_judgement(args.interval, args.judge_every)


if __name__ == "__main__":
    main()
