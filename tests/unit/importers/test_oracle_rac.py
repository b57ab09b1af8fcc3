"""AWR RAC global reports (awrgrpt.sql HTML, real 19c reports of Microsoft's Oracle-on-Azure
lab): the foreground wait events of each instance, read strictly, matching the report's own
Top Timed Foreground Events table (an instance's row as printed; the instances' rows adding
up to the cluster row the report prints above them)."""

from __future__ import annotations

import functools
import gzip
import html
import re
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from iogauge.cli.main import app
from iogauge.errors import InputFormatError
from iogauge.importers import awr_html
from iogauge.importers.base import Source
from iogauge.importers.registry import import_file
from iogauge.model.waitevents import WaitEventFrame

AWR_HTML = Path(__file__).resolve().parents[2] / "fixtures" / "awr-html"
RAC = {name: AWR_HTML / f"azure-levelup-AWR_{name}.html.gz"
       for name in ("DBU", "DBV", "DBW", "DBZ")}

#: a cell's text: its tags dropped (the I# sits in a <div class="hidden">), &#160; decoded
_CELL_RE = re.compile(r"<td[^>]*>(.*?)</td>", re.DOTALL)
_TAG_RE = re.compile(r"<[^>]+>")


def _printed_rows(path: Path) -> list[tuple[str, str, str, str]]:
    """(I#, event, waits, total (s)) of the report's Top Timed Foreground Events, read by
    regular expressions over its cells (not by the product's parser)."""
    text = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
    start = text.index('summary="Top Timed Foreground Events')
    end = text.index("</table>", start)
    out = []
    for tr in text[start:end].split("<tr")[1:]:
        cells = [html.unescape(_TAG_RE.sub("", c)).strip() for c in _CELL_RE.findall(tr)]
        if len(cells) >= 6 and re.fullmatch(r"\*|\d+", cells[0]):
            out.append((cells[0], cells[2], cells[3], cells[5]))
    return out


def _num(cell: str) -> Decimal | None:
    cell = cell.replace(",", "").strip()
    return Decimal(cell) if cell else None


@pytest.mark.parametrize("name", sorted(RAC))
def test_rac_report_gives_each_instances_top_foreground_events(name: str) -> None:
    res = import_file(RAC[name])
    assert (res.format, res.skipped, res.frame.df.height) == ("awr-html", 0, 0)
    waits = res.waits.df.filter(pl.col("section") == "top timed events")
    printed = _printed_rows(RAC[name])
    instance_rows = [r for r in printed if r[0] != "*"]
    assert waits.height == len(instance_rows) == 20  # 10 events x 2 instances
    assert sorted(waits["instance"].unique()) == [f"{name}1", f"{name}2"]
    assert set(waits["db_name"]) == {name}
    assert set(waits["section"]) == {"top timed events"}
    # each row as the report prints it, in its order
    for (inst, event, n, total), row in zip(instance_rows, waits.iter_rows(named=True),
                                            strict=True):
        assert row["instance"] == f"{name}{inst}"
        assert row["event"] == event
        assert row["waits"] == (None if _num(n) is None else float(_num(n) or 0))
        assert row["time_waited_s"] == float(_num(total) or 0)


def test_instance_rows_add_up_to_the_cluster_rows() -> None:
    """For an event in the top 10 of both instances, the instances' waits add up to the
    cluster row's (the '*' row the report prints: 'Cluster-wide total')."""
    res = import_file(RAC["DBV"])
    cluster = {ev: _num(n) for i, ev, n, _t in _printed_rows(RAC["DBV"]) if i == "*"}
    top = res.waits.df.filter(pl.col("section") == "top timed events")
    per = top.group_by("event").agg(pl.col("waits").sum(), pl.len())
    both = per.filter(pl.col("len") == 2).filter(pl.col("event") != "DB CPU")
    assert both.height >= 3
    for event, total, _n in both.iter_rows():
        assert Decimal(str(int(total))) == cluster[event], event


def test_one_instance_row_as_printed() -> None:
    waits = import_file(RAC["DBV"]).waits.df
    row = waits.filter((pl.col("instance") == "DBV1") & (pl.col("event") == "log file sync")
                       ).row(0, named=True)
    # printed: 1  Commit  log file sync  16,035,645  0.00  11,953.43  745.43us  8.53
    assert (row["wait_class"], row["waits"], row["time_waited_s"], row["avg_wait_ms"],
            row["pct_db_time"], row["host"]) == ("Commit", 16_035_645.0, 11_953.43,
                                                 pytest.approx(0.74543), 8.53, "exa1-c1-node1")
    # the window: End Snap Time 22-Feb-23 00:00, Elapsed Time(min) 10,080.25
    assert row["ts"].isoformat() == "2023-02-22T00:00:00+00:00"
    assert row["interval_s"] == 10_080.25 * 60


