"""A sysstat JSON document in any layout, read a piece at a time.

``iostat -o JSON`` and ``sadf -j`` write ``{"sysstat": {"hosts": [{<host keys>,
"statistics": [<entry>, ...], ...}, ...]}}``, one statistics entry per interval. Their own
layouts (tabs, one line per object) have readers of their own that check every line
(:mod:`iogauge.importers.iostat_json`, :mod:`iogauge.importers.sadf_json`). This module
reads the same documents in any other layout — re-indented by ``jq`` or Python, or on one
line (``jq -c``) — without holding the whole document: each piece of :data:`CHUNK_BYTES` is
scanned for the JSON structure, vectorised (numpy):

* the quotes that open or close a string (a quote after an odd run of backslashes is
  escaped), and from their count before each bracket whether it is inside a string;
* the depth after each bracket outside strings (a running sum of +1 for ``{`` ``[``, -1
  for ``}`` ``]``);
* the brackets at depth 4 or less (the document, ``sysstat``, ``hosts``, each host and
  its ``statistics`` list) are followed one by one — a few per host — to know which list is
  a ``statistics`` one; inside it, the brackets that return to its depth delimit the
  entries, found for all entries of a piece at once.

The complete entries of a piece are read by ``polars.read_json`` in one call, as a table
(:class:`Batch`); when polars refuses them (an entry malformed or not an object, bytes that
are not UTF-8), they are decoded one by one with ``json.loads``, the bad one named by the
line where the parser stops. An entry still open at the end of a piece is carried to the
next. Everything that is not inside a statistics entry — the host keys, ``restarts``, the
brackets and the commas between entries, with each entry replaced by ``{}`` and as many
line breaks as it held — is kept as the document's *skeleton* (a few per cent of an
indented input, almost nothing of one on one line), parsed at the end so that the document
is checked as a JSON parser would check it, line numbers included.

A document that ends inside a statistics entry (a cut) keeps its complete entries and says
where it was cut; one whose entry does not close because of damage (an entry that stops
decoding before its last token) is an error naming the line.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NoReturn

import numpy as np
import polars as pl

from iogauge.errors import InputFormatError
from iogauge.importers.base import Source
from iogauge.importers.io import decode, encoding_of

#: Bytes read per piece.
CHUNK_BYTES = 4 << 20
#: A statistics entry longer than this is damage (a bracket lost), not an entry: the
#: largest real ones (sadf -j -- -A of a big machine) are some hundred kB.
MAX_ENTRY_BYTES = 64 << 20

_QUOTE, _BACKSLASH, _NL = 34, 92, 10
_OPENERS = {123: 125, 91: 93}  # '{' -> '}', '[' -> ']'
_KEY_BEFORE = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:\s*$')
_DEPTH_STATS = 5  # inside a statistics list: document 1, sysstat 2, hosts 3, host 4


@dataclass
class Host:
    """One host of the document.

    Attributes:
        no: its number in the input (1, 2 …; across documents one after the other).
        info: its keys before ``"statistics"`` (``nodename``, ``date`` …).
        line: line of its ``"statistics"`` list.
        entries: statistics entries met so far (decoded, dropped or cut).
    """

    no: int
    info: dict[str, Any]
    line: int
    entries: int = 0


@dataclass
class Batch:
    """Consecutive statistics entries of one host, read from one piece.

    Attributes:
        host: the host.
        entries: one row per entry (objects only: a list or scalar entry is passed over, a
            malformed one refused), its columns the entries' keys as polars reads them
            (``disk``: a list of structs …), plus ``_line`` (line of the entry's ``{``) and
            ``_idx`` (its number within its host, 0 = the first; an entry dropped leaves a
            gap).
    """

    host: Host
    entries: pl.DataFrame


@dataclass
class _Part:
    """Entries of one host as read: ``blob[starts[k]:ends[k]]`` is entry k (the blob is
    comma-separated entries as in the file), at ``lines[k]``, numbered ``indices[k]``."""

    host: Host
    blobs: list[bytes] = field(default_factory=list)
    starts: list[list[int]] = field(default_factory=list)
    ends: list[list[int]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)


@dataclass
class _Frame:
    """An open bracket at depth 4 or less: its closer, role and line."""

    closer: int
    role: str  # doc, sysstat, hosts, host, stats, other
    line: int


class HostsDocument:
    """Read one input's sysstat document(s) with :meth:`pieces`; afterwards ``hosts``,
    ``documents`` (the skeletons parsed: each document without its statistics entries;
    empty when cut) and ``cut`` describe it.

    ``tool`` names the writer in messages (``iostat``, ``sadf``).
    """

    def __init__(self, source: Source, *, tool: str, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.source = source
        self.tool = tool
        self.chunk_bytes = chunk_bytes
        self.hosts: list[Host] = []
        self.documents: list[Any] = []
        self.cut = False
        # scanner state at the end of what was read
        self._depth = 0
        self._in_str = False
        self._esc = False  # the next byte is escaped (a backslash ended the last piece)
        self._line = 1  # line of the next byte
        self._stack: list[_Frame] = []
        self._skel = bytearray()
        self._host_open = 0  # skeleton offset of the current host's '{'
        self._host: Host | None = None
        self._entry: bytearray | None = None  # an entry begun in an earlier piece
        self._entry_line = 0

    # ---- the pieces -------------------------------------------------------------------------
    def pieces(self, stream: BinaryIO) -> Iterator[list[Batch]]:
        """The entries of each piece, in file order (pieces without any are not given)."""
        head = stream.read(4)
        enc = encoding_of(head)
        if enc in ("utf-16", "utf-16-le"):  # (small files from Windows tools: whole)
            data = decode(head + stream.read()).encode("utf-8")
            chunks: Iterator[bytes] = iter([data])
        else:
            head = head.removeprefix(b"\xef\xbb\xbf")
            chunks = _chunks(head, stream, self.chunk_bytes)
        for chunk in chunks:
            batches = self._scan(chunk)
            if batches:
                yield batches
        self._end()

    # ---- one piece --------------------------------------------------------------------------
    def _scan(self, data: bytes) -> list[Batch]:
        arr = np.frombuffer(data, dtype=np.uint8)
        n = arr.size
        quotes = np.flatnonzero(arr == _QUOTE)
        slashes = np.flatnonzero(arr == _BACKSLASH)
        if self._esc or slashes.size:
            escaped: list[int] = [0] if self._esc else []
            for p in slashes.tolist():
                if escaped and escaped[-1] == p:
                    continue  # (an escaped backslash escapes nothing)
                escaped.append(p + 1)
            self._esc = bool(escaped) and escaped[-1] == n
            if escaped:
                quotes = quotes[~np.isin(quotes, np.asarray(escaped, dtype=np.int64))]
        brackets = np.flatnonzero((arr == 123) | (arr == 125) | (arr == 91) | (arr == 93))
        in_str = (np.searchsorted(quotes, brackets) + int(self._in_str)) & 1
        brackets = brackets[in_str == 0]
        del in_str
        codes = arr[brackets]
        delta = np.where((codes == 123) | (codes == 91), 1, -1).astype(np.int64)
        after = self._depth + np.cumsum(delta)
        before = after - delta
        newlines = np.flatnonzero(arr == _NL)
        self._in_str = bool((int(self._in_str) + quotes.size) & 1)
        del quotes, slashes

        def line_at(pos: int) -> int:
            return self._line + int(np.searchsorted(newlines, pos))

        parts: list[_Part] = []
        cursor = 0
        t = 0
        nb = brackets.size
        if self._entry is not None:  # an entry begun before: it ends where depth is back
            ends = np.flatnonzero(after == _DEPTH_STATS)
            if ends.size == 0:
                self._entry += data
                if len(self._entry) > MAX_ENTRY_BYTES:
                    self._overlong()
                self._finish_piece(after, newlines)
                return []
            t = int(ends[0])
            end = int(brackets[t]) + 1
            self._entry += data[:end]
            entry, entry_line = bytes(self._entry), self._entry_line
            self._entry = None
            part = self._part(parts)
            self._add(part, entry, [0], [len(entry)], [entry_line])
            self._skel += b"{}" + b"\n" * entry.count(b"\n")
            cursor, t = end, t + 1
        # the brackets at depth 4 or less, one by one
        outer = np.flatnonzero(np.minimum(before, after) < _DEPTH_STATS)
        oi = int(np.searchsorted(outer, t))
        while True:
            top = self._stack[-1] if self._stack else None
            if top is not None and top.role == "stats":
                # a statistics list: its entries up to its ']' (the next outer bracket)
                stop = int(outer[oi]) if oi < outer.size else nb
                cursor = self._entries(data, cursor, brackets, before, after, t, stop,
                                       newlines, parts)
                if self._entry is not None:
                    break
                t = stop
                if oi >= outer.size:
                    break
            if oi >= outer.size:
                break
            t = int(outer[oi])
            oi += 1
            pos = int(brackets[t])
            self._skel += data[cursor:pos]
            cursor = pos + 1
            code = int(codes[t])
            try:
                if delta[t] > 0:
                    self._open(code, int(before[t]), line_at(pos))
                else:
                    self._close(code, line_at(pos))
            except InputFormatError:
                for part in parts:  # (the entries before it first: their problems too)
                    if part.lines:
                        self._read(part)
                raise
            self._skel.append(code)
            t += 1
        if self._entry is None:
            self._skel += data[cursor:]
        self._finish_piece(after, newlines)
        del data, arr
        return [self._read(part) for part in parts if part.lines]

    def _finish_piece(self, after: np.ndarray, newlines: np.ndarray) -> None:
        if after.size:
            self._depth = int(after[-1])
        self._line += newlines.size

    def _entries(self, data: bytes, cursor: int, brackets: np.ndarray, before: np.ndarray,
                 after: np.ndarray, t0: int, stop: int, newlines: np.ndarray,
                 parts: list[_Part]) -> int:
        """Read the entries of a statistics list between bracket ``t0`` and ``stop`` (its
        ``]``, or the end of the piece); return the offset read up to."""
        seg_before = before[t0:stop]
        seg_after = after[t0:stop]
        opens = np.flatnonzero(seg_before == _DEPTH_STATS) + t0
        closes = np.flatnonzero((seg_after == _DEPTH_STATS) & (seg_before > _DEPTH_STATS)) + t0
        if opens.size == 0:
            return cursor
        starts = brackets[opens]
        ends = brackets[closes] + 1
        done = ends.size
        part = self._part(parts)
        if done:
            first = int(starts[0])
            last = int(ends[-1])
            start_lines = self._line + np.searchsorted(newlines, starts[:done])
            breaks = np.searchsorted(newlines, ends) - np.searchsorted(newlines, starts[:done])
            self._add(part, data[first:last], (starts[:done] - first).tolist(),
                      (ends - first).tolist(), start_lines.tolist())
            # the skeleton: what is between the entries, each entry as '{}' and its breaks
            skel: list[bytes] = []
            prev = cursor
            for s, e, k in zip(starts[:done].tolist(), ends.tolist(), breaks.tolist(),
                               strict=True):
                skel.append(data[prev:s])
                skel.append(b"{}" + b"\n" * k)
                prev = e
            self._skel += b"".join(skel)
            cursor = prev
        if opens.size > done:  # the last entry goes on in the next piece
            s = int(starts[done])
            self._skel += data[cursor:s]
            self._entry = bytearray(data[s:])
            self._entry_line = self._line + int(np.searchsorted(newlines, s))
            if len(self._entry) > MAX_ENTRY_BYTES:
                self._overlong()
            return len(data)
        return cursor

    def _part(self, parts: list[_Part]) -> _Part:
        host = self._host
        if host is None:  # (a statistics list outside a host: refused by _open)
            raise AssertionError("statistics entries outside a host")
        if parts and parts[-1].host is host:
            return parts[-1]
        parts.append(_Part(host))
        return parts[-1]

    def _add(self, part: _Part, blob: bytes, starts: list[int], ends: list[int],
             lines: list[int]) -> None:
        n = part.host.entries
        part.host.entries += len(starts)
        part.blobs.append(blob)
        part.starts.append(starts)
        part.ends.append(ends)
        part.lines += lines
        part.indices += range(n, n + len(starts))

    def _read(self, part: _Part) -> Batch:
        """The entries of ``part`` as a table: polars reads them in one call; when it
        cannot (an entry that is malformed or not an object, bytes that are not UTF-8)
        they are decoded one by one, the bad ones refused, and the rest read again."""
        lines, indices = part.lines, part.indices
        try:
            df = pl.read_json(io.BytesIO(b"[" + b",".join(part.blobs) + b"]"),
                              infer_schema_length=None)
        except pl.exceptions.PolarsError:
            df = None
        if df is None or df.height != len(lines):
            del df
            good: list[str] = []
            kept: list[int] = []
            k = 0
            for blob, starts, ends in zip(part.blobs, part.starts, part.ends, strict=True):
                for s, e in zip(starts, ends, strict=True):
                    text = blob[s:e]
                    try:
                        obj = json.loads(decode(text))
                    except json.JSONDecodeError as exc:
                        self._refuse_entry(text, lines[k], exc)
                    else:
                        if isinstance(obj, dict):
                            good.append(json.dumps(obj))
                            kept.append(k)
                    k += 1
            lines = [lines[i] for i in kept]
            indices = [indices[i] for i in kept]
            try:
                df = pl.read_json(io.StringIO("[" + ",".join(good) + "]"),
                                  infer_schema_length=None)
            except pl.exceptions.PolarsError as exc:
                raise InputFormatError(self.source.path, lines[0] if lines else None,
                                       f"statistics entries with values of conflicting types: "
                                       f"{str(exc).splitlines()[0]}") from exc
        part.blobs.clear()
        return Batch(part.host, df.with_columns(
            pl.Series("_line", lines, dtype=pl.Int64()),
            pl.Series("_idx", indices, dtype=pl.Int64())))

    def _refuse_entry(self, text: bytes, line: int, exc: json.JSONDecodeError) -> None:
        where = line + exc.lineno - 1
        reason = f"malformed JSON statistics entry: {exc.msg}"
        if not self.source.lenient:
            raise InputFormatError(self.source.path, where, reason)
        self.source.skip(where, f"{reason} (the entry from line {line} was dropped)",
                         count=text.count(b"\n") + 1)

    def _overlong(self) -> None:
        """An entry that does not close within :data:`MAX_ENTRY_BYTES`: damage."""
        damage = _damage(bytes(self._entry or b""))
        if damage is not None:
            raise InputFormatError(self.source.path, self._entry_line + damage.lineno - 1,
                                   f"malformed JSON statistics entry: {damage.msg}")
        raise InputFormatError(self.source.path, self._entry_line,
                               f"a statistics entry longer than {MAX_ENTRY_BYTES >> 20} MiB "
                               "(a closing bracket lost?)")

    # ---- the brackets outside the entries ------------------------------------------------
    def _open(self, code: int, depth: int, line: int) -> None:
        parent = self._stack[-1].role if self._stack else None
        key = self._key()
        role = "other"
        if depth == 0:
            if code != 123:
                self._not_json(line, "the document is not an object")
            role = "doc"
        elif parent == "doc" and key == "sysstat" and code == 123:
            role = "sysstat"
        elif parent == "sysstat" and key == "hosts" and code == 91:
            role = "hosts"
        elif parent == "hosts" and code == 123:
            role = "host"
            self._host_open = len(self._skel)
            self._host = None
        elif parent == "host" and key == "statistics" and code == 91:
            role = "stats"
            self._start_host(line)
        self._stack.append(_Frame(_OPENERS[code], role, line))

    def _close(self, code: int, line: int) -> None:
        if not self._stack:
            self._not_json(line, f"{chr(code)!r} closes nothing")
        frame = self._stack.pop()
        if frame.closer != code:
            self._not_json(line, f"{chr(code)!r} closes the "
                           f"{chr(123 if frame.closer == 125 else 91)!r} of line {frame.line}")
        if frame.role == "host":
            self._host = None

    def _key(self) -> str | None:
        m = _KEY_BEFORE.search(self._skel, max(0, len(self._skel) - 4096))
        if m is None:
            return None
        try:
            key = json.loads(b'"' + m.group(1) + b'"')
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        return key if isinstance(key, str) else None

    def _start_host(self, line: int) -> None:
        """A host's ``"statistics"`` list opens: its keys so far are its info."""
        head = bytes(self._skel[self._host_open:])
        head = head[:_KEY_BEFORE.search(head).start()]  # type: ignore[union-attr]
        head = head.rstrip().removesuffix(b",")
        try:
            info = json.loads(decode(head + b"}"))
        except json.JSONDecodeError as exc:
            first = self._skel.count(b"\n", 0, self._host_open) + 1
            self._not_json(first + exc.lineno - 1, exc.msg)
        if self._host is not None:  # (a second "statistics" key: the same host)
            return
        self._host = Host(len(self.hosts) + 1, info if isinstance(info, dict) else {}, line)
        self.hosts.append(self._host)

    def _not_json(self, line: int | None, why: str) -> NoReturn:
        raise InputFormatError(self.source.path, line, f"not valid JSON: {why}")

    # ---- the end --------------------------------------------------------------------------
    def _end(self) -> None:
        src = self.source
        if self._entry is not None:
            text = bytes(self._entry)
            self._entry = None
            host = self._host
            done = host.entries if host is not None else 0
            damage = _damage(text)
            if damage is not None:
                if host is not None:
                    host.entries += 1
                self._refuse_entry(text, self._entry_line, damage)
            else:
                self.cut = True
                src.note(f"the document ends in the middle of report {done + 1} (line "
                         f"{self._entry_line}) — cut while {self.tool} was running? — the "
                         f"{done} complete report(s) before it were kept")
            return
        if self._depth > 0 or self._in_str:
            if not self.hosts:
                self._not_json(self._line, 'the document ends before its "statistics" list')
            self.cut = True
            src.note(f"the document ends before its closing brackets (cut while {self.tool} "
                     "was running?); every complete report was kept")
            return
        skel = decode(bytes(self._skel))
        self._skel = bytearray()
        decoder = json.JSONDecoder()
        pos = 0
        while True:
            while pos < len(skel) and skel[pos] in " \t\r\n":
                pos += 1
            if pos >= len(skel):
                break
            try:
                doc, pos = decoder.raw_decode(skel, pos)
            except json.JSONDecodeError as exc:
                src.bad_line(exc.lineno, f"not valid JSON: {exc.msg}")
                return
            self.documents.append(doc)
        if not self.documents:
            raise InputFormatError(src.path, None, "not valid JSON: the input is empty")
        for doc in self.documents:
            sysstat = doc.get("sysstat") if isinstance(doc, dict) else None
            if not isinstance(sysstat, dict) or not isinstance(sysstat.get("hosts"), list):
                raise InputFormatError(src.path, None, 'not a sysstat document (no '
                                       '"sysstat": {"hosts": [...]})')


def _chunks(head: bytes, stream: BinaryIO, size: int) -> Iterator[bytes]:
    block = head + stream.read(size)
    while block:
        yield block
        block = stream.read(size)


_LAST_TOKEN = re.compile(r"\s*\S*\s*")


def cut_short(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether the JSON parser stopped on ``text`` (``exc``) because the text ends too soon
    -- at its end, or in its last token or an unterminated last string -- rather than at
    damage before that."""
    return exc.msg.startswith("Unterminated string") or bool(
        _LAST_TOKEN.fullmatch(text, exc.pos))


def _damage(text: bytes) -> json.JSONDecodeError | None:
    """Why an entry that does not close is damage rather than a cut (:func:`cut_short`)."""
    s = decode(text)
    try:
        json.JSONDecoder().raw_decode(s)
    except json.JSONDecodeError as exc:
        return None if cut_short(s, exc) else exc
    return None
