"""sadf -d / sadf -j importer and the binary sa importer (which runs this machine's sadf).

The 12.6.1 fixtures are exports of one sa file, tests/fixtures/sa/sysstat12.6.1-disk-restart.sa
(two stretches of four 1-second intervals around a LINUX RESTART, 4 devices); every export
must give the same rows as the sar text of that file.
"""

from __future__ import annotations

import io
import json
import shutil
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from tests.helpers.importing import (
    as_printed,
    assert_pieces_agree,
    other_formats_fixtures,
    reading_variants,
)

from iogauge.errors import InputFormatError, IogaugeError
from iogauge.importers import sa_binary, sadf, sadf_json, sar_text
from iogauge.importers.base import Source
from iogauge.importers.registry import detect, import_file
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures"
SADF = FIX / "sadf"
SA = FIX / "sa"
V12 = "sysstat12.6.1"
DEV = ["device", "device_kind", "ts", "interval_s", "iops", "r_kBps", "w_kBps", "d_kBps",
       "areq_kB", "aqu_sz", "await_ms", "svctm_ms", "util_pct"]
CPU = ["cpu_user_pct", "cpu_nice_pct", "cpu_system_pct", "cpu_iowait_pct", "cpu_steal_pct",
       "cpu_idle_pct"]
needs_sadf = pytest.mark.skipif(sa_binary.find_sadf() is None,
                                reason="needs sadf (package sysstat) on PATH")


def load(name: str, **kw: object) -> tuple[SampleFrame, Source]:
    src = Source(path=str(SADF / name), **kw)  # type: ignore[arg-type]
    return sadf.parse((SADF / name).read_bytes(), src), src


def parse_bytes(data: bytes, **kw: object) -> tuple[SampleFrame, Source]:
    src = Source(path="mem", **kw)  # type: ignore[arg-type]
    return sadf.parse(data, src), src


def sar_reference() -> SampleFrame:
    path = FIX / "sar" / f"{V12}-sar-u-d-restart.txt"
    return sar_text.parse(path.read_bytes(), Source(path=str(path)))


def same(a: SampleFrame, b: SampleFrame, cols: list[str]) -> bool:
    return a.df.sort("ts", "device").select(cols).equals(b.df.sort("ts", "device").select(cols))


def row(frame: SampleFrame, device: str, ts: str) -> dict[str, object]:
    t = datetime.fromisoformat(ts).replace(tzinfo=UTC)
    hit = frame.df.filter((pl.col("device") == device) & (pl.col("ts") == t))
    assert hit.height == 1
    return hit.to_dicts()[0]


# ---- sniffing -----------------------------------------------------------------------------


def test_sniff_accepts_sadf_exports() -> None:
    for f in sorted(SADF.iterdir()):
        assert sadf.sniff(f.read_text(encoding="utf-8")[:65536]), f.name
        assert detect(f.read_bytes()[:65536], str(f)) == "sadf", f.name


# iostat -o JSON (sysstat 12.6 on this VM; the PerfKitBenchmarker capture has a string
# timestamp): another engineer's format, never sadf's.
_IOSTAT_JSON = ('{"sysstat": {\n\t"hosts": [\n\t\t{\n\t\t\t"nodename": "vm",\n\t\t\t"sysname": '
                '"Linux",\n\t\t\t"date": "11/22/26",\n\t\t\t"statistics": [\n\t\t\t\t{\n'
                '\t\t\t\t\t"timestamp": "2024-03-14T17:53:14-0700",\n\t\t\t\t\t"disk": [\n'
                '\t\t\t\t\t\t{"disk_device": "vda", "tps": 1.0}\n\t\t\t\t\t]\n\t\t\t\t}\n'
                '\t\t\t]\n\t\t}\n\t]\n}}\n')


@pytest.mark.parametrize("head", [
    _IOSTAT_JSON,
    _IOSTAT_JSON.replace('"timestamp": "2024-03-14T17:53:14-0700",\n', ""),
    "Linux 6.1.0 (box) \t11/22/26 \t_x86_64_\t(2 CPU)\n\n10:00:00 DEV tps\n",
    "hostname;interval;timestamp;DEV\n",
    "vm;1;2026-11-22 10:49:25 UTC;vda;1.00\n",
    "",
])
def test_sniff_refuses_other_formats(head: str) -> None:
    assert not sadf.sniff(head)


def test_sniff_refuses_other_formats_fixtures() -> None:
    mine = {"sar", "sa", "sadf"}
    for f in other_formats_fixtures(FIX, mine):
        head = f.read_bytes()[:65536].decode("utf-8", errors="replace")
        assert not sadf.sniff(head), f"sadf sniffer accepted {f}"


# ---- sadf -d -----------------------------------------------------------------------------


