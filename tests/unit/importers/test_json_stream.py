"""sysstat JSON in any layout, read a piece at a time (importers/json_stream.py).

The writers' own layouts have line-by-line readers; the same documents re-indented (as jq
and Python leave them) or on one line go through :class:`HostsDocument`. The two readings
of one document must give the same rows.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from iogauge.errors import InputFormatError
from iogauge.importers import iostat_json, json_stream, sadf_json
from iogauge.importers.base import Source
from iogauge.model.sampleframe import SampleFrame

FIX = Path(__file__).resolve().parents[2] / "fixtures"
IOSTAT = FIX / "iostat-json"
SADF = FIX / "sadf"
OWN_IOSTAT = ["live-sysstat12.6-x-t.json", "live-sysstat12.6-d-t-iso.json"]
OWN_SADF = ["sysstat12.6.1-sadf-j-uALL.json", "sysstat12.6.1-sadf-j-A.json",
            "sysstat12.6.1-sadf-j-T-Tokyo.json"]


def relayout(data: bytes, how: str) -> bytes:
    doc = json.loads(data)
    if how == "compact":
        return json.dumps(doc, separators=(",", ":")).encode()
    if how == "sorted":
        return json.dumps(doc, indent=1, sort_keys=True).encode()
    return json.dumps(doc, indent="\t" if how == "tab" else 2).encode()


def read(module: Any, data: bytes, chunk: int, **kw: Any) -> tuple[pl.DataFrame, Source]:
    src = Source(path="x.json", **kw)
    frames = list(module.iter_parse(io.BytesIO(data), src, chunk_bytes=chunk))
    df = SampleFrame.concat(frames).df if frames else SampleFrame.empty().df
    return df.sort(df.columns, nulls_last=True), src


@pytest.mark.parametrize("name", OWN_IOSTAT)
@pytest.mark.parametrize("how", ["tab", "compact", "sorted"])
def test_iostat_any_layout_gives_the_rows_of_its_own(name: str, how: str) -> None:
    data = (IOSTAT / name).read_bytes()
    assert iostat_json.own_layout(data[:64])
    want, want_src = read(iostat_json, data, 1 << 20)
    other = relayout(data, how)
    assert not iostat_json.own_layout(other[:64])
    for chunk in (3, 1 << 20):
        got, src = read(iostat_json, other, chunk)
        assert got.equals(want), (how, chunk)
        assert src.notes == want_src.notes


@pytest.mark.parametrize("name", OWN_SADF)
@pytest.mark.parametrize("how", ["indent", "compact", "sorted"])
def test_sadf_any_layout_gives_the_rows_of_its_own(name: str, how: str) -> None:
    data = (SADF / name).read_bytes()
    assert sadf_json.own_layout(data[:64])
    kw: dict[str, Any] = {}
    want, want_src = read(sadf_json, data, 1 << 20, **kw)
    other = relayout(data, how)
    for chunk in (5, 1 << 20):
        got, src = read(sadf_json, other, chunk, **kw)
        assert got.equals(want), (how, chunk)
        assert src.notes == want_src.notes  # (restart records counted in both)


def _weird_doc() -> bytes:
    """Strings with quotes, backslashes and brackets where the scanner looks for structure."""
    doc = json.loads((IOSTAT / OWN_IOSTAT[0]).read_bytes())
    host = doc["sysstat"]["hosts"][0]
    host["nodename"] = 'we\\"ird [host] {x} \\\\'
    host["machine"] = '"]}{["'
    for st in host["statistics"]:
        for d in st["disk"]:
            if d["disk_device"] == "vda":
                d["disk_device"] = 'v]d}a\\"'
    return json.dumps(doc, indent=1).encode()


def test_brackets_quotes_and_backslashes_inside_strings_in_any_piece() -> None:
    data = _weird_doc()
    want, _ = read(iostat_json, data, 1 << 20)
    assert set(want["host"]) == {'we\\"ird [host] {x} \\\\'}
    assert 'v]d}a\\"' in set(want["device"])
    # pieces of every size from 1 to 12 bytes cut every string and escape somewhere
    for chunk in range(1, 13):
        got, _ = read(iostat_json, data, chunk)
        assert got.equals(want), chunk


def _entry_ends(data: bytes) -> list[int]:
    """Offsets just after each statistics entry's closing brace (compact layout)."""
    doc = json.loads(data)
    n = len(doc["sysstat"]["hosts"][0]["statistics"])
    ends, depth, in_str, esc = [], 0, False, False
    for i, c in enumerate(data.decode()):
        if esc:
            esc = False
        elif c == "\\":
            esc = True
        elif c == '"':
            in_str = not in_str
        elif not in_str and c in "{[":
            depth += 1
        elif not in_str and c in "}]":
            depth -= 1
            if depth == 5 and c == "}":
                ends.append(i + 1)
    assert len(ends) == n
    return ends


