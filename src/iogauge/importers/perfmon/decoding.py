"""A perfmon log's bytes as UTF-8 text: UTF-16 (either byte order) transcoded as it is read."""

from __future__ import annotations

import codecs
import io
import os
import stat
from typing import BinaryIO

import numpy as np

# ---- decoding ----------------------------------------------------------------------------


def _utf16_to_utf8(data: bytes, offset: int, big_endian: bool) -> bytes:
    """UTF-16 text as UTF-8 bytes. ASCII-only text (the usual case) is converted by taking
    the low byte of every code unit -- exact when every unit is <= 0x7F, one copy, and
    ~10x faster than a codec, which builds a str and then the bytes."""
    n_units = (len(data) - offset) // 2
    if (len(data) - offset) % 2 == 0 and n_units:
        units = np.frombuffer(data, dtype=">u2" if big_endian else "<u2", offset=offset)
        if int(units.max()) <= 0x7F:
            low = np.frombuffer(data, dtype=np.uint8, offset=offset + (1 if big_endian else 0))
            return low[::2].tobytes()
    codec = "utf-16-be" if big_endian else "utf-16-le"
    return data[offset:].decode(codec, errors="replace").encode("utf-8")


def to_utf8(data: bytes) -> tuple[bytes, str]:
    """The file as UTF-8 bytes (what polars reads) and the encoding it was in.

    relog writes UTF-16 LE with a BOM by default; typeperf and logman CSV are ANSI
    (the system code page, cp1252 on western Windows) or UTF-8. UTF-8 and ASCII data are
    returned as they are (no copy).
    """
    if data.startswith(b"\xff\xfe"):
        return _utf16_to_utf8(data, 2, big_endian=False), "utf-16-le"
    if data.startswith(b"\xfe\xff"):
        return _utf16_to_utf8(data, 2, big_endian=True), "utf-16-be"
    if len(data) >= 4 and data[1:2] == b"\x00" and data[3:4] == b"\x00":
        return _utf16_to_utf8(data, 0, big_endian=False), "utf-16-le"
    if data.isascii():
        return data, "ascii"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace").encode("utf-8"), "cp1252"
    return data, "utf-8"


#: Bytes read per call when :func:`read_utf8` converts a UTF-16 stream: a piece is converted
#: while it is still in the CPU cache, and the UTF-16 text is never held whole.
READ_BYTES = 1 << 20


def read_utf8(stream: BinaryIO) -> tuple[bytes, str]:
    """The whole of ``stream`` as UTF-8 bytes and the encoding it was in, as :func:`to_utf8`
    gives for the same bytes.

    UTF-16 (relog's default, twice the size of the text) is converted a piece at a time as
    it is read: ASCII pieces by narrowing every code unit to a byte (exact when each is
    <= 0x7F) straight into one output buffer, sized from the file when it is a plain file,
    any other piece and everything after it by an incremental codec (which carries a code
    unit or surrogate pair split between pieces). Other encodings are read whole and go
    through :func:`to_utf8`.
    """
    head = stream.read(4)
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        offset, big_endian = 2, head.startswith(b"\xfe\xff")
    elif len(head) >= 4 and head[1:2] == b"\x00" and head[3:4] == b"\x00":
        offset, big_endian = 0, False
    else:
        return to_utf8(_read_rest(stream, head))
    encoding = "utf-16-be" if big_endian else "utf-16-le"
    unit = ">u2" if big_endian else "<u2"
    # ASCII text goes into ``out`` (pre-sized for a plain file: no growing, no join);
    # ``parts`` takes what does not fit and everything once a non-ASCII unit was met.
    out = bytearray(_remaining(stream) // 2 + 2)
    out_arr = np.frombuffer(out, dtype=np.uint8)
    filled = 0
    parts: list[bytes] = []
    carry = head[offset:]  # bytes of the text not yet converted (at most one odd byte)
    codec: codecs.IncrementalDecoder | None = None
    buf = bytearray(READ_BYTES)
    while True:
        n = stream.readinto(buf)  # type: ignore[attr-defined]
        if not n:
            break
        chunk = carry + bytes(buf[:n]) if carry else memoryview(buf)[:n]
        even = len(chunk) - len(chunk) % 2
        carry = bytes(chunk[even:])
        if codec is None:
            units = np.frombuffer(chunk, dtype=unit, count=even // 2)
            if units.size == 0 or int(units.max()) <= 0x7F:
                # the numeric value of a unit <= 0x7F is its ASCII byte, whatever the order
                if not parts and filled + units.size <= out_arr.size:
                    np.copyto(out_arr[filled:filled + units.size], units, casting="unsafe")
                    filled += units.size
                else:
                    parts.append(units.astype(np.uint8).tobytes())
                continue
            codec = codecs.getincrementaldecoder(encoding)(errors="replace")
        parts.append(codec.decode(bytes(chunk[:even])).encode("utf-8"))
    if codec is None:
        codec = codecs.getincrementaldecoder(encoding)(errors="replace")
    tail = codec.decode(carry, final=True)  # an odd last byte: U+FFFD, as a one-shot decode
    if tail:
        parts.append(tail.encode("utf-8"))
    first = bytes(memoryview(out)[:filled])
    del out_arr, out
    return (b"".join([first, *parts]) if parts else first), encoding


def _remaining(stream: BinaryIO) -> int:
    """Bytes left to read in ``stream`` when it is a plain file, else 0 (unknown)."""
    if not isinstance(stream, io.BufferedReader):
        return 0
    try:
        st = os.fstat(stream.fileno())
        return max(st.st_size - stream.tell(), 0) if stat.S_ISREG(st.st_mode) else 0
    except (OSError, ValueError):
        return 0


def _read_rest(stream: BinaryIO, head: bytes) -> bytes:
    """``head`` (what was read of ``stream``) and the rest of it, as one bytes object.

    A plain file is read again from its start in one call of its known size (as
    :func:`.io.read_bytes` does): ``head + read()`` would grow a buffer chunk by chunk and
    then copy it, holding the file two or three times at the peak.
    """
    if isinstance(stream, io.BufferedReader) and stream.seekable():
        try:
            size = os.fstat(stream.fileno()).st_size
        except OSError:
            size = 0
        if size > len(head):
            stream.seek(0)
            data = stream.read(size)
            rest = stream.read()  # a file that grew while being read
            return data + rest if rest else data
    return head + stream.read()