def test_csv_golden_values() -> None:
    frame, src = load(f"{V12}-sadf-d-u.csv")
    assert len(frame) == 32 and set(frame.df["source"]) == {"sadf"}
    # 'vm;1;2026-11-22 11:03:37 UTC;vda;10239.00;128464.00;131220.00;131092.00;38.17;0.47;
    # 0.05;43.20', the first interval after the LINUX-RESTART record
    r = row(frame, "vda", "2026-11-22T11:03:37")
    assert (r["host"], r["interval_s"], r["iops"], r["r_kBps"], r["w_kBps"], r["d_kBps"]) == (
        "vm", 1.0, 10239.0, 128464.0, 131220.0, 131092.0)
    assert (r["areq_kB"], r["aqu_sz"], r["await_ms"], r["util_pct"], r["svctm_ms"]) == (
        38.17, 0.47, 0.05, 43.2, None)
    # CPU -1 (all): '60.61;0.00;28.79;9.60;0.00;1.01'
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_iowait_pct"],
            r["cpu_idle_pct"]) == (60.61, 28.79, 9.6, 1.01)
    assert any("LINUX-RESTART" in n for n in src.notes)
    assert same(frame, sar_reference(), DEV + CPU)


def test_csv_epoch_stamps_decimal_commas_and_cpu_all() -> None:
    frame, _ = load(f"{V12}-sadf-d-U-uALL-de_DE.csv")  # 'vm;1;1795345411;loop0;579,00;...'
    assert same(frame, sar_reference(), DEV + CPU)  # %sys+%irq+%soft = plain %system here


def test_csv_sysstat_10_layout() -> None:
    frame, src = load("handbuilt-sysstat10-sadf-d.csv")
    assert len(frame) == 10
    # 'dev8-16;13.52;580.18;56.83;47.10;0.11;8.28;3.27;4.42': sectors halve to kB
    r = row(frame, "dev8-16", "2016-03-28T09:20:01")
    assert (r["interval_s"], r["iops"], r["r_kBps"], r["w_kBps"], r["areq_kB"]) == (
        600.0, 13.52, 290.09, 28.415, 23.55)
    assert (r["aqu_sz"], r["await_ms"], r["svctm_ms"], r["util_pct"]) == (0.11, 8.28, 3.27,
                                                                          4.42)
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["cpu_iowait_pct"]) == (0.01, 0.02, 0.08)
    assert r["host"] == "hostname.example.com" and r["device_kind"] == "disk"
    assert any("LINUX-RESTART" in n for n in src.notes)


def test_csv_local_time_stamps_use_tz() -> None:
    text = (SADF / f"{V12}-sadf-d-u.csv").read_text(encoding="utf-8").replace(" UTC;", ";")
    text = text.replace("2026-11-22 11:", "2026-11-22 20:")  # as 'sadf -T' prints in Tokyo
    frame, _ = parse_bytes(text.encode(), tz=ZoneInfo("Asia/Tokyo"))
    assert same(frame, sar_reference(), DEV)
    frame, src = parse_bytes(text.encode())
    assert frame.df["ts"].min() == datetime(2026, 11, 22, 20, 3, 31, tzinfo=UTC)
    assert any("assumed UTC" in n for n in src.notes)


def test_csv_cut_mid_line_keeps_whole_intervals() -> None:
    data = (SADF / f"{V12}-sadf-d-u.csv").read_bytes()
    cut = data.index(b"vm;1;2026-11-22 11:03:39 UTC;loop2;") + 20
    frame, src = parse_bytes(data[:cut])
    assert frame.df.group_by("ts").len()["len"].to_list() == [4] * 6
    assert any("partial interval" in n for n in src.notes)
    cut = data.index(b"vm;1;2026-11-22 11:03:39 UTC;loop0;") + 5  # a new interval's first row
    frame, src = parse_bytes(data[:cut])
    assert len(frame) == 24  # 11:03:38 lists its 4 devices: whole, kept
    assert not any("partial interval" in n for n in src.notes)
    cut = data.index(b"vm;1;2026-11-22 11:03:39 UTC;vda;") + 5
    frame, src = parse_bytes(data[:cut])
    assert len(frame) == 24  # 3 of 4 devices of 11:03:39: dropped
    assert any("partial interval" in n for n in src.notes)


_CSV_LINE = b"vm;1;2026-11-22 11:03:37 UTC;vda;10239.00;"


@pytest.mark.parametrize(("old", "new", "reason"), [
    (_CSV_LINE, b"vm;1;2026-11-22 11:03:37 UTC;vda;1O239.00;",
     "column 'tps' is not a number: '1O239.00'"),
    (_CSV_LINE, b"vm;1;2026-11-22 11:03:37 UTC;vda;",
     "11 fields where the header at line 29 has 12"),
    (_CSV_LINE, b"vm;1;yesterday;vda;10239.00;",
     "timestamp 'yesterday' is not 'YYYY-MM-DD HH:MM:SS [UTC]' or epoch seconds"),
    (_CSV_LINE, b"vm;0;2026-11-22 11:03:37 UTC;vda;10239.00;", "interval 0 s is not positive"),
])
def test_csv_bad_rows(old: bytes, new: bytes, reason: str) -> None:
    data = (SADF / f"{V12}-sadf-d-u.csv").read_bytes()
    line = data[:data.index(old)].count(b"\n") + 1
    bad = data.replace(old, new, 1)
    with pytest.raises(InputFormatError) as exc:
        parse_bytes(bad)
    assert (exc.value.path, exc.value.line_no, exc.value.reason) == ("mem", line, reason)
    frame, src = parse_bytes(bad, lenient=True)
    assert (len(frame), src.skipped) == (31, 1)


