"""AWR HTML: real reports (Microsoft's Oracle-on-Azure lab, 12.2 CDB on Exadata; its 19c
RAC global reports in test_oracle_rac) read with an HTML parser into the rows the report's
own tables hold; the HTML and the text of the same report give the same rows; mutated
reports give clear errors only, and lenient reads never invent a row."""

from __future__ import annotations

import gzip
import html
import re
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iogauge.errors import InputFormatError
from iogauge.importers import awr_html
from iogauge.importers.base import Source
from iogauge.importers.registry import detect, import_file
from iogauge.model.waitevents import WaitEventFrame

AWR = Path(__file__).resolve().parents[2] / "fixtures" / "awr"
AWR_HTML = AWR.parent / "awr-html"
DBS = AWR_HTML / "azure-levelup-AWR_DBS.html.gz"  # 12.2.0.1 CDB, instance dbs1, 3 days
DBT = AWR_HTML / "azure-levelup-AWR_DBT.html.gz"
RAC = AWR_HTML / "azure-levelup-AWR_DBU.html.gz"  # 19c awrgrpt
SOE_TXT = AWR / "awr_11201_soe_swingbench_hostcpu.txt"
SOE_HTML = AWR_HTML / "awr_11201_soe_swingbench_hostcpu.html"


def test_sniffed_by_title_before_the_text_reader() -> None:
    assert detect(gzip.decompress(DBS.read_bytes())[:65536]) == "awr-html"
    assert detect(SOE_HTML.read_bytes()) == "awr-html"
    assert detect(SOE_TXT.read_bytes()) == "awr"


def test_real_12_2_report_rows_match_its_tables() -> None:
    res = import_file(DBS)
    assert (res.format, res.skipped) == ("awr-html", 0)
    ts = res.frame.df
    # Tablespace IO Stats: 16 rows, one per (container, tablespace); 16K blocks
    assert ts.height == 16
    assert set(ts["device_kind"]) == {"tablespace"}
    staging = ts.filter(pl.col("device") == "WWPCONT1:STAGING_TBS").to_dicts()[0]
    assert (staging["r_iops"], staging["r_await_ms"], staging["w_iops"]) == (284.0, 0.46, 22.0)
    assert staging["r_areq_kB"] == pytest.approx(5.65 * 16)
    assert res.frame.df["ts"].to_list()[0].isoformat() == "2022-01-26T10:00:35+00:00"
    waits = res.waits.df
    counts = dict(waits.group_by("section").len().rows())
    assert counts == {"top timed events": 10, "foreground wait events": 176,
                      "background wait events": 225, "iostat by filetype": 13,
                      "wait event histogram": 306}
    # 12.2's histogram (the summary 11.2.0.4 gives it) ends at '>=512us': the waits are read,
    # the shares of waits >= 32 ms and >= 1 s cannot be, and are left empty
    hist = waits.filter(pl.col("section") == "wait event histogram")
    assert hist.row(0, named=True)["event"] == "ADR block file read"
    assert hist.row(0, named=True)["waits"] == 23.4e6  # printed 23.4M
    assert hist["waits_ge_32ms_pct"].null_count() == hist["waits_ge_1s_pct"].null_count() == 306
    first = waits.filter(pl.col("section") == "foreground wait events").row(0, named=True)
    assert (first["event"], first["waits"], first["time_waited_s"], first["avg_wait_ms"],
            first["pct_db_time"]) == ("cell single block physical read", 98875012.0,
                                      34992.0, 0.3539, 7.89)
    top = waits.filter(pl.col("section") == "top timed events")
    assert top.row(0, named=True)["time_waited_s"] == 321500.0  # DB CPU 321.5K
    assert res.waits.df["db_name"].unique().to_list() == ["DBS"]


def test_second_real_report_imports_strictly() -> None:
    res = import_file(DBT)
    assert res.skipped == 0
    assert res.frame.df.height == 11
    top = res.waits.df.filter(pl.col("section") == "top timed events")
    assert top.filter(pl.col("event") == "cell single block physical read")[
        "waits"].to_list() == [700e6]  # printed 700M


