"""Vectorised parsing of the date and time texts that system tools print (shared by importers).

Why a module of its own: sysstat, and most Unix tools, print times with ``strftime`` in the
*locale of the user who ran them*, so one tool produces many spellings. iostat ``-t`` prints
each report time with ``"%x %X"`` (iostat.c ``write_sample_timestamp``), or ``"%FT%T%z"``
when ``S_TIME_FORMAT=ISO`` is set; its ``Linux … (host) <date> _arch_ (n CPU)`` banner and
the ``date`` of ``iostat -o JSON`` use ``%x`` alone; sar prints ``%X`` (time only) with the
date in the banner. The spellings read here (all seen in real logs):

================================  =================================================
``06/13/2018 02:10:50 PM``        en_US (``%x`` = MM/DD/YYYY, 12-hour ``%X``)
``09/26/21 03:35:19``             C / POSIX (MM/DD/YY, 24-hour)
``13/06/2018 14:10:50``           en_GB, fr_FR, es_ES … (DD/MM/YYYY)
``13.06.2018 14:10:50``           de_DE, ru_RU, pl_PL … (DD.MM.YYYY)
``2018-06-13T14:10:50+0200``      ``S_TIME_FORMAT=ISO`` (offset stated: exact UTC)
``2018年06月13日 14時10分50秒``   ja_JP (zh_CN writes 时; ko_KR 년/월/일 and 시/분/초)
``02:10:50 PM`` / ``14:10:50``    ``%X`` alone (sar); dates from :func:`roll_days`
================================  =================================================

How a file's stamps are read, in a few polars expressions and never one Python call per
line:

1. :func:`stamp_dates` lists the *distinct* dates of the texts (a log has one per day), with
   their fields in printed order;
2. :func:`infer_date_order` decides month/day vs day/month from all of them: a field above
   12 can only be a day; failing that, the field that changes from one date to the next is
   the day; failing that, the separator's convention ('/' month first as in C and en_US;
   '.' and '-' day first) — with a note, because that is a guess;
3. :func:`parse_local` reads every text as a naive wall-clock time in that order. A tool
   prints all stamps of a file in one format, so the texts shaped exactly like the first
   (same widths and separators, checked with one automaton match) are handed to chrono's
   ``strptime`` with a format built from that example; the rest go through capturing regular
   expressions and integer date arithmetic. Both give null for impossible values (30
   February, hour 25, 13 PM). Two-digit years follow chrono's ``%y``: 00-69 -> 20xx,
   70-99 -> 19xx (POSIX differs only for 69);
4. :func:`to_utc` converts: a stated offset is exact; otherwise the user's zone (``--tz``)
   with daylight-saving folds resolved from the sequence (after local time steps back, the
   repeated hour is the later one); otherwise UTC, with a note;
5. :func:`nominal_interval_s` and :func:`interval_lengths` turn report times of one-second
   resolution into interval lengths.

Every function takes and returns polars Series / DataFrames and is pure.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import polars as pl

#: Date orders :func:`infer_date_order` decides: month/day/year, day/month/year,
#: year/month/day.
DATE_ORDERS: tuple[str, ...] = ("MDY", "DMY", "YMD")

# Numeric dates (any of / . - as separator, year first or last) and an optional time,
# with optional AM/PM (also a.m./p.m.) and an optional UTC offset (ISO %z, +HH:MM, Z).
NUMERIC_PATTERN = (
    r"^\s*(?P<f1>\d{1,4})(?P<sep>[/.\-])(?P<f2>\d{1,2})[/.\-](?P<f3>\d{1,4})\.?"
    r"(?:(?:\s+|T)(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2}))?(?:[.,]\d+)?"
    r"\s*(?P<ampm>[AaPp]\.?\s?[Mm]\.?)?\s*(?P<tz>Z|[+-]\d{2}:?\d{2})?)?\s*$"
)
# CJK locales: ja_JP "%Y年%m月%d日 %H時%M分%S秒", zh_CN 时, ko_KR "%Y년 %m월 %d일 (요일)" and
# "%H시 %M분 %S초" (or with 오전/오후 for a 12-hour clock).
CJK_PATTERN = (
    r"^\s*(?P<f1>\d{4})\s*[年년]\s*(?P<f2>\d{1,2})\s*[月월]\s*(?P<f3>\d{1,2})\s*[日일]"
    r"(?:\s*\([^)]*\))?"
    r"(?:\s*(?P<ampm>午前|午後|上午|下午|오전|오후|AM|PM|am|pm)?\s*(?P<H>\d{1,2})\s*[時时시:]"
    r"\s*(?P<M>\d{1,2})\s*(?:[分분:]\s*(?P<S>\d{1,2})\s*[秒초]?)?)?\s*$"
)
# %X alone (sar): "14:10:50", "02:10:50 PM", "14時10分50秒".
TIME_PATTERN = (
    r"^\s*(?:(?P<ampm1>午前|午後|上午|下午|오전|오후)\s*)?(?P<H>\d{1,2})\s*[:時时시]\s*"
    r"(?P<M>\d{2})\s*(?:[:分분]\s*(?P<S>\d{2})\s*[秒초]?)?(?:[.,]\d+)?"
    r"\s*(?P<ampm>[AaPp]\.?\s?[Mm]\.?)?\s*$"
)
_PM_WORDS = ("午後", "下午", "오후")
_GROUPS = ("f1", "sep", "f2", "f3", "H", "M", "S", "ampm", "tz")
#: :func:`to_utc`'s note when times that state no offset are read as UTC.
NO_ZONE_NOTE = ("the file states no time zone: times read as UTC (give the zone the log was "
                "written in with --tz)")
#: chrono's two-digit year pivot (strptime %y): below it 20xx, else 19xx.
_YY_PIVOT = 70


def _int(expr: pl.Expr) -> pl.Expr:
    return expr.cast(pl.Int32, strict=False)


def _pm_flag(ampm: pl.Expr) -> pl.Expr:
    """True for PM, False for AM, null for a 24-hour clock."""
    first = ampm.str.slice(0, 1).str.to_lowercase()
    return (pl.when(ampm.is_null()).then(None)
            .when(ampm.is_in(list(_PM_WORDS)) | (first == "p")).then(True)
            .otherwise(False))


def _offset_min(tz: pl.Expr) -> pl.Expr:
    digits = tz.str.replace(":", "", literal=True)
    return (pl.when(tz == "Z").then(0)
            .when(tz.is_not_null())
            .then((_int(digits.str.slice(1, 2)) * 60 + _int(digits.str.slice(3, 2)))
                  * pl.when(digits.str.starts_with("-")).then(-1).otherwise(1))
            .otherwise(None))


def _patterns(kind: str) -> tuple[str, ...]:
    if kind == "time":
        return (TIME_PATTERN,)
    if kind in ("date", "datetime"):
        return (NUMERIC_PATTERN, CJK_PATTERN)
    raise ValueError(f"kind must be 'datetime', 'date' or 'time', not {kind!r}")


def _fields(kind: str, get: dict[str, pl.Expr], cjk: pl.Expr) -> list[pl.Expr]:
    """The output columns of :func:`split_stamps` from per-group string expressions."""
    if kind == "time":
        return [
            pl.lit(None, pl.Int32).alias("f1"), pl.lit(None, pl.Int32).alias("f2"),
            pl.lit(None, pl.Int32).alias("f3"), pl.lit(False).alias("year_first"),
            pl.lit(None, pl.String).alias("sep"),
            _int(get["H"]).alias("hour"), _int(get["M"]).alias("minute"),
            _int(get["S"]).fill_null(0).alias("second"), _pm_flag(get["ampm"]).alias("pm"),
            pl.lit(None, pl.Int32).alias("offset_min"),
            get["H"].is_not_null().alias("has_time"),
        ]
    has_time = get["H"].is_not_null() if kind == "datetime" else pl.lit(False)
    return [
        _int(get["f1"]).alias("f1"), _int(get["f2"]).alias("f2"), _int(get["f3"]).alias("f3"),
        (get["f1"].str.len_chars() == 4).fill_null(False).alias("year_first"),
        pl.when(cjk).then(pl.lit("cjk")).otherwise(get["sep"]).alias("sep"),
        pl.when(has_time).then(_int(get["H"])).otherwise(0).alias("hour"),
        pl.when(has_time).then(_int(get["M"])).otherwise(0).alias("minute"),
        pl.when(has_time).then(_int(get["S"]).fill_null(0)).otherwise(0).alias("second"),
        pl.when(has_time).then(_pm_flag(get["ampm"])).otherwise(None).alias("pm"),
        pl.when(has_time).then(_offset_min(get["tz"])).otherwise(None).cast(pl.Int32)
        .alias("offset_min"),
        has_time.alias("has_time"),
    ]


def split_stamps(texts: pl.Series, *, kind: str = "datetime") -> pl.DataFrame:
    """Integer fields of date/time texts, in printed order (date order undecided).

    Args:
        texts: the texts (nulls allowed).
        kind: ``"datetime"`` (date and time; the time may be missing, as in a banner date),
            ``"date"`` (any time is ignored) or ``"time"`` (``%X`` alone: f1..f3 null).

    Returns:
        One row per text with ``f1``, ``f2``, ``f3`` (date fields as printed; f1 is the year
        when ``year_first``), ``year_first``, ``sep`` (date separator ``/``, ``.``, ``-`` or
        ``cjk``), ``hour``, ``minute``, ``second`` (0 when not printed), ``pm`` (True/False
        on a 12-hour clock, null on a 24-hour one), ``offset_min`` (minutes east of UTC when
        the text states an offset), ``has_time`` and ``ok`` (matched a known spelling).
        Values are not range-checked: :func:`local_datetimes` nulls impossible ones.

    This is the general (capturing regular expression) path; :func:`parse_local` uses it
    only for texts that are not shaped like the file's first stamp.
    """
    df = pl.DataFrame({"t": texts.cast(pl.String)})
    t = pl.col("t")
    pats = _patterns(kind)
    frames = [df.select(t.str.extract_groups(p).alias("g")).unnest("g") for p in pats]
    if kind == "time":
        g = frames[0]
        get = {k: (pl.col(k) if k in g.columns else pl.lit(None, pl.String)) for k in _GROUPS}
        get["ampm"] = pl.coalesce(pl.col("ampm1"), pl.col("ampm"))
        out = g.select(_fields(kind, get, pl.lit(False)))
        return out.with_columns(pl.col("hour").is_not_null().alias("ok"))
    num, cjk = frames
    both = pl.concat([num, cjk.rename({k: f"c_{k}" for k in cjk.columns})], how="horizontal")
    get = {}
    for k in _GROUPS:
        cols = [pl.col(x) for x in (k, f"c_{k}") if x in both.columns]
        get[k] = pl.coalesce(cols) if cols else pl.lit(None, pl.String)
    out = both.select(_fields(kind, get, pl.col("c_f1").is_not_null()))
    return out.with_columns(pl.col("f1").is_not_null().alias("ok"))


@dataclass(frozen=True)
class _Shape:
    """The layout of a file's first stamp: a fixed-width pattern and where each group is."""

    example: str
    pattern: str  # regex matching texts of exactly this shape
    spans: dict[str, tuple[int, int]]  # group -> (start, end) in characters
    cjk: bool

    def date_span(self) -> tuple[int, int]:
        """Characters of the date: its fields and a closing mark such as 日 or '.'."""
        start = min(self.spans[g][0] for g in ("f1", "f2", "f3"))
        end = max(self.spans[g][1] for g in ("f1", "f2", "f3"))
        while end < len(self.example) and not (self.example[end].isspace()
                                               or self.example[end] in "T0123456789"):
            end += 1
        return start, end

    def strptime(self, order: str, *, until: int | None = None) -> str | None:
        """A chrono format for this shape in date order ``order`` (None if it has none)."""
        spec: dict[str, str] = {}
        width3 = self.spans["f3"][1] - self.spans["f3"][0]
        width1 = self.spans["f1"][1] - self.spans["f1"][0]
        year = {4: "%Y", 2: "%y"}
        if order == "YMD":
            if width1 != 4:
                return None
            spec = {"f1": "%Y", "f2": "%m", "f3": "%d"}
        elif width3 in year:
            spec = {"f1": "%m" if order == "MDY" else "%d",
                    "f2": "%d" if order == "MDY" else "%m", "f3": year[width3]}
        else:
            return None
        if "H" in self.spans:
            spec["H"] = "%I" if "ampm" in self.spans else "%H"
            spec["M"] = "%M"
            if "S" in self.spans:
                spec["S"] = "%S"
            if "ampm" in self.spans:
                amp = self.example[slice(*self.spans["ampm"])]
                if not re.fullmatch(r"[AaPp][Mm]", amp):
                    return None  # a.m. / 午後: not chrono's %p
                spec["ampm"] = "%p"
        end = len(self.example) if until is None else until
        out: list[str] = []
        pos = 0
        for group, (a, b) in sorted(((g, s) for g, s in self.spans.items() if g in spec),
                                    key=lambda x: x[1][0]):
            if b > end:
                break
            out.append(self.example[pos:a].replace("%", "%%"))
            out.append(spec[group])
            pos = b
        out.append(self.example[pos:end].replace("%", "%%"))
        return "".join(out)