def test_csv_horizontal_layout_is_refused() -> None:
    text = ("# hostname;interval;timestamp;DEV;tps;rkB/s[...]\n"
            "vm;1;2026-11-22 10:49:41 UTC;loop0;0.00;0.00;vda;1.00;2.00\n")
    with pytest.raises(InputFormatError, match="sadf -dh"):
        parse_bytes(text.encode())


def test_csv_without_disk_activity() -> None:
    text = ("# hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle\n"
            "vm;1;2026-11-22 10:49:41 UTC;-1;0.00;0.00;1.00;0.00;0.00;99.00\n")
    with pytest.raises(InputFormatError, match="no disk activity"):
        parse_bytes(text.encode())


# ---- sadf -j -----------------------------------------------------------------------------


def test_json_matches_csv_and_sar() -> None:
    frame, src = load(f"{V12}-sadf-j-uALL.json")
    assert len(frame) == 32
    assert same(frame, sar_reference(), DEV + CPU)
    r = row(frame, "loop0", "2026-11-22T11:03:32")  # "tps": 1000.00, "rkB": 1976.00
    assert (r["iops"], r["r_kBps"], r["util_pct"], r["device_kind"]) == (1000.0, 1976.0,
                                                                         100.4, "loop")
    assert any("restart record" in n for n in src.notes)


def test_json_local_times() -> None:
    frame, _ = load(f"{V12}-sadf-j-T-Tokyo.json", tz=ZoneInfo("Asia/Tokyo"))  # "utc": 0
    assert same(frame, sar_reference(), DEV + CPU)
    frame, src = load(f"{V12}-sadf-j-T-Tokyo.json")
    assert frame.df["ts"].min() == datetime(2026, 11, 22, 20, 3, 31, tzinfo=UTC)
    assert any("assumed UTC" in n for n in src.notes)


def test_json_any_layout() -> None:
    doc = json.loads((SADF / f"{V12}-sadf-j-uALL.json").read_text(encoding="utf-8"))
    frame, _ = parse_bytes(json.dumps(doc, indent=2).encode())  # as jq would print it
    assert same(frame, sar_reference(), DEV + CPU)
    frame, _ = parse_bytes(json.dumps(doc).encode())
    assert same(frame, sar_reference(), DEV + CPU)


def test_json_sysstat_10_keys() -> None:
    stat = ('\t\t\t\t{\n\t\t\t\t\t"timestamp": {"date": "2016-03-28", "time": "09:20:01", '
            '"utc": 1, "interval": 600},\n\t\t\t\t\t"cpu-load-all": [\n\t\t\t\t\t\t{"cpu": '
            '"all", "usr": 0.01, "nice": 0.00, "sys": 0.02, "iowait": 0.08, "steal": 0.00, '
            '"irq": 0.00, "soft": 0.00, "guest": 0.02, "gnice": 0.00, "idle": 99.86}\n'
            '\t\t\t\t\t],\n\t\t\t\t\t"disk": [\n\t\t\t\t\t\t{"disk-device": "dev8-16", '
            '"tps": 13.52, "rd_sec": 580.18, "wr_sec": 56.83, "avgrq-sz": 47.10, '
            '"avgqu-sz": 0.11, "await": 8.28, "svctm": 3.27, "util-percent": 4.42}\n'
            '\t\t\t\t\t]\n\t\t\t\t}\n')
    doc = ('{"sysstat": {\n\t"hosts": [\n\t\t{\n\t\t\t"nodename": "rhel7",\n\t\t\t'
           '"file-date": "2016-03-28",\n\t\t\t"statistics": [\n' + stat +
           '\t\t\t],\n\t\t\t"restarts": [\n\t\t\t]\n\t\t}\n\t]\n}}\n')
    assert sadf.sniff(doc)
    frame, _ = parse_bytes(doc.encode())
    r = frame.to_dicts()[0]
    assert (r["host"], r["device"], r["interval_s"], r["iops"], r["r_kBps"], r["w_kBps"],
            r["areq_kB"], r["aqu_sz"], r["svctm_ms"], r["util_pct"]) == (
        "rhel7", "dev8-16", 600.0, 13.52, 290.09, 28.415, 23.55, 0.11, 3.27, 4.42)
    assert (r["cpu_user_pct"], r["cpu_system_pct"], r["d_kBps"]) == (0.01, 0.02, None)


