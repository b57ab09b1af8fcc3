"""AWR RAC global reports (awrgrpt.sql HTML, real 19c reports of Microsoft's Oracle-on-Azure
lab): the foreground wait events of each instance, read strictly, matching the report's own
Top Timed Foreground Events table (an instance's row as printed; the instances' rows adding
up to the cluster row the report prints above them)."""

from __future__ import annotations

import gzip
import html
import re
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from iogauge.cli.main import app
from iogauge.errors import InputFormatError
from iogauge.importers.registry import import_file

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
    waits = res.waits.df
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
    per = res.waits.df.group_by("event").agg(pl.col("waits").sum(), pl.len())
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
    assert res.waits.df.height == 19


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
