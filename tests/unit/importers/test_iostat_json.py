"""iostat -o JSON importer: golden values, every disk key, cut documents, damage, sniffing.

Fixtures (tests/fixtures/iostat-json, see NOTICE): the PerfKitBenchmarker capture (kernel
6.5), captures of this machine's sysstat 12.6.1 (-x -t, and -d -t under S_TIME_FORMAT=ISO),
and a document in sysstat 11.0-11.4 keys built from the sysstat 10 sample's values.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from tests.helpers.importing import assert_pieces_agree, reading_variants

from iogauge.errors import InputFormatError
from iogauge.importers import iostat, iostat_json, registry
from iogauge.importers.base import Source
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures"
JFIX = FIX / "iostat-json"
PKB = "pkb-kernel6.5-iostat-o-json.json"
LIVE_X = "live-sysstat12.6-x-t.json"
LIVE_D_ISO = "live-sysstat12.6-d-t-iso.json"
OLD = "derived-sysstat11-oldkeys.json"

#: 12.x disk key -> (SampleFrame column, factor)
KEYS: dict[str, tuple[str, float]] = {
    "r/s": ("r_iops", 1.0), "w/s": ("w_iops", 1.0), "d/s": ("d_iops", 1.0),
    "f/s": ("f_iops", 1.0), "rkB/s": ("r_kBps", 1.0), "wkB/s": ("w_kBps", 1.0),
    "dkB/s": ("d_kBps", 1.0), "rrqm/s": ("r_merged_ps", 1.0), "wrqm/s": ("w_merged_ps", 1.0),
    "drqm/s": ("d_merged_ps", 1.0), "rrqm": ("r_rqm_pct", 1.0), "wrqm": ("w_rqm_pct", 1.0),
    "drqm": ("d_rqm_pct", 1.0), "r_await": ("r_await_ms", 1.0),
    "w_await": ("w_await_ms", 1.0), "d_await": ("d_await_ms", 1.0),
    "f_await": ("f_await_ms", 1.0), "rareq-sz": ("r_areq_kB", 1.0),
    "wareq-sz": ("w_areq_kB", 1.0), "dareq-sz": ("d_areq_kB", 1.0), "aqu-sz": ("aqu_sz", 1.0),
    "util": ("util_pct", 1.0), "tps": ("iops", 1.0), "kB_read/s": ("r_kBps", 1.0),
    "kB_wrtn/s": ("w_kBps", 1.0), "kB_dscd/s": ("d_kBps", 1.0),
}
CPU = {"user": "cpu_user_pct", "nice": "cpu_nice_pct", "system": "cpu_system_pct",
       "iowait": "cpu_iowait_pct", "steal": "cpu_steal_pct", "idle": "cpu_idle_pct"}


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)  # type: ignore[misc]


def load(name: str | bytes, **kw: Any) -> tuple[SampleFrame, Source]:
    data = name if isinstance(name, bytes) else (JFIX / name).read_bytes()
    src = Source(path="t.json" if isinstance(name, bytes) else name, **kw)
    return iostat_json.parse(data, src), src


def assert_every_value_as_printed(frame: SampleFrame, doc: dict[str, Any]) -> None:
    """Every disk entry of every statistics entry is a row with the printed values."""
    stats = doc["sysstat"]["hosts"][0]["statistics"]
    df = frame.df.sort("ts", maintain_order=True)
    times = df["ts"].unique(maintain_order=True).to_list()
    assert len(times) == len(stats)
    n = 0
    for t, st in zip(times, stats, strict=True):
        for disk in st["disk"]:
            row = df.filter((pl.col("ts") == t) & (pl.col("device") == disk["disk_device"]))
            assert row.height == 1
            r = row.row(0, named=True)
            for key, value in disk.items():
                if key in KEYS:
                    col, factor = KEYS[key]
                    assert r[col] == value * factor, (key, disk["disk_device"])
            for key, col in CPU.items():  # -d prints no avg-cpu: null, not 0
                assert r[col] == (st["avg-cpu"][key] if "avg-cpu" in st else None)
            n += 1
    assert len(frame) == n


def test_pkb_kernel65_golden() -> None:
    frame, src = load(PKB)
    assert len(frame) == 6 and frame.devices() == ["dm-0", "dm-1", "sda"]
    df = frame.df
    assert set(df["host"].unique()) == {"test-instance"}
    assert set(df["source"].unique()) == {"iostat-json"}
    # "2024-03-14T17:53:14-0700": the stated offset gives UTC exactly, no zone note
    assert df["ts"].unique().sort().to_list() == [utc(2024, 3, 15, 0, 53, 14),
                                                  utc(2024, 3, 15, 0, 53, 15)]
    assert not src.notes
    assert df.filter(pl.col("since_boot"))["ts"].unique().to_list() == [
        utc(2024, 3, 15, 0, 53, 14)]
    assert df["interval_s"].unique().to_list() == [1.0]
    dm0 = df.filter((pl.col("device") == "dm-0") & pl.col("since_boot")).row(0, named=True)
    assert (dm0["r_iops"], dm0["w_iops"], dm0["d_iops"], dm0["f_iops"], dm0["r_kBps"],
            dm0["w_kBps"], dm0["d_kBps"], dm0["r_await_ms"], dm0["w_await_ms"],
            dm0["d_await_ms"], dm0["r_areq_kB"], dm0["w_areq_kB"], dm0["d_areq_kB"],
            dm0["aqu_sz"], dm0["util_pct"]) == (
        1.39, 22.85, 0.14, 0.0, 69.95, 431.31, 378.71, 0.95, 1.12, 0.53, 50.28, 18.88,
        2621.28, 0.03, 0.98)
    assert (dm0["cpu_user_pct"], dm0["cpu_nice_pct"], dm0["cpu_system_pct"],
            dm0["cpu_iowait_pct"], dm0["cpu_steal_pct"], dm0["cpu_idle_pct"]) == (
        0.72, 0.22, 0.77, 0.01, 0.05, 98.23)
    sda = df.filter((pl.col("device") == "sda") & pl.col("since_boot")).row(0, named=True)
    # "rrqm" is %rrqm in 11.5+ JSON; the per-second count is "rrqm/s"
    assert (sda["r_merged_ps"], sda["w_merged_ps"], sda["r_rqm_pct"], sda["w_rqm_pct"]) == (
        0.22, 10.07, 15.07, 39.02)
    assert sda["device_kind"] == "disk" and dm0["device_kind"] == "dm"
    assert sda["svctm_ms"] is None and sda["await_ms"] is None  # not in 12.x JSON
    assert_every_value_as_printed(frame, json.loads((JFIX / PKB).read_text()))


def test_live_capture_every_value() -> None:
    frame, src = load(LIVE_X)
    assert len(frame) == 12
    assert frame.df["ts"].min() == utc(2026, 11, 22, 11, 14, 35)  # "11/22/26 11:14:35"
    assert any("read as UTC" in n for n in src.notes)
    assert_every_value_as_printed(frame, json.loads((JFIX / LIVE_X).read_text()))


def test_live_basic_report_with_iso_stamps() -> None:
    frame, _ = load(LIVE_D_ISO, tz=ZoneInfo("Asia/Tokyo"))
    assert frame.df["ts"].min() == utc(2026, 11, 22, 11, 14, 35)  # +0000 stated: --tz unused
    loop0 = frame.df.filter(pl.col("device") == "loop0").sort("ts").row(0, named=True)
    assert (loop0["iops"], loop0["r_kBps"], loop0["w_kBps"], loop0["d_kBps"]) == (
        119.88, 22645.72, 7181.13, 0.0)
    assert loop0["r_iops"] is None
    assert_every_value_as_printed(frame, json.loads((JFIX / LIVE_D_ISO).read_text()))


def test_sysstat11_old_keys() -> None:
    frame, _ = load(OLD)
    sda = frame.df.filter(pl.col("device") == "sda").row(0, named=True)
    # old "rrqm" = merges per second; "r" = r/s; "rkB" = rkB/s; avgrq-sz in sectors
    assert (sda["r_merged_ps"], sda["w_merged_ps"], sda["r_iops"], sda["w_iops"],
            sda["r_kBps"], sda["w_kBps"], sda["areq_kB"], sda["aqu_sz"], sda["await_ms"],
            sda["r_await_ms"], sda["w_await_ms"], sda["svctm_ms"], sda["util_pct"]) == (
        0.0, 0.02, 0.13, 0.11, 5.27, 1.10, 52.53 / 2, 0.0, 0.88, 0.53, 1.29, 0.52, 0.01)
    assert sda["r_rqm_pct"] is None
    assert sda["ts"] == utc(2021, 11, 30, 10, 15, 1)
    assert frame.df["since_boot"].all()


# ---- cut and damaged documents -------------------------------------------------------------


def test_cut_document_keeps_complete_reports() -> None:
    data = (JFIX / PKB).read_bytes()
    cut = data.index(b'"disk_device": "dm-1"', data.index(b"17:53:15"))  # inside report 2
    frame, src = load(data[:cut])
    assert len(frame) == 3
    assert frame.df["ts"].unique().to_list() == [utc(2024, 3, 15, 0, 53, 14)]
    assert any("ends in the middle of report 2" in n and "1 complete" in n for n in src.notes)


def test_cut_in_the_first_report_keeps_nothing_and_says_so() -> None:
    data = (JFIX / LIVE_X).read_bytes()
    frame, src = load(data[:data.index(b"loop2")])
    assert len(frame) == 0
    assert any("ends in the middle of report 1" in n for n in src.notes)


def test_cut_after_the_last_report_before_the_closing_brackets() -> None:
    data = (JFIX / LIVE_X).read_bytes()
    end = data.rindex(b"]\n\t\t}")  # statistics closed, hosts/sysstat not
    frame, src = load(data[:end + 1])
    assert len(frame) == 12
    assert not any("middle" in n for n in src.notes)


def test_malformed_entry_in_the_middle_names_its_line() -> None:
    text = (JFIX / PKB).read_text().replace('"r/s": 1.25', '"r/s": 1.2.5')
    line = next(i for i, ln in enumerate(text.split("\n"), 1) if "1.2.5" in ln)
    with pytest.raises(InputFormatError) as err:
        load(text.encode())
    assert "malformed JSON statistics entry" in err.value.reason
    assert err.value.line_no == line  # the line the JSON parser stopped at
    # --lenient drops that entry (lines 12-99), whole, and reads the next one (its
    # interval given: the one stamp left cannot tell it)
    frame, src = load(text.encode(), lenient=True, interval_s=1.0)
    assert src.skipped == 99 - 12 + 1
    assert src.skipped_examples == [(f"line {line}: malformed JSON statistics entry: Expecting "
                                    "',' delimiter (the entry from line 12 was dropped)")]
    assert sorted(frame.df["device"]) == ["dm-0", "dm-1", "sda"]
    assert frame.df["ts"].unique().to_list() == [utc(2024, 3, 15, 0, 53, 15)]
    assert not frame.df["since_boot"].any()


def test_not_json_at_all() -> None:
    with pytest.raises(InputFormatError, match="not valid JSON"):
        load(b'{"sysstat": {"hosts": [{"nodename": "x", ')


# ---- times ---------------------------------------------------------------------------------


def _without_stamps(name: str) -> bytes:
    doc = json.loads((JFIX / name).read_text())
    for st in doc["sysstat"]["hosts"][0]["statistics"]:
        st.pop("timestamp", None)
    return json.dumps(doc).encode()


def test_no_stamps_needs_the_interval() -> None:
    with pytest.raises(InputFormatError, match="--interval"):
        load(_without_stamps(LIVE_X))


def test_no_stamps_with_interval_and_start() -> None:
    frame, _ = load(_without_stamps(LIVE_X), interval_s=1.0)
    assert frame.df["ts"].unique().sort().to_list() == [
        utc(2026, 11, 22), utc(2026, 11, 22, 0, 0, 1), utc(2026, 11, 22, 0, 0, 2)]
    frame, _ = load(_without_stamps(LIVE_X), interval_s=2.0,
                    start=dt.datetime(2026, 11, 22, 12, 0, 0), tz=ZoneInfo("Europe/Paris"))
    assert frame.df["ts"].min() == utc(2026, 11, 22, 11, 0, 0)
    assert frame.df["ts"].max() == utc(2026, 11, 22, 11, 0, 4)


def test_object_timestamp_is_sadf_not_iostat() -> None:
    doc = json.loads((JFIX / PKB).read_text())
    for st in doc["sysstat"]["hosts"][0]["statistics"]:
        st["timestamp"] = {"date": "2024-03-14", "time": "17:53:14", "utc": 0, "interval": 1}
    with pytest.raises(InputFormatError, match="sadf"):
        load(json.dumps(doc).encode())


# ---- sniffing ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(JFIX.glob("*.json")), ids=lambda p: p.name)
def test_sniff_accepts_iostat_json(path: Path) -> None:
    head = path.read_bytes()[:65536]
    assert iostat_json.sniff(head.decode())
    assert not iostat.sniff(head.decode())
    assert registry.detect(head, str(path)) == "iostat-json"


def test_sniff_refuses_sadf_j_and_fio() -> None:
    sadf = ('{"sysstat": {\n\t"hosts": [\n\t\t{\n\t\t\t"nodename": "h",\n\t\t\t'
            '"sysdata-version": 3.2,\n\t\t\t"statistics": [\n\t\t\t\t{\n\t\t\t\t\t'
            '"timestamp": {"date": "2024-03-14", "time": "17:53:14", "utc": 1, '
            '"interval": 60},\n\t\t\t\t\t"disk": [{"disk-device": "sda", "tps": 1.0}]')
    assert not iostat_json.sniff(sadf)
    for path in sorted((FIX / "fio").glob("*.json")):
        assert not iostat_json.sniff(path.read_bytes()[:65536].decode())
    for path in sorted((FIX / "iostat").glob("*.txt")):
        assert not iostat_json.sniff(path.read_text())


# ---- iostat's own layout, read a piece at a time --------------------------------------------


def _iostat_layout(doc: dict[str, Any]) -> bytes:
    """``doc`` written the way iostat.c writes it (a tab per level, one object a line)."""
    out = ['{"sysstat": {', '\t"hosts": [']
    hosts = doc["sysstat"]["hosts"]
    for hi, host in enumerate(hosts):
        out.append("\t\t{")
        out += [f'\t\t\t"{k}": {json.dumps(v)},' for k, v in host.items() if k != "statistics"]
        out.append('\t\t\t"statistics": [')
        stats = host["statistics"]
        for si, st in enumerate(stats):
            out.append("\t\t\t\t{")
            parts = []
            if "timestamp" in st:
                parts.append(f'\t\t\t\t\t"timestamp": {json.dumps(st["timestamp"])}')
            if "avg-cpu" in st:
                parts.append(f'\t\t\t\t\t"avg-cpu":  {json.dumps(st["avg-cpu"])}')
            if "disk" in st:
                parts.append('\t\t\t\t\t"disk": [\n' + ",\n".join(
                    "\t\t\t\t\t\t" + json.dumps(d) for d in st["disk"]) + "\n\t\t\t\t\t]")
            out.append(",\n".join(parts))
            out.append("\t\t\t\t}" + ("," if si < len(stats) - 1 else ""))
        out.append("\t\t\t]")
        out.append("\t\t}" + ("," if hi < len(hosts) - 1 else ""))
    out += ["\t]", "}}"]
    return ("\n".join(out) + "\n").encode()


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _line_no(data: bytes, needle: bytes) -> int:
    return data[:data.index(needle)].count(b"\n") + 1


@pytest.mark.parametrize("name", [LIVE_X, LIVE_D_ISO, OLD])
def test_captures_are_in_iostats_own_layout(name: str) -> None:
    assert iostat_json.own_layout((JFIX / name).read_bytes()[:64])
    assert not iostat_json.own_layout((JFIX / PKB).read_bytes()[:64])


@pytest.mark.parametrize("name", [PKB, LIVE_X, LIVE_D_ISO, OLD])
def test_both_readers_give_the_same_rows(name: str) -> None:
    """The same document in iostat's layout (read line by line, vectorised) and re-indented
    by a JSON writer (read by a JSON parser): the same rows and notes."""
    doc = json.loads((JFIX / name).read_text())
    own, own_src = load(_iostat_layout(doc))
    other, other_src = load(json.dumps(doc, indent=2).encode())
    assert iostat_json.own_layout(_iostat_layout(doc)[:64])
    assert own.df.equals(other.df)
    assert own_src.notes == other_src.notes
    assert len(own) == sum(len(st.get("disk", [])) for st in
                           doc["sysstat"]["hosts"][0]["statistics"])


def test_a_long_run_is_read_in_pieces_with_its_intervals() -> None:
    """200 reports in pieces of 2 kB: one frame per piece, and every report's interval
    measured from the report before it, across the cuts (a 3 s gap stays 3 s)."""
    doc = json.loads((JFIX / LIVE_X).read_text())
    stats = doc["sysstat"]["hosts"][0]["statistics"]
    t0 = dt.datetime(2026, 11, 22, 11, 14, 35)
    long = []
    for i in range(200):
        entry = json.loads(json.dumps(stats[i % 3]))
        entry["timestamp"] = (t0 + dt.timedelta(seconds=i + (2 if i >= 120 else 0))
                              ).strftime("%m/%d/%y %H:%M:%S")
        long.append(entry)
    doc["sysstat"]["hosts"][0]["statistics"] = long
    data = _iostat_layout(doc)
    src = Source(path="long.json")
    frames = list(iostat_json.iter_parse(io.BytesIO(data), src, chunk_bytes=2000))
    assert len(frames) > 50
    df = SampleFrame.concat(frames).df
    whole, _ = load(data)
    assert df.equals(whole.df)
    per_report = df.group_by("ts").agg(pl.col("interval_s").first(),
                                       pl.col("since_boot").first()).sort("ts")
    assert per_report.height == 200
    assert per_report["since_boot"].sum() == 1
    assert per_report["interval_s"].to_list() == [1.0] * 120 + [3.0] + [1.0] * 79


def test_a_lost_line_is_refused_at_the_line_after_it() -> None:
    data = (JFIX / LIVE_X).read_bytes()
    lines = _lines(data)
    close = next(i for i, ln in enumerate(lines) if ln == b"\t\t\t\t},")  # report 1's end
    with pytest.raises(InputFormatError) as err:
        load(b"\n".join(lines[:close] + lines[close + 1:]))
    assert err.value.line_no == close + 1  # the next report's '{', now on line close + 1
    assert "cannot follow" in err.value.reason
    # (one report left: its interval is not in the file)
    frame, src = load(b"\n".join(lines[:close] + lines[close + 1:]), lenient=True,
                      interval_s=1.0)
    # report 1, left open, and report 2, whose '{' was refused: both dropped whole (9 lines
    # each besides the refused one); report 3 kept
    assert frame.df["ts"].unique().to_list() == [utc(2026, 11, 22, 11, 14, 37)]
    assert src.skipped == 19


def test_a_damaged_value_names_its_line_and_lenient_drops_its_report() -> None:
    data = (JFIX / LIVE_X).read_bytes()
    needle = b'"disk_device": "loop1", "r/s": 0.00'
    at = data.index(needle, data.index(b"11:14:36"))
    bad = data[:at] + data[at:].replace(b'"r/s": 0.00', b'"r/s": 0.0.0', 1)
    with pytest.raises(InputFormatError) as err:
        load(bad)
    assert err.value.line_no == _line_no(bad, b"0.0.0")
    assert "unreadable JSON object" in err.value.reason
    frame, src = load(bad, lenient=True)
    assert frame.df["ts"].unique().sort().to_list() == [utc(2026, 11, 22, 11, 14, 35),
                                                        utc(2026, 11, 22, 11, 14, 37)]
    # the bad line, and the other 9 lines of its report ('{' to '},')
    assert src.skipped == 10
    assert any("dropped whole" in e for e in src.skipped_examples)


def test_a_line_outside_the_layout_is_refused() -> None:
    data = (JFIX / LIVE_X).read_bytes()
    at = data.index(b'\t\t\t\t\t"disk": [')
    bad = data[:at] + b"\t\t\t\t\tgarbage\n" + data[at:]
    with pytest.raises(InputFormatError, match="not a line of iostat -o JSON's layout") as err:
        load(bad)
    assert err.value.line_no == _line_no(bad, b"garbage")


def test_two_documents_one_after_the_other() -> None:
    """``cat`` of two runs: both read, each run's first report flagged since-boot."""
    one = (JFIX / LIVE_X).read_bytes()
    two = one.replace(b'"nodename": "vm"', b'"nodename": "vm2"')
    frame, _ = load(one + two)
    single, _ = load(LIVE_X)
    assert len(frame) == 2 * len(single)
    for host in ("vm", "vm2"):
        rows = frame.df.filter(pl.col("host") == host)
        assert rows.drop("host").equals(single.df.drop("host"))