def test_json_cut_off_keeps_whole_intervals() -> None:
    data = (SADF / f"{V12}-sadf-j-uALL.json").read_bytes()
    cut = data.index(b'"time": "11:03:39"')
    cut = data.index(b'"disk-device": "loop2"', cut) + 10  # inside the loop2 object
    frame, src = parse_bytes(data[:cut])
    assert frame.df.group_by("ts").len()["len"].to_list() == [4] * 6
    assert frame.df["ts"].max() == datetime(2026, 11, 22, 11, 3, 38, tzinfo=UTC)
    assert any("cut off" in n for n in src.notes)


def test_json_bad_value_names_the_line() -> None:
    data = (SADF / f"{V12}-sadf-j-uALL.json").read_bytes()
    old = b'{"disk-device": "vda", "tps": 10239.00,'
    line = data[:data.index(old)].count(b"\n") + 1
    bad = data.replace(old, b'{"disk-device": "vda", "tps": "many",', 1)
    with pytest.raises(InputFormatError) as exc:
        parse_bytes(bad)
    assert exc.value.line_no == line and "'tps' is 'many', not a number" in exc.value.reason
    frame, src = parse_bytes(bad, lenient=True)  # its statistics entry (12 lines) dropped whole
    assert (len(frame), src.skipped) == (28, 12)


def test_json_broken_document() -> None:
    with pytest.raises(InputFormatError, match=r"mem:3: not valid JSON"):
        parse_bytes(b'{"sysstat": {"hosts": [\n{"nodename": "x",\n "statistics": [}]}}')


# ---- sadf -j in sadf's own layout, a piece at a time ----------------------------------------


J_ALL = f"{V12}-sadf-j-A.json"  # sadf -j -- -A of a sadc -S XALL recording of its own


def lines_of(name: str) -> list[bytes]:
    return (SADF / name).read_bytes().split(b"\n")


def line_no(lines: list[bytes], text: bytes, after: int = 0) -> int:
    """1-based number of the first line at or after line ``after`` + 1 holding ``text``."""
    return next(i for i, ln in enumerate(lines, 1) if i > after and text in ln)


def joined(lines: list[bytes]) -> bytes:
    return b"\n".join(lines)


_J_VARIANTS = reading_variants(SADF, {}, "*.json")


@pytest.mark.parametrize(("name", "data", "kw"), _J_VARIANTS, ids=[v[0] for v in _J_VARIANTS])
def test_json_pieces_give_what_the_whole_document_gives(name: str, data: bytes,
                                                        kw: dict[str, object]) -> None:
    """Read in pieces of 1 byte (a statistics entry at a time) and 900 bytes, each piece
    carrying the brackets still open, the host and the stamps read: the same rows, notes
    and refused lines as one read of the whole document."""
    assert_pieces_agree(sadf_json, data, (1, 900), kw, name)


@pytest.mark.parametrize("name", [f"{V12}-sadf-j-uALL.json", f"{V12}-sadf-j-T-Tokyo.json",
                                  J_ALL])
def test_json_own_layout_and_json_parser_agree(name: str) -> None:
    data = (SADF / name).read_bytes()
    assert sadf_json.own_layout(data[:64])
    own, _ = parse_bytes(data)
    indented = json.dumps(json.loads(data), indent=2).encode()  # as jq prints it
    assert not sadf_json.own_layout(indented[:64])
    generic, _ = parse_bytes(indented)
    assert len(own) > 0
    assert own.df.equals(generic.df)


def test_json_every_activity() -> None:
    """sadf -j -- -A: the disk list among memory, network (objects of lists), power
    management... Every printed disk object is a row, with the 'all' CPU's context."""
    data = (SADF / J_ALL).read_bytes()
    frame, src = parse_bytes(data)
    doc = json.loads(data)
    printed = [(s["timestamp"]["time"], d["disk-device"], d["tps"], d["wkB"], d["await"])
               for s in doc["sysstat"]["hosts"][0]["statistics"] for d in s["disk"]]
    got = [(r["ts"].strftime("%H:%M:%S"), r["device"], r["iops"], r["w_kBps"], r["await_ms"])
           for r in frame.df.iter_rows(named=True)]
    assert got == printed and len(got) == 8
    r = row(frame, "vda", "2026-11-24T07:26:18")  # "tps": 692.00, "wkB": 352256.00
    assert (r["iops"], r["w_kBps"], r["areq_kB"], r["util_pct"]) == (692.0, 352256.0,
                                                                      509.18, 59.2)
    cpu = doc["sysstat"]["hosts"][0]["statistics"][0]["cpu-load"][0]  # (-A: usr, sys, irq...)
    assert cpu["cpu"] == "all"
    assert r["cpu_system_pct"] == round(cpu["sys"] + cpu["irq"] + cpu["soft"], 2)
    assert src.notes == [] and src.skipped == 0


