"""The shared date/time reader (iogauge.importers.timestamps): every spelling of its module
docstring, both of parse_local's paths (chrono strptime for texts shaped like the first, the
capturing regular expressions for the rest), date-order inference, zones, day roll-over and
intervals."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iogauge.importers import timestamps as tsx

# (text, date order, local wall-clock time, stated offset in minutes)
SPELLINGS = [
    ("06/13/2018 02:10:50 PM", "MDY", datetime(2018, 6, 13, 14, 10, 50), None),  # en_US
    ("09/26/21 03:35:19", "MDY", datetime(2021, 9, 26, 3, 35, 19), None),  # C / POSIX
    ("13/06/2018 14:10:50", "DMY", datetime(2018, 6, 13, 14, 10, 50), None),  # en_GB
    ("13.06.2018 14:10:50", "DMY", datetime(2018, 6, 13, 14, 10, 50), None),  # de_DE
    ("2018-06-13T14:10:50+0200", "YMD", datetime(2018, 6, 13, 14, 10, 50), 120),  # ISO
    ("2018-06-13T14:10:50-05:30", "YMD", datetime(2018, 6, 13, 14, 10, 50), -330),
    ("2018-06-13T14:10:50Z", "YMD", datetime(2018, 6, 13, 14, 10, 50), 0),
    ("2018年06月13日 14時10分50秒", "YMD", datetime(2018, 6, 13, 14, 10, 50), None),  # ja_JP
    ("2018年06月13日 14时10分50秒", "YMD", datetime(2018, 6, 13, 14, 10, 50), None),  # zh_CN
    ("2018년 06월 13일 (수) 오후 02시 10분 50초", "YMD", datetime(2018, 6, 13, 14, 10, 50),
     None),  # ko_KR, 12-hour
    ("06/13/2018 02:10:50 p.m.", "MDY", datetime(2018, 6, 13, 14, 10, 50), None),
]

#: A stamp of another shape, put first so that the text under test is read by the
#: regular-expression path instead of strptime.
OTHER_SHAPE = "2000-01-01 00:00"


def _local(texts: list[str | None], order: str, kind: str = "datetime") -> list[datetime | None]:
    return tsx.parse_local(pl.Series("t", texts, dtype=pl.String), order,
                           kind=kind)["local"].to_list()


@pytest.mark.parametrize(("text", "order", "expect", "offset"), SPELLINGS)
def test_every_spelling_reads_the_same_by_either_path(text: str, order: str, expect: datetime,
                                                      offset: int | None) -> None:
    shaped = tsx.parse_local(pl.Series("t", [text, text]), order)
    assert shaped["local"].to_list() == [expect, expect]
    assert shaped["offset_min"].to_list() == [offset, offset]
    other_order = "YMD" if order == "YMD" else order
    mixed = tsx.parse_local(pl.Series("t", [OTHER_SHAPE, text]), other_order)
    assert mixed["local"][1] == expect
    assert mixed["offset_min"][1] == offset


def test_null_texts_keep_their_rows() -> None:
    # a null among stamps of one shape once vanished, shifting every later time up a row
    texts = ["06/13/2018 02:10:50 PM", None, "06/13/2018 02:10:52 PM", "garbage", None]
    assert _local(texts, "MDY") == [datetime(2018, 6, 13, 14, 10, 50), None,
                                    datetime(2018, 6, 13, 14, 10, 52), None, None]
    assert _local([None, None], "MDY") == [None, None]
    assert _local([None, "06/13/2018 14:10:52"], "MDY") == [None,
                                                           datetime(2018, 6, 13, 14, 10, 52)]


@pytest.mark.parametrize("first", ["01/01/2019 01:00:00 AM", OTHER_SHAPE])
def test_twelve_hour_clock_edges(first: str) -> None:
    texts = [first, "01/01/2019 12:00:00 AM", "01/01/2019 12:30:00 PM",
             "01/01/2019 01:00:00 PM", "01/01/2019 11:59:59 PM", "01/01/2019 13:00:00 PM",
             "01/01/2019 00:30:00 AM"]
    got = _local(texts, "MDY")[1:]
    d = datetime(2019, 1, 1)
    assert got == [d, d.replace(hour=12, minute=30), d.replace(hour=13),
                   d.replace(hour=23, minute=59, second=59), None, None]


@pytest.mark.parametrize("first", ["01/01/2019 00:00:00", OTHER_SHAPE])
def test_impossible_values_are_null(first: str) -> None:
    texts = [first, "02/30/2019 00:00:00", "02/29/2019 00:00:00", "02/29/2020 00:00:00",
             "02/29/2000 00:00:00", "02/29/1900 00:00:00", "13/01/2019 00:00:00",
             "01/32/2019 00:00:00", "01/01/2019 24:00:00", "01/01/2019 23:60:00",
             "04/31/2019 00:00:00", "00/10/2019 00:00:00"]
    got = _local(texts, "MDY")[1:]
    assert got == [None, None, datetime(2020, 2, 29), datetime(2000, 2, 29), None, None, None,
                   None, None, None, None]


@pytest.mark.parametrize("first", ["01/01/00 00:00:00", OTHER_SHAPE])
def test_two_digit_years_follow_chrono(first: str) -> None:
    got = _local([first, "01/01/69 00:00:00", "01/01/70 00:00:00", "12/31/99 00:00:00"],
                 "MDY")[1:]
    assert got == [datetime(2069, 1, 1), datetime(1970, 1, 1), datetime(1999, 12, 31)]


def test_dates_alone() -> None:
    got = tsx.parse_local(pl.Series("t", ["06/13/2018", "06/14/2018"]), "MDY", kind="date")
    assert got["local"].to_list() == [datetime(2018, 6, 13), datetime(2018, 6, 14)]


# ---- date order ---------------------------------------------------------------------------


def _order(texts: list[str], hint: str | None = None) -> tsx.DateOrder:
    return tsx.infer_date_order(tsx.stamp_dates(pl.Series("t", texts)), hint)


def test_a_field_above_12_decides() -> None:
    assert _order(["06/13/2018 00:00:00"]) == tsx.DateOrder("MDY", True)
    dmy = _order(["13/06/2018 00:00:00"])
    assert (dmy.order, dmy.certain) == ("DMY", True)
    assert dmy.note is not None and "13/06/2018" in dmy.note
    assert _order(["2018-06-01T00:00:00"]) == tsx.DateOrder("YMD", True)


def test_a_date_no_order_can_read_says_nothing() -> None:
    # 13/45: neither field can be the month (hypothesis put one in a log of 06/14 dates,
    # and whether the log failed as "mixing orders" depended on where it was cut)
    assert _order(["06/14/2018 10:00:00", "13/45/2018 10:00:00"]) == tsx.DateOrder("MDY", True)
    assert _order(["14/06/2018 10:00:00", "45/13/2018 10:00:00"]).order == "DMY"
    assert _order(["13/45/2018 10:00:00"]) == tsx.DateOrder("MDY", True)
    with pytest.raises(ValueError, match="mix day-first and month-first"):
        _order(["06/14/2018 10:00:00", "14/06/2018 10:00:00"])


def test_the_changing_field_is_the_day() -> None:
    mdy = _order(["06/01/2018 23:59:59", "06/02/2018 00:00:00"])
    assert (mdy.order, mdy.certain) == ("MDY", False)
    dmy = _order(["01.06.2018 23:59:59", "02.06.2018 00:00:00"])
    assert (dmy.order, dmy.certain) == ("DMY", False)
    assert dmy.note is not None and "first field" in dmy.note


def test_one_ambiguous_date_follows_its_separator() -> None:
    slash = _order(["06/01/2018 10:00:00"])
    dot = _order(["06.01.2018 10:00:00"])
    assert (slash.order, slash.certain, dot.order, dot.certain) == ("MDY", False, "DMY", False)
    assert slash.note is not None and "ambiguous" in slash.note


def test_the_hint_decides_unless_contradicted() -> None:
    assert _order(["06/01/2018 10:00:00"], "DMY") == tsx.DateOrder("DMY", True)
    with pytest.raises(ValueError, match="can only be MDY"):
        _order(["06/13/2018 10:00:00"], "DMY")
    with pytest.raises(ValueError, match="year first"):
        _order(["2018-06-13T10:00:00"], "MDY")
    with pytest.raises(ValueError, match="not one of"):
        _order(["06/13/2018 10:00:00"], "MYD")


def test_contradictory_dates_are_refused() -> None:
    with pytest.raises(ValueError, match="day-first and month-first"):
        _order(["13/06/2018 00:00:00", "06/14/2018 00:00:00"])
    with pytest.raises(ValueError, match="year-first and year-last"):
        _order(["2018-06-13T00:00:00", "06/14/2018 00:00:00"])


# ---- zones ---------------------------------------------------------------------------------


def _utc(local: list[datetime | None], offsets: list[int | None] | None,
         tz: str | None) -> tuple[list[datetime | None], str | None]:
    off = None if offsets is None else pl.Series("o", offsets, dtype=pl.Int32)
    out, note = tsx.to_utc(pl.Series("l", local, dtype=pl.Datetime("us")), off,
                           ZoneInfo(tz) if tz else None)
    assert out.dtype == pl.Datetime("us", "UTC")
    return out.to_list(), note


def test_stated_offsets_are_exact_and_win_over_the_zone() -> None:
    t = datetime(2018, 6, 13, 14, 10, 50)
    got, note = _utc([t, t, t], [120, -330, None], "Asia/Tokyo")
    assert got == [datetime(2018, 6, 13, 12, 10, 50, tzinfo=UTC),
                   datetime(2018, 6, 13, 19, 40, 50, tzinfo=UTC),
                   datetime(2018, 6, 13, 5, 10, 50, tzinfo=UTC)]
    assert note is None


def test_no_zone_means_utc_with_a_note() -> None:
    t = datetime(2018, 6, 13, 14, 10, 50)
    got, note = _utc([t, None], None, None)
    assert got == [t.replace(tzinfo=UTC), None]
    assert note is not None and "--tz" in note
    assert _utc([None], None, None) == ([None], None)
    assert _utc([t], [60], None) == ([datetime(2018, 6, 13, 13, 10, 50, tzinfo=UTC)], None)


def test_daylight_saving_fold_and_gap() -> None:
    # Europe/Paris, 2018-10-28: 03:00 CEST -> 02:00 CET; a log written every 20 minutes
    # through the change reads 02:20, 02:40, 02:00, 02:20 ... (the second 02:xx is CET)
    wall = [datetime(2018, 10, 28, 2, 20), datetime(2018, 10, 28, 2, 40),
            datetime(2018, 10, 28, 2, 0), datetime(2018, 10, 28, 2, 20),
            datetime(2018, 10, 28, 3, 0)]
    got, _ = _utc(wall, None, "Europe/Paris")  # type: ignore[arg-type]
    base = datetime(2018, 10, 28, 0, 20, tzinfo=UTC)
    assert got == [base, base + timedelta(minutes=20), base + timedelta(minutes=40),
                   base + timedelta(minutes=60), base + timedelta(minutes=100)]
    # 2018-03-25 02:30 does not exist in Paris (clocks jump 02:00 -> 03:00)
    got, _ = _utc([datetime(2018, 3, 25, 1, 30), datetime(2018, 3, 25, 2, 30),
                   datetime(2018, 3, 25, 3, 30)], None, "Europe/Paris")
    assert got == [datetime(2018, 3, 25, 0, 30, tzinfo=UTC), None,
                   datetime(2018, 3, 25, 1, 30, tzinfo=UTC)]


# ---- days and intervals --------------------------------------------------------------------


def test_roll_days_counts_midnights_not_small_steps_back() -> None:
    times = pl.Series("t", [time(23, 50), time(23, 59, 59), time(0, 0, 9), time(12, 0),
                            time(11, 30), time(23, 0), time(0, 10)])
    got = tsx.roll_days(times, pl.Series([date(2018, 12, 31)])).to_list()
    assert got == [date(2018, 12, 31), date(2018, 12, 31), date(2019, 1, 1), date(2019, 1, 1),
                   date(2019, 1, 1), date(2019, 1, 1), date(2019, 1, 2)]
    with pytest.raises(ValueError, match="date of the first stamp"):
        tsx.roll_days(times, pl.Series([], dtype=pl.Date))


def test_nominal_interval_and_lengths() -> None:
    t0 = datetime(2018, 6, 13, tzinfo=UTC)
    # 1 s jitter, a 60 s gap, a step back, a 15 s step
    secs = [0, 10, 21, 30, 40, 50, 110, 109, 120, 135]
    utc = pl.Series("t", [t0 + timedelta(seconds=s) for s in secs])
    assert tsx.nominal_interval_s(utc) == 10.0
    assert tsx.interval_lengths(utc, 10.0).to_list() == [10.0, 10.0, 10.0, 10.0, 10.0, 10.0,
                                                         60.0, 10.0, 10.0, 15.0]
    assert tsx.nominal_interval_s(utc.head(1)) is None


# ---- properties ----------------------------------------------------------------------------

#: strftime spellings of real logs, with the date order each needs
FORMATS = [("%m/%d/%Y %I:%M:%S %p", "MDY"), ("%m/%d/%y %H:%M:%S", "MDY"),
           ("%d/%m/%Y %H:%M:%S", "DMY"), ("%d.%m.%Y %H:%M:%S", "DMY"),
           ("%Y-%m-%dT%H:%M:%S", "YMD"), ("%Y年%m月%d日 %H時%M分%S秒", "YMD")]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2068, 12, 31)),
                min_size=1, max_size=30),
       st.sampled_from(FORMATS), st.booleans(), st.lists(st.booleans(), max_size=30))
def test_printed_times_read_back(times: list[datetime], fmt: tuple[str, str], mixed: bool,
                                 nulls: list[bool]) -> None:
    """Whatever the time, a stamp strftime printed reads back to it (to the second), in
    order, nulls in place, by strptime (one shape) or the regular expressions (mixed)."""
    spelling, order = fmt
    exact = [t.replace(microsecond=0) for t in times]
    texts: list[str | None] = [t.strftime(spelling) for t in exact]
    expect: list[datetime | None] = list(exact)
    for k, is_null in enumerate(nulls[:len(texts)]):
        if is_null:
            texts[k] = None
            expect[k] = None
    if mixed:
        texts.insert(0, OTHER_SHAPE if order == "YMD" else
                     datetime(2000, 1, 2).strftime("%d-%m-%Y" if order == "DMY" else "%m/%d/%Y"))
        expect.insert(0, datetime(2000, 1, 1) if order == "YMD" else datetime(2000, 1, 2))
    assert _local(texts, order) == expect
