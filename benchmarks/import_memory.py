"""Peak memory of ``iogauge import --parquet`` for the formats read a piece at a time besides
Linux ``iostat`` text (which ``import_speed.py`` measures): Solaris ``iostat -x``, AIX
``iostat -DT`` and ``-DlT``, Linux ``sar -A`` text, AIX ``sar`` text, ``iostat -o JSON``,
``/proc/diskstats`` snapshots, ``sadf -d`` and ``sadf -j`` (the JSON in its writer's layout
and in a JSON tool's), RMF, AWR and fio JSON.

Target (the importers issue): memory stays below 3x the input size. Each input (about
``--size-mb``) is built from a fixture in ``tests/fixtures`` (see its NOTICE), repeated:

* ``solaris-iostat``: [Goodus]'s ``iostat -x 5`` of a ``cp`` (no time stamps: imported with
  ``--start`` and ``--interval 5``), its reports one after another;
* ``aix-iostat -DT`` / ``-DlT``: the documented block and long forms, their three reports
  over and over (the times of day go round: each copy is the next day);
* ``sar -A``: the ksar RHEL 7 (sysstat 10.1.5) ``sar -A`` report, one copy after another, a
  banner and footer each (``cat`` of the same day's files);
* ``sar -u -d -p`` of one report: a day of 1-second samples of 12 disks, as ``sar -f``
  prints one daily file (the CPU section, then the device section);
* ``unix-sar``: the ksar AIX 7.2 ``sar`` report, each copy's header date one day on (a month
  of daily reports, ``cat sar*``);
* ``iostat -o JSON``: the live ``-x -t`` capture's three reports over and over, each stamped
  one second after the one before, in iostat's own layout;
* ``diskstats snapshots``: ``TS <epoch>`` + ``/proc/diskstats`` a second apart, the pt
  capture's first snapshot with its counters growing by their first increments;
* ``sadf -d``: one long stretch of ``sadf -d -- -d -u``, its CPU section then its DEV
  section, the 12.6.1 export's first interval one second apart;
* ``sadf -j``: the 12.6.1 ``sadf -j -- -d -u ALL`` export's statistics entries over and
  over, one second apart, in sadf's own layout;
* ``iostat -o JSON, re-indented`` and ``sadf -j, one line``: the same entries in the
  layouts a JSON tool leaves (``jq .``: two spaces a level; ``jq -c``: one line), which
  :mod:`iogauge.importers.json_stream` reads;
* ``rmf``: [Yuge]'s RMF Postprocessor output (DASD, cache, ESS rank pages of 4 intervals),
  each copy's dates a day after the last's;
* ``awr``: the 19c AWR text report excerpt (wait events, file I/O), each copy a day later
  (a month of reports in one file, as ``cat`` leaves them);
* ``fio --status-interval``: fio 3.1's JSON report over and over, one second apart (the
  cumulative status reports of a long run; only the last is imported).

A binary sa file cannot be built from a fixture (sadc writes it, a record a second):
``--sa FILE`` measures one captured with ``benchmarks/make_sa_file.py`` (sadc with 1,000
loop disks, some 20 minutes for 100 MB), read by the native reader (``--format sa``) and,
alternating with it as the same-run baseline, by this machine's sadf (``--format sa-sadf``).

Each import runs in its own process, measured with ``os.wait4`` (wall clock, ``ru_maxrss``);
the figure is peak RSS / input bytes, the baseline the input itself (1x), in the same run.
The peak includes the interpreter and its libraries (~0.1 GB: Python, polars, numpy). The
inputs are built in a process of their own: a child's ``ru_maxrss`` starts from its parent's
high-water mark (Linux carries it over at ``exec``), so a parent that had built a 100 MB
input in memory added 0.07 GB to the peak of every import it ran.

Usage::

    .venv/bin/python benchmarks/import_memory.py             # 100 MB each, ~2.5 min
    .venv/bin/python benchmarks/import_memory.py --size-mb 50 --check
    .venv/bin/python benchmarks/import_memory.py --sa /var/tmp/sa100 --only-sa
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
TARGET_RATIO = 3.0


def _repeat(body: bytes, size: int, head: bytes = b"") -> bytes:
    return head + body * max(1, -(-(size - len(head)) // len(body)))


def _solaris(size: int) -> bytes:
    return _repeat((FIX / "solaris-iostat" / "seed001-iostat-x5-cp-maxcontig6.txt")
                   .read_bytes(), size)


def _aix(name: str) -> Callable[[int], bytes]:
    def build(size: int) -> bytes:
        text = (FIX / "aix-iostat" / name).read_bytes()
        at = text.index(b"Disks:") if b"Disks:" in text else text.index(b"hdisk")
        return _repeat(text[at:], size, text[:at])
    return build


def _sar_a(size: int) -> bytes:
    return _repeat((FIX / "sar" / "ksar-rhel7-sysstat10.1.5-sar-A.txt").read_bytes(), size)


def _sar_one_report(size: int) -> bytes:
    """``sar -u -d -p -f`` of one daily file sampled every second (one report: its CPU
    section, then its device section), 12 disks, values of the 12.6.1 capture's first row."""
    head = "Linux 6.18.44-fc-v445 (vm) \t11/22/2026 \t_x86_64_\t(2 CPU)\n\n"
    disks = [f"sd{chr(97 + i)}" for i in range(12)]
    per_s = 75 + 100 * len(disks)
    n = min(86_399, max(2, (size - len(head)) // per_s))
    t0 = datetime(2026, 11, 22)
    tod = [(t0 + timedelta(seconds=k)).strftime("%H:%M:%S") for k in range(n + 1)]
    cpu_head = (f"{tod[0]}        CPU     %user     %nice   %system   %iowait    %steal"
                "     %idle\n")
    out = [head, cpu_head]
    out += [f"{t}        all     71.00      0.00     29.00      0.00      0.00      0.00\n"
            for t in tod[1:]]
    out.append(f"\n{tod[0]}          DEV       tps     rkB/s     wkB/s     dkB/s   areq-sz"
               "    aqu-sz     await     %util\n")
    out += [f"{t}  {d:>11}    579.00   1124.00   1192.00      0.00      4.00      9.37"
            "     16.18     61.20\n" for t in tod[1:] for d in disks]
    return "".join(out).encode()


def _unix_sar_days(size: int) -> bytes:
    text = (FIX / "unix-sar" / "ksar-aix7.2-sar.txt").read_text()
    if not text.endswith("\n"):
        text += "\n"
    head = re.compile(r"^(\s*AIX\s+\S+\s.*?)(\d{2})/(\d{2})/(\d{2})(\s*)$", re.MULTILINE)
    m = head.search(text)
    if m is None:
        raise SystemExit("ksar-aix7.2-sar.txt: no AIX header line")
    day0 = datetime(2000 + int(m.group(4)), int(m.group(2)), int(m.group(3)))
    out: list[str] = []
    total = 0
    k = 0
    while total < size:
        stamp = (day0 + timedelta(days=k)).strftime("%m/%d/%y")
        day = head.sub(lambda g, s=stamp: f"{g.group(1)}{s}{g.group(5)}", text)
        out.append(day)
        total += len(day)
        k += 1
    return "".join(out).encode()


def _entries_over_and_over(text: str, end: int, size: int,
                           restamp: Callable[[str, int], str]) -> bytes:
    """A sysstat JSON document in its writer's layout (a tab per level, a statistics
    entry's brackets at four tabs), its statistics entries (from ``"statistics": [`` to
    ``end``) repeated until about ``size`` bytes; ``restamp(entry, k)`` stamps copy ``k``."""
    at = text.index('"statistics": [\n') + len('"statistics": [\n')
    entries = [e.removesuffix(",\n").removesuffix("\n").removesuffix("\t\t\t\t}")
               for e in re.split(r"(?<=\n)(?=\t{4}\{\n)", text[at:end]) if e.strip()]
    out: list[str] = [text[:at]]
    total = at
    k = 0
    while total < size:
        entry = restamp(entries[k % len(entries)], k)
        out.append(("\t\t\t\t},\n" if k else "") + entry)
        total += len(entry) + 7
        k += 1
    out.append("\t\t\t\t}\n" + text[end:])
    return "".join(out).encode()


def _iostat_json(size: int) -> bytes:
    """The live ``iostat -o JSON -x -t`` capture's three reports over and over, one second
    apart, in iostat's own layout (tabs, one disk object a line)."""
    text = (FIX / "iostat-json" / "live-sysstat12.6-x-t.json").read_text()
    stamp = re.compile(r'"timestamp": "[^"]*"')
    t0 = datetime(2026, 11, 22, 11, 14, 35)
    return _entries_over_and_over(
        text, text.rindex("\t\t\t]\n"), size,
        lambda e, k: stamp.sub((t0 + timedelta(seconds=k)).strftime(
            '"timestamp": "%m/%d/%y %H:%M:%S"'), e))


def _diskstats(size: int) -> bytes:
    """``TS <epoch>`` then ``/proc/diskstats`` a second apart (pt-diskstats --save-samples):
    the pt capture's first snapshot, each device's counters growing by its first interval's
    increments (the in-flight gauge kept), so every interval is derived (no resets)."""
    text = (FIX / "diskstats-snapshots" / "pt-diskstats-ts-before-kernel5.txt").read_text()
    snaps = [b.split("\n", 1)[1] for b in text.split("TS ") if b.strip()]
    first = {ln.split()[2]: ln.split() for ln in snaps[0].splitlines() if ln.strip()}
    second = {ln.split()[2]: ln.split() for ln in snaps[1].splitlines() if ln.strip()}
    devices = []
    for name, f in first.items():
        s = second.get(name, f)
        inc = [0 if j == 8 or len(s) != len(f) else max(0, int(s[3 + j]) - int(f[3 + j]))
               for j in range(len(f) - 3)]
        devices.append((f"{int(f[0]):4d} {int(f[1]):7d} {name}", [int(x) for x in f[3:]], inc))
    out: list[str] = []
    total = 0
    k = 0
    while total < size:
        block = [f"TS {1700000000 + k}.000000 snapshot {k}"]
        for head, base, inc in devices:
            block.append(head + " " + " ".join(str(b + k * i) for b, i in zip(base, inc,
                                                                             strict=True)))
        chunk = "\n".join(block) + "\n"
        out.append(chunk)
        total += len(chunk)
        k += 1
    return "".join(out).encode()


def _sadf_d(size: int) -> bytes:
    """``sadf -d -- -d -u`` of one long stretch, as sadf prints it: the CPU section, then the
    DEV section (the 12.6.1 export's first interval of each device, one second apart)."""
    text = (FIX / "sadf" / "sysstat12.6.1-sadf-d-u.csv").read_text()
    lines = text.splitlines()
    cpu_head = next(ln for ln in lines if ";CPU;" in ln and ln.startswith("#"))
    dev_head = next(ln for ln in lines if ";DEV;" in ln and ln.startswith("#"))
    cpu = next(ln for ln in lines if not ln.startswith("#") and ";-1;" in ln)
    t0 = cpu.split(";")[2]
    devs = [ln for ln in lines if not ln.startswith("#") and ln.split(";")[2] == t0
            and ";-1;" not in ln and ln.split(";")[1] != "-1"]
    per = len(cpu) + 1 + sum(len(d) + 1 for d in devs)
    n = max(1, size // per)
    start = datetime.strptime(t0.removesuffix(" UTC"), "%Y-%m-%d %H:%M:%S")
    stamps = [(start + timedelta(seconds=k)).strftime("%Y-%m-%d %H:%M:%S UTC")
              for k in range(n)]
    out = [cpu_head, *(cpu.replace(t0, s) for s in stamps), dev_head]
    out += [d.replace(t0, s) for s in stamps for d in devs]
    return ("\n".join(out) + "\n").encode()


def _sadf_j(size: int) -> bytes:
    """``sadf -j -- -d -u ALL`` of one long stretch, in sadf's own layout: the 12.6.1
    export's statistics entries over and over, one second apart (its restarts list kept at
    the end)."""
    text = (FIX / "sadf" / "sysstat12.6.1-sadf-j-uALL.json").read_text()
    stamp = re.compile(r'"date": "[^"]*", "time": "[^"]*"')
    t0 = datetime(2026, 11, 22, 11, 3, 31)
    return _entries_over_and_over(
        text, text.index("\n\t\t\t],\n") + 1, size,  # (the statistics list's end)
        lambda e, k: stamp.sub((t0 + timedelta(seconds=k)).strftime(
            '"date": "%Y-%m-%d", "time": "%H:%M:%S"'), e, count=1))


def _relaid(name: str, indent: int | None, restamp: Callable[[dict[str, Any], int], None]
            ) -> Callable[[int], bytes]:
    """A builder of a sysstat JSON fixture's statistics entries over and over in the layout
    of a JSON tool: ``indent`` spaces a level (``jq .``), or one line when None
    (``jq -c``); ``restamp(entry, k)`` stamps copy ``k``."""

    def build(size: int) -> bytes:
        doc = json.loads((FIX / name).read_text())
        host = doc["sysstat"]["hosts"][0]
        entries = host["statistics"]
        host["statistics"] = ["@entries@"]
        seps = (",", ":") if indent is None else (",", ": ")
        outer = json.dumps(doc, indent=indent, separators=seps)
        before, after = outer.split('"@entries@"')
        pad = "\n" + before[before.rindex("\n") + 1:] if indent is not None else ""
        out = [before]
        total = len(before)
        k = 0
        while total < size:
            entry = copy.deepcopy(entries[k % len(entries)])
            restamp(entry, k)
            text = ("," + pad if k else "") + json.dumps(entry, indent=indent,
                                                         separators=seps).replace("\n", pad)
            out.append(text)
            total += len(text)
            k += 1
        out.append(after)
        return "".join(out).encode()

    return build


def _iostat_stamp(entry: dict[str, Any], k: int) -> None:
    entry["timestamp"] = (datetime(2026, 11, 22, 11, 14, 35) + timedelta(seconds=k)).strftime(
        "%m/%d/%y %H:%M:%S")


def _sadf_stamp(entry: dict[str, Any], k: int) -> None:
    t = datetime(2026, 11, 22, 11, 3, 31) + timedelta(seconds=k)
    entry["timestamp"].update(date=t.strftime("%Y-%m-%d"), time=t.strftime("%H:%M:%S"))


def _shift_dates(text: str, pattern: str, fmt: str, days: int) -> str:
    """``text`` with every date ``pattern`` matches (group 1, in ``fmt``) ``days`` later."""
    def later(m: re.Match[str]) -> str:
        when = datetime.strptime(m.group(1), fmt) + timedelta(days=days)
        return m.group(0).replace(m.group(1), when.strftime(fmt))
    return re.sub(pattern, later, text)


def _copies_a_day_apart(name: str, pattern: str, fmt: str) -> Callable[[int], bytes]:
    """A builder of a report fixture over and over, each copy's dates a day after the last
    copy's (so that no interval repeats)."""

    def build(size: int) -> bytes:
        text = (FIX / name).read_text()
        out: list[str] = []
        total = 0
        k = 0
        while total < size:
            out.append(_shift_dates(text, pattern, fmt, k))
            total += len(out[-1])
            k += 1
        return "".join(out).encode()

    return build


def _fio_status(size: int) -> bytes:
    """``fio --status-interval 1 --output-format=json``: fio 3.1's report of the QD1 run over
    and over, one second apart (each a cumulative report; the last is the one imported)."""
    doc = json.loads((FIX / "fio" / "fio-plot-HPDL380G8-H420i-Crucial-MX200_randread-1-1.json")
                     .read_text())
    out: list[str] = []
    total = 0
    k = 0
    while total < size:
        doc["timestamp"] = doc["timestamp"] + 1
        doc["timestamp_ms"] = doc["timestamp_ms"] + 1000
        out.append(json.dumps(doc, indent=2) + "\n")
        total += len(out[-1])
        k += 1
    return "".join(out).encode()


#: format label -> (builder, extra import options)
INPUTS: dict[str, tuple[Callable[[int], bytes], list[str]]] = {
    "solaris-iostat -x": (_solaris, ["--start", "2008-02-21T10:00", "--interval", "5"]),
    "aix-iostat -DT": (_aix("doc-aix-iostat-DT.txt"), ["--start", "2024-03-04T09:00"]),
    "aix-iostat -DlT": (_aix("doc-aix-iostat-DlT.txt"), ["--start", "2024-03-04T23:00"]),
    "sar -A (Linux)": (_sar_a, []),
    "sar -udp, one report": (_sar_one_report, []),
    "unix-sar (AIX days)": (_unix_sar_days, []),
    "iostat -o JSON": (_iostat_json, []),
    "diskstats snapshots": (_diskstats, []),
    "sadf -d": (_sadf_d, []),
    "sadf -j": (_sadf_j, []),
    "iostat -o JSON, re-indented": (_relaid("iostat-json/live-sysstat12.6-x-t.json", 2,
                                            _iostat_stamp), []),
    "sadf -j, one line": (_relaid("sadf/sysstat12.6.1-sadf-j-uALL.json", None,
                                  _sadf_stamp), []),
    "rmf (DASD, cache, ESS)": (_copies_a_day_apart(
        "rmf/seed000_before_1rank.txt", r"\bC?DATE\s+(\d\d/\d\d/\d{4})", "%m/%d/%Y"), []),
    "awr (19c text reports)": (_copies_a_day_apart(
        "awr/awr_19c_config5-2-1_ssd_cache1024m.txt", r"(\d\d-[A-Z][a-z]{2}-\d\d) \d",
        "%d-%b-%y"), []),
    "fio --status-interval": (_fio_status, []),
}


def measure(cmd: list[str]) -> tuple[float, int]:
    """Run ``cmd``; its wall time (s) and peak RSS (bytes)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {err.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_maxrss * 1024


def _measure_sa(cli: Path, sa: Path, tmp: Path, runs: int) -> bool:
    """The native reader (format sa) and the sadf path (sa-sadf: sadf -j read from its
    pipe) on one sa file, alternating, ``runs`` times each; prints every run and the
    speed-up of the best runs. True when the native reader's peak is under the target."""
    n = sa.stat().st_size
    best: dict[str, tuple[float, int]] = {}
    for _ in range(runs):
        for fmt in ("sa", "sa-sadf"):
            out = tmp / f"{fmt}.parquet"
            wall, peak = measure([str(cli), "import", str(sa), "--format", fmt,
                                  "--parquet", str(out)])
            best[fmt] = min(best.get(fmt, (wall, peak)), (wall, peak))
            label = f"{fmt} (binary, {sa.name})"
            print(f"{label:28s} {n / 1e6:9.1f} {wall:7.2f} {n / 1e6 / wall:6.1f} "
                  f"{peak / 1e6:8.1f} {peak / n:9.2f}x")
    import polars as pl

    rows = {fmt: pl.scan_parquet(tmp / f"{fmt}.parquet").select(pl.len()).collect().item()
            for fmt in best}
    print(f"rows: native {rows['sa']:,}, sadf path {rows['sa-sadf']:,}; native "
          f"{best['sa-sadf'][0] / best['sa'][0]:.1f}x faster (best runs)")
    return best["sa"][1] / n < TARGET_RATIO


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=100.0, help="input size per format")
    ap.add_argument("--check", action="store_true", help="exit 1 if a format misses 3x")
    ap.add_argument("--sa", type=Path, action="append", default=[], metavar="FILE",
                    help="also measure this binary sa file (benchmarks/make_sa_file.py "
                    "captures one); may be repeated")
    ap.add_argument("--only-sa", action="store_true", help="measure only the --sa files")
    ap.add_argument("--sa-runs", type=int, default=2, help="alternating runs of the native "
                    "reader and of the sadf path per --sa file")
    ap.add_argument("--build", nargs=2, metavar=("FORMAT", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    size = int(args.size_mb * 1e6)
    if args.build:  # (in a process of its own: see the module docstring)
        Path(args.build[1]).write_bytes(INPUTS[args.build[0]][0](size))
        return 0
    cli = Path(sys.executable).parent / "iogauge"
    if not cli.exists():
        raise SystemExit(f"{cli} not found: run `make install` first")
    print(f"{'format':28s} {'input MB':>9s} {'wall s':>7s} {'MB/s':>6s} {'peak MB':>8s} "
          f"{'peak/input':>10s}")
    ok = True
    base = "/var/tmp" if Path("/var/tmp").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="iogauge-import-memory-", dir=base) as tmp:
        for sa in args.sa:
            ok = _measure_sa(cli, sa, Path(tmp), args.sa_runs) and ok
        for label, (_build, opts) in ({} if args.only_sa else INPUTS).items():
            path = Path(tmp) / "input.txt"
            subprocess.run([sys.executable, __file__, "--size-mb", str(args.size_mb),
                            "--build", label, str(path)], check=True)
            n = path.stat().st_size
            wall, peak = measure([str(cli), "import", str(path), "--parquet",
                                  str(Path(tmp) / "out.parquet"), *opts])
            ratio = peak / n
            ok = ok and ratio < TARGET_RATIO
            print(f"{label:28s} {n / 1e6:9.1f} {wall:7.2f} {n / 1e6 / wall:6.1f} "
                  f"{peak / 1e6:8.1f} {ratio:9.2f}x")
            path.unlink()
    print(f"target: peak below {TARGET_RATIO:g}x the input; "
          + ("met by every format" if ok else "MISSED by some format"))
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