def _shape_of(texts: pl.Series, kind: str) -> _Shape | None:
    first = texts.drop_nulls()
    if first.len() == 0:
        return None
    example = first[0]
    for pat in _patterns(kind):
        m = re.match(pat, example)
        if m is None:
            continue
        spans = {g: m.span(i) for g, i in m.re.groupindex.items() if m.span(i)[0] >= 0}
        if "ampm1" in spans:
            spans["ampm"] = spans.pop("ampm1")
        out: list[str] = []
        amp = spans.get("ampm")
        for pos, ch in enumerate(example):
            if amp is not None and amp[0] <= pos < amp[1] and ch in "AaPpMm":
                out.append("[AaPp]" if ch in "AaPp" else "[Mm]")
            elif ch in "0123456789":
                out.append("[0-9]")
            else:
                out.append(re.escape(ch))
        return _Shape(example, "^" + "".join(out) + "$", spans, pat == CJK_PATTERN)
    return None


@dataclass(frozen=True)
class FixedShape:
    """A stamp shape as byte positions, for a byte-level reader that must read every text of
    the shape as :func:`parse_local` does (its strptime path): the iostat importer's ``ig_stamps``.

    Attributes:
        template: the example stamp (ASCII).
        classes: per byte, 0 for a literal (equal to the template's), 1 for a digit, 2 for
            the first letter of AM/PM (``AaPp``), 3 for its second (``Mm``).
        at: (offset, length) of the year, month, day, hour, minute and second (length 0:
            absent, read as 0).
        ampm: offset of the AM/PM mark, -1 on a 24-hour clock.
    """

    template: bytes
    classes: bytes
    at: tuple[int, ...]
    ampm: int