def test_text_and_html_of_one_report_give_the_same_rows() -> None:
    text, html = import_file(SOE_TXT), import_file(SOE_HTML)
    assert text.frame.df.sort("device").equals(html.frame.df.sort("device"))
    tw, hw = text.waits.df, html.waits.df
    assert tw.height == hw.height == 21  # 5 top, 6 fg, 3 bg, 4 histogram, 3 by filetype
    # the text cuts names at the column width ("control file sequential re"): each text
    # row is the HTML row of the same place, its names a prefix of the HTML names
    for t, h in zip(tw.iter_rows(named=True), hw.iter_rows(named=True), strict=True):
        assert h["event"].startswith(t["event"])
        assert (h["wait_class"] or "").startswith(t["wait_class"] or "")
        drop = ("event", "wait_class")
        assert {k: v for k, v in t.items() if k not in drop} == \
            {k: v for k, v in h.items() if k not in drop}


_REPORTS = [DBS, SOE_HTML]  # (RAC: test_oracle_rac)


def _parse(data: bytes, *, lenient: bool) -> tuple[set[tuple[object, ...]], Source]:
    src = Source(path="mutated.html", lenient=lenient)
    frame = awr_html.parse(data, src)
    waits = WaitEventFrame.concat(src.waits).df
    rows = set(frame.df.select("device", "r_iops", "r_await_ms").iter_rows())
    rows |= set(waits.select("section", "event", "waits", "time_waited_s").iter_rows())
    return rows, src


_WHOLE: dict[bytes, set[tuple[object, ...]]] = {}


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[bytes, bytes, bool]:
    """(report, mutated report, whether a line was cut short) -- lines dropped, doubled,
    cut, or junk lines pasted in."""
    path = draw(st.sampled_from(_REPORTS))
    raw = path.read_bytes()
    data = gzip.decompress(raw) if path.suffix == ".gz" else raw
    lines = data.split(b"\n")
    cut = False
    for _ in range(draw(st.integers(1, 5))):
        at = draw(st.integers(0, len(lines) - 1))
        how = draw(st.sampled_from(["drop", "dup", "cut", "junk"]))
        if how == "drop":
            del lines[at]
        elif how == "dup":
            lines.insert(at, lines[at])
        elif how == "cut":
            lines[at] = lines[at][: draw(st.integers(0, len(lines[at])))]
            cut = True
        else:
            lines.insert(at, draw(st.binary(max_size=40)))
    return data, b"\n".join(lines), cut


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_mutated_html_gives_clear_errors_and_lenient_invents_nothing(
        case: tuple[bytes, bytes, bool]) -> None:
    original, data, cut = case
    whole = _WHOLE.get(original)
    if whole is None:
        whole = _WHOLE[original] = _parse(original, lenient=False)[0]
    for lenient in (False, True):
        try:
            rows, _ = _parse(data, lenient=lenient)
        except InputFormatError as exc:  # strict: a clear error, never another exception
            error: InputFormatError | None = exc
        else:
            error = None
        if error is not None:
            assert error.reason
        elif not cut:  # (a cell cut short is a different value, not an invented row)
            assert rows <= whole


def test_real_report_os_statistics_as_host_cpu() -> None:
    df = import_file(DBS).frame.df
    total = 253_199_088 + 566_798_662  # BUSY_TIME + IDLE_TIME of the report
    assert df["cpu_user_pct"].unique().to_list() == [pytest.approx(226_865_365 * 100 / total)]
    assert df["cpu_idle_pct"].null_count() == 0


def test_iostat_by_filetype_small_and_large_reads() -> None:
    """Real 12.2 report: 'Data File  ...  381.89us  244.41ms'; the TOTAL: row is no file
    type; the SOE text and HTML give the same three rows (Log File prints no read time)."""
    ft = import_file(DBS).waits.df.filter(pl.col("section") == "iostat by filetype")
    got = dict(ft.select("event", "avg_wait_ms").iter_rows())
    assert got["Data File small read"] == pytest.approx(0.38189)
    assert got["Data File large read"] == 244.41
    assert got["Temp File small read"] == 390.89
    assert not any(k.startswith("TOTAL") for k in got)
    for path in (SOE_TXT, SOE_HTML):
        soe = import_file(path).waits.df.filter(pl.col("section") == "iostat by filetype")
        assert soe.select("event", "avg_wait_ms").rows() == [
            ("Data File small read", 177.4), ("Data File large read", 44.6),
            ("Control File small read", 3.1)]