def test_json_sadf_comma_bugs_still_import() -> None:
    """sysstat 10.2.1 wrote no ',' after "file-date" (sysstat issue #12), 11.1.5 none
    between two network activities (#90): the document is not valid JSON, but its commas
    are on lines whose values are not read, and it imports as the fixed one does."""
    lines = lines_of(J_ALL)
    at = line_no(lines, b'"file-date"')
    net = line_no(lines, b'"net-sock"')
    assert lines[at - 1].endswith(b",") and lines[net - 1].endswith(b",")
    lines[at - 1] = lines[at - 1][:-1]
    lines[net - 1] = lines[net - 1][:-1]
    with pytest.raises(json.JSONDecodeError):
        json.loads(joined(lines))
    frame, src = parse_bytes(joined(lines))
    assert frame.df.equals(parse_bytes((SADF / J_ALL).read_bytes())[0].df)
    assert src.skipped == 0


def _damaged(what: str) -> tuple[bytes, int, str]:
    """The uALL export with one line lost, doubled or changed: (document, the line the
    error must name, words of its reason)."""
    lines = lines_of(f"{V12}-sadf-j-uALL.json")
    second = line_no(lines, b'"time": "11:03:32"')
    disk = line_no(lines, b'"disk": [', second)
    vda = line_no(lines, b'"vda"', second)
    if what == "disk list lost":  # its objects are then indented one tab too far
        del lines[disk - 1]
        return joined(lines), disk, "is indented by 6 tab(s)"
    if what == "disk doubled":  # the commas stay right
        lines.insert(vda - 2, lines[vda - 2])
        return joined(lines), vda, "disk 'loop2' a second time in one statistics entry"
    if what == "last disk lost":  # loop2's ',' is then before the list's ']'
        del lines[vda - 1]
        return joined(lines), vda - 1, "ends with ',' but is the last of its list"
    if what == "bracket changed":
        lines[vda] = lines[vda].replace(b"]", b"}")
        return joined(lines), vda + 1, "does not close what was opened"
    if what == "entry end lost":  # the disk list's ']' is then followed by a '{'
        del lines[vda + 1]
        return joined(lines), vda + 1, "does not end with ',' but is followed by a sibling"
    if what == "spaces":
        lines[disk - 1] = lines[disk - 1].replace(b"\t", b"    ")
        return joined(lines), disk, "not a line of sadf -j's layout"
    if what == "timestamp lost":
        del lines[second - 1]
        return joined(lines), second - 1, 'without its "timestamp" line'
    raise AssertionError(what)


@pytest.mark.parametrize("what", ["disk list lost", "disk doubled", "last disk lost",
                                  "bracket changed", "entry end lost", "spaces",
                                  "timestamp lost"])
def test_json_damaged_line_is_named(what: str) -> None:
    """A lost, doubled or changed line is an error at that line (or the first line it
    leaves out of place); --lenient drops that interval whole (4 devices), the other 7
    intervals are read, and with the 'entry end lost' the next interval as well."""
    data, at, words = _damaged(what)
    with pytest.raises(InputFormatError) as exc:
        parse_bytes(data)
    assert (exc.value.line_no, words in exc.value.reason) == (at, True), exc.value.reason
    frame, src = parse_bytes(data, lenient=True)
    lost = 2 if what == "entry end lost" else 1
    assert frame.df["ts"].n_unique() == 8 - lost
    assert frame.df.group_by("ts").len()["len"].to_list() == [4] * (8 - lost)
    assert src.skipped > 0
    assert datetime(2026, 11, 22, 11, 3, 32, tzinfo=UTC) not in frame.df["ts"].to_list()


def test_json_cut_off_after_the_statistics_keeps_every_interval() -> None:
    data = (SADF / f"{V12}-sadf-j-uALL.json").read_bytes()
    cut = data.index(b'"restarts"')
    frame, src = parse_bytes(data[:cut])
    assert len(frame) == 32
    assert any("cut off after its last statistics entry" in n for n in src.notes)


def test_json_documents_one_after_the_other() -> None:
    """``cat`` of two exports: two hosts, each with its own rows."""
    data = (SADF / f"{V12}-sadf-j-uALL.json").read_bytes()
    frame, _ = parse_bytes(data + data.replace(b'"nodename": "vm"', b'"nodename": "vm2"'))
    assert frame.df.group_by("host").len().sort("host").rows() == [("vm", 32), ("vm2", 32)]


def test_json_without_disk_statistics() -> None:
    lines = lines_of(f"{V12}-sadf-j-uALL.json")
    cpu_only = joined([ln for ln in lines if b"disk" not in ln]).replace(b"],\n\t\t\t\t\t]",
                                                                         b"]")
    with pytest.raises(InputFormatError, match=r"no disk statistics \('disk' lists\)"):
        parse_bytes(cpu_only)
    empty = joined([ln for ln in lines if b"disk-device" not in ln])  # sadf: no disk seen
    with pytest.raises(InputFormatError, match="the disk statistics hold no rows"):
        parse_bytes(empty)