def test_cpu_only_and_idle_z_runs_are_not_errors() -> None:
    """iostat -c (no disk list) and an idle -z interval ('"disk": [', a blank line, ']'),
    without -t: no rows, no --interval needed for them."""
    cpu_only = (b'{"sysstat": {\n\t"hosts": [\n\t\t{\n\t\t\t"nodename": "vm",\n'
                b'\t\t\t"date": "11/24/26",\n\t\t\t"statistics": [\n'
                b"\t\t\t\t{\n\t\t\t\t\t\"avg-cpu\":  {\"user\": 1.00, \"nice\": 0.00, "
                b"\"system\": 0.50, \"iowait\": 0.00, \"steal\": 0.00, \"idle\": 98.50}\n"
                b"\t\t\t\t},\n"
                b"\t\t\t\t{\n\t\t\t\t\t\"avg-cpu\":  {\"user\": 1.00, \"nice\": 0.00, "
                b"\"system\": 0.50, \"iowait\": 0.00, \"steal\": 0.00, \"idle\": 98.50},\n"
                b"\t\t\t\t\t\"disk\": [\n\n\t\t\t\t\t]\n\t\t\t\t}\n"
                b"\t\t\t]\n\t\t}\n\t]\n}}\n")
    assert iostat_json.own_layout(cpu_only[:64])
    frame, src = load(cpu_only)
    assert len(frame) == 0 and src.skipped == 0
    assert any("no device statistics" in n for n in src.notes)


