"""Speed and memory of the perfmon (PDH-CSV) importer against a bare ``polars.read_csv``.

Target (issue): a >= 200 MB perfmon CSV imports within 2x the time of a bare
``polars.read_csv`` of the same file, and the import's peak memory stays below 3x the input
size.

What is measured, each in a fresh Python process (so one run's memory cannot help another):

* ``import``: ``iogauge.importers.registry.import_file(path)`` -- sniffing, reading the file,
  decoding, the parse to a validated SampleFrame: everything ``iogauge import`` does before
  storing.
* ``read_csv``: ``polars.read_csv(path)`` -- polars' defaults, nothing else (for the UTF-16
  file: of the UTF-8 file with the same content, as polars reads UTF-8 only).

Times are the best of ``repeats`` runs (wall clock around the call only; interpreter start
and ``import polars`` excluded in both). Memory is the process's peak resident set
(``VmHWM``), reported whole and as the growth over the resident set just before the call
(the interpreter with polars and iogauge loaded); the ratio to the input size uses the
whole peak, the stricter of the two.

The file is generated (no public capture exists): PDH-CSV 4.0 as relog writes it -- every
cell quoted, CRLF, values printed with full double precision -- for ``hosts`` x
``instances`` (half LogicalDisk ``C:``.., half PhysicalDisk ``0 C:``..) x 15 disk counters,
one line per 15 s, values drawn around the [MS-Azure-JP] case (Premium SSD, ~5,000 IOPS of 4 KiB
at ~3.5 ms). A UTF-16 LE copy with relog's empty first sample is measured too.

Run alone::

    .venv/bin/python benchmarks/_perfmon_speed.py               # 200 MB, ~1-2 min
    .venv/bin/python benchmarks/_perfmon_speed.py --size-mb 400 --check

``benchmarks/import_speed.py`` imports this module and calls :func:`run`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

TARGET_TIME_RATIO = 2.0
TARGET_MEMORY_RATIO = 3.0
DEFAULT_SIZE_MB = 200

#: The 15 disk counters of every instance (PDH spelling).
COUNTERS: tuple[str, ...] = (
    "Avg. Disk sec/Read", "Avg. Disk sec/Write", "Avg. Disk sec/Transfer",
    "Disk Reads/sec", "Disk Writes/sec", "Disk Transfers/sec",
    "Disk Read Bytes/sec", "Disk Write Bytes/sec", "Disk Bytes/sec",
    "Avg. Disk Queue Length", "Current Disk Queue Length", "% Idle Time", "% Disk Time",
    "Avg. Disk Bytes/Read", "Split IO/Sec",
)


def _instances(n: int) -> list[tuple[str, str]]:
    """(object, instance) pairs: n/2 logical disks C:.. and n/2 physical disks 0 C:.."""
    half = max(n // 2, 1)
    letters = [chr(ord("C") + i) for i in range(half)]
    return ([("LogicalDisk", f"{x}:") for x in letters]
            + [("PhysicalDisk", f"{i} {x}:") for i, x in enumerate(letters)])


def generate(path: Path, size_mb: float, *, hosts: int = 2, instances: int = 20,
             seed: int = 2) -> dict[str, Any]:
    """Write a UTF-8 PDH-CSV file of at least ``size_mb`` MB; returns its shape."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    paths = [f"\\\\SQLPROD{h + 1:02d}\\{obj}({inst})\\{c}"
             for h in range(hosts) for obj, inst in _instances(instances) for c in COUNTERS]
    header = ",".join(f'"{c}"' for c in ["(PDH-CSV 4.0) (Pacific Standard Time)(480)",
                                         *paths]) + "\r\n"
    # One line is ~21 bytes per cell; write in blocks until the size is reached.
    bytes_per_row = 21 * (len(paths) + 1)
    rows_total = int(size_mb * 1e6 / bytes_per_row) + 1
    start = datetime(2024, 4, 15, 2, 0, 0, tzinfo=UTC)
    block = 2000
    written = 0
    with path.open("wb") as fh:
        fh.write(header.encode("ascii"))
        while written < rows_total or fh.tell() < size_mb * 1e6:
            n = block
            reads = rng.gamma(50.0, 100.0, size=(n, 1)) * rng.uniform(0.5, 1.5, (1, len(paths)))
            cols: dict[str, Any] = {}
            ts = [(start + timedelta(seconds=15 * (written + i))).strftime(
                "%m/%d/%Y %H:%M:%S.000") for i in range(n)]
            cols["t"] = ts
            for j, p in enumerate(paths):
                c = p.rsplit("\\", 1)[1]
                base = reads[:, j]
                if c.startswith("Avg. Disk sec"):
                    v = rng.gamma(4.0, 0.0035 / 4.0, n)  # ~3.5 ms, [MS-Azure-JP]
                elif c.endswith("Bytes/sec"):
                    v = base * 4096.0
                elif c.startswith(("% Idle", "% Disk")):
                    v = rng.uniform(0.0, 100.0, n)
                elif c.startswith(("Avg. Disk Queue", "Current")):
                    v = rng.gamma(2.0, 1.0, n)
                elif c.startswith("Avg. Disk Bytes"):
                    v = np.full(n, 4096.0) + rng.uniform(0, 1, n)
                else:
                    v = base
                cols[f"v{j}"] = v
            pl.DataFrame(cols).write_csv(fh, include_header=False, quote_style="always",
                                         line_terminator="\r\n")
            written += n
    return {"path": str(path), "bytes": path.stat().st_size, "rows": written,
            "columns": len(paths) + 1, "hosts": hosts, "instances": instances,
            "counters": len(COUNTERS)}