def fixed_shape(example: str, order: str) -> FixedShape | None:
    """The byte layout of ``example``'s shape in date order ``order``; None when a byte
    reader could differ from :func:`parse_local` (not ASCII, an offset, CJK marks, a shape
    that strptime does not take, a year of other than 2 or 4 digits).

    Cached by shape (the example with every digit read as 0, which is also the template:
    a digit outside the date and time fields, if a shape had one, must then be 0)."""
    return _fixed_shape(example.translate(_ZERO_DIGITS), order)


_ZERO_DIGITS = str.maketrans("123456789", "000000000")


@functools.lru_cache(maxsize=64)
def _fixed_shape(example: str, order: str) -> FixedShape | None:
    if not example.isascii():
        return None
    shape = _shape_of(pl.Series([example], dtype=pl.String), "datetime")
    if shape is None or shape.cjk or "tz" in shape.spans or shape.strptime(order) is None:
        return None
    spans = shape.spans
    ymd = {"MDY": ("f3", "f1", "f2"), "DMY": ("f3", "f2", "f1"), "YMD": ("f1", "f2", "f3")}
    at: list[int] = []
    for group in (*ymd[order], "H", "M", "S"):
        a, b = spans.get(group, (0, 0))
        at += [a, b - a]
    if at[1] not in (2, 4):
        return None
    classes = bytearray(len(example))
    for group in ("f1", "f2", "f3", "H", "M", "S"):
        if group in spans:
            a, b = spans[group]
            classes[a:b] = b"\x01" * (b - a)
    ampm = -1
    if "ampm" in spans:
        a, b = spans["ampm"]
        if b - a != 2:  # strptime takes "AM"/"PM" only (a.m. is read by the patterns)
            return None
        classes[a], classes[a + 1], ampm = 2, 3, a
    return FixedShape(example.encode("ascii"), bytes(classes), tuple(at), ampm)


