"""Real AWR 11.2.0.4 reports, text and HTML of the same two RAC instances (yasushiyy/awr2csv's
samples, MIT; see tests/fixtures/NOTICE): each imports strictly, its rows are the report's
own tables (values read off the files and written here literally), the text and the HTML
give the same rows but for the precision each prints, and --lenient only ever skips.

The layouts these reports taught the readers: "Total Wait Time (sec)" printed in a column
four wide ("Tota" over "Time"), N/A where no average exists, Cache Sizes after the Top 10,
a histogram count cut at its column width ("118.6" for 118.6K), the HTML's summaries of
11.2.0.4, and a Tablespace IO Stats whose values after Av Blks/Rd are not under their
headings (its writes are not read)."""

from __future__ import annotations

import gzip
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from iogauge.cli.main import app
from iogauge.errors import InputFormatError
from iogauge.importers import awr
from iogauge.importers.base import Source
from iogauge.importers.registry import import_file
from iogauge.model.waitevents import WaitEventFrame

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TXT = {n: FIXTURES / "awr" / f"awr2csv-11.2.0.4-rac-orcl{n}.txt.gz" for n in (1, 2)}
HTML = {n: FIXTURES / "awr-html" / f"awr2csv-11.2.0.4-rac-orcl{n}.html.gz" for n in (1, 2)}
WAIT = ["event", "waits", "time_waited_s", "avg_wait_ms"]


def _section(path: Path, section: str) -> pl.DataFrame:
    res = import_file(path)
    assert res.skipped == 0
    return res.waits.df.filter(pl.col("section") == section)


@pytest.mark.parametrize("path", [*TXT.values(), *HTML.values()], ids=lambda p: p.name)
def test_imports_strictly_with_the_reports_notes(path: Path) -> None:
    res = import_file(path)
    assert res.skipped == 0
    assert res.format == ("awr" if path.parent.name == "awr" else "awr-html")
    assert res.frame.df.height == 8  # 4 tablespaces, 4 files
    assert any("11.2.0.4 layout" in n and "writes were not read" in n for n in res.notes)
    ts = res.frame.df.filter(pl.col("device_kind") == "tablespace")
    assert ts["w_iops"].null_count() == 4


def test_instance_1_top_and_foreground_events_as_printed() -> None:
    top = _section(TXT[1], "top timed events")
    assert top.height == 10
    assert top.select(WAIT).rows()[:5] == [
        ("DB CPU", None, 1.1, None),
        ("name-service call wait", 12.0, 0.6, 49.0),
        ("IPC send completion sync", 121.0, 0.1, 1.0),
        ("gc current block 2-way", 97.0, 0.1, 1.0),
        ("log file sync", 2.0, 0.0, 21.0),
    ]
    assert top.row(0, named=True)["pct_db_time"] == 58.0
    fg = _section(TXT[1], "foreground wait events")
    assert fg.height == 22
    named = {r[0]: r[1:] for r in fg.select(WAIT).rows()}
    assert named["name-service call wait"] == (12.0, 1.0, 49.0)
    assert named["PX Deq: reap credit"] == (359.0, 0.0, 0.0)
    assert named["jobq slave wait"] == (960.0, 481.0, 501.0)


def test_instance_2_top_and_foreground_events_as_printed() -> None:
    top = _section(TXT[2], "top timed events")
    assert top.height == 10
    named = {r[0]: r[1:] for r in top.select(WAIT).rows()}
    assert named["DB CPU"] == (None, 1.0, None)
    assert named["name-service call wait"] == (12.0, 0.8, 64.0)
    assert named["db file sequential read"] == (4.0, 0.0, 10.0)
    fg = _section(TXT[2], "foreground wait events")
    assert fg.height == 26
    named = {r[0]: r[1:] for r in fg.select(WAIT).rows()}
    assert named["PX qref latch"] == (1638.0, 0.0, 0.0)  # printed 1,638
    assert named["SQL*Net message from clien"] == (724.0, 3620.0, 5000.0)


def test_tablespace_rows_match_tablespace_io_stats() -> None:
    for n, expected in ((1, [("SYSAUX", 0.0, 3.3, 8.0), ("SYSTEM", 0.0, 5.2, 8.0),
                             ("TEMP", 0.0, 0.0, 8.0), ("UNDOTBS1", 0.0, 0.0, 0.0)]),
                        (2, [("SYSAUX", 0.0, 4.2, 37.6), ("SYSTEM", 0.0, 4.0, 16.8),
                             ("TEMP", 0.0, 0.0, 96.0), ("UNDOTBS2", 0.0, 0.0, 0.0)])):
        ts = import_file(TXT[n]).frame.df.filter(pl.col("device_kind") == "tablespace")
        # Av Rds/s, Av Rd(ms), Av Blks/Rd x the 8 KB block of Cache Sizes (after the Top 10)
        assert ts.sort("device").select("device", "r_iops", "r_await_ms",
                                        "r_areq_kB").rows() == expected


def test_file_io_stats_read_its_writes_and_an_n_a_read_time() -> None:
    files = import_file(TXT[1]).frame.df.filter(pl.col("device_kind") == "datafile")
    undo = files.filter(pl.col("parent") == "UNDOTBS1").row(0, named=True)
    # "0 0 N/A N/A 0 N/A 121 ...": no reads, no read time; writes are read here
    assert (undo["r_iops"], undo["r_await_ms"], undo["w_iops"]) == (0.0, 0.0, 0.0)