def test_each_instances_iostat_by_file_type() -> None:
    """DBV's IOStat by File Type, instance rows as printed: 1 Data File 1.52ms / 84.00ms,
    2 Data File 581.09us / 26.30ms; no 'Total' and no '*' row; Other has no large read."""
    ft = import_file(RAC["DBV"]).waits.df.filter(pl.col("section") == "iostat by filetype")
    got = {(i, e): v for i, e, v in ft.select("instance", "event", "avg_wait_ms").rows()}
    assert got[("DBV1", "Data File small read")] == 1.52
    assert got[("DBV1", "Data File large read")] == 84.0
    assert got[("DBV2", "Data File small read")] == pytest.approx(0.58109)
    assert got[("DBV2", "Data File large read")] == 26.3
    assert ("DBV1", "Other small read") in got and ("DBV1", "Other large read") not in got
    assert not any(e.startswith("Total") for _i, e in got)
    assert ft.height == 2 * (7 * 2 - 1)  # 7 file types a instance, Other without large


def _dbv_with(old: str, new: str, tmp_path: Path) -> Path:
    """DBV with one cell of its Top Timed Foreground Events replaced (the first after the
    table's summary)."""
    text = gzip.decompress(RAC["DBV"].read_bytes()).decode("utf-8", "replace")
    at = text.index(old, text.index('summary="Top Timed Foreground Events'))
    path = tmp_path / "rac.html"
    path.write_text(text[:at] + new + text[at + len(old):])
    return path


def test_an_instance_the_report_does_not_list_is_refused(tmp_path: Path) -> None:
    bad = _dbv_with('<div class="hidden">   2</div>', '<div class="hidden">   7</div>',
                    tmp_path)
    with pytest.raises(InputFormatError, match="instance '7' is not in Database Instances"):
        import_file(bad)
    res = import_file(bad, lenient=True)
    assert res.skipped == 1
    assert res.waits.df.filter(pl.col("section") == "top timed events").height == 19


def test_a_slow_instance_is_judged_through_the_cli(tmp_path: Path) -> None:
    """A RAC report has no tablespace rows: its instances' waits are still judged, and
    the findings printed (instance 1's log file sync made 390.8 ms, as in the issue)."""
    slow = _dbv_with(">11,953.43<", ">6,266,730.07<", tmp_path)
    slow.write_text(slow.read_text().replace(">745.43us<", ">390.80ms<", 1))
    out = CliRunner().invoke(app, ["analyze", str(slow)])
    assert out.exit_code == 0, out.output
    assert "no device rows, wait events only" in out.output
    assert "log file sync averages 390.8 ms per wait on DBV/DBV1" in out.output
    assert "DBV2" not in out.output.split("findings")[1].split("\n")[1]


def _head() -> list[bytes]:
    """DBV cut to what the reader reads -- its title and three tables (Database Instances,
    Top Timed Foreground Events, IOStat by File Type), each as printed: a whole report
    for the reader, a fiftieth of the file, so that mutations land on what is read."""
    data = gzip.decompress(RAC["DBV"].read_bytes())
    parts = [data[:data.index(b"</title>") + len(b"</title>")]]
    for summary in (b"Database Instances", b"Top Timed Foreground Events",
                    b"IOStat by File Type"):
        at = data.rindex(b"<table", 0, data.index(b'summary="' + summary))
        parts.append(data[at:data.index(b"</table>", at) + len(b"</table>")])
    return b"\n".join(parts).split(b"\n")


_HEAD = _head()


@functools.cache
def _whole() -> frozenset[tuple[object, ...]]:
    """The unmutated rows, read once."""
    return frozenset(_rows(b"\n".join(_HEAD), lenient=False))


def _rows(data: bytes, *, lenient: bool) -> set[tuple[object, ...]]:
    src = Source(path="mutated.html", lenient=lenient)
    awr_html.parse(data, src)
    waits = WaitEventFrame.concat(src.waits).df
    return set(waits.select("instance", "section", "event", "waits", "time_waited_s",
                            "avg_wait_ms").iter_rows())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(_HEAD) - 1),
                          st.sampled_from(["drop", "dup", "junk", "digit"])),
                min_size=1, max_size=5))
def test_mutated_rac_report_gives_clear_errors_and_lenient_invents_nothing(
        edits: list[tuple[int, str]]) -> None:
    """Lines dropped, doubled, junk pasted in, or a digit changed to a letter: strict
    reading names the line or reads it; lenient reading gives no row the whole report
    does not have (and the whole cut report gives all 46 instance rows)."""
    assert len(_whole()) == 20 + 26
    whole = _whole()
    lines = list(_HEAD)
    for at, how in edits:
        k = min(at, len(lines) - 1)
        if how == "drop":
            del lines[k]
        elif how == "dup":
            lines.insert(k, lines[k])
        elif how == "junk":
            lines.insert(k, b"<tr><td>1</td><td>x</td><td>junk 12</td></tr>")
        else:
            lines[k] = re.sub(rb"\d", b"Z", lines[k], count=1)
    data = b"\n".join(lines)
    for lenient in (False, True):
        try:
            rows = _rows(data, lenient=lenient)
        except InputFormatError as exc:  # strict: a clear error, never another exception
            error: InputFormatError | None = exc
        else:
            error = None
        if error is not None:
            assert error.reason
        elif all(how != "digit" for _at, how in edits):
            # (a changed digit may be another value, not an invented row)
            assert rows <= whole
