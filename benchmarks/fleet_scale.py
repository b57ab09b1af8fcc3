"""Fleet at scale: ``iogauge analyze --prometheus`` over a synthetic fleet backfilled into a
real Prometheus, at 250 / 500 / 1,000 hosts x 4 devices x 24 h at 60 s.

Steps (every one timed and printed):

1. tests/helpers/synthetic_fleet.py writes the fleet as OpenMetrics, one file per 2-hour
   block, with planted saturations and knees (``PLANTS`` below) spread over the hosts;
2. ``promtool tsdb create-blocks-from openmetrics`` backfills each file;
3. Prometheus serves the blocks (127.0.0.1, a free port, data in the work directory);
4. a warm-up: every query of the largest size once (Prometheus reads the new blocks);
5. per fleet size, ``iogauge analyze --prometheus URL --match part=~... --from --to
   --window 60 --json`` runs in a child process: wall time and its peak RSS; the planted
   devices must be the top of the ranking;
6. baseline, same run: the same query_range expressions (iogauge's own, for the same host
   batches and time chunks) sent to the same Prometheus by a bare HTTP loop that reads and
   discards the answers, as many at once as iogauge sends: Prometheus's evaluation and
   transfer, without iogauge's parsing and analysis. The ratio is iogauge / baseline.

Targets (issue 34): <= 10 min and <= 4 GB at 1,000 hosts, memory flat as hosts are added.

Usage::

    .venv/bin/python benchmarks/fleet_scale.py                      # 1,000 hosts, 24 h
    .venv/bin/python benchmarks/fleet_scale.py --hosts 500 --hours 6
    .venv/bin/python benchmarks/fleet_scale.py --workdir /var/tmp/fleet --keep
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.promstack import PROMTOOL, prometheus  # noqa: E402
from tests.helpers.synthetic_fleet import Plant, host_name, write_fleet  # noqa: E402

#: Planted devices: one saturation and one knee in every 125 hosts (8 + 8 at 1,000 hosts).
PLANT_EVERY = 125
SIZES = (250, 500, 1000)


def plants(hosts: int) -> list[Plant]:
    out = []
    for h in range(0, hosts, PLANT_EVERY):
        out.append(Plant(h + 17, "sda", "saturation"))
        out.append(Plant(h + 71, "sda", "knee"))
    return [p for p in out if p.host < hosts]


def selector(size: int, sizes: list[int]) -> str:
    parts = "|".join(f"p{i}" for i, s in enumerate(sizes) if s <= size)
    return f'part=~"{parts}"'


def run_iogauge(url: str, match: str, start: str, end: str) -> tuple[float, float, dict]:
    """``iogauge analyze --json`` in a child: (wall s, peak RSS MiB, document)."""
    exe = Path(sys.executable).with_name("iogauge")
    code = ("import resource,subprocess,sys,time;t=time.perf_counter();"
            "r=subprocess.run(sys.argv[2:],capture_output=True);"
            "w=time.perf_counter()-t;"
            "sys.stderr.write(r.stderr.decode()[-3000:]);"
            "open(sys.argv[1]+'.out','wb').write(r.stdout);"
            "print(w,resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,r.returncode)")
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out = Path(tmp.name)
    res = subprocess.run([sys.executable, "-c", code, str(out), str(exe), "analyze",
                          "--prometheus", url, "--match", match, "--from", start, "--to", end,
                          "--window", "60", "--json"], capture_output=True, text=True,
                         check=False)
    wall, rss_kib, rc = res.stdout.split()
    if rc != "0":
        raise SystemExit(f"iogauge analyze failed ({rc}): {res.stderr}")
    doc = json.loads(Path(str(out) + ".out").read_text())
    Path(str(out) + ".out").unlink()
    out.unlink()
    return float(wall), int(rss_kib) / 1024, doc


def baseline(url: str, match: str, start: datetime, end: datetime) -> tuple[float, int]:
    """The same query_range calls, as many at once as iogauge sends them, answers read and
    dropped: (wall s, bytes)."""
    from iogauge.sources.prometheus import PromClient, PromSelection, parse_selector, promql
    from iogauge.sources.prometheus.reader import (
        batch_matchers,
        discover_hosts,
        disk_queries,
        host_batches,
    )

    client = PromClient(url, env={})
    sel = PromSelection(start=start, end=end, window_s=60.0, matchers=parse_selector(match))
    t0 = time.perf_counter()
    calls = []
    for hosts in host_batches(discover_hosts(client, sel), sel.hosts_per_batch):
        m = batch_matchers(sel, hosts)
        queries = [q for _, q in disk_queries(sel, m)]
        queries.append(promql.cpu_expression(m, "instance", 60.0))
        calls += [(q, a, b) for q in queries for a, b in sel.chunks()]

    def one(call: tuple[str, float, float]) -> int:
        q, a, b = call
        body = urllib.parse.urlencode({"query": q, "start": a, "end": b, "step": 60}).encode()
        with urllib.request.urlopen(f"{url}/api/v1/query_range", body,  # noqa: S310
                                    timeout=600) as r:
            return len(r.read())

    with ThreadPoolExecutor(sel.parallel_queries) as pool:
        total = sum(pool.map(one, calls))
    return time.perf_counter() - t0, total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    sizes = [s for s in SIZES if s < args.hosts] + [args.hosts]
    work = args.workdir or Path(tempfile.mkdtemp(prefix="iogauge-fleet-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    steps = int(args.hours * 60)
    start_s = (int(time.time()) // 7200 - int(args.hours // 2) - 2) * 7200
    planted = plants(args.hosts)
    try:
        t = time.perf_counter()
        files = write_fleet(work / "om", args.hosts, start_s, steps, 60, planted,
                            parts=sizes[:-1])
        size_gb = sum(f.stat().st_size for f in files) / 1e9
        print(f"generated {len(files)} OpenMetrics files, {size_gb:.2f} GB, "
              f"{time.perf_counter() - t:.0f} s")
        t = time.perf_counter()
        tsdb = work / "tsdb"
        tsdb.mkdir(exist_ok=True)
        for f in files:
            subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(f),
                            str(tsdb)], check=True, capture_output=True)
            f.unlink()  # the text is 20x the blocks
        print(f"backfilled with promtool in {time.perf_counter() - t:.0f} s")
        a = datetime.fromtimestamp(start_s, UTC)
        b = datetime.fromtimestamp(start_s + steps * 60, UTC)
        with prometheus(work, data=tsdb, extra=("--query.max-samples=200000000",)) as prom:
            # Both measured passes run warm: the first queries after a backfill wait for
            # Prometheus to read the new blocks (10 hosts x 24 h: iogauge 45.6 s cold,
            # 21.9 s warm; the bare loop 33.0 s and 15.8 s).
            t = time.perf_counter()
            baseline(prom.url, selector(sizes[-1], sizes), a, b)
            print(f"warm-up (every query once, untimed in the table): "
                  f"{time.perf_counter() - t:.0f} s")
            print(f"{'hosts':>6} {'iogauge s':>10} {'peak MiB':>9} {'baseline s':>11} "
                  f"{'ratio':>6} {'MB':>6}  planted on top")
            for size in sizes:
                match = selector(size, sizes)
                wall, rss, doc = run_iogauge(prom.url, match, a.isoformat(), b.isoformat())
                base, nbytes = baseline(prom.url, match, a, b)
                want = {(host_name(p.host), p.device) for p in planted if p.host < size}
                ranking = doc["fleet"]["ranking"]
                top = {(r["host"], r["device"]) for r in ranking[:len(want)]}
                ok = "yes" if top == want else f"NO: {sorted(want - top)}"
                print(f"{size:>6} {wall:>10.1f} {rss:>9.0f} {base:>11.1f} "
                      f"{wall / base:>6.1f} {nbytes / 1e6:>6.0f}  {ok} "
                      f"({len(want)} planted, {len(ranking)} devices)", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
