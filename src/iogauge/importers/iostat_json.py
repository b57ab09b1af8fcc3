"""sysstat ``iostat -o JSON`` -> SampleFrame (format id ``iostat-json``).

The document is ``{"sysstat": {"hosts": [{"nodename", "release", "date", "statistics": [
{"timestamp", "avg-cpu": {...}, "disk": [{"disk_device": ..., <column>: <value>, ...}]},
...]}]}}`` (iostat.c ``write_json_*``). The disk keys are the text report's column names
(``r/s``, ``rkB/s`` or ``rMB/s`` or ``rsec/s``, ``rareq-sz``, ``aqu-sz``, ``tps``,
``kB_read/s`` …), imported with the same mapping and unit conversions as the text importer
(:data:`iogauge.importers.iostat_text.COLUMNS`), with these JSON-only spellings:

* ``util`` is ``%util``; in 11.5+ ``rrqm``/``wrqm``/``drqm`` are ``%rrqm``/``%wrqm``/``%drqm``
  (the percentage of requests merged: the per-second counts are ``rrqm/s`` …);
* sysstat 11.0-11.4 wrote ``rrqm``, ``wrqm`` (merges per second), ``r``, ``w``, ``rkB``,
  ``wkB``, ``avgrq-sz`` (sectors), ``avgqu-sz``, ``await``, ``svctm``, ``util`` — recognised by
  the absence of ``r/s``; and ``kB_read_per_sec``/``kB_wrtn_per_sec`` in the basic report;
* ``timestamp`` is a *string* (``%x %X`` in the locale, or ISO 8601 with offset under
  ``S_TIME_FORMAT=ISO``) and is present only with ``-t``; ``sadf -j`` documents, whose
  timestamp is an object, belong to the ``sadf`` importer.

Times, intervals, the since-boot first report and files without ``-t`` follow the text
importer (see its module docstring): the first statistics entry of each host is iostat's
since-boot summary (``since_boot``), intervals come from successive stamps or
``--interval``, and without stamps reports are placed from ``--start`` (or midnight of the
host's ``date``) in steps of ``--interval``.

A document cut off mid-run (iostat still writing, or killed) is not an error: every complete
statistics entry is kept, the partial one dropped, and a note says where the cut was. A
malformed entry in the middle of the document is an error naming its line (``--lenient``:
the entries after it are skipped and counted).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from iogauge.collector.sysfs import guess_parent, kind_from_name
from iogauge.errors import InputFormatError
from iogauge.importers import timestamps as tsx
from iogauge.importers.base import Source
from iogauge.importers.io import decode
from iogauge.importers.iostat_text import COLUMNS, UNKNOWN_INTERVAL_S, ColumnSpec
from iogauge.model.sampleframe import SampleFrame

NAME = "iostat-json"
DESCRIPTION = ("sysstat iostat -o JSON (any version; a file cut off mid-run keeps its complete "
               "reports)")
EXPECTS = ('a JSON document {"sysstat": {"hosts": [{"statistics": [...]}]}} whose statistics '
           'hold "disk" lists of {"disk_device": …} objects (or "avg-cpu"), with a string '
           '"timestamp" or none (sadf -j, with an object timestamp, is format sadf)')

#: JSON-only disk keys (sysstat 12.x and 11.5+): key -> mapping.
_JSON_KEYS: dict[str, ColumnSpec] = {
    "util": ColumnSpec("util_pct"),
    "rrqm": ColumnSpec("r_rqm_pct"), "wrqm": ColumnSpec("w_rqm_pct"),
    "drqm": ColumnSpec("d_rqm_pct"),
    "kB_read_per_sec": ColumnSpec("r_kBps", 1.0, True),
    "kB_wrtn_per_sec": ColumnSpec("w_kBps", 1.0, True),
}
#: sysstat 11.0-11.4 extended JSON (no "r/s" key): key -> mapping.
_OLD_KEYS: dict[str, ColumnSpec] = {
    "rrqm": ColumnSpec("r_merged_ps"), "wrqm": ColumnSpec("w_merged_ps"), "r": ColumnSpec("r_iops"),
    "w": ColumnSpec("w_iops"), "rkB": ColumnSpec("r_kBps"), "wkB": ColumnSpec("w_kBps"),
    "util": ColumnSpec("util_pct"),
}
#: avg-cpu key -> SampleFrame column.
_CPU_KEYS: dict[str, str] = {
    "user": "cpu_user_pct", "nice": "cpu_nice_pct", "system": "cpu_system_pct",
    "iowait": "cpu_iowait_pct", "steal": "cpu_steal_pct", "idle": "cpu_idle_pct",
}

_SNIFF_SYSSTAT = re.compile(r'\{\s*"sysstat"\s*:\s*\{\s*"hosts"\s*:\s*\[')
_SNIFF_DISK = re.compile(r'"disk_device"\s*:|"avg-cpu"\s*:')
_SNIFF_NOT = re.compile(r'"timestamp"\s*:\s*\{|"sysdata-version"|"file-date"|"disk-device"')


def sniff(head: str) -> bool:
    """``iostat -o JSON``: a sysstat hosts document with disk_device / avg-cpu entries and no
    sadf markers (object timestamps, sysdata-version, file-date, disk-device)."""
    return bool(_SNIFF_SYSSTAT.search(head) and _SNIFF_DISK.search(head)
                and not _SNIFF_NOT.search(head))


@dataclass
class _Host:
    info: dict[str, Any]
    stats: list[dict[str, Any]]
    first_line: int  # line of the host's statistics array (for messages)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _load(text: str, source: Source) -> list[_Host]:
    """The hosts of the document, repairing a cut-off end (complete entries kept)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        return _load_cut(text, source, exc)
    if not isinstance(doc, dict) or not isinstance(doc.get("sysstat"), dict):
        raise InputFormatError(source.path, 1, 'not an iostat JSON document (no "sysstat" '
                               "object at the top)")
    hosts = doc["sysstat"].get("hosts")
    if not isinstance(hosts, list):
        raise InputFormatError(source.path, 1, '"sysstat" has no "hosts" list')
    out: list[_Host] = []
    for h in hosts:
        if not isinstance(h, dict):
            raise InputFormatError(source.path, None, "a hosts entry is not an object")
        stats = h.get("statistics", [])
        if not isinstance(stats, list):
            raise InputFormatError(source.path, None, '"statistics" is not a list')
        out.append(_Host({k: v for k, v in h.items() if k != "statistics"}, stats, 1))
    return out