def stamp_dates(texts: pl.Series, *, kind: str = "datetime") -> pl.DataFrame:
    """The distinct dates among ``texts`` in order of first appearance, with their fields.

    Returns rows of :func:`split_stamps` (``f1``, ``f2``, ``f3``, ``year_first``, ``sep``,
    ``ok`` …), one per distinct date: the input of :func:`infer_date_order`. Cheap: texts
    shaped like the first contribute only their date substring.
    """
    df = pl.DataFrame({"t": texts.cast(pl.String)}).drop_nulls()
    shape = _shape_of(df["t"], kind)
    dates: list[pl.Series] = []
    if shape is not None:
        fixed = df["t"].str.contains(shape.pattern)
        a, b = shape.date_span()
        dates.append(df.filter(fixed)["t"].str.slice(a, b - a)
                     .unique(maintain_order=True))
        df = df.filter(~fixed)
    if df.height:
        dates.append(df["t"])
    if not dates:
        return split_stamps(pl.Series("t", [], dtype=pl.String), kind="date")
    uniq = pl.concat(dates).unique(maintain_order=True)
    return split_stamps(uniq, kind="date").filter(pl.col("ok"))


@dataclass(frozen=True)
class DateOrder:
    """How the date fields of a file are ordered.

    Attributes:
        order: ``"MDY"``, ``"DMY"`` or ``"YMD"``.
        certain: True when the values (a field above 12, year first) or the user decided it;
            False when it was inferred from which field changes, or guessed from the
            separator's convention (then ``note`` says so).
        note: a sentence for the user when the order was inferred or guessed, else None.
    """

    order: str
    certain: bool
    note: str | None = None