def test_mixed_stamps_name_the_first_report_without_one() -> None:
    data = (JFIX / LIVE_X).read_bytes()
    at = data.index(b'\t\t\t\t\t"timestamp": "11/22/26 11:14:36",\n')
    bad = data[:at] + data[at:].replace(b'\t\t\t\t\t"timestamp": "11/22/26 11:14:36",\n', b"", 1)
    with pytest.raises(InputFormatError, match="have a timestamp and others none") as err:
        load(bad)
    # report 2's '{': 9 lines after report 1's stamp (its own stamp, the line after, is gone)
    assert err.value.line_no == _line_no(bad, b'"timestamp": "11/22/26 11:14:35"') + 9


_VARIANTS = reading_variants(JFIX, {}, "*.json")


@pytest.mark.parametrize(("name", "data", "kw"), _VARIANTS, ids=[v[0] for v in _VARIANTS])
def test_pieces_give_what_the_whole_file_gives(name: str, data: bytes,
                                                kw: dict[str, object]) -> None:
    """Read in pieces of 1 byte (a line at a time), 700 bytes and 2 kB, every statistics
    entry is read whole with what the entries before it left (its number, host, the time
    before it): the same rows, notes and refused lines as one read of the whole document."""
    assert_pieces_agree(iostat_json, data, (1, 700, 2000), kw, name)