def test_histogram_count_cut_at_its_width_is_left_empty_with_a_note() -> None:
    res = import_file(TXT[1])
    hist = res.waits.df.filter(pl.col("section") == "wait event histogram")
    gcs = hist.filter(pl.col("event") == "gcs remote message").row(0, named=True)
    # "gcs remote message  118.6  1.2 .6 .4 .2 .2  95.2  2.2": <1ms 1.2 % ... <32ms 95.2 %,
    # <=1s (32 ms-1 s) 2.2 %, >1s blank (its 30 ms timeouts)
    assert gcs["waits"] is None
    assert (gcs["waits_ge_32ms_pct"], gcs["waits_ge_1s_pct"]) == (2.2, 0.0)
    assert any("'118.6' (line 474)" in n and "left empty" in n for n in res.notes)
    html = import_file(HTML[1]).waits.df.filter(
        (pl.col("section") == "wait event histogram") & (pl.col("event") == "gcs remote message"))
    assert html["waits"].to_list() == [118600.0]  # the HTML prints 118.6K


def test_iostat_by_filetype_n_a_gives_no_row() -> None:
    ft = _section(TXT[2], "iostat by filetype")
    assert dict(ft.select("event", "avg_wait_ms").rows()) == {
        "Control File small read": 0.1, "Data File small read": 3.6,
        "Data File large read": 16.1, "Temp File small read": 1.5}


def _half_unit(x: float) -> Decimal:
    exp = Decimal(repr(x)).as_tuple().exponent
    assert isinstance(exp, int)
    return Decimal(5).scaleb(exp - 1) if exp < 0 else Decimal("0.5")


def _same_printed(text: object, html: object, scale: int) -> bool:
    """The text and the HTML print one value: equal, or within half a unit of the last
    digit each prints (the HTML prints 3.33 where the text prints 3.3; both round Oracle's
    value, so 1.95 in the HTML may be 1.9 in the text)."""
    if not isinstance(text, float) or not isinstance(html, float):
        return text == html
    gap = abs(Decimal(repr(text)) - Decimal(repr(html)))
    return gap <= (_half_unit(text) + _half_unit(html)) * scale


@pytest.mark.parametrize("n", [1, 2])
def test_text_and_html_give_the_same_rows(n: int) -> None:
    t, h = import_file(TXT[n]), import_file(HTML[n])
    pairs = [(t.frame.df.sort("device"), h.frame.df.sort("device")), (t.waits.df, h.waits.df)]
    differ = []
    for a, b in pairs:
        assert a.columns == b.columns
        assert a.height == b.height
        for x, y in zip(a.iter_rows(named=True), b.iter_rows(named=True), strict=True):
            for k in x:
                if k in ("event", "wait_class"):  # the text cuts names at the column width
                    ok = " ".join((y[k] or "").split()).startswith(" ".join((x[k] or "").split()))
                else:  # Av Blks/Rd x 8 KB: the printed difference times 8
                    ok = _same_printed(x[k], y[k], 8 if k == "r_areq_kB" else 1)
                if not ok:
                    differ.append((x.get("section"), x.get("event") or x.get("device"), k))
    # the one value they do not share: the count the text cut at its column width
    assert differ == [("wait event histogram", "gcs remote message", "waits")]
    assert t.waits.df.height == {1: 234, 2: 246}[n]


def _rows(path: Path, data: bytes, *, lenient: bool) -> set[tuple[object, ...]]:
    src = Source(path=str(path), lenient=lenient)
    frame = awr.parse(data, src)
    waits = WaitEventFrame.concat(src.waits).df
    out = set(waits.select("section", "event", "waits", "time_waited_s").iter_rows())
    return out | set(frame.df.select("device", "r_iops", "r_await_ms").iter_rows())


@pytest.mark.parametrize("n", [1, 2])
def test_lenient_equals_strict(n: int) -> None:
    data = gzip.decompress(TXT[n].read_bytes())
    src = Source(path="x", lenient=True)
    awr.parse(data, src)
    assert src.skipped == 0
    assert _rows(TXT[n], data, lenient=True) == _rows(TXT[n], data, lenient=False)


_DATA = {n: gzip.decompress(p.read_bytes()) for n, p in TXT.items()}
_WHOLE = {n: _rows(TXT[n], d, lenient=False) for n, d in _DATA.items()}


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[int, bytes, bool]:
    """(instance, a report with lines dropped, doubled, cut or pasted from elsewhere in it,
    whether a line was changed): only pasted and doubled lines must give a subset."""
    n = draw(st.sampled_from([1, 2]))
    lines = _DATA[n].split(b"\n")
    changed = False
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["drop", "dup", "cut", "paste"]))
        if how == "drop":
            del lines[at]
            changed = True
        elif how == "dup":
            lines.insert(at, lines[at])
        elif how == "cut":
            lines[at] = lines[at][: draw(st.integers(0, len(lines[at])))]
            changed = True
        else:  # a header line (before the Top 10) pasted anywhere
            lines.insert(at, lines[draw(st.integers(1, 45))])
    return n, b"\n".join(lines), changed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)
@given(_mutated())
def test_mutated_reports_give_clear_errors_and_lenient_invents_nothing(
        case: tuple[int, bytes, bool]) -> None:
    n, data, changed = case
    try:
        strict: set[tuple[object, ...]] | None = _rows(TXT[n], data, lenient=False)
    except InputFormatError as exc:  # a clear error: the file, a line, a reason
        error: InputFormatError | None = exc
        strict = None
    else:
        error = None
    if error is not None:
        assert error.path == str(TXT[n])
        assert error.reason
    elif not changed:
        assert strict is not None
        assert strict <= _WHOLE[n]
    lenient = _rows(TXT[n], data, lenient=True)
    if not changed:
        assert lenient <= _WHOLE[n]


def test_analyze_through_the_cli() -> None:
    res = CliRunner().invoke(app, ["analyze", str(TXT[2])])
    assert res.exit_code == 0, res.output
    assert "SYSAUX" in res.output and "UNDOTBS2" in res.output