def _example(ok: pl.DataFrame, *, big_first: bool | None = None) -> str:
    rows = ok
    if big_first is True:
        rows = ok.filter(pl.col("f1") > 12)
    elif big_first is False:
        rows = ok.filter(pl.col("f2") > 12)
    r = rows.row(0, named=True)
    sep = r["sep"] if r["sep"] and r["sep"] != "cjk" else "/"
    return f"{r['f1']:02d}{sep}{r['f2']:02d}{sep}{r['f3']:02d}"


def infer_date_order(dates: pl.DataFrame, hint: str | None = None) -> DateOrder:
    """Decide the date order from every date of a file (rows of :func:`stamp_dates` or
    :func:`split_stamps`, in file order).

    Args:
        dates: parsed dates (rows with ``ok`` false are ignored).
        hint: ``"MDY"``/``"DMY"``/``"YMD"`` from the user; it wins unless the values
            contradict it (then ValueError).

    Raises:
        ValueError: dates mix year-first and year-last spellings, or day-first and
            month-first values (the first and the second field both exceed 12 somewhere),
            or contradict the hint.
    """
    if hint is not None and hint not in DATE_ORDERS:
        raise ValueError(f"date order {hint!r} is not one of {', '.join(DATE_ORDERS)}")
    ok = dates.filter(pl.col("ok") & pl.col("f1").is_not_null())
    if ok.height == 0:
        return DateOrder(hint or "MDY", True)
    year_first = ok["year_first"]
    if year_first.all():
        if hint not in (None, "YMD"):
            raise ValueError(f"dates are written year first (e.g. {_example(ok)}), which "
                             f"contradicts the date order {hint}")
        return DateOrder("YMD", True)
    if year_first.any():
        raise ValueError("dates mix year-first and year-last spellings")
    # a date that no order can read (13/45/2018: no month) says nothing about the order;
    # it is refused, with its line, when the stamps are read
    f1, f2 = pl.col("f1"), pl.col("f2")
    ok = ok.filter(((f1 <= 12) & (f2 <= 31)) | ((f2 <= 12) & (f1 <= 31)))
    if ok.height == 0:
        return DateOrder(hint or "MDY", True)
    f1_big = ok.filter(pl.col("f1") > 12).height
    f2_big = ok.filter(pl.col("f2") > 12).height
    if f1_big and f2_big:
        raise ValueError("dates mix day-first and month-first values (both the first and "
                         "the second field exceed 12 in different dates)")
    if f1_big or f2_big:
        order = "DMY" if f1_big else "MDY"
        sample = _example(ok, big_first=bool(f1_big))
        if hint is not None and hint != order:
            raise ValueError(f"dates such as {sample} can only be {order}, which contradicts "
                             f"the date order {hint}")
        return DateOrder(order, True, None if order == "MDY" else
                         f"dates read as day/month/year (a value such as {sample} cannot "
                         "be month first)")
    if hint is not None:
        return DateOrder(hint, True)
    # No field above 12: the field that changes from one date to the next is the day.
    distinct = ok.select("f1", "f2").unique(maintain_order=True)
    changes1 = int((distinct["f1"].diff().fill_null(0) != 0).sum())
    changes2 = int((distinct["f2"].diff().fill_null(0) != 0).sum())
    if changes2 and not changes1:
        return DateOrder("MDY", False, "dates are ambiguous (no day above 12); read as "
                         "month/day/year because the second field is the one that changes")
    if changes1 and not changes2:
        return DateOrder("DMY", False, "dates are ambiguous (no day above 12); read as "
                         "day/month/year because the first field is the one that changes")
    seps = set(ok["sep"].drop_nulls().unique().to_list())
    order = "MDY" if seps <= {"/"} else "DMY"
    word = ("month/day/year (the C and en_US convention for '/')" if order == "MDY" else
            "day/month/year (the convention for '.' and '-' dates)")
    return DateOrder(order, False, f"dates such as {_example(ok)} are ambiguous (no day above "
                     f"12); read as {word} — give the date order explicitly if that is wrong")


