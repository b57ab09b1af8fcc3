"""How long the simulator takes for one hour of a 200-IOPS device (target: under 10 s).

Simulates, for each profile, [Oe]'s file-share workload (10 threads on partition A)
capped at ``--rate`` IOPS with Poisson arrivals for ``--hours`` of virtual time (1 h x
200 IOPS = 720,000 requests), sampled every second, and prints the requests simulated,
wall and CPU seconds, microseconds per request and the virtual-to-real speed-up.

Usage::

    .venv/bin/python benchmarks/simulator_speed.py                 # all bundled profiles
    .venv/bin/python benchmarks/simulator_speed.py raid5-6x400g    # one profile
    .venv/bin/python benchmarks/simulator_speed.py --check         # exit 1 if > 10 s

The wall time is what the target is about; CPU time is printed too because a loaded
machine stretches wall time (compare runs from the same machine state only). A probe line
gives this machine's pure-Python speed (``sum(range(10**7))``, ~0.1 s on a current desktop
CPU with Python 3.11) so figures from different machines can be put side by side.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from iogauge.lab import accel
from iogauge.lab.profiles import build_model, list_profiles
from iogauge.lab.simulator import simulate
from iogauge.lab.workloads import oe_paper

TARGET_S = 10.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="*", help="profiles (default: every bundled one)")
    ap.add_argument("--hours", type=float, default=1.0, help="virtual hours (default 1)")
    ap.add_argument("--rate", type=float, default=200.0, help="IOPS cap (default 200)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 if any profile takes {TARGET_S:g} s or more per hour")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the pure-Python baseline run of each profile")
    args = ap.parse_args()
    names = args.profiles or [p for p in list_profiles() if p != "hdd-7200-400g"]
    c0 = time.process_time()
    sum(range(10**7))
    print(f"probe: sum(range(10**7)) took {time.process_time() - c0:.3f} s of CPU")
    duration = round(args.hours * 3600.0)
    print(f"{'profile':<16} {'requests':>9} {'IOPS':>7} {'wall s':>7} {'CPU s':>7} "
          f"{'us/req':>7} {'speed-up':>9} {'s per 1 h':>9}")
    worst = 0.0
    compiled = accel.modules().compiled
    print(f"disk models: {'compiled (iogauge_accel, mypyc)' if compiled else 'pure Python'}"
          "; baseline: the pure-Python models, same run")
    for name in names:
        runs = [("", compiled)]
        if compiled and not args.no_baseline:
            runs.append((" (pure)", False))
        walls = []
        for tag, use_compiled in runs:
            os.environ["IOGAUGE_PURE_PYTHON"] = "0" if use_compiled else "1"
            accel.modules.cache_clear()
            model = build_model(name)
            wls = oe_paper("file-share", "A", rate_iops=args.rate, arrival="poisson")
            c0, w0 = time.process_time(), time.perf_counter()
            res = simulate(model, wls, float(duration), interval_s=1.0, seed=args.seed)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            walls.append(wall)
            per_hour = wall / (duration / 3600.0)
            if not tag:
                worst = max(worst, per_hour)
            print(f"{name + tag:<16} {res.completed:>9} {res.completed / duration:>7.1f} "
                  f"{wall:>7.2f} {cpu:>7.2f} {wall / res.completed * 1e6:>7.1f} "
                  f"{duration / wall:>8.0f}x {per_hour:>9.2f}")
        if len(walls) == 2:
            print(f"{'':<16} compiled is {walls[1] / walls[0]:.2f}x faster than pure Python")
        os.environ.pop("IOGAUGE_PURE_PYTHON", None)
        accel.modules.cache_clear()
    ok = worst < TARGET_S
    print(f"slowest: {worst:.2f} s of wall time per simulated hour "
          f"({'meets' if ok else 'MISSES'} the {TARGET_S:g} s target)")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
