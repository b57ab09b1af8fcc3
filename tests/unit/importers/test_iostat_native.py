"""The iostat importer's C kernels (importers/iostat/kernels.c via importers/iostat/native.py) give
exactly what the numpy routines they replace give.

test_iostat_text.py runs every importer test with both; here each kernel is compared with
its numpy reference (and the decoder with a slow reference) on generated input, including
the decoder's three ways of reading a range (SSE4.1, two words, place by place), whose
tests against the slow reference are in test_iostat_text.py.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iogauge.importers import iostat
from iogauge.importers import timestamps as tsx
from iogauge.importers.base import Source
from iogauge.importers.iostat import fixed as iostat_fixed
from iogauge.importers.iostat import lines as iostat_lines
from iogauge.importers.iostat import native

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "iostat"



def _kernels() -> native.Kernels:
    kern = native.kernels()
    if kern is None:
        pytest.skip("the native iostat kernels are not built (no C compiler?)")
    return kern


def test_kernels_are_built_and_fresh_wherever_a_c_compiler_is() -> None:
    # make install (scripts/build_accel.py) builds them; the speed figures of
    # benchmarks/import_speed.py are with them. A stale build (source edited since) is not
    # loaded: re-run `make install`.
    if shutil.which("cc") is None:
        pytest.skip("no C compiler: the importer uses its numpy routines")
    native.kernels.cache_clear()
    assert native.kernels() is not None, (
        f"{native.library_path()} is missing or was built from another {native.SOURCE}: "
        "run `make install` (scripts/build_accel.py)")


def test_a_stale_or_disabled_library_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    _kernels()
    monkeypatch.setattr(native, "source_sha256", lambda: "0" * 64)
    native.kernels.cache_clear()
    try:
        assert native.kernels() is None
    finally:
        monkeypatch.undo()
        native.kernels.cache_clear()
    monkeypatch.setenv("IOGAUGE_PURE_PYTHON", "1")
    native.kernels.cache_clear()
    try:
        assert native.kernels() is None
    finally:
        monkeypatch.delenv("IOGAUGE_PURE_PYTHON")
        native.kernels.cache_clear()
    assert native.kernels() is not None


# ---- lines and classification -----------------------------------------------------------

_TEXT = st.lists(st.sampled_from(["\n", "\r\n", "\r", " ", "\t", "a", "x", "Device",
                                  " Device", "Linux ", "avg-cpu", "0", "12:00:01",
                                  "01/02/2024 10:00:00 AM", "é", "\x0b"]), max_size=40)


def _both(monkeypatch: pytest.MonkeyPatch, fn: object, *args: object) -> tuple[object, object]:
    got = fn(*args)  # type: ignore[operator]
    with monkeypatch.context() as mp:
        mp.setattr(native, "kernels", lambda: None)
        want = fn(*args)  # type: ignore[operator]
    return got, want


@settings(max_examples=300, deadline=None)
@given(parts=_TEXT)
def test_lines_and_kinds_match_numpy(parts: list[str]) -> None:
    _kernels()
    buf = "".join(parts).encode()
    with pytest.MonkeyPatch.context() as mp:
        lines = iostat_lines.Lines(buf)
        kind = iostat_lines.classify(lines)
        mp.setattr(native, "kernels", lambda: None)
        ref = iostat_lines.Lines(buf)
        ref_kind = iostat_lines.classify(ref)
    assert lines.n == ref.n
    assert lines.starts.tolist() == ref.starts.tolist()
    assert lines.ends.tolist() == ref.ends.tolist()
    assert kind.tolist() == ref_kind.tolist()


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=9000), extra=st.lists(st.integers(0, 8999), max_size=600))
def test_newlines_are_counted_like_bytes_count(data: bytes, extra: list[int]) -> None:
    # blocks of 255 x 16 bytes are summed at once: inputs cross that boundary
    kern = _kernels()
    buf = bytearray(data.ljust(len(data) + len(extra) * 7, b"x"))
    for at in extra:
        if at < len(buf):
            buf[at] = 10
    text = bytes(buf)
    arr = np.frombuffer(text, dtype=np.uint8)
    assert kern.lib.ig_count(arr, arr.size, 10) == text.count(b"\n")
    starts, _ends = kern.lines(text, arr)
    assert starts.size == text.count(b"\n") + (1 if text and not text.endswith(b"\n") else 0)


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.txt")))
def test_every_fixture_is_classified_and_parsed_alike(name: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _kernels()
    data = (FIX / name).read_bytes()
    buf = iostat_lines.utf8(data)
    kind, ref_kind = _both(monkeypatch, lambda: iostat_lines.classify(iostat_lines.Lines(buf)))
    assert kind.tolist() == ref_kind.tolist()  # type: ignore[attr-defined]
    lines = iostat_lines.Lines(buf)
    big = np.arange(lines.n)
    assert lines.text(big).to_list() == [buf[s:e].decode() for s, e in
                                         zip(lines.starts.tolist(), lines.ends.tolist(),
                                             strict=True)]

    def parse() -> tuple[pl.DataFrame, list[str]]:
        src = Source(path=name, interval_s=2.0, lenient=True)
        try:
            frame = iostat.parse(data, src).df
        except Exception as exc:  # noqa: BLE001 - the same refusal is expected of both
            return pl.DataFrame({"error": [str(exc)]}), []
        return frame, [*src.notes]

    (frame, notes), (ref, ref_notes) = _both(monkeypatch, parse)  # type: ignore[misc]
    assert frame.equals(ref, null_equal=True)
    assert notes == ref_notes


# ---- the fixed-width decoder ----------------------------------------------------------------
# Compared with the slow reference and the numpy decoder in test_iostat_text.py (its decoder
# tests run every way of reading a range there, through decode_native below).


def decode_native(rows: list[str], fields: list[tuple[int, int]], *, vector: bool
                  ) -> tuple[list[np.ndarray], np.ndarray]:
    """ig_decode_fixed on equal-length ``rows``, placed in a buffer with other text between
    them (as in a piece: each line's start is an offset into it)."""
    kern = _kernels()
    text = "".join(r + "\n#junk#\n" for r in rows).encode()
    width = len(rows[0])
    starts = np.arange(len(rows), dtype=np.int64) * (width + 8)
    dots = []
    for a, b in fields:
        d = text.rfind(b".", a, b)
        dots.append(d if d >= 0 else b)
    if any(d <= a for (a, _b), d in zip(fields, dots, strict=True)):
        return [np.zeros(len(rows))] * len(fields), np.zeros(len(rows), dtype=bool)
    out, ok = kern.decode_fixed(np.frombuffer(text, dtype=np.uint8), starts, fields, dots,
                                vector=vector)
    return list(out), ok


# ---- device names ---------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(names=st.lists(st.sampled_from(["sda", "sdb", "nvme0n1p12", "dm-0", "x y", "",
                                       "1234567890123", "sdé", "sd\xe9a"]), min_size=1,
                      max_size=60))