_TOKEN = re.compile(r'\\.|["{}\[\]]')


def _closes(text: str, pos: int) -> bool:
    """Whether the JSON value starting at ``pos`` ends before the end of ``text`` (brackets
    balanced outside strings). Stops at that end, so the work is one entry's length."""
    depth = 0
    in_string = False
    for m in _TOKEN.finditer(text, pos):
        tok = m.group(0)
        if tok.startswith("\\"):
            continue
        if tok == '"':
            in_string = not in_string
        elif not in_string:
            depth += 1 if tok in "{[" else -1
            if depth == 0:
                return True
    return False


def _load_cut(text: str, source: Source, exc: json.JSONDecodeError) -> list[_Host]:
    """A document that does not parse: decode entry by entry, keep the complete ones."""
    decoder = json.JSONDecoder()
    out: list[_Host] = []
    for m in re.finditer(r'"statistics"\s*:\s*\[', text):
        head_start = text.rfind("{", 0, m.start())
        try:
            info = json.loads(text[head_start:m.start()].rstrip().rstrip(",") + "}")
        except json.JSONDecodeError:
            info = {}
        stats: list[dict[str, Any]] = []
        pos = m.end()
        stop_reason = None
        stop_pos = pos
        while True:
            while pos < len(text) and text[pos] in " \t\r\n,":
                pos += 1
            if pos >= len(text):
                stop_reason, stop_pos = "cut", pos
                break
            if text[pos] == "]":
                break
            try:
                entry, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as err:
                stop_reason, stop_pos = err.msg, pos
                break
            if isinstance(entry, dict):
                stats.append(entry)
            pos = end
        if stop_reason is not None:
            rest = text[stop_pos:]
            # A cut leaves one entry that never closes; an entry that closes but does not
            # decode is damage in the middle of the document.
            if stop_reason == "cut" or not _closes(text, stop_pos):
                source.note(f"the document ends in the middle of report {len(stats) + 1} "
                            f"(line {_line_of(text, stop_pos)}) — cut while iostat was "
                            f"running? — the {len(stats)} complete report(s) were kept")
            else:
                ln = _line_of(text, stop_pos)
                source.bad_line(ln, f"malformed JSON statistics entry: {stop_reason}")
                source.skip(ln, "statistics entries after the malformed one were not read",
                            count=max(rest.count("\n"), 1))
        out.append(_Host(info, stats, _line_of(text, m.start())))
    if not out:
        raise InputFormatError(source.path, exc.lineno,
                               f"not valid JSON and no \"statistics\" list found: {exc.msg}")
    return out


