"""fio results in JSON (``fio --output-format=json``), fio 2.x and 3.x.

A fio run is one measured interval: every job ran for its ``runtime`` and the document is
written when the run ends (fio stat.c ``__show_run_stats``: ``timestamp`` /
``timestamp_ms`` are taken when the report is printed). So every row has

* ``ts`` = the end of the run: ``timestamp_ms`` (fio >= 2.17), else ``timestamp``; fio 2.1
  prints neither: then ``--start`` + the run's duration, else the file's modification time
  (noted). Jobs of several groups (``stonewall``) ran one after another, but the JSON does
  not say when each group ended: all rows carry the run's end, noted.
* ``interval_s`` = the job's runtime: the longest of its read/write/trim ``runtime`` (ms).

Two kinds of rows:

**One row per job** (``device`` ``fio:<jobname>``, a clone number appended when several
entries share a name -- ``numjobs`` without ``group_reporting``; ``device_kind`` ``other``;
``parent`` the job's ``filename`` -- its kernel name when it is ``/dev/<name>`` and fio
reported that disk in ``disk_util`` -- so a job links to the disk it drove):

=====================  ==========================================================
column                 fio field (per direction: read -> r_, write -> w_, trim -> d_)
=====================  ==========================================================
r_iops                 ``iops`` (fio: total I/Os / runtime)
r_kBps                 ``bw_bytes`` / 1024 (fio 3), else ``bw`` (KiB/s)
r_await_ms             ``lat_ns.mean`` / 1e6 (fio 3), ``lat.mean`` / 1e3 (fio 2, us)
r_areq_kB              bytes / ``total_ios`` (fio 3 ``io_bytes`` is bytes; fio 2.x
                       ``io_bytes`` is KiB); null when fio 2.1 gives no ``total_ios``
r_lat_p50/p95/p99/     ``clat_ns.percentile`` / 1e6 (fio 3), ``clat.percentile`` / 1e3
  p999_ms              (fio 2); null when the direction did no I/O or the percentile
                       list (``percentile_list``) lacks it
iops, kBps             read + write + trim
await_ms               mean of the directions' ``lat`` weighted by ``total_ios``
=====================  ==========================================================

fio's HOWTO defines slat (submission), clat (completion: submission to completion) and
lat (total: from when fio created the I/O unit to completion, i.e. slat + clat). The
await columns take **lat**, the whole time the application waited, which is what iostat's
await approximates from the block layer; the percentile columns are fio's default
**clat** percentiles (the SampleFrame percentile columns are completion latencies).

**One row per ``disk_util`` entry** (``device`` the kernel name fio measured, ``device_kind``
from the name: ``md`` for an array with ``aggr_*`` member statistics). fio samples
``/sys/block/<dev>/stat`` while the jobs run (diskutil.c ``update_io_tick_disk``) and
prints counts since the first sample: ios, merges, ticks (ms), ``in_queue`` (ms), ``util``
(%, fio's io_ticks / elapsed, capped at 100), ``read_sectors``/``write_sectors`` in newer
fio. The elapsed time fio divides by is not printed, so ``interval_s`` of a disk row is the
run's duration: the sum over job groups of each group's longest runtime (groups run one
after another). Derived as sysstat does (r/s = ios / interval, r_await = ticks / ios or 0,
%rrqm = merges / (merges + ios), aqu-sz = in_queue / interval, kB = sectors / 2); ``util_pct``
is fio's own. md arrays do not account I/O time (fio prints zero ticks, in_queue and util
for them while their members are busy): their time-based columns are left null, noted.

Several documents in one file (``--status-interval``) are cumulative reports of the same
run: the last one (the final report) is imported and the interim ones are noted. The file
is read a piece at a time and each document decoded when it is whole, keeping only the
last, so a long run's status reports are not held in memory together: 100 MB of them
(``benchmarks/import_memory.py``) import at 0.12 GB peak in 1.7-2.5 s, where reading the
whole file took 0.62 GB in 2.8 s.
Text fio printed before the JSON (warnings, errors of other jobs) is skipped and noted.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from iogauge.collector.sysfs import kind_from_name
from iogauge.errors import InputFormatError
from iogauge.importers._lines import pieces
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.importers.json_stream import cut_short
from iogauge.model.sampleframe import TS_DTYPE, SampleFrame

NAME = "fio"
DESCRIPTION = "fio JSON results (--output-format=json; fio 2.x clat in us, 3.x clat_ns)"
EXPECTS = 'a JSON document with a "fio version" key and "jobs" (fio --output-format=json)'

#: (SampleFrame suffix, percentile) pairs taken from fio's percentile list.
_PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 50.0), ("p95", 95.0), ("p99", 99.0),
                                               ("p999", 99.9))
_DIRECTIONS: tuple[tuple[str, str], ...] = (("read", "r"), ("write", "w"), ("trim", "d"))
_AGGREGATE_CLIENT = "All clients"


def sniff(head: str) -> bool:
    """A JSON object (possibly after fio's warnings) with a ``"fio version"`` key."""
    brace = head.find("{")
    return brace >= 0 and '"fio version"' in head[brace:brace + 4096]


def sniff_bytes(head: bytes) -> bool:
    """:func:`sniff` of the decoded ``head``."""
    return sniff(decode(head))


# ---- reading the document(s) -----------------------------------------------------------

#: Bytes read per piece by :func:`iter_parse`.
CHUNK_BYTES = 4 << 20
_DOC_START = re.compile(r"^\{", re.MULTILINE)


@dataclass
class _Last:
    """The last fio report of the input, and what was met on the way.

    Attributes:
        doc: the last top-level JSON object.
        docs: how many top-level objects the input held.
        version_line: line of the last object's ``"fio version"`` key (None: absent).
        skipped_text: text outside the objects was met (fio's warnings).
    """

    doc: dict[str, Any] | None = None
    docs: int = 0
    version_line: int | None = None
    skipped_text: bool = False


def _last_document(stream: BinaryIO, source: Source, chunk_bytes: int) -> _Last:
    """The last top-level JSON object of ``stream``: with ``--status-interval`` fio prints a
    report every interval, each covering the run so far, so only the last is kept. The
    input is read a piece at a time; an object is decoded once it is whole (a piece that
    ends inside one is read on), so memory holds a piece and the object being read."""
    decoder = json.JSONDecoder()
    out = _Last()
    buf = ""
    first_line = 1  # line number of buf[0]
    for data, last in pieces(stream, chunk_bytes):
        buf += decode(data)
        del data
        pos = 0
        counted, line = 0, first_line  # line number at buf[counted] (counted on, not again)
        while True:
            m = _DOC_START.search(buf, pos)
            if m is None:
                out.skipped_text = out.skipped_text or bool(buf[pos:].strip())
                pos = len(buf)
                break
            out.skipped_text = out.skipped_text or bool(buf[pos:m.start()].strip())
            try:
                obj, end = decoder.raw_decode(buf, m.start())
            except json.JSONDecodeError as exc:
                if not last and cut_short(buf, exc):
                    pos = m.start()  # (the object goes on in the next piece)
                    break
                raise InputFormatError(source.path, first_line + exc.lineno - 1,
                                       f"not valid JSON: {exc.msg} (column {exc.colno})"
                                       ) from None
            if isinstance(obj, dict):
                out.doc, out.docs = obj, out.docs + 1
                at = buf.find('"fio version"', m.start(), end)
                if at >= 0:
                    line += buf.count("\n", counted, at)
                    counted = at
                out.version_line = None if at < 0 else line
            pos = end
        first_line = line + buf.count("\n", counted, pos)
        buf = buf[pos:]
    if out.skipped_text:
        source.note("fio: text outside the JSON document(s) was skipped (fio prints job "
                    "errors and warnings before its JSON)")
    if out.doc is None:
        raise InputFormatError(source.path, None, "no JSON object found")
    return out


# ---- per-job values ----------------------------------------------------------------------


def _num(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _lat_section(direction: dict[str, Any], name: str) -> tuple[dict[str, Any] | None, float]:
    """(``name``_ns or ``name`` section, divisor to milliseconds: a division by 10**6 is
    exact to the last bit where a multiplication by 1e-6 is not)."""
    ns = direction.get(f"{name}_ns")
    if isinstance(ns, dict):
        return ns, 1e6
    us = direction.get(name)
    if isinstance(us, dict):
        return us, 1e3
    return None, 1.0


def _percentile(pcts: dict[str, Any], wanted: float) -> float | None:
    for key, value in pcts.items():
        try:
            at = float(key)
        except ValueError:
            continue
        if abs(at - wanted) < 1e-6 and isinstance(value, int | float):
            return float(value)
    return None


def _direction(direction: dict[str, Any], prefix: str, row: dict[str, Any]) -> \
        tuple[float | None, float | None]:
    """Fill the ``prefix`` columns of ``row``; returns (completed I/Os or None, lat ms)."""
    iops = _num(direction, "iops")
    row[f"{prefix}_iops"] = iops
    bw_bytes = _num(direction, "bw_bytes")
    row[f"{prefix}_kBps"] = bw_bytes / 1024.0 if bw_bytes is not None else \
        _num(direction, "bw")
    lat, per_ms = _lat_section(direction, "lat")
    lat_ms = None
    if lat is not None and _num(lat, "mean") is not None:
        lat_ms = float(lat["mean"]) / per_ms
    row[f"{prefix}_await_ms"] = lat_ms
    total = _num(direction, "total_ios")
    io_bytes = _num(direction, "io_bytes")
    if total is not None and io_bytes is not None:
        # fio 3 prints io_bytes in bytes next to io_kbytes; fio 2.x printed KiB.
        kib = io_bytes / 1024.0 if "io_kbytes" in direction else io_bytes
        row[f"{prefix}_areq_kB"] = kib / total if total > 0 else 0.0
    did_io = (total is not None and total > 0) or (total is None and bool(iops))
    if prefix in ("r", "w"):
        clat, clat_per_ms = _lat_section(direction, "clat")
        pcts = clat.get("percentile") if clat is not None else None
        for suffix, at in _PERCENTILES:
            value = _percentile(pcts, at) if did_io and isinstance(pcts, dict) else None
            row[f"{prefix}_lat_{suffix}_ms"] = None if value is None else value / clat_per_ms
    return total, lat_ms


def _job_row(job: dict[str, Any], device: str, parent: str | None, host: str,
             ts: datetime) -> dict[str, Any] | None:
    runtimes = [_num(job.get(d, {}), "runtime") or 0.0 for d, _p in _DIRECTIONS
                if isinstance(job.get(d), dict)]
    runtime_ms = max(runtimes, default=0.0)
    if runtime_ms <= 0:
        return None
    row: dict[str, Any] = {"source": NAME, "host": host, "device": device,
                           "device_kind": "other", "parent": parent, "ts": ts,
                           "interval_s": runtime_ms / 1000.0}
    weights: list[tuple[float | None, float | None, float]] = []
    for key, prefix in _DIRECTIONS:
        direction = job.get(key)
        if not isinstance(direction, dict):
            continue
        total, lat_ms = _direction(direction, prefix, row)
        weights.append((total, lat_ms, row.get(f"{prefix}_iops") or 0.0))
    present = [row.get(f"{p}_iops") for _k, p in _DIRECTIONS if row.get(f"{p}_iops") is not None]
    row["iops"] = sum(x for x in present if x is not None) if present else None
    kbs = [row.get(f"{p}_kBps") for _k, p in _DIRECTIONS if row.get(f"{p}_kBps") is not None]
    row["kBps"] = sum(x for x in kbs if x is not None) if kbs else None
    row["await_ms"] = _weighted_await(weights)
    return row


def _weighted_await(weights: list[tuple[float | None, float | None, float]]) -> float | None:
    """Mean latency over directions weighted by completed I/Os (sysstat's await: total time
    / total I/Os); 0.0 when nothing completed, as sysstat prints."""
    if all(t is not None for t, _l, _i in weights):
        n = sum(t for t, _l, _i in weights if t is not None)
        if n == 0:
            return 0.0
        if any(lat is None for t, lat, _i in weights if t):
            return None
        return sum(t * lat for t, lat, _i in weights if t and lat is not None) / n
    # fio 2.1 has no total_ios: exact only when a single direction did I/O.
    active = [lat for _t, lat, iops in weights if iops > 0]
    if not active:
        return 0.0
    return active[0] if len(active) == 1 else None


# ---- disk_util ---------------------------------------------------------------------------


def _disk_row(disk: dict[str, Any], host: str, ts: datetime, interval_s: float,
              source: Source) -> dict[str, Any] | None:
    name = disk.get("name")
    if not isinstance(name, str) or not name:
        return None

    def get(key: str) -> float:
        return _num(disk, key) or 0.0

    rd, wr = get("read_ios"), get("write_ios")
    rm, wm = get("read_merges"), get("write_merges")
    rt, wt = get("read_ticks"), get("write_ticks")
    in_queue = get("in_queue")
    is_md = any(k.startswith("aggr_") for k in disk) or bool(re.fullmatch(r"md\d+", name))
    kind = "md" if is_md else kind_from_name(name)

    def ratio(num: float, den: float, scale: float = 1.0) -> float:
        return num / den * scale if den > 0 else 0.0

    row: dict[str, Any] = {
        "source": NAME, "host": host, "device": name, "device_kind": kind, "ts": ts,
        "interval_s": interval_s,
        "r_iops": rd / interval_s, "w_iops": wr / interval_s, "iops": (rd + wr) / interval_s,
        "r_merged_ps": rm / interval_s, "w_merged_ps": wm / interval_s,
        "r_rqm_pct": ratio(rm, rm + rd, 100.0), "w_rqm_pct": ratio(wm, wm + wr, 100.0),
        "r_await_ms": ratio(rt, rd), "w_await_ms": ratio(wt, wr),
        "await_ms": ratio(rt + wt, rd + wr),
        "aqu_sz": in_queue / (interval_s * 1000.0),
        "util_pct": _num(disk, "util"),
    }
    rs, ws = _num(disk, "read_sectors"), _num(disk, "write_sectors")
    if rs is not None and ws is not None:
        row.update(r_kBps=rs / 2.0 / interval_s, w_kBps=ws / 2.0 / interval_s,
                   kBps=(rs + ws) / 2.0 / interval_s, r_areq_kB=ratio(rs, rd, 0.5),
                   w_areq_kB=ratio(ws, wr, 0.5), areq_kB=ratio(rs + ws, rd + wr, 0.5))
    if is_md and rd + wr > 0 and rt == 0 and wt == 0 and in_queue == 0:
        for col in ("r_await_ms", "w_await_ms", "await_ms", "aqu_sz", "util_pct"):
            row[col] = None
        source.note(f"fio: {name} is an md array, which does not account I/O time (zero "
                    "ticks, in_queue and util while it did I/O): its latency, queue and "
                    "utilisation are left null; see its member disks")
    return row


# ---- the run -----------------------------------------------------------------------------


def _run_seconds(jobs: list[dict[str, Any]]) -> float:
    """The run's duration: groups run one after another; a group lasts as long as its
    longest job."""
    per_group: dict[Any, float] = {}
    for job in jobs:
        runtime = max((_num(job.get(d, {}), "runtime") or 0.0 for d, _p in _DIRECTIONS
                       if isinstance(job.get(d), dict)), default=0.0)
        gid = job.get("groupid", 0)
        per_group[gid] = max(per_group.get(gid, 0.0), runtime)
    return sum(per_group.values()) / 1000.0


def _end_time(doc: dict[str, Any], run_s: float, source: Source) -> datetime:
    ms = _num(doc, "timestamp_ms")
    if ms is not None and ms > 0:
        return datetime.fromtimestamp(ms / 1000.0, tz=UTC)
    sec = _num(doc, "timestamp")
    if sec is not None and sec > 0:
        return datetime.fromtimestamp(sec, tz=UTC)
    start: datetime | None = getattr(source, "start", None)
    if start is not None:
        if start.tzinfo is None:
            start = start.replace(tzinfo=source.tz or UTC)
        source.note("fio: the JSON has no timestamp (fio < 2.17); the run's end is taken as "
                    "--start + its duration")
        return (start + timedelta(seconds=run_s)).astimezone(UTC)
    try:
        mtime = Path(source.path).stat().st_mtime
    except OSError:
        raise InputFormatError(source.path, None, "the JSON has no timestamp (fio < 2.17) "
                               "and the file's time cannot be read; give --start") from None
    source.note("fio: the JSON has no timestamp (fio < 2.17); the run's end is taken as the "
                "file's modification time (give --start to set it)")
    return datetime.fromtimestamp(mtime, tz=UTC)


def _filename(job: dict[str, Any], global_opts: dict[str, Any]) -> str | None:
    opts = job.get("job options")
    for where in (opts if isinstance(opts, dict) else {}, global_opts):
        name = where.get("filename")
        if isinstance(name, str) and name:
            return name
    return None


def parse(data: bytes, source: Source) -> SampleFrame:
    """One row per job and one per ``disk_util`` device of the (final) fio report."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


def iter_parse(stream: BinaryIO, source: Source, *, chunk_bytes: int = CHUNK_BYTES
               ) -> Iterator[SampleFrame]:
    """The rows of :func:`parse`, the input read a piece at a time (one SampleFrame: the
    final report's)."""
    found = _last_document(stream, source, chunk_bytes)
    if found.docs > 1:
        source.note(f"fio: {found.docs} reports in the file (--status-interval); the last, "
                    "which covers the whole run, is imported")
    doc = found.doc or {}
    if "fio version" not in doc:
        raise InputFormatError(source.path, None, 'the JSON has no "fio version" key: not a '
                               "fio report")
    jobs = doc.get("jobs", doc.get("client_stats"))
    if not isinstance(jobs, list):
        raise InputFormatError(source.path, found.version_line,
                               'no "jobs" list in the fio report')
    jobs = [j for j in jobs if isinstance(j, dict) and j.get("jobname") != _AGGREGATE_CLIENT]
    default_host = source.host or Path(source.path).stem
    run_s = _run_seconds(jobs)
    ts = _end_time(doc, run_s, source)
    global_opts = doc.get("global options")
    if not isinstance(global_opts, dict):
        global_opts = {}
    disks = [d for d in doc.get("disk_util", []) if isinstance(d, dict)]
    disk_names = {d.get("name") for d in disks}

    names = Counter(str(j.get("jobname", "")) for j in jobs)
    seen: Counter[str] = Counter()
    rows: list[dict[str, Any]] = []
    groups = {j.get("groupid", 0) for j in jobs}
    for job in jobs:
        jobname = str(job.get("jobname", ""))
        clone = seen[jobname]
        seen[jobname] += 1
        device = f"fio:{jobname}" if names[jobname] == 1 else f"fio:{jobname}.{clone}"
        filename = _filename(job, global_opts)
        parent = filename
        if filename and filename.startswith("/dev/") and filename[5:] in disk_names:
            parent = filename[5:]
        host = str(job.get("hostname") or default_host)
        if job.get("error"):
            source.note(f"fio: job {jobname} ended with error {job.get('error')}; its "
                        "statistics cover what it did before")
        row = _job_row(job, device, parent, host, ts)
        if row is None:
            source.note(f"fio: job {jobname} has no runtime (it did no I/O); no row")
            continue
        rows.append(row)
    if len(groups) > 1:
        source.note(f"fio: {len(groups)} job groups ran one after another, but fio's JSON "
                    "gives only the run's end: every row is stamped with it")
    if disks:
        if run_s > 0:
            source.note(f"fio: disk_util rows cover the whole run; fio does not print the "
                        f"time it measured them over, so their interval is the jobs' run "
                        f"time ({run_s:g} s)")
            host = default_host if not jobs else str(jobs[0].get("hostname") or default_host)
            for disk in disks:
                drow = _disk_row(disk, host, ts, run_s, source)
                if drow is not None:
                    rows.append(drow)
        else:
            source.note("fio: disk_util present but no job ran: no disk rows")
    if not rows:
        raise InputFormatError(source.path, None, "the fio report has no job with a runtime")
    df = pl.DataFrame(rows, infer_schema_length=None)
    df = df.with_columns(pl.col("ts").cast(TS_DTYPE))
    yield SampleFrame(df)