def test_device_names_match_numpy(names: list[str]) -> None:
    kern = _kernels()
    lines_txt = [f"{n:<13s}  1.00".encode()[:19].ljust(19) for n in names]
    buf = b"\n".join(lines_txt) + b"\n"
    lines = iostat_lines.Lines(buf)
    idx = np.arange(lines.n)
    device, valid = iostat_fixed.line_names(lines, idx, 19, 13)
    mat = np.frombuffer(b"".join(lines_txt), dtype=np.uint8).reshape(len(names), 19)
    ref, ref_valid = iostat_fixed.device_names(mat, 13)
    assert device.to_list() == ref.to_list()
    assert valid.tolist() == ref_valid.tolist()
    assert kern.group_names(lines.arr, lines.starts, 13, max_groups=1) is None or \
        len(set(device.to_list())) <= 1


# ---- time-stamp shapes -----------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.text(alphabet="0123456789/: APM年\u0663x", max_size=12), min_size=1,
                      max_size=40))
def test_lines_are_grouped_by_their_digit_shape_exactly(lines: list[str]) -> None:
    kern = _kernels()
    buf = ("\n".join(lines) + "\n").encode()
    parsed = iostat_lines.Lines(buf)
    idx = np.arange(parsed.n)
    grouped = kern.group_shapes(parsed.arr, parsed.starts, parsed.ends, idx)
    assert grouped is not None
    code, first = grouped
    shape = [re.sub(r"[0-9]", "0", line) for line in lines]  # ASCII digits only
    # same group exactly when same shape; groups numbered by first appearance
    assert [shape[i] for i in first.tolist()] == list(dict.fromkeys(shape))
    assert [shape[first[c]] for c in code.tolist()] == shape
    assert kern.group_shapes(parsed.arr, parsed.starts, parsed.ends, idx,
                             max_groups=len(set(shape)) - 1) is None