def _mapping(keys: set[str]) -> dict[str, ColumnSpec]:
    """disk key -> column mapping for entries with these keys (lowest rank per target)."""
    old = "r" in keys and "r/s" not in keys
    chosen: dict[str, tuple[str, ColumnSpec]] = {}
    for key in keys:
        if key == "disk_device":
            continue
        spec = (_OLD_KEYS.get(key) if old else None) or _JSON_KEYS.get(key) or COLUMNS.get(key)
        if spec is None or spec.target is None:
            continue
        prev = chosen.get(spec.target)
        if prev is None or spec.rank < prev[1].rank:
            chosen[spec.target] = (key, spec)
    return dict(chosen.values())


def parse(data: bytes, source: Source) -> SampleFrame:
    """All rows of an ``iostat -o JSON`` document (see the module docstring)."""
    text = decode(data)
    hosts = _load(text, source)
    frames = [f for h in hosts if (f := _host_frame(h, source)) is not None]
    if not frames:
        source.note("no device statistics found in the document (iostat -c prints CPU only)")
        return SampleFrame.empty()
    return SampleFrame.concat(frames) if len(frames) > 1 else frames[0]


def _host_frame(host: _Host, source: Source) -> SampleFrame | None:
    stats = host.stats
    if not stats:
        return None
    name = host.info.get("nodename") or source.host or Path(source.path).stem
    # One list of every disk entry, and per report its stamp and CPU (loops per report).
    disks: list[dict[str, Any]] = []
    report_of: list[int] = []
    stamps: list[str | None] = []
    cpu: dict[str, list[float | None]] = {c: [] for c in _CPU_KEYS.values()}
    for i, st in enumerate(stats):
        d = st.get("disk") or []
        disks.extend(d)
        report_of.extend([i] * len(d))
        ts = st.get("timestamp")
        if ts is not None and not isinstance(ts, str):
            raise InputFormatError(source.path, None, "statistics entry with a non-string "
                                   "timestamp: a sadf -j document (use --format sadf)")
        stamps.append(ts)
        acpu = st.get("avg-cpu") or {}
        for key, col in _CPU_KEYS.items():
            v = acpu.get(key)
            cpu[col].append(float(v) if isinstance(v, int | float) else None)
    if not disks:
        return None
    df = pl.from_dicts(disks, infer_schema_length=None)
    if "disk_device" not in df.columns or df["disk_device"].null_count():
        raise InputFormatError(source.path, host.first_line,
                               'a "disk" entry has no "disk_device"')
    mapping = _mapping(set(df.columns))
    exprs = [pl.col("disk_device").cast(pl.String).alias("device")]
    for key, spec in mapping.items():
        v = pl.col(key).cast(pl.Float64, strict=False)
        exprs.append((v * spec.factor if spec.factor != 1.0 else v).alias(spec.target or ""))
    rows = df.select(exprs).with_columns(pl.Series("report", report_of, dtype=pl.Int64))
    if "_wd_kBps" in rows.columns:
        rows = rows.with_columns((pl.col("r_kBps") + pl.col("_wd_kBps")).alias("kBps")
                                 ).drop("_wd_kBps")
    for key in ("rqm/s",):
        if key in df.columns:
            spec = COLUMNS[key]
            if spec.note:
                source.note(spec.note)
    reports = pl.DataFrame({"report": list(range(len(stats))), **cpu},
                           schema={"report": pl.Int64, **dict.fromkeys(cpu, pl.Float64)})
    times = _times(host, stamps, source)
    reports = pl.concat([reports, times], how="horizontal")
    joined = rows.join(reports, on="report", how="left").filter(pl.col("ts").is_not_null())
    devices = joined["device"].unique().to_list()
    parents = [guess_parent(d) for d in devices]
    info = pl.DataFrame({"device": devices, "parent": parents,
                         "device_kind": ["partition" if p else kind_from_name(d)
                                         for d, p in zip(devices, parents, strict=True)]},
                        schema={"device": pl.String, "parent": pl.String,
                                "device_kind": pl.String})
    joined = joined.join(info, on="device", how="left")
    measures = [c for c in joined.columns if c not in (
        "report", "device", "parent", "device_kind", "ts", "interval_s", "since_boot")]
    joined = _clean(joined, measures, source)
    return SampleFrame(joined.select(
        pl.lit(NAME).alias("source"), pl.lit(str(name)).alias("host"), "device",
        "device_kind", "parent", "ts", "interval_s", "since_boot", *measures))


def _clean(df: pl.DataFrame, measures: list[str], source: Source) -> pl.DataFrame:
    """Negative values (counter glitches) and non-numbers -> null, with a note."""
    neg = {m: int(df[m].lt(0).sum()) for m in measures}
    neg = {m: c for m, c in neg.items() if c}
    if neg:
        source.note("negative values (a kernel or sysstat counter glitch) were read as not "
                    "measured (null): " + ", ".join(f"{m} x{c}" for m, c in neg.items()))
        df = df.with_columns([pl.when(pl.col(m) < 0).then(None).otherwise(pl.col(m)).alias(m)
                              for m in neg])
    return df