def local_datetimes(parts: pl.DataFrame, order: str, *,
                    date: pl.Series | None = None) -> pl.Series:
    """Naive wall-clock datetimes (µs) from :func:`split_stamps` rows and a date order.

    Args:
        parts: rows of :func:`split_stamps`.
        order: ``"MDY"``, ``"DMY"`` or ``"YMD"``.
        date: for time-only rows (``kind="time"``), the date of each row (pl.Date).

    Impossible values (month 13, 30 February, hour 25, 13 PM) give null, so the caller can
    name the line. A 12-hour clock maps 12 AM to 00 and 12 PM to 12. Integer arithmetic
    only (days from the civil calendar, H. Hinnant's algorithm), no string round trip.
    """
    if order not in DATE_ORDERS:
        raise ValueError(f"date order {order!r} is not one of {', '.join(DATE_ORDERS)}")
    f1, f2, f3 = pl.col("f1"), pl.col("f2"), pl.col("f3")
    y, m, d = {"MDY": (f3, f1, f2), "DMY": (f3, f2, f1), "YMD": (f1, f2, f3)}[order]
    year: pl.Expr = (pl.when(y < _YY_PIVOT).then(y + 2000).when(y < 100).then(y + 1900)
                     .otherwise(y))
    frame = parts
    if date is not None:
        frame = parts.with_columns(date.cast(pl.Date).alias("_date"))
        year = pl.col("_date").dt.year()
        m = pl.col("_date").dt.month()
        d = pl.col("_date").dt.day()
    hour, pm = pl.col("hour"), pl.col("pm")
    hour24 = (pl.when(pm.is_null()).then(hour)
              .when((hour < 1) | (hour > 12)).then(None)
              .when(pm).then(pl.when(hour == 12).then(12).otherwise(hour + 12))
              .otherwise(pl.when(hour == 12).then(0).otherwise(hour)))
    yy, mm, dd = year.cast(pl.Int64), m.cast(pl.Int64), d.cast(pl.Int64)
    leap = ((yy % 4 == 0) & (yy % 100 != 0)) | (yy % 400 == 0)
    month_days = (pl.when(mm == 2).then(pl.lit(28) + leap.cast(pl.Int64))
                  .when(mm.is_in([4, 6, 9, 11])).then(30).otherwise(31))
    minute, second = pl.col("minute").cast(pl.Int64), pl.col("second").cast(pl.Int64)
    valid = (mm.is_between(1, 12) & dd.is_between(1, 31) & (dd <= month_days)
             & hour24.is_between(0, 23) & minute.is_between(0, 59) & second.is_between(0, 59))
    ya = yy - (mm <= 2).cast(pl.Int64)
    era = ya // 400
    yoe = ya - era * 400
    doy = (153 * (mm + pl.when(mm > 2).then(-3).otherwise(9)) + 2) // 5 + dd - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    micros = (days * 86400 + hour24.cast(pl.Int64) * 3600 + minute * 60 + second) * 1_000_000
    return frame.select(pl.when(valid).then(micros).otherwise(None)
                        .cast(pl.Datetime("us")).alias("local")).to_series()