# ---- time stamps ---------------------------------------------------------------------------

_SPELLINGS = [("%m/%d/%Y %I:%M:%S %p", "MDY"), ("%m/%d/%y %H:%M:%S", "MDY"),
              ("%d/%m/%Y %H:%M:%S", "DMY"), ("%d.%m.%Y %H:%M:%S", "DMY"),
              ("%Y-%m-%dT%H:%M:%S", "YMD"), ("%m/%d/%Y %I:%M %p", "MDY"), ("%d/%m/%y", "DMY")]


@settings(max_examples=80, deadline=None)
@given(times=st.lists(st.datetimes(min_value=dt.datetime(1970, 1, 1),
                                   max_value=dt.datetime(2068, 12, 31)), min_size=1,
                      max_size=20),
       spelling=st.sampled_from(_SPELLINGS),
       damage=st.lists(st.tuples(st.integers(0, 19), st.integers(0, 30),
                                 st.sampled_from("0123456789aApPmM -:/9")), max_size=6),
       lower=st.booleans())
def test_stamp_kernel_reads_what_parse_local_reads(
        times: list[dt.datetime], spelling: tuple[str, str],
        damage: list[tuple[int, int, str]], lower: bool) -> None:
    """ig_stamps against timestamps.parse_local (chrono strptime) on printed times, some
    with a character changed (impossible months, days, hours, 12-hour marks, another
    separator): where the kernel reads a line it reads the same time; it refuses every line
    that parse_local cannot read, and refuses a readable one only for a leap second or
    another shape than the first line's (parse_local reads those by its regular
    expressions; so does the importer, which hands them to it)."""
    kern = _kernels()
    fmt, order = spelling
    texts = [t.strftime(fmt) for t in times]
    if lower:
        texts = [t.replace("AM", "am").replace("PM", "pm") for t in texts]
    for row, col, ch in damage:
        if row < len(texts) and col < len(texts[row]) and row:  # the first sets the shape
            texts[row] = texts[row][:col] + ch + texts[row][col + 1:]
    shape = tsx.fixed_shape(texts[0], order)
    assert shape is not None
    data = ("\n".join(texts) + "\n").encode()
    lines = iostat_lines.Lines(data)
    idx = np.arange(lines.n)
    us, ok = kern.stamps(lines.arr, lines.starts, lines.ends, idx, shape.template,
                         shape.classes, list(shape.at), shape.ampm)
    ref = tsx.parse_local(pl.Series(texts), order)["local"].to_list()
    for text, value, read, want in zip(texts, us.tolist(), ok.tolist(), ref, strict=True):
        if read:
            assert want is not None, text
            assert dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=value) == want, text
        else:
            assert want is None or ":60" in text or not _same_shape(text, texts[0]), text


def _same_shape(a: str, b: str) -> bool:
    """Digits where digits, AM/PM letters where they are, the same characters elsewhere."""
    return len(a) == len(b) and all(
        (x.isdigit() and y.isdigit()) or x == y or (x in "AaPp" and y in "AaPp")
        or (x in "Mm" and y in "Mm") for x, y in zip(a, b, strict=True))


def test_stamp_shapes_the_kernel_leaves_to_parse_local() -> None:
    assert tsx.fixed_shape("2018-06-13T14:10:50+0200", "YMD") is None  # an offset
    assert tsx.fixed_shape("2018年06月13日 14時10分50秒", "YMD") is None  # not ASCII
    assert tsx.fixed_shape("06/13/2018 02:10:50 p.m.", "MDY") is None  # not %p
    assert tsx.fixed_shape("06/13/18 02:10:50", "YMD") is None  # no 4-digit year first
    shape = tsx.fixed_shape("06/13/2018 02:10:50 PM", "MDY")
    assert shape is not None and shape.ampm == 20 and shape.at[:2] == (6, 4)
