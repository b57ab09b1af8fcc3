"""Import speed and memory: iogauge against ``jc --iostat``, and the perfmon importer.

iostat part (targets from the issue): a >= 100 MB ``iostat -x -t`` log imports to Parquet at
least 20x faster than ``jc --iostat`` converts it to JSON, with peak memory below 3x the
input size.

The log is built from a real capture, ``tests/fixtures/iostat/iostat-tool-rhel6-iostat-x-t-
mb.txt`` (sysstat 9 on RHEL 6, 11 disks, ``-x -t -m``, 12-hour time stamps): its 318 reports
are repeated with time stamps advancing one second per report (days roll over), under one
banner, until the file reaches ``--size-mb``. Every line is as sysstat printed it.

Each tool runs in its own process, measured with ``os.wait4`` (wall clock from fork to exit,
CPU time, and ``ru_maxrss``, the peak resident set):

* ``jc --iostat < log > out.json`` — jc 1.x, the line-by-line Python parser the target is
  set against (``pip install jc``; it is in the ``dev`` extras);
* ``iogauge stream`` — the importer's streaming path, as ``import --parquet`` runs it:
  :func:`iogauge.importers.iostat.iter_parse` reads the file piece by piece (4 MiB) in
  a thread of its own while polars ``sink_parquet`` writes the SampleFrames already parsed
  (:func:`iogauge.store.parquet.write_frames`, zstd), so memory is bounded by the pieces in
  flight, not the file;
* ``iogauge in-memory`` — ``registry.import_file`` then ``SampleFrame.to_parquet``: the file
  is read piece by piece into the parser as well, but every SampleFrame is kept and
  concatenated before the one write, so memory grows with the rows (the frame is larger than
  the text: 22 float columns per row); shown for comparison;
* ``iogauge import --parquet`` — the command itself (``.venv/bin/iogauge``), which streams
  like the first row (the first row is its code path without the CLI around it) but also
  starts the whole CLI (typer, rich, and the modules of every other command) and prints its
  summary: what a user sees.
* ``iogauge import --db`` — the command into a new DuckDB store (the default output):
  the same streamed SampleFrames go into the store batch by batch in one transaction, under
  the store's bulk memory limit (``iogauge.store.duckdb_store.BULK_SETTINGS``).

Ratios use the whole process wall time (interpreter start included for both sides: jc's
start-up is its own, iogauge's includes importing polars). The time inside the iogauge
process spent on parse + write (start-up excluded) is printed too.

Usage::

    .venv/bin/python benchmarks/import_speed.py                  # 100 MB, ~1 min (jc ~30 s)
    .venv/bin/python benchmarks/import_speed.py --size-mb 200 --check
    .venv/bin/python benchmarks/import_speed.py --skip-perfmon
    .venv/bin/python benchmarks/import_speed.py --skip-perfmon --pairs 5   # median of 5

``--check`` exits 1 when the streaming import misses either target (with ``--pairs`` above 1,
the median ratios of the streaming path and of the command must both reach 20x). The
perfmon part runs ``benchmarks/_perfmon_speed.py``'s ``run(work_dir)`` when that module is
present.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "fixtures" / "iostat" / "iostat-tool-rhel6-iostat-x-t-mb.txt"
TARGET_SPEEDUP = 20.0
TARGET_MEMORY_RATIO = 3.0
STAMP = re.compile(r"(?m)^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d [AP]M$")


def build_log(path: Path, size_mb: float, sample: Path = SAMPLE) -> int:
    """Write the benchmark log (see the module docstring); returns its size in bytes."""
    text = sample.read_text()
    first = STAMP.search(text)
    if first is None:
        raise SystemExit(f"{sample}: no -t time stamps found")
    banner = text[:first.start()]
    bodies = STAMP.split(text[first.start():])[1:]  # each report after its stamp line
    start = datetime.strptime(first.group(0), "%m/%d/%Y %I:%M:%S %p")
    target = int(size_mb * 1e6)
    written = 0
    k = 0
    with path.open("w", encoding="ascii") as out:
        out.write(banner)
        written += len(banner)
        while written < target:
            chunk = []
            for body in bodies:
                stamp = (start + timedelta(seconds=k)).strftime("%m/%d/%Y %I:%M:%S %p")
                chunk.append(stamp)
                chunk.append(body)
                k += 1
            block = "".join(chunk)
            out.write(block)
            written += len(block)
    return path.stat().st_size


@dataclass
class Run:
    """One measured process."""

    label: str
    cmd: list[str]
    wall_s: float = 0.0
    cpu_s: float = 0.0
    maxrss_bytes: int = 0
    inner_s: float | None = None
    rows: int | None = None
    native: bool | None = None  # the importer's C kernels were loaded (iogauge children)


def measure(run: Run, *, stdin: Path | None = None, stdout: Path | None = None) -> Run:
    """Run ``run.cmd`` to completion; fill wall/cpu/peak-RSS from os.wait4."""
    fin = stdin.open("rb") if stdin else subprocess.DEVNULL
    fout = stdout.open("wb") if stdout else subprocess.PIPE
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(run.cmd, stdin=fin, stdout=fout, stderr=subprocess.PIPE)
        out = proc.stdout.read() if proc.stdout else b""
        err = proc.stderr.read() if proc.stderr else b""
        _, status, usage = os.wait4(proc.pid, 0)
        run.wall_s = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if stdin:
            fin.close()  # type: ignore[union-attr]
        if stdout:
            fout.close()  # type: ignore[union-attr]
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(run.cmd)} failed ({proc.returncode}): "
                         f"{err.decode(errors='replace')[-2000:]}")
    run.cpu_s = usage.ru_utime + usage.ru_stime
    run.maxrss_bytes = usage.ru_maxrss * 1024
    if out.strip():
        info = json.loads(out.decode().strip().splitlines()[-1])
        run.inner_s = info.get("seconds")
        run.rows = info.get("rows")
        run.native = info.get("native")
    return run


# ---- the iogauge child processes ------------------------------------------------------------


def child(mode: str, log: str, out: str) -> None:
    """Run inside the measured process: import ``log`` to Parquet ``out``, print JSON."""
    import polars as pl

    from iogauge.importers import iostat, registry
    from iogauge.importers.base import Source
    from iogauge.importers.io import open_binary
    from iogauge.importers.iostat import native
    from iogauge.store.parquet import write_frames

    t0 = time.perf_counter()
    if mode == "stream":
        source = Source(path=log)
        stream, _ = open_binary(log)
        rows = write_frames(iostat.iter_parse(stream, source), out)
        stream.close()
    else:
        result = registry.import_file(log, fmt="iostat")
        result.frame.to_parquet(out)
        rows = len(result.frame)
    seconds = time.perf_counter() - t0
    check = pl.scan_parquet(out).select(pl.len()).collect().item()
    assert check == rows, (check, rows)
    print(json.dumps({"seconds": seconds, "rows": rows,
                      "native": native.kernels() is not None}))
    from iogauge.cli.shutdown import spare_final_collections

    spare_final_collections()  # as `iogauge import` does before the interpreter exits


# ---- main ----------------------------------------------------------------------------------


def _print_pair(k: int, stream: Run, command: Run | None, jc: Run) -> None:
    line = (f"pair {k}: jc {jc.wall_s:.2f} s; stream {stream.wall_s:.2f} s, "
            f"{jc.wall_s / stream.wall_s:.1f}x")
    if command:
        line += (f"; import --parquet {command.wall_s:.2f} s, "
                 f"{jc.wall_s / command.wall_s:.1f}x")
    print(line)


def _jc() -> str | None:
    local = Path(sys.executable).parent / "jc"
    return str(local) if local.exists() else shutil.which("jc")


def _interpreter(script: str) -> str:
    """The Python that runs ``script`` (its ``#!`` line) and that Python's version."""
    try:
        with Path(script).open("rb") as fh:
            first = fh.readline(4096).decode(errors="replace").strip()
    except OSError:
        return "?"
    if not first.startswith("#!"):
        return "?"
    python = first[2:].split()[0]
    try:
        probe = "import platform; print(platform.python_version())"
        version = subprocess.run([python, "-c", probe],
                                 capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return python
    return f"{python} (Python {version.strip()})"


def run_iostat(work: Path, size_mb: float, pairs: int = 1,
               jc: str | None = None) -> dict[str, Any]:
    log = work / "iostat-x-t.log"
    t0 = time.perf_counter()
    size = build_log(log, size_mb)
    print(f"log: {log} ({size / 1e6:.1f} MB, built in {time.perf_counter() - t0:.1f} s from "
          f"{SAMPLE.name})")
    me = [sys.executable, str(Path(__file__).resolve()), "--child"]
    runs = [
        measure(Run("iogauge stream", [*me, "stream", str(log), str(work / "stream.parquet")])),
        measure(Run("iogauge in-memory", [*me, "memory", str(log),
                                          str(work / "memory.parquet")])),
    ]
    cli = Path(sys.executable).parent / "iogauge"
    if cli.exists():
        runs.append(measure(Run("import --parquet", [str(cli), "import", str(log), "--parquet",
                                                     str(work / "cli.parquet")]),
                            stdout=work / "cli.out"))
        db = work / "cli.duckdb"
        for stale in (db, db.with_name(db.name + ".wal")):
            stale.unlink(missing_ok=True)  # a reused --work-dir: measure a new store
        runs.append(measure(Run("import --db", [str(cli), "import", str(log), "--db",
                                                str(db)]),
                            stdout=work / "cli-db.out"))
    jc = jc or _jc()
    jc_run = None
    if jc is None:
        print("jc is not installed: `.venv/bin/pip install jc` (in the dev extras) to compare")
    else:
        # jc is pure Python: its speed follows the interpreter's build (on one log, jc took
        # ~20 % less time under Debian's python3.11, libpython linked in, than under a pyenv
        # build with a shared libpython); say which ran each side
        print(f"iogauge runs on {sys.executable} (Python {platform.python_version()}); "
              f"jc: {jc} on {_interpreter(jc)}")
        jc_run = measure(Run("jc --iostat", [jc, "--iostat"]), stdin=log,
                         stdout=work / "jc.json")
        runs.append(jc_run)
    kernels = runs[0].native
    print("\nimporter byte kernels: " + ("C (iostat/kernels.c)" if kernels else
                                        "numpy (the C kernels are not built: make install)"))
    print(f"\n{'':18s} {'wall s':>8s} {'MB/s':>8s} {'cpu s':>8s} {'inner s':>8s} "
          f"{'peak RSS MB':>12s} {'RSS/input':>10s} {'rows':>10s}")
    for r in runs:
        inner = f"{r.inner_s:8.2f}" if r.inner_s is not None else f"{'':8s}"
        rows = f"{r.rows:10,d}" if r.rows is not None else ""
        print(f"{r.label:18s} {r.wall_s:8.2f} {size / 1e6 / r.wall_s:8.1f} {r.cpu_s:8.2f} "
              f"{inner} {r.maxrss_bytes / 1e6:12.1f} {r.maxrss_bytes / size:10.2f} {rows}")
    result: dict[str, Any] = {"input_bytes": size, "runs": {r.label: r.__dict__ for r in runs}}
    stream = runs[0]
    ok = stream.maxrss_bytes / size < TARGET_MEMORY_RATIO
    if jc_run is not None:
        speedup = jc_run.wall_s / stream.wall_s
        cpu_speedup = jc_run.cpu_s / stream.cpu_s
        inner = jc_run.wall_s / stream.inner_s if stream.inner_s else float("nan")
        ok = ok and speedup >= TARGET_SPEEDUP
        result.update(speedup=speedup, cpu_speedup=cpu_speedup)
        print(f"\nspeed-up of the streaming import over jc: {speedup:.1f}x wall "
              f"(target >= {TARGET_SPEEDUP:g}x), {cpu_speedup:.1f}x CPU time, {inner:.1f}x "
              "counting only iogauge's parse + write")
        for r in runs[1:-1]:
            print(f"{r.label}: {jc_run.wall_s / r.wall_s:.1f}x wall, "
                  f"{jc_run.cpu_s / r.cpu_s:.1f}x CPU time")
    print(f"peak memory of the streaming import: {stream.maxrss_bytes / size:.2f}x the input "
          f"(target < {TARGET_MEMORY_RATIO:g}x); "
          + "; ".join(f"{r.label}: {r.maxrss_bytes / size:.2f}x" for r in runs[1:]
                      if r is not jc_run))
    if jc_run is not None and pairs > 1:
        # The machine's speed drifts within minutes (jc's own time varied 15-28 s in one
        # afternoon): more (stream, command, jc) triples run back to back, and the median
        # ratios.
        command = next((r for r in runs if r.label == "import --parquet"), None)
        ratios = [jc_run.wall_s / stream.wall_s]
        cmd_ratios = [jc_run.wall_s / command.wall_s] if command else []
        _print_pair(1, stream, command, jc_run)
        for k in range(2, pairs + 1):
            s_run = measure(Run("iogauge stream", [*me, "stream", str(log),
                                                   str(work / "stream.parquet")]))
            c_run = (measure(Run("import --parquet", command.cmd), stdout=work / "cli.out")
                     if command else None)
            j_run = measure(Run("jc --iostat", [str(jc), "--iostat"]), stdin=log,
                            stdout=work / "jc.json")
            ratios.append(j_run.wall_s / s_run.wall_s)
            if c_run:
                cmd_ratios.append(j_run.wall_s / c_run.wall_s)
            _print_pair(k, s_run, c_run, j_run)
        median = statistics.median(ratios)
        print(f"median speed-up over {pairs} pairs: stream {median:.1f}x (range "
              f"{min(ratios):.1f}-{max(ratios):.1f}x)", end="")
        ok = stream.maxrss_bytes / size < TARGET_MEMORY_RATIO and median >= TARGET_SPEEDUP
        result.update(pair_speedups=ratios, median_speedup=median)
        if cmd_ratios:
            cmd_median = statistics.median(cmd_ratios)
            print(f", import --parquet {cmd_median:.1f}x (range {min(cmd_ratios):.1f}-"
                  f"{max(cmd_ratios):.1f}x)", end="")
            ok = ok and cmd_median >= TARGET_SPEEDUP
            result.update(command_pair_speedups=cmd_ratios, command_median_speedup=cmd_median)
        print(f"; target >= {TARGET_SPEEDUP:g}x")
    result["ok"] = ok
    return result


def run_perfmon(work: Path) -> dict[str, Any] | None:
    path = Path(__file__).resolve().parent / "_perfmon_speed.py"
    if not path.exists():
        print("\nperfmon part: not available yet (benchmarks/_perfmon_speed.py is missing)")
        return None
    spec = importlib.util.spec_from_file_location("_perfmon_speed", path)
    if spec is None or spec.loader is None:
        print("\nperfmon part: benchmarks/_perfmon_speed.py cannot be loaded")
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    print("\nperfmon part (benchmarks/_perfmon_speed.py):")
    figures: dict[str, Any] = module.run(work / "perfmon")
    print(module.report(figures))
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--size-mb", type=float, default=100.0, help="log size (default 100)")
    ap.add_argument("--work-dir", type=Path, default=None,
                    help="where to build the files (default: a temporary directory under "
                         "/var/tmp, deleted after)")
    ap.add_argument("--skip-perfmon", action="store_true", help="iostat part only")
    ap.add_argument("--pairs", type=int, default=1,
                    help="(stream, import --parquet, jc) triples to run back to back; the "
                         "median ratios are the figures (and what --check tests) when more "
                         "than one (default 1)")
    ap.add_argument("--jc", default=None, metavar="PATH",
                    help="the jc to compare with (default: the one beside this Python, else "
                         "the first on PATH); e.g. one installed for another interpreter")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "LOG", "OUT"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    base = "/var/tmp" if Path("/var/tmp").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="iogauge-import-speed-", dir=base) as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        result = run_iostat(work, args.size_mb, args.pairs, jc=args.jc)
        if not args.skip_perfmon:
            run_perfmon(work)
    if args.check and not result["ok"]:
        print("target missed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