def test_json_dst_fall_back_repeat_across_pieces() -> None:
    """sadf -j -T through the Berlin fall-back hour (02:00-02:50 twice, "utc": 0): read in
    pieces of 300 bytes, each host's latest stamp is carried and the second pass known as
    such - 10 minutes apart throughout, as read whole."""
    local = ([f"01:{m:02d}:00" for m in (40, 50)]
             + [f"02:{m:02d}:00" for m in range(0, 60, 10)] * 2
             + [f"03:{m:02d}:00" for m in (0, 10)])
    entries = [("\t\t\t\t{\n\t\t\t\t\t\"timestamp\": {\"date\": \"2026-10-25\", \"time\": "
                f"\"{t}\", \"utc\": 0, \"interval\": 600}},\n\t\t\t\t\t\"disk\": [\n"
                "\t\t\t\t\t\t{\"disk-device\": \"sda\", \"tps\": 1.00}\n\t\t\t\t\t]\n")
               for t in local]
    doc = ('{"sysstat": {\n\t"hosts": [\n\t\t{\n\t\t\t"nodename": "h",\n\t\t\t"statistics": [\n'
           + "\t\t\t\t},\n".join(entries) + "\t\t\t\t}\n\t\t\t]\n\t\t}\n\t]\n}}\n").encode()
    berlin = ZoneInfo("Europe/Berlin")
    whole, _ = parse_bytes(doc, tz=berlin)
    src = Source(path="mem", tz=berlin)
    frames = list(sadf_json.iter_parse(io.BytesIO(doc), src, chunk_bytes=300))
    assert len(frames) > 5
    assert SampleFrame.concat(frames).df.equals(whole.df)
    ts = whole.df["ts"]
    assert ts.len() == len(local)
    assert set(ts.diff().drop_nulls().dt.total_seconds().to_list()) == {600}


# ---- binary sa files ---------------------------------------------------------------------


def test_sa_sniff_bytes() -> None:
    data = (SA / f"{V12}-disk-restart.sa").read_bytes()
    assert data[:4] == b"\x96\xd5\x75\x21"  # SYSSTAT_MAGIC 0xd596, FORMAT_MAGIC 0x2175 (LE)
    assert sa_binary.sniff_bytes(data[:64])
    assert sa_binary.sniff_bytes(b"\xd5\x96\x21\x75")  # written on a big-endian machine
    assert not sa_binary.sniff_bytes(b"Linux 6.1")
    assert not sa_binary.sniff("anything")
    assert detect(data[:65536], "sa01") == "sa"


def test_sa_file_equals_its_sadf_export() -> None:
    """The native reader (no sadf needed) gives the rows sadf -d printed of the file, disk
    and CPU, to the printed digits."""
    result = import_file(SA / f"{V12}-disk-restart.sa")
    assert result.format == "sa" and len(result.frame) == 32
    csv, _ = load(f"{V12}-sadf-d-u.csv")  # the same file through sadf -d -- -d -u
    assert same(as_printed(result.frame), csv, ["host", *DEV, *CPU])
    assert set(result.frame.df["source"]) == {"sa"}


@needs_sadf
def test_sa_daily_files_are_continuous() -> None:
    day1 = import_file(SA / f"{V12}-rotation-day1.sa").frame
    day2 = import_file(SA / f"{V12}-rotation-day2.sa").frame
    v1 = day1.df.filter(pl.col("device") == "vda").sort("ts")
    v2 = day2.df.filter(pl.col("device") == "vda").sort("ts")
    assert (len(v1), len(v2)) == (6, 3)
    first = v2.row(0, named=True)
    assert (first["ts"] - v1["ts"][-1]).total_seconds() == first["interval_s"] == 1.0


