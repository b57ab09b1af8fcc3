"""The line and piece toolkit of the text importers: the one chunker (:func:`pieces`), lines
as a polars frame (:func:`read_lines`), pieces of lines and of whole reports carried across
pieces (:func:`line_frames`, :func:`report_frames`), and the small helpers the line-based
importers share (local times to UTC, plain numbers, the host name, refusing rows)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers.base import Source
from iogauge.importers.io import decode, encoding_of


def pieces(stream: BinaryIO, size: int, *, blank_line: bool = False,
           first_size: int | None = None, cut_last: bool = False
           ) -> Iterator[tuple[bytearray, bool]]:
    """``(piece, last)`` for the bytes of ``stream`` in pieces of about ``size`` bytes (the
    first of about ``first_size``), each but the last cut just after its last line break, or
    with ``blank_line`` just after its last blank line (``\n\n`` or ``\n\r\n``: a
    format that never puts one inside a table can then scan each piece on its own). A piece
    without a cut grows until one comes. The last piece is all that is left when the stream
    ends (a stream shorter than ``size`` is one last piece; it may be empty); with
    ``cut_last`` the last read is cut too, and only the text after its cut is the last piece
    (a reader whose last piece takes a slower path then reads as little as possible so).

    Each piece is a new buffer that the stream is read into (``readinto``: the text after the
    cut is the only copy), so a piece is never copied whole. A UTF-16 stream (its line breaks
    are not the byte ``\n`` alone) is transcoded to UTF-8 whole: such files come from Windows
    editors and are small. Every other encoding is given as read.
    """
    first = stream.read(4)
    if encoding_of(first) in ("utf-16", "utf-16-le"):
        stream = io.BytesIO(decode(first + stream.read()).encode("utf-8"))
        first = b""
    carry: bytes | bytearray = first
    want = size if first_size is None else first_size
    while True:
        buf, got = _read_after(stream, carry, want)
        if not got or (got < want and not cut_last):  # the stream ended: the rest is the last
            yield buf, True
            return
        want = size
        cut = _cut_after_blank(buf) if blank_line else buf.rfind(b"\n") + 1
        if cut <= 0:
            carry = buf
            continue
        carry = bytes(buf[cut:])
        del buf[cut:]
        yield buf, False


def _cut_after_blank(buf: bytearray) -> int:
    """Offset just after the last blank line of ``buf`` (0: none)."""
    cut = buf.rfind(b"\n\n")
    # a CRLF blank line after it (searching only the tail: a LF file has none, and a
    # search of the whole piece for it costs as much as the scan of the piece)
    cut = max(cut, buf.rfind(b"\n\r\n", max(cut, 0)))
    return 0 if cut < 0 else buf.index(b"\n", cut + 1) + 1


def _read_after(stream: BinaryIO, carry: bytes | bytearray, size: int) -> tuple[bytearray, int]:
    """``carry`` then up to ``size`` bytes of ``stream`` (fewer only at its end) in one new
    buffer; returns it and the number of bytes read."""
    buf = bytearray(len(carry) + size)
    buf[:len(carry)] = carry
    got = 0
    readinto = getattr(stream, "readinto", None)
    with memoryview(buf) as view:
        while got < size:
            at = len(carry) + got
            if readinto is not None:
                n = readinto(view[at:]) or 0
            else:  # a stream without readinto (rare): read and place
                block = stream.read(size - got)
                n = len(block)
                view[at:at + n] = block
            if not n:
                break
            got += n
    del buf[len(carry) + got:]
    return buf, got


_LINE_SCHEMA = {"line": pl.String()}


def read_lines(data: bytes | list[bytes]) -> pl.DataFrame:
    """The input as one row per line: ``line_no`` (1-based, u32) and ``line`` (str, null when
    blank), trailing blanks and carriage returns removed.

    The whole text is read by polars as one string column (no per-line Python loop); blank
    lines come back as null, so the row index + 1 is the line number. A one-item list hands
    the bytes over: they are let go once read, before the lines are trimmed (a copy of the
    column), so the peak holds the input or a second column, not both.
    """
    if isinstance(data, list):
        data = data.pop()
    if encoding_of(data) != "utf-8":
        data = decode(data).encode("utf-8")
    if not data.strip():
        return pl.DataFrame({"line_no": [], "line": []},
                            schema={"line_no": pl.UInt32(), "line": pl.String()})
    df = pl.read_csv(io.BytesIO(data), has_header=False, separator="\x1f", quote_char=None,
                     new_columns=["line"], schema=_LINE_SCHEMA)
    del data
    line = pl.col("line").str.strip_chars_end(" \t\r\x00")
    return df.with_row_index("line_no", offset=1).with_columns(
        pl.when(line.str.len_chars() > 0).then(line).otherwise(None).alias("line"))


@dataclass
class LineCarry:
    """What one piece of a file read in pieces (:func:`line_frames`) hands on to the next.

    Attributes:
        lines: lines held back (``line_no``, ``line``), read again at the head of the next
            piece (the report the piece may have ended inside).
        lines_read: lines of the file before the next piece's new bytes.
        seen_text: some piece so far held more than white space (else: "empty file").
    """

    lines: pl.DataFrame | None = None
    lines_read: int = 0
    seen_text: bool = False


def line_frames(stream: BinaryIO, chunk_bytes: int, carry: LineCarry, path: str,
                reader: Callable[[list[bytes]], pl.DataFrame] | None = None
                ) -> Iterator[tuple[pl.DataFrame, bool, bool]]:
    """``(lines, last, cut)`` for each piece of ``stream`` (:func:`pieces`): the piece's
    lines (``reader``, default :func:`read_lines`) numbered in the file, after the lines the
    piece before held back in ``carry.lines``. ``cut``: the last piece does not end with a
    line break (its last line, number ``carry.lines_read``, may be cut short). Raises "empty
    file" for a stream of white space only."""
    read = reader or read_lines
    number_dtype = read([b""]).schema["line_no"]
    for piece, last in pieces(stream, chunk_bytes):
        data = bytes(piece)  # (the readers take bytes; the piece is let go)
        del piece
        cut = last and bool(data) and not ends_with_newline(data)
        # counted on the bytes (read_lines gives no rows at all for a piece of blank lines)
        n_new = data.count(b"\n") + (1 if cut else 0)
        carry.seen_text = carry.seen_text or bool(data.strip())
        lines = read([data])
        del data
        if lines.height == 0 and n_new:
            # blank lines only: kept as blank rows, so that a piece's lines stay consecutive
            lines = pl.DataFrame({"line_no": pl.int_range(1, n_new + 1, eager=True)
                                  .cast(number_dtype),
                                  "line": pl.repeat(None, n_new, dtype=pl.String(),
                                                    eager=True)})
        if carry.lines_read:
            lines = lines.with_columns(pl.col("line_no") + carry.lines_read)
        carry.lines_read += n_new
        if carry.lines is not None:
            lines = pl.concat([carry.lines, lines])
            carry.lines = None
        yield lines, last, cut
    if not carry.seen_text:
        raise InputFormatError(path, None, "empty file")