# ---- the real reports' rows against their own tables, read here by regular expressions ----
_CELL_RE = re.compile(r"<t[dh][^>]*>(.*?)(?=<t[dh]|</tr|<tr|$)", re.IGNORECASE | re.DOTALL)
_TAG_RE = re.compile(r"<[^>]+>")
_SUFFIX = {"K": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9)}
_UNIT = {"ns": Decimal("0.000001"), "us": Decimal("0.001"), "ms": Decimal(1),
         "s": Decimal(1000)}


def _printed(path: Path, summary: str) -> list[list[str]]:
    """The rows of cells (headings first) of the table whose summary starts so."""
    text = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
    start = text.lower().index(f'summary="{summary.lower()}')
    end = text.lower().index("</table>", start)
    rows = re.split(r"<tr\b[^>]*>", text[start:end], flags=re.IGNORECASE)[1:]
    return [[html.unescape(_TAG_RE.sub("", c)).replace("\xa0", " ").strip()
             for c in _CELL_RE.findall(tr)] for tr in rows]


def _dec(cell: str) -> float | None:
    """'98,875,012', '321.5K', '353.90us' (-> ms) as the report means them."""
    cell = cell.replace(",", "")
    if not cell:
        return None
    m = re.fullmatch(r"([\d.]+)(ns|us|ms|s)", cell)
    if m:
        return float(Decimal(m.group(1)) * _UNIT[m.group(2)])
    if cell[-1] in _SUFFIX:
        return float(Decimal(cell[:-1]) * _SUFFIX[cell[-1]])
    return float(Decimal(cell))


@pytest.mark.parametrize("path", [DBS, DBT], ids=["DBS", "DBT"])
def test_real_foreground_waits_match_the_printed_table(path: Path) -> None:
    """Every foreground wait row: the event, Waits, Total Wait Time (s) and Avg wait as
    the report prints them, in its order, none more, none less."""
    printed = _printed(path, "This table displays Foreground Wait Events")
    heads, rows = printed[0], printed[1:]
    at = {h: heads.index(h) for h in ("Event", "Waits", "Total Wait Time (s)", "Avg wait")}
    got = (import_file(path).waits.df.filter(pl.col("section") == "foreground wait events")
           .select("event", "waits", "time_waited_s", "avg_wait_ms").rows())
    want = [(r[at["Event"]], _dec(r[at["Waits"]]), _dec(r[at["Total Wait Time (s)"]]),
             _dec(r[at["Avg wait"]])) for r in rows]
    assert len(got) == len(want) > 100
    for g, w in zip(got, want, strict=True):
        assert g[:3] == w[:3]
        assert g[3] == pytest.approx(w[3], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("path", [DBS, DBT], ids=["DBS", "DBT"])
def test_real_tablespace_rows_match_tablespace_io_stats(path: Path) -> None:
    """Every Tablespace IO Stats row (container:tablespace; the root's without a container
    name): Av Rds/s, Av Rd(ms), Writes avg/s as printed."""
    printed = _printed(path, "This table displays IO Statistics for different tablespaces")
    heads, rows = printed[0], printed[1:]
    at = {h: heads.index(h) for h in ("Tablespace", "Av Rds/s", "Av Rd(ms)", "Writes avg/s",
                                      "PDB Name")}
    want = {":".join(x for x in (r[at["PDB Name"]], r[at["Tablespace"]]) if x): (
        _dec(r[at["Av Rds/s"]]), _dec(r[at["Av Rd(ms)"]]) or 0.0, _dec(r[at["Writes avg/s"]]))
        for r in rows}
    df = import_file(path).frame.df.filter(pl.col("device_kind") == "tablespace")
    got = {d: (r, rd, w) for d, r, rd, w in
           df.select("device", "r_iops", "r_await_ms", "w_iops").rows()}
    assert got == want