def utf16_copy(src: Path, dst: Path) -> dict[str, Any]:
    """relog's default: UTF-16 LE with BOM, and an empty first sample."""
    text = src.read_bytes().decode("ascii")
    head, _sep, rest = text.partition("\r\n")
    n_cells = head.count('","') + 1
    first_ts = rest[:rest.index('"', 1) + 1]
    blank = first_ts.replace("02:00:00", "01:59:45") + ',"' + '","'.join([" "] * (n_cells - 1))
    blank += '"\r\n'
    dst.write_bytes(b"\xff\xfe" + (head + "\r\n" + blank + rest).encode("utf-16-le"))
    return {"path": str(dst), "bytes": dst.stat().st_size}


# ---- measurement in a child process --------------------------------------------------------


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _child(mode: str, path: str) -> None:
    """Measure one call in this (fresh) process; print JSON on stdout."""
    import polars as pl

    from iogauge.importers.registry import import_file

    base_kb = _status_kb("VmRSS")
    t0 = time.perf_counter()
    if mode == "import":
        res = import_file(path)
        rows, fmt = len(res.frame), res.format
    else:
        df = pl.read_csv(path)
        rows, fmt = df.height, "polars.read_csv"
    seconds = time.perf_counter() - t0
    print(json.dumps({"mode": mode, "format": fmt, "rows": rows, "seconds": seconds,
                      "peak_rss": _status_kb("VmHWM") * 1024,
                      "baseline_rss": base_kb * 1024}))


def _run_child(mode: str, path: Path) -> dict[str, Any]:
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", mode,
                          str(path)], capture_output=True, text=True, check=False, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{mode} of {path} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _compare(path: Path, size: int, repeats: int, bare_path: Path | None = None
             ) -> dict[str, Any]:
    """Alternate import and read_csv runs (so a busy neighbour slows both alike); best of
    ``repeats`` each. ``bare_path``: the file polars reads (polars reads UTF-8 only, so a
    UTF-16 import is compared with polars reading the same content in UTF-8)."""
    runs: dict[str, list[dict[str, Any]]] = {"import": [], "read_csv": []}
    for _ in range(repeats):
        runs["import"].append(_run_child("import", path))
        runs["read_csv"].append(_run_child("read_csv", bare_path or path))
    imp = min(runs["import"], key=lambda r: r["seconds"])
    bare = min(runs["read_csv"], key=lambda r: r["seconds"])
    peak = max(r["peak_rss"] for r in runs["import"])
    base = min(r["baseline_rss"] for r in runs["import"])
    return {
        "file_bytes": size,
        "import_s": imp["seconds"], "read_csv_s": bare["seconds"],
        "time_ratio": imp["seconds"] / bare["seconds"],
        "import_rows": imp["rows"], "read_csv_rows": bare["rows"],
        "import_peak_rss": peak, "import_baseline_rss": base,
        "read_csv_peak_rss": max(r["peak_rss"] for r in runs["read_csv"]),
        "memory_ratio": peak / size,
        "memory_growth_ratio": (peak - base) / size,
        "import_all_s": [r["seconds"] for r in runs["import"]],
        "read_csv_all_s": [r["seconds"] for r in runs["read_csv"]],
    }