def test_cut_anywhere_keeps_the_complete_entries() -> None:
    data = relayout((IOSTAT / OWN_IOSTAT[0]).read_bytes(), "compact")
    full, _ = read(iostat_json, data, 1 << 20, interval_s=1.0)
    ends = _entry_ends(data)
    stats_at = data.index(b'"statistics":[') + len(b'"statistics":[')
    per_entry = full.group_by("ts").len().sort("ts")["len"].to_list()
    for cut in range(stats_at, len(data), 37):
        got, src = read(iostat_json, data[:cut], 1 << 20, interval_s=1.0)
        complete = sum(1 for e in ends if e <= cut)
        assert len(got) == sum(per_entry[:complete]), cut
        assert any("the document ends" in n for n in src.notes), cut
    with pytest.raises(InputFormatError, match='ends before its "statistics" list'):
        read(iostat_json, data[:stats_at - 3], 1 << 20)


def _first_entry_end(replacement: bytes) -> tuple[bytes, int]:
    """The re-indented iostat document with the line that ends its first statistics entry
    (``},`` at 10 spaces: another entry follows) replaced; and that line's index."""
    data = relayout((IOSTAT / OWN_IOSTAT[0]).read_bytes(), "indent")
    lines = data.split(b"\n")
    at = lines.index(b"          },")
    return b"\n".join([*lines[:at], replacement, *lines[at + 1:]]), at


def test_a_lost_closing_brace_is_damage_not_a_cut() -> None:
    broken, at = _first_entry_end(b"          ,")
    with pytest.raises(InputFormatError) as err:
        read(iostat_json, broken, 512)
    assert "malformed JSON statistics entry" in err.value.reason
    assert err.value.line_no == at + 2  # the parser stops at the next entry's '{'


def test_a_lost_comma_between_entries_names_its_line() -> None:
    broken, at = _first_entry_end(b"          }")
    with pytest.raises(InputFormatError, match="not valid JSON") as err:
        read(iostat_json, broken, 300)
    assert err.value.line_no == at + 2


def test_a_bracket_that_closes_the_wrong_list_outside_the_entries() -> None:
    data = b'{"sysstat": {"hosts": [\n{"nodename": "x",\n "statistics": [}]}}'
    with pytest.raises(InputFormatError, match=r"x.json:3: not valid JSON: '\}' closes"):
        read(iostat_json, data, 4)


def test_entries_that_are_not_objects_are_passed_over() -> None:
    doc = json.loads((IOSTAT / OWN_IOSTAT[0]).read_bytes())
    want, _ = read(iostat_json, json.dumps(doc).encode(), 1 << 20)
    doc["sysstat"]["hosts"][0]["statistics"][1:1] = [7, "x", [1, {"disk": []}], None]
    got, _ = read(iostat_json, json.dumps(doc).encode(), 64)
    # (the entries keep their numbers: the first is still the since-boot one)
    assert got.equals(want)


def test_documents_one_after_the_other_are_two_hosts() -> None:
    one = relayout((IOSTAT / OWN_IOSTAT[0]).read_bytes(), "indent")
    got, _ = read(iostat_json, one + b"\n" + one.replace(b'"vm"', b'"vm2"'), 100)
    single, _ = read(iostat_json, one, 100)
    assert len(got) == 2 * len(single)
    assert got.group_by("host").agg(pl.col("since_boot").sum()).sort("host").rows() == [
        ("vm", single["since_boot"].sum()), ("vm2", single["since_boot"].sum())]


def test_utf16_document() -> None:
    data = relayout((IOSTAT / OWN_IOSTAT[0]).read_bytes(), "indent")
    want, _ = read(iostat_json, data, 1 << 20)
    got, _ = read(iostat_json, b"\xff\xfe" + data.decode().encode("utf-16-le"), 100)
    assert got.equals(want)


def test_an_entry_that_never_closes_stops_at_the_limit(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setattr(json_stream, "MAX_ENTRY_BYTES", 6000)  # (an entry: 2.2 kB here)
    broken, at = _first_entry_end(b"          ,")
    with pytest.raises(InputFormatError) as err:
        read(iostat_json, broken, 700)
    assert err.value.line_no == at + 2  # named by where the JSON parser stops
    data = relayout((IOSTAT / OWN_IOSTAT[0]).read_bytes(), "indent")
    long = data.replace(b'"disk": [', b'"disk": [' + b" " * 7000, 1)
    with pytest.raises(InputFormatError, match="a statistics entry longer than") as err:
        read(iostat_json, long, 700)
    assert err.value.line_no == 12  # (the first entry's "{")


def test_lenient_drops_the_entry_and_counts_its_lines() -> None:
    data = relayout((SADF / OWN_SADF[0]).read_bytes(), "indent")
    want, _ = read(sadf_json, data, 1 << 20)
    text = data.decode()
    i = text.index('"tps": ', text.index('"disk"'))
    bad = (text[:i] + '"tps": 1.2.3' + text[text.index(",", i):]).encode()
    with pytest.raises(InputFormatError, match="malformed JSON statistics entry"):
        read(sadf_json, bad, 300)
    got, src = read(sadf_json, bad, 300, lenient=True)
    first = json.loads(data)["sysstat"]["hosts"][0]["statistics"][0]
    assert len(got) == len(want) - len(first["disk"])
    lines_of_first = json.dumps(first, indent=2).count("\n") + 1
    assert src.skipped == lines_of_first


@pytest.mark.parametrize("module", [iostat_json, sadf_json])
def test_nothing_but_blanks_is_not_a_document(module: Any) -> None:
    with pytest.raises(InputFormatError, match="the input is empty"):
        read(module, b" \n\t\n", 1 << 20)
