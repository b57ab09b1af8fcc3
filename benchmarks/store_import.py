"""``iogauge import --db`` before and after imports moved to a side file, in one run.

Two source trees take turns under this interpreter (``--baseline SRC``: another checkout's
``src``, e.g. the main checkout's, as *before*; this one's as *after*; one interpreter and
one set of libraries for both, since two virtualenvs of the same versions differed by 30 MiB
of peak RSS here), each import ``iogauge import LOG --db DB`` in its own process, wall time
and peak RSS from ``os.wait4``:

* **new store**: import_speed.py's 100 MB iostat log (``build_log``) into a store that does
  not exist yet (the path import_speed.py's ``import --db`` row measures);
* **existing store**: the same log into a copy of a store holding a day of 1 s samples of
  20 devices (store_live.py's synthetic day, stored with ``Store.append``), the copy made
  before the clock starts: the side file's cost is the copy of that store;
* **a reader during the import**: while the import into the day's store runs, a reader in
  another process (``Store.open(read_only=True)`` and ``count()``, what ``analyze``,
  ``report`` and ``export`` do first) is started one second in: its wall time, and whether
  it was refused. Before, the reader waits until the import ends (refused after 10 s).

Usage::

    .venv/bin/python benchmarks/store_import.py --baseline /work/main/src
    .venv/bin/python benchmarks/store_import.py --baseline OLD/src --pairs 3 --size-mb 50
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_speed import build_log  # a sibling benchmark script
from iogauge.model.sampleframe import SampleFrame
from iogauge.store import Store
from store_live import hour_frame

_CLI = ("import sys; sys.argv = ['iogauge', *sys.argv[1:]]; "
        "from iogauge.cli.main import main; main()")
_READER = """
import sys, time
t = time.perf_counter()
from iogauge.store import Store
try:
    with Store.open(sys.argv[1], read_only=True) as st:
        n = st.count()
    print("ok", n, time.perf_counter() - t)
except Exception as exc:
    print("refused", 0, time.perf_counter() - t, str(exc)[:80].replace(" ", "_"))
"""


def build_day(path: Path, hours: int, devices: int) -> None:
    rng = np.random.default_rng(40)
    with Store.open(path) as st:
        for h in range(hours):
            st.append(SampleFrame(hour_frame(h, devices, rng)))


def run_import(src: str, log: Path, db: Path, *, reader: bool = False
               ) -> tuple[float, int, str]:
    """(wall s, peak RSS bytes, reader outcome) of ``iogauge import log --db db`` of the
    source tree ``src``."""
    env = {**os.environ, "PYTHONPATH": src}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _CLI, "import", str(log), "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    outcome = ""
    if reader:
        time.sleep(1.0)
        res = subprocess.run([sys.executable, "-c", _READER, str(db)], capture_output=True,
                             text=True, check=False, env=env)
        outcome = res.stdout.strip() or res.stderr.strip()[-200:]
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{src} import failed: {err.decode(errors='replace')[-1000:]}")
    return wall, usage.ru_maxrss * 1024, outcome


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--baseline", required=True, help="the src directory of the checkout "
                    "before, e.g. /work/main/src")
    ap.add_argument("--size-mb", type=float, default=100.0, help="log size (default 100)")
    ap.add_argument("--hours", type=int, default=24, help="hours in the existing store")
    ap.add_argument("--devices", type=int, default=20, help="devices in the existing store")
    ap.add_argument("--pairs", type=int, default=2, help="before/after turns (default 2)")
    ap.add_argument("--build", nargs=2, metavar=("WHAT", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.build:
        # Inputs are built in a process of their own: a child's ru_maxrss starts from its
        # parent's high-water mark, so building them here would raise every import's peak.
        what, path = args.build[0], Path(args.build[1])
        if what == "log":
            build_log(path, args.size_mb)
        else:
            build_day(path, args.hours, args.devices)
        return 0
    builds = {"before": args.baseline, "after": str(Path(__file__).resolve().parents[1] / "src")}
    base = "/var/tmp" if Path("/var/tmp").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="iogauge-store-import-", dir=base) as tmp:
        work = Path(tmp)
        log, day = work / "iostat.log", work / "day.duckdb"
        for what, path in (("log", log), ("day", day)):
            subprocess.run([sys.executable, __file__, "--size-mb", str(args.size_mb), "--hours",
                            str(args.hours), "--devices", str(args.devices), "--build", what,
                            str(path), "--baseline", args.baseline], check=True)
        size = log.stat().st_size
        with Store.open(day, read_only=True) as st:
            rows = st.count()
        print(f"log {size / 1e6:.1f} MB; existing store {day.stat().st_size / 1e6:.1f} MB, "
              f"{rows:,} rows ({args.hours} h x {args.devices} devices)")
        print(f"{'build':7s} {'case':15s} {'wall s':>7s} {'peak MiB':>9s}  reader (outcome, "
              "rows, s)")
        for _pair in range(args.pairs):
            for name, src in builds.items():
                db = work / f"{name}-new.duckdb"
                shutil.rmtree(db.with_name(db.name + ".live"), ignore_errors=True)
                db.unlink(missing_ok=True)
                wall, peak, _ = run_import(src, log, db)
                print(f"{name:7s} {'new store':15s} {wall:7.2f} {peak / 2**20:9.0f}")
                db.unlink()
                db = work / f"{name}-day.duckdb"
                shutil.copyfile(day, db)
                wall, peak, reader = run_import(src, log, db, reader=True)
                print(f"{name:7s} {'existing store':15s} {wall:7.2f} {peak / 2**20:9.0f}  "
                      f"{reader}")
                db.unlink()
                shutil.rmtree(db.with_name(db.name + ".live"), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