def run(work_dir: Path, *, size_mb: float = DEFAULT_SIZE_MB, repeats: int = 3,
        utf16: bool = True) -> dict[str, Any]:
    """Generate the files in ``work_dir``, measure, and return the figures.

    Keys: ``utf8`` and (if ``utf16``) ``utf16`` hold ``file_bytes``, ``import_s``,
    ``read_csv_s`` (for ``utf16``: polars reading the UTF-8 file of the same content),
    ``time_ratio``, ``memory_ratio`` (peak RSS / file size),
    ``memory_growth_ratio`` (peak RSS minus the pre-call RSS, / file size), row counts;
    ``shape`` describes the generated file; ``targets`` the limits; ``ok`` whether the
    UTF-8 file meets both targets.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    csv_path = work_dir / "perfmon-bench-utf8.csv"
    shape = generate(csv_path, size_mb)
    result: dict[str, Any] = {"shape": shape,
                              "targets": {"time_ratio": TARGET_TIME_RATIO,
                                          "memory_ratio": TARGET_MEMORY_RATIO}}
    result["utf8"] = _compare(csv_path, shape["bytes"], repeats)
    if utf16:
        u16 = work_dir / "perfmon-bench-utf16.csv"
        info = utf16_copy(csv_path, u16)
        result["utf16"] = _compare(u16, info["bytes"], repeats, bare_path=csv_path)
        u16.unlink()
    csv_path.unlink()
    r = result["utf8"]
    result["ok"] = (r["time_ratio"] <= TARGET_TIME_RATIO
                    and r["memory_ratio"] < TARGET_MEMORY_RATIO)
    return result


def report(result: dict[str, Any]) -> str:
    """Human-readable lines for ``result`` (also used by benchmarks/import_speed.py)."""
    s = result["shape"]
    lines = [(f"perfmon PDH-CSV: {s['rows']} lines x {s['columns']} columns ({s['hosts']} "
              f"hosts x {s['instances']} instances x {s['counters']} counters)")]
    for key in ("utf8", "utf16"):
        if key not in result:
            continue
        r = result[key]
        mb = r["file_bytes"] / 1e6
        lines.append(
            f"  {key:5} {mb:7.1f} MB: import {r['import_s']:.2f} s ({r['import_rows']} rows, "
            f"{mb / r['import_s']:.0f} MB/s) vs polars.read_csv {r['read_csv_s']:.2f} s -> "
            f"{r['time_ratio']:.2f}x (target <= {TARGET_TIME_RATIO:g}x); peak RSS "
            f"{r['import_peak_rss'] / 1e6:.0f} MB = {r['memory_ratio']:.2f}x input "
            f"(growth {r['memory_growth_ratio']:.2f}x; target < {TARGET_MEMORY_RATIO:g}x); "
            f"read_csv peak {r['read_csv_peak_rss'] / 1e6:.0f} MB")
    lines.append("  " + ("meets both targets" if result["ok"] else "TARGET MISSED"))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=DEFAULT_SIZE_MB)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-utf16", action="store_true")
    ap.add_argument("--work-dir", type=Path, default=None)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return 0
    with tempfile.TemporaryDirectory(prefix="iogauge-perfmon-bench-",
                                     dir=args.work_dir) as tmp:
        result = run(Path(tmp), size_mb=args.size_mb, repeats=args.repeats,
                     utf16=not args.no_utf16)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0 if result["ok"] or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