def report_frames(stream: BinaryIO, chunk_bytes: int, carry: LineCarry, path: str,
                  head: str, reader: Callable[[list[bytes]], pl.DataFrame] | None = None
                  ) -> Iterator[tuple[pl.DataFrame, bool, bool]]:
    """:func:`line_frames` of whole reports: each piece but the last is cut before its last
    line that matches ``head`` (a report's first line), and the lines from there wait in
    ``carry.lines`` for the next piece; a piece with fewer than two such lines is read on.
    (Each line is tested once: the lines held back are not tested again.)"""
    heads: list[int] = []  # line numbers of the report heads among the lines held back
    seen = 0  # the last line tested
    for lines, last, cut in line_frames(stream, chunk_bytes, carry, path, reader):
        if last:
            yield lines, last, cut
            continue  # (the end: line_frames still says "empty file" of blanks only)
        new = lines.filter((pl.col("line_no") > seen)
                           & pl.col("line").str.contains(head).fill_null(False))
        heads += new["line_no"].to_list()
        seen = int(lines["line_no"][-1]) if lines.height else seen
        if len(heads) < 2:
            carry.lines = lines  # no report ends in this piece: read on
            continue
        from_line = heads[-1]
        heads = [from_line]
        carry.lines = lines.filter(pl.col("line_no") >= from_line)
        yield lines.filter(pl.col("line_no") < from_line), last, cut