@needs_sadf
def test_sa_cut_off_file(tmp_path: Path) -> None:
    data = (SA / f"{V12}-disk-restart.sa").read_bytes()
    cut = tmp_path / "sa22"
    cut.write_bytes(data[:len(data) * 2 // 3])
    result = import_file(cut)
    assert 0 < len(result.frame) < 32
    assert result.frame.df.group_by("ts").len()["len"].unique().to_list() == [4]
    assert any("cut off" in n for n in result.notes)


@needs_sadf
def test_sa_format_sadf_cannot_read(tmp_path: Path) -> None:
    data = bytearray((SA / f"{V12}-disk-restart.sa").read_bytes())
    data[2:4] = b"\x71\x21"  # FORMAT_MAGIC of older sysstat (0x2171)
    old = tmp_path / "sa01"
    old.write_bytes(bytes(data))
    with pytest.raises(IogaugeError) as exc:
        import_file(old, fmt="sa-sadf")
    message = str(exc.value)
    assert message.startswith(f"{old}: ")
    assert "cannot read the format of this file (0x2171)" in message  # sadf's own words
    assert "sadf -c sa01" in message and str(tmp_path) not in message.split(": ", 1)[1]
    # the conversion was tried, and sadf -c's own words say why it failed (the records
    # after the header are 12.6.1's, not 0x2171's)
    assert "converting it with 'sadf -c' failed too: " in message
    assert "Invalid data found" in message


@needs_sadf
def test_sa_older_format_converted_with_sadf_c(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A file sadf cannot read for its older format is converted with sadf -c and the copy
    read, with a note. The fake sadf says what this machine's sadf 12.6.1 says of a 0x2171
    file and "converts" it to the fixture; everything else is the real sadf."""
    real = sa_binary.find_sadf()
    fixture = SA / f"{V12}-disk-restart.sa"
    _fake_sadf(tmp_path, monkeypatch, (
        'if [ "$1" = "-c" ]; then\n'
        '  echo "File successfully converted to sysstat format version 12.6.1" >&2\n'
        f"  cat {fixture}; exit 0\n"
        "fi\n"
        'if [ "$1" = "-j" ] && head -c 4 "$2" | od -An -tx1 | grep -q "71 21"; then\n'
        '  echo "Invalid system activity file: $2" >&2\n'
        '  echo "Current sysstat version cannot read the format of this file (0x2171)" >&2\n'
        "  exit 3\n"
        "fi\n"
        f'exec {real} "$@"\n'))
    data = bytearray(fixture.read_bytes())
    data[2:4] = b"\x71\x21"
    src = Source(path="sa01")
    got = sa_binary.parse(bytes(data), src)
    monkeypatch.delenv("IOGAUGE_SADF")
    assert got.df.equals(sa_binary.parse(fixture.read_bytes(), Source(path="sa01")).df)
    assert len(got) == 32
    assert any("older sysstat format (0x2171): converted with 'sadf -c'" in n
               and "File successfully converted" in n for n in src.notes), src.notes


def test_sa_without_sadf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The native reader needs no sadf; --format sa-sadf says it needs one."""
    monkeypatch.setenv("IOGAUGE_SADF", str(tmp_path / "no-such-sadf"))
    assert len(import_file(SA / f"{V12}-disk-restart.sa").frame) == 32
    with pytest.raises(IogaugeError, match=r"needs the sadf program \(package sysstat\)"):
        import_file(SA / f"{V12}-disk-restart.sa", fmt="sa-sadf")


@needs_sadf
def test_sa_sadf_found_by_env(monkeypatch: pytest.MonkeyPatch) -> None:
    found = shutil.which("sadf") or sa_binary.find_sadf()
    assert found is not None
    monkeypatch.setenv("IOGAUGE_SADF", found)
    assert len(import_file(SA / f"{V12}-disk-restart.sa").frame) == 32


@needs_sadf
def test_sa_json_read_from_sadfs_pipe_in_pieces() -> None:
    """sadf's output is read from its pipe a piece at a time: pieces of 500 bytes (an
    interval each) give what one piece gives."""
    data = (SA / f"{V12}-disk-restart.sa").read_bytes()
    whole = sa_binary.parse(data, Source(path="sa22"))
    frames = list(sa_binary.iter_parse(io.BytesIO(data), Source(path="sa22"),
                                       chunk_bytes=500))
    assert len(frames) >= 8
    assert SampleFrame.concat(frames).df.equals(whole.df) and len(whole) == 32


def test_sa_sadf_keeps_writing_while_a_piece_is_read(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """sadf's pipe is drained ahead of the reader: a sadf that prints 2 MB more than the
    document finishes while the reader holds its first frame (read only when asked, the
    pipe would fill at 64 kB and sadf would wait). Closing the reader then stops the
    thread that drains the pipe."""
    done = tmp_path / "done"
    _fake_sadf(tmp_path, monkeypatch, f"cat {SADF / f'{V12}-sadf-j-uALL.json'}\n"
               f"head -c 2000000 /dev/zero\ntouch {done}\n")
    frames = sa_binary.iter_parse(io.BytesIO(b"\x96\xd5\x75\x21"), Source(path="sa22"),
                                  chunk_bytes=500)
    assert len(next(frames)) > 0
    for _ in range(200):  # (up to 10 s: sadf has only to write 2 MB to a pipe)
        if done.exists():
            break
        time.sleep(0.05)
    assert done.exists(), "sadf was held up until the reader asked for more"
    frames.close()
    assert not [t for t in threading.enumerate() if t.name == "sadf-read-ahead"]


def _fake_sadf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    fake = tmp_path / "sadf"
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    monkeypatch.setenv("IOGAUGE_SADF", str(fake))


@pytest.mark.parametrize(("script", "words"), [
    # sadf printed the start of a document, then failed: its message is the error
    ("head -c 300 " + str(SADF / f"{V12}-sadf-j-uALL.json") + "\n"
     "echo \"Invalid system activity file: $2\" >&2\nexit 2\n",
     "cannot read this sa file: Invalid system activity file: sa22"),
    ("exit 3\n", "cannot read this sa file: exit status 3 and no output"),
    ("sleep 30\n", "did not finish within 0.5 s"),
])
def test_sa_sadf_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str,
                          words: str) -> None:
    _fake_sadf(tmp_path, monkeypatch, script)
    monkeypatch.setattr(sa_binary, "_SADF_TIMEOUT_S", 0.5)
    with pytest.raises(IogaugeError) as exc:
        sa_binary.parse(b"\x96\xd5\x75\x21", Source(path="sa22"))
    assert words in str(exc.value), str(exc.value)


def test_sa_sadf_output_that_is_not_its_json(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """sadf exits 0 but prints what the JSON reader refuses: the reader's error, naming
    the line."""
    _fake_sadf(tmp_path, monkeypatch, "sed 's/\"disk\": \\[/\"disk\": {/' "
               + str(SADF / f"{V12}-sadf-j-uALL.json") + "\n")
    with pytest.raises(InputFormatError, match=r"sa22:23: '\]' does not close what was opened"):
        sa_binary.parse(b"\x96\xd5\x75\x21", Source(path="sa22"))


@pytest.mark.parametrize("name", ["sysstat12.6.1-sadf-d-u.csv",
                                  "sysstat12.6.1-sadf-d-U-uALL-de_DE.csv"])
def test_csv_sections_split_in_batches_read_as_one(name: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The DEV and CPU lines are split into fields a batch at a time: batches of 7 rows (a
    decimal-comma file too, judged on the whole section) give the frame, notes and skips of
    one batch, whole and cut inside its last interval."""
    data = (SADF / name).read_bytes()
    for text in (data, data[:len(data) * 2 // 3]):
        one, src_one = parse_bytes(text, lenient=True)
        monkeypatch.setattr(sadf, "BATCH_ROWS", 7)
        many, src_many = parse_bytes(text, lenient=True)
        monkeypatch.undo()
        assert one.df.height > 7
        assert many.df.equals(one.df)
        assert (src_many.notes, src_many.skipped) == (src_one.notes, src_one.skipped)


# ---- sadf -d a piece at a time ----------------------------------------------------------------


_VARIANTS = reading_variants(SADF, {}, "*.csv")


@pytest.mark.parametrize(("name", "data", "kw"), _VARIANTS, ids=[v[0] for v in _VARIANTS])
def test_csv_pieces_give_what_the_whole_file_gives(name: str, data: bytes,
                                                    kw: dict[str, object]) -> None:
    """Read in pieces of 1 byte (a line at a time) and 700 bytes (300 with --tz), each piece
    ends two intervals early and carries its section's header, the CPU rows and the latest
    stamps: the same rows, notes and refused lines as one read of the whole export."""
    assert_pieces_agree(sadf, data, (1, 700), kw, name)
    assert_pieces_agree(sadf, data, (300,), {**kw, "tz": ZoneInfo("Europe/Berlin")}, name)


def test_csv_dst_fall_back_repeat_across_pieces() -> None:
    """Local stamps (sadf -T) through the Berlin fall-back hour, 02:00-02:50 twice: read in
    pieces of 200 bytes, the second pass is still known as such (the latest stamp of the
    section is carried) - times strictly increasing, 10 minutes apart, as read whole."""
    lines = [("# hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;"
              "await;%util")]
    local = [f"2026-10-25 01:{m:02d}:00" for m in (40, 50)]
    local += [f"2026-10-25 02:{m:02d}:00" for m in range(0, 60, 10)] * 2
    local += [f"2026-10-25 03:{m:02d}:00" for m in (0, 10)]
    for stamp in local:
        for dev in ("sda", "sdb"):
            lines.append(f"h;600;{stamp};{dev};1.00;2.00;3.00;0.00;4.00;0.01;1.00;2.00")
    data = ("\n".join(lines) + "\n").encode()
    whole, _ = parse_bytes(data, tz=ZoneInfo("Europe/Berlin"))
    src = Source(path="mem", tz=ZoneInfo("Europe/Berlin"))
    frames = list(sadf.iter_parse(io.BytesIO(data), src, chunk_bytes=200))
    assert len(frames) > 5
    pieces = SampleFrame.concat(frames)
    assert pieces.df.equals(whole.df)
    ts = pieces.df.filter(pl.col("device") == "sda")["ts"]
    assert ts.len() == len(local)
    assert set(ts.diff().drop_nulls().dt.total_seconds().to_list()) == {600}


def test_json_lost_entry_opener_counts_the_entry_lines() -> None:
    """An entry whose opening '{' line is lost is not read; with --lenient its two refused
    lines and its nine other lines are all counted as skipped."""
    lines = (SADF / f"{V12}-sadf-j-uALL.json").read_bytes().split(b"\n")
    at = lines.index(b"\t\t\t\t{")
    end = lines.index(b"\t\t\t\t},", at)
    bad = b"\n".join(lines[:at] + lines[at + 1:])
    with pytest.raises(InputFormatError) as exc:
        parse_bytes(bad)
    assert exc.value.line_no == at + 1  # (its timestamp line, now where the '{' was)
    frame, src = parse_bytes(bad, lenient=True)
    assert (len(frame), src.skipped) == (28, end - at)  # the entry's lines but the lost one
    assert any("opening '{' is lost" in e for e in src.skipped_examples)