@pytest.mark.parametrize("how", ["lost", "doubled"])
def test_a_lost_or_doubled_last_disk_line_is_refused(how: str) -> None:
    """The last disk object of a list has no ',': losing it leaves the one before it with
    a ',' and nothing after; doubling it leaves a ',' missing (and the disk twice). The
    order of kinds is right either way: the commas (and names) tell."""
    data = (JFIX / LIVE_X).read_bytes()
    lines = _lines(data)
    last = next(i for i, ln in enumerate(lines) if ln.startswith(b"\t\t\t\t\t\t{")
                and not ln.endswith(b","))
    if how == "lost":
        bad, line = b"\n".join(lines[:last] + lines[last + 1:]), last  # the one before
        why = "ends with ','"
    else:
        bad, line = b"\n".join(lines[:last + 1] + lines[last:]), last + 1
        why = "does not end with ','"
    with pytest.raises(InputFormatError, match=why) as err:
        load(bad)
    assert err.value.line_no == line


def test_a_disk_twice_in_one_report_is_refused() -> None:
    data = (JFIX / LIVE_X).read_bytes()
    lines = _lines(data)
    first = next(i for i, ln in enumerate(lines) if ln.startswith(b"\t\t\t\t\t\t{"))
    bad = b"\n".join(lines[:first + 1] + lines[first:])
    with pytest.raises(InputFormatError, match="'loop0' a second time") as err:
        load(bad)
    assert err.value.line_no == first + 2