def _times(host: _Host, stamps: list[str | None], source: Source) -> pl.DataFrame:
    """ts, interval_s and since_boot per statistics entry."""
    n = len(stamps)
    since_boot = pl.Series("since_boot", [i == 0 for i in range(n)], dtype=pl.Boolean)
    date = host.info.get("date")
    date_text = date if isinstance(date, str) else None
    hint = source.interval_s
    texts = pl.Series("t", stamps, dtype=pl.String)
    if texts.null_count() < n:
        if texts.null_count():
            raise InputFormatError(source.path, host.first_line, "some statistics entries "
                                   "have a timestamp and others none")
        found = [tsx.stamp_dates(texts)]
        if date_text:
            found.append(tsx.stamp_dates(pl.Series([date_text]), kind="date"))
        try:
            order = tsx.infer_date_order(pl.concat(found, how="vertical_relaxed"),
                                         source.date_order)
        except ValueError as exc:
            raise InputFormatError(source.path, host.first_line, str(exc)) from exc
        if order.note:
            source.note(order.note)
        parsed = tsx.parse_local(texts, order.order)
        bad = [i for i, v in enumerate(parsed["local"].to_list()) if v is None]
        for i in bad:
            source.bad_line(host.first_line, f"statistics entry {i + 1}: timestamp "
                                             f"{stamps[i]!r} is not a date and time")
        utc, note = tsx.to_utc(parsed["local"], parsed["offset_min"], source.tz)
        if note:
            source.note(note)
        nominal = hint if hint is not None else tsx.nominal_interval_s(utc.drop_nulls())
        if nominal is None:
            if n > 1:
                raise _no_interval(source, host)
            source.note("the document holds only iostat's since-boot summary: its rows are "
                        f"flagged since_boot with a nominal interval_s of "
                        f"{UNKNOWN_INTERVAL_S:g} s")
            nominal = UNKNOWN_INTERVAL_S
        lengths = tsx.interval_lengths(utc, nominal)
        return pl.DataFrame([utc.alias("ts"), lengths.alias("interval_s"), since_boot])
    # no -t: reports placed from --start or the host's date at midnight
    if hint is None and n > 1:
        raise _no_interval(source, host)
    step = hint if hint is not None else UNKNOWN_INTERVAL_S
    if hint is None:
        source.note("the document holds only iostat's since-boot summary: its rows are "
                    f"flagged since_boot with a nominal interval_s of {UNKNOWN_INTERVAL_S:g} s")
    anchor = _anchor(source, date_text, host)
    offs = pl.Series("us", [round(i * step * 1e6) for i in range(n)], dtype=pl.Int64)
    ts = pl.DataFrame([offs]).select(pl.lit(anchor, dtype=pl.Datetime("us", "UTC"))
                                     + pl.duration(microseconds=pl.col("us"))).to_series()
    return pl.DataFrame([ts.alias("ts"), pl.Series("interval_s", [step] * n, dtype=pl.Float64),
                         since_boot])


def _no_interval(source: Source, host: _Host) -> InputFormatError:
    return InputFormatError(
        source.path, host.first_line,
        "the sampling interval of these iostat reports is not in the file (reports without "
        "-t time stamps, or a single measured report): give it with --interval SECONDS — "
        "the number after the options on the iostat command line, e.g. 5 for "
        "'iostat -o JSON -x 5'")


def _anchor(source: Source, date_text: str | None, host: _Host) -> datetime:
    if source.start is not None:
        start = source.start
        if start.tzinfo is None:
            utc, _ = tsx.to_utc(pl.Series([start], dtype=pl.Datetime("us")), None, source.tz)
            start = utc[0]
        return start.astimezone(UTC)
    if date_text is None:
        raise InputFormatError(source.path, host.first_line,
                               "the reports carry no timestamp (iostat was run without -t) "
                               'and the host has no "date": give --start and --interval')
    dates = tsx.stamp_dates(pl.Series([date_text]), kind="date")
    order = tsx.infer_date_order(dates, source.date_order)
    parsed = tsx.parse_local(pl.Series([date_text]), order.order, kind="date")
    utc, note = tsx.to_utc(parsed["local"], parsed["offset_min"], source.tz)
    if utc[0] is None:
        raise InputFormatError(source.path, host.first_line,
                               f'host "date" {date_text!r} is not a date')
    if note:
        source.note(note)
    source.note("the reports carry no timestamp (iostat was run without -t): report times are "
                f"counted from midnight of the host date ({date_text}) in steps of the "
                "interval; only their spacing is real (give --start for the real start time)")
    result: datetime = utc[0]
    return result