def ends_with_newline(data: bytes | bytearray) -> bool:
    """True if the (decoded) input ends with a line break, i.e. its last line is whole."""
    if encoding_of(data) != "utf-8":
        return decode(data).endswith(("\n", "\r"))
    return data.endswith((b"\n", b"\r"))


def localize(naive: pl.Expr, source: Source, *, zone_stated: str | None = None) -> pl.Expr:
    """Turn naive local date-times into UTC: the user's ``--tz`` zone, else UTC with a note.

    ``zone_stated`` is a zone abbreviation the file printed (``JST``): the abbreviations are
    ambiguous (IST, CST), so ``--tz`` still decides; without it only UTC/GMT are trusted.
    """
    if source.tz is not None:
        key = source.tz.key
        return (naive.dt.replace_time_zone(key, ambiguous="earliest", non_existent="null")
                .dt.convert_time_zone("UTC"))
    if zone_stated is not None and zone_stated.upper() in ("UTC", "GMT", "UCT", "Z"):
        return naive.dt.replace_time_zone("UTC")
    if zone_stated is not None:
        source.note(f"time stamps carry the zone abbreviation {zone_stated!r}, which does not "
                    "name one zone; taken as UTC - give the host's zone with --tz")
    else:
        source.note("time stamps are the host's local time and the file does not state its "
                    "zone; taken as UTC - give the host's zone with --tz")
    return naive.dt.replace_time_zone("UTC")


def start_local(source: Source) -> datetime | None:
    """``Source.start`` as a naive local date-time (an aware value is converted into ``--tz``,
    or UTC when no zone was given - the zone the local times are then taken in)."""
    if source.start is None:
        return None
    if source.start.tzinfo is None:
        return source.start
    zone = source.tz if source.tz is not None else UTC
    return source.start.astimezone(zone).replace(tzinfo=None)


_NUMBER_RE = r"^[+]?(?:\d+\.?\d*|\.\d+)$"


def numbers(tokens: pl.Expr) -> pl.Expr:
    """Tokens as Float64 where they are plain decimal numbers (``12``, ``0.30``, ``.7``); any
    other token (``-``, ``1.2K``, ``nan``) becomes null so the caller can refuse the line."""
    return (pl.when(tokens.str.contains(_NUMBER_RE)).then(tokens).otherwise(None)
            .cast(pl.Float64()))


def host_fallback(source: Source) -> str:
    """``Source.host``, else the file name without its extensions (``sar.txt.gz`` -> ``sar``)."""
    if source.host:
        return source.host
    name = Path(source.path).name
    return name.split(".")[0] or name


def max_int(series: pl.Series, default: int = 0) -> int:
    """The largest value of an integer series as ``int`` (``default`` when empty/null)."""
    value = series.max()
    return int(value) if isinstance(value, int | float) else default


def refuse_rows(source: Source, bad: pl.DataFrame) -> None:
    """Report every row of ``bad`` (columns ``line_no``, ``reason``) through ``bad_line``."""
    for line_no, reason in bad.select("line_no", "reason").sort("line_no").iter_rows():
        source.bad_line(int(line_no), str(reason))