def parse_local(texts: pl.Series, order: str, *, kind: str = "datetime") -> pl.DataFrame:
    """Every text as a naive wall-clock datetime in date order ``order``.

    Returns one row per text: ``local`` (Datetime µs, null where the text is not a valid
    stamp) and ``offset_min`` (minutes east of UTC where the text states an offset).
    Texts shaped like the first go through chrono ``strptime`` (fast); others through
    :func:`split_stamps` and :func:`local_datetimes`.
    """
    df = pl.DataFrame({"t": texts.cast(pl.String)}).with_row_index("_i")
    shape = _shape_of(df["t"], kind) if kind != "time" else None
    parts: list[pl.DataFrame] = []
    rest = df
    if shape is not None:
        tz_span = shape.spans.get("tz")
        fmt = shape.strptime(order, until=tz_span[0] if tz_span else None)
        if fmt is not None:
            hit = df["t"].str.contains(shape.pattern)
            whole = hit.null_count() == 0 and bool(hit.all())  # the usual case: one shape
            fixed = df if whole else df.filter(hit)
            text = pl.col("t")
            if tz_span is not None:
                text = text.str.slice(0, tz_span[0])
            off = (_offset_min(pl.col("t").str.slice(tz_span[0], tz_span[1] - tz_span[0]))
                   if tz_span is not None else pl.lit(None, pl.Int32))
            parts.append(fixed.select(
                "_i", text.str.to_datetime(fmt, time_unit="us", strict=False).alias("local"),
                off.cast(pl.Int32).alias("offset_min")))
            # the rest: other shapes, and null texts (a null row, not a missing one)
            rest = df.clear() if whole else df.filter((~hit).fill_null(True))
    if rest.height:
        fields = split_stamps(rest["t"], kind=kind)
        parts.append(pl.DataFrame({
            "_i": rest["_i"],
            "local": local_datetimes(fields, order),
            "offset_min": fields["offset_min"],
        }))
    if not parts:
        return pl.DataFrame(schema={"local": pl.Datetime("us"), "offset_min": pl.Int32})
    out = pl.concat(parts, how="vertical_relaxed")
    if len(parts) > 1:
        out = out.sort("_i")
    return out.drop("_i")


def to_utc(local: pl.Series, offset_min: pl.Series | None,
           tz: ZoneInfo | None) -> tuple[pl.Series, str | None]:
    """UTC datetimes from wall-clock ones: stated offset, else ``tz``, else UTC (with a note).

    Args:
        local: naive datetimes in the order the file lists them (the order matters for
            daylight-saving folds).
        offset_min: minutes east of UTC per row where the text stated one (null elsewhere),
            or None.
        tz: the user's zone for times that state no offset, or None.

    Returns:
        ``(utc, note)``: Datetime(µs, UTC), null where the local time does not exist in
        ``tz`` (the spring-forward gap: the zone is probably wrong), and a note when UTC had
        to be assumed. In a fold (the repeated hour when clocks go back) a time is the first
        occurrence until local time has stepped back, and the second occurrence for the hour
        after that step — which is how a log written through the change reads.
    """
    no_offset = offset_min is None or offset_min.null_count() == offset_min.len()
    if tz is None and no_offset:  # the usual log: wall-clock times and no zone given
        return (local.cast(pl.Datetime("us")).dt.replace_time_zone("UTC").rename("utc"),
                NO_ZONE_NOTE if local.null_count() < local.len() else None)
    df = pl.DataFrame({"local": local.cast(pl.Datetime("us"))})
    off = offset_min.cast(pl.Int32) if offset_min is not None else \
        pl.Series("off", [None] * df.height, dtype=pl.Int32)
    df = df.with_columns(off.alias("off"))
    note = None
    loc = pl.col("local")
    stated = (loc - pl.duration(minutes=pl.col("off"))).dt.replace_time_zone("UTC")
    needs_zone = df["off"].is_null() & df["local"].is_not_null()
    if tz is None:
        unstated = loc.dt.replace_time_zone("UTC")
        if needs_zone.any():
            note = NO_ZONE_NOTE
    else:
        step_back = loc.diff() < pl.duration(seconds=0)
        jump_at = pl.when(step_back).then(loc).otherwise(None).forward_fill()
        later = (jump_at.is_not_null() & (loc >= jump_at)
                 & (loc - jump_at < pl.duration(hours=1)))
        ambiguous = pl.when(later).then(pl.lit("latest")).otherwise(pl.lit("earliest"))
        unstated = (loc.dt.replace_time_zone(tz.key, ambiguous=ambiguous, non_existent="null")
                    .dt.convert_time_zone("UTC"))
    out = df.select(pl.when(pl.col("off").is_not_null()).then(stated).otherwise(unstated)
                    .dt.cast_time_unit("us").alias("utc")).to_series()
    return out, note


def roll_days(times: pl.Series, start: pl.Series, *, threshold_h: float = 12.0) -> pl.Series:
    """Dates for time-only stamps (sar ``%X``): a new day whenever the clock steps back.

    Args:
        times: pl.Time (or naive Datetime whose time part is used), in file order.
        start: the first day (pl.Date, e.g. from the banner); its first value is used.
        threshold_h: a step back larger than this many hours is midnight passing; a smaller
            one (daylight saving ends, clock adjusted) is not.

    Returns:
        pl.Date per row. Gaps longer than a day cannot be seen from times alone.
    """
    if start.len() == 0 or start[0] is None:
        raise ValueError("roll_days needs the date of the first stamp")
    df = pl.DataFrame({"t": times})
    if df.schema["t"] != pl.Time:
        df = df.with_columns(pl.col("t").dt.time())
    secs = pl.col("t").cast(pl.Int64) // 1_000_000_000
    rolled = (secs.diff().fill_null(0) < -int(threshold_h * 3600)).cast(pl.Int64).cum_sum()
    first = start.cast(pl.Date)[0]
    return df.select((pl.lit(first) + pl.duration(days=rolled)).cast(pl.Date)
                     .alias("date")).to_series()


def nominal_interval_s(utc: pl.Series) -> float | None:
    """The sampling interval of a sequence of report times (seconds), or None if unknown.

    The most frequent positive step between successive times (ties: the smaller), which is
    the interval the tool was started with even when one-second clock resolution makes some
    steps a second longer or shorter. None with fewer than two times.
    """
    steps = (pl.DataFrame({"t": utc}).select(pl.col("t").diff().dt.total_microseconds())
             .to_series().drop_nulls())
    steps = steps.filter(steps > 0)
    if steps.len() == 0:
        return None
    counts = steps.value_counts()
    top = counts["count"].max()
    best = counts.filter(pl.col("count") == top)[counts.columns[0]].min()
    return float(best) / 1e6  # type: ignore[arg-type]


def interval_lengths(utc: pl.Series, nominal_s: float, *,
                     resolution_s: float = 1.0) -> pl.Series:
    """Interval length of each report from successive report times.

    A step within ``resolution_s`` of the nominal interval (one-second clock resolution) is
    the nominal interval; a step back or zero (clock set back) is the nominal interval too;
    a longer step is a real gap (the tool was stopped, the host suspended: rates then cover
    the whole gap) and is kept. The first report gets the nominal interval.
    """
    df = pl.DataFrame({"t": utc})
    step = pl.col("t").diff().dt.total_microseconds().cast(pl.Float64) / 1e6
    out = (pl.when(step.is_null() | (step <= 0) | ((step - nominal_s).abs() <= resolution_s))
           .then(pl.lit(nominal_s)).otherwise(step))
    return df.select(out.alias("interval_s")).to_series()
