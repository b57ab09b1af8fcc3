"""Binary sysstat data files (``/var/log/sa/saDD``, ``/var/log/sysstat/saDD``, what ``sadc``
writes), read by running this machine's ``sadf -j FILE -- -d -u``: format ``sa-sadf``, used
only when asked for (``--format sa-sadf``). Files are read natively by
:mod:`iogauge.importers.sa` (format ``sa``); this path stays for a file of a sysstat newer
than that reader knows (a format magic after 0x2175), which an up-to-date sadf can read,
and as the tests' oracle where sadf is installed.

The binary layout changes between sysstat versions (sa.h: "strict writing, read any" only
within one FORMAT_MAGIC), so instead of decoding it here we let the installed ``sadf`` do
what it does for ``sar -f``, and import its JSON with :mod:`iogauge.importers.sadf_json`. Every
sa file starts with ``struct file_magic`` (sa.h): ``unsigned short sysstat_magic = 0xd596``
then ``format_magic`` (0x2175 for sysstat 11.7.1+; 0x2171, 0x2173 older), in the byte order
of the machine that wrote it (sadf reads both orders).

When ``sadf`` is missing the error says so. A file in an older format (sadf: "Current
sysstat version cannot read the format of this file (0x2171)"; sysstat's test data has
9.1.6's files in 0x2171 and 10.3.1's and 11.6.5's in 0x2173) is converted with ``sadf -c``
into the temporary directory and that copy is read, with a note; this is what sysstat's own
RPM scriptlet does to the files in /var/log/sa on an upgrade (sysstat.spec: ``sadf -C``
stating that message, then ``sadf -c FILE > FILE.migrate``). sadf -c takes HZ from this
machine for a 0x2171 file (it says so, and the note quotes it). When sadf cannot read the
file, or cannot convert it, the error quotes sadf's own messages. A file cut off while being
written is read up to its last whole record (sadf reports "End of system activity file
unexpected"; the note quotes it).

Memory and time: sadf's JSON is read from its pipe a piece at a time, and a thread drains
the pipe ahead of the reader (:class:`_ReadAhead`, up to :data:`_AHEAD_CHUNKS` MiB), so that
sadf keeps writing while a piece is parsed; reading the pipe only when the reader asked for
the next piece left sadf waiting on a full pipe for the whole parse, and the two ran one
after the other. A 107.7 MB file captured here (1,300 records of 1,021 disks;
``benchmarks/make_sa_file.py``, ``import_memory.py --sa``) imports to Parquet in 7.7-8.8 s at
0.24 GB peak (2.26x), where reading the pipe only when asked took 12.5-13.7 s at 0.22 GB
(alternating runs, same rows); sadf alone took 6.4 s.

Device names: sysstat 12 stores major:minor numbers and resolves names when it reads the
file (sa_common.c get_device_name: this machine's /sys, then its ioconf table, else
``devM-m``). For a file written on another host the names may therefore not be that host's;
a note says so.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, BinaryIO, cast

from iogauge.errors import InputFormatError, IogaugeError
from iogauge.importers import sadf_json
from iogauge.importers.base import Source
from iogauge.importers.io import head_then
from iogauge.model.sampleframe import SampleFrame

NAME = "sa-sadf"
DESCRIPTION = ("binary sysstat sa data files read with this machine's sadf (only with "
               "--format sa-sadf: for a format newer than the native reader knows)")
EXPECTS = "the sysstat file magic 0xd596 in the first two bytes (either byte order)"

#: struct file_magic.sysstat_magic (sa.h SYSSTAT_MAGIC), little- and big-endian.
SYSSTAT_MAGIC_BYTES = (b"\x96\xd5", b"\xd5\x96")
#: Options given to sadf after ``--``: disk statistics and CPU utilisation (sar -d -u).
SADF_SAR_OPTIONS = ("-d", "-u")
#: Where Debian/Ubuntu and RHEL put sadf when PATH lacks /usr/bin (cron-like environments).
_SADF_FALLBACKS = ("/usr/bin/sadf", "/usr/local/bin/sadf")
#: Where distributions install sadc, the collector that writes sa files (not on PATH):
#: Debian/Ubuntu, RHEL (lib64/sa), others.
_SADC_PATHS = ("/usr/lib/sysstat/sadc", "/usr/lib64/sa/sadc", "/usr/lib/sa/sadc",
               "/usr/libexec/sa/sadc", "/usr/libexec/sysstat/sadc")
_SADF_TIMEOUT_S = 600
#: sadf's output read ahead of the reader: this many chunks of _AHEAD_CHUNK_BYTES.
_AHEAD_CHUNKS = 8
_AHEAD_CHUNK_BYTES = 1 << 20


def sniff_bytes(head: bytes) -> bool:
    """The sysstat magic number at offset 0, in either byte order."""
    return head[:2] in SYSSTAT_MAGIC_BYTES


def sniff(head: str) -> bool:
    """A binary sa file is never valid text: detection uses :func:`sniff_bytes`, which the
    registry prefers for this module; decoded text is refused."""
    del head
    return False


def find_sadf() -> str | None:
    """The sadf program: ``$IOGAUGE_SADF``, else PATH, else the usual locations."""
    wanted = os.environ.get("IOGAUGE_SADF")
    if wanted:
        return wanted if Path(wanted).is_file() else None
    found = shutil.which("sadf")
    if found:
        return found
    return next((p for p in _SADF_FALLBACKS if Path(p).is_file()), None)


def find_sadc() -> str | None:
    """sysstat's sadc (for the tests and benchmarks that capture sa files), else None."""
    return next((p for p in _SADC_PATHS if Path(p).is_file()), shutil.which("sadc"))


def _sadf_env() -> dict[str, str]:
    """sadf's environment: messages in English (they are matched and quoted), times in
    UTC."""
    return {**os.environ, "LC_ALL": "C", "TZ": "UTC"}


def parse(data: bytes, source: Source) -> SampleFrame:
    """Run ``sadf -j`` on the (decompressed) file and import its JSON."""
    return SampleFrame.concat(list(iter_parse(io.BytesIO(data), source)))


def iter_parse(stream: BinaryIO, source: Source, *,
               chunk_bytes: int = sadf_json.CHUNK_BYTES) -> Iterator[SampleFrame]:
    """The rows of :func:`parse` as sadf prints them: the file is copied to a temporary
    file (sadf needs one it can seek in; the input may be a decompressed stream) and
    sadf's JSON is read from its pipe a piece of about ``chunk_bytes`` at a time
    (:func:`iogauge.importers.sadf_json.iter_parse`), so neither the file nor sadf's output
    is held whole. sadf's error, when it fails, is the error (with its version)."""
    sadf = find_sadf()
    if sadf is None:
        raise IogaugeError(
            f"{source.path}: is a binary sysstat sa file, and reading it needs the sadf "
            "program (package sysstat), which is not installed here (not on PATH, nor set "
            "with IOGAUGE_SADF). Install sysstat, or on a host that has it run "
            f"'sadf -j {Path(source.path).name} -- -d -u > {Path(source.path).name}.json' "
            "and import the JSON")
    with tempfile.TemporaryDirectory(prefix="iogauge-sa-") as tmp:
        copy = Path(tmp) / "sa.data"
        with copy.open("wb") as fh:
            shutil.copyfileobj(stream, fh, 1 << 20)
        with (Path(tmp) / "stderr").open("w+b") as err:
            converted: Path | None = None
            try:
                yield from _run_sadf(sadf, copy, err, source, chunk_bytes)
            except _OldFormatError as old:  # (before any row: sadf printed nothing)
                converted = _convert(sadf, copy, source, old)
        if converted is not None:
            with (Path(tmp) / "stderr2").open("w+b") as err:
                yield from _run_sadf(sadf, converted, err, source, chunk_bytes)


def _run_sadf(sadf: str, copy: Path, err: BinaryIO, source: Source, chunk_bytes: int
              ) -> Iterator[SampleFrame]:
    """Run sadf on ``copy`` (its messages into ``err``) and read its JSON as it comes."""
    try:
        proc = subprocess.Popen(
            [sadf, "-j", str(copy), "--", *SADF_SAR_OPTIONS], stdout=subprocess.PIPE,
            stderr=err, env=_sadf_env(),
            start_new_session=True)  # (a group of its own: killed with what it started)
    except OSError as exc:
        raise IogaugeError(f"{source.path}: cannot run {sadf}: {exc}") from exc
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        _kill(proc)

    timer = threading.Timer(_SADF_TIMEOUT_S, expire)
    timer.start()
    failed: InputFormatError | None = None
    head = b""
    ahead: _ReadAhead | None = None
    try:
        if proc.stdout is None:  # (never: stdout is a pipe)
            raise IogaugeError(f"{source.path}: {sadf} gave no output pipe")
        out = ahead = _ReadAhead(proc.stdout)
        head = out.read(4096)
        if head.strip():
            try:
                # (only read() is used of a stream: the read-ahead has that)
                rest = cast(BinaryIO, out)
                yield from sadf_json.iter_parse(head_then(head, rest), source, sa_file=True,
                                                chunk_bytes=chunk_bytes)
            except InputFormatError as exc:
                failed = exc  # (sadf's own error, if it failed, says more: see below)
        while out.read(1 << 20):
            pass  # (sadf may still be writing: let it finish, keeping nothing)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:  # (the reader was closed early, or raised)
            _kill(proc)
            proc.wait()
        if ahead is not None:
            ahead.close()  # (sadf has ended: its thread sees the pipe's end)
        if proc.stdout is not None:
            proc.stdout.close()
    if timed_out.is_set():
        raise IogaugeError(f"{source.path}: {sadf} did not finish within "
                           f"{_SADF_TIMEOUT_S} s")
    err.seek(0)
    stderr = _quote(err.read(), str(copy), Path(source.path).name)
    if proc.returncode != 0 or not head.strip():
        version = _sadf_version(sadf)
        said = stderr or f"exit status {proc.returncode} and no output"
        message = f"{source.path}: {sadf} ({version}) cannot read this sa file: {said}"
        found = _OLD_FORMAT_RE.search(stderr)
        if found is not None and not head.strip():
            raise _OldFormatError(message, found.group(1))
        raise IogaugeError(message) from failed
    if failed is not None:
        raise failed
    if "End of system activity file unexpected" in stderr:
        source.note("the sa file is cut off (sadf: End of system activity file unexpected): "
                    "its whole records were read, the partial last one was not")
    elif stderr:
        source.note(f"sadf reported: {stderr}")
    _note_foreign_host(head, source)


#: sadf's words for a file of an older format (sa_common.c handle_invalid_sa_file), which
#: sysstat's RPM scriptlet also looks for before it converts a file with sadf -c.
_OLD_FORMAT_RE = re.compile(r"Current sysstat version cannot read the format of this file "
                            r"\((0x[0-9a-fA-F]+)\)")


class _OldFormatError(IogaugeError):
    """sadf read nothing: the file is in an older sysstat format (``magic``)."""

    def __init__(self, message: str, magic: str) -> None:
        super().__init__(message)
        self.magic = magic


def _convert(sadf: str, copy: Path, source: Source, old: _OldFormatError) -> Path:
    """``copy`` converted to the current format with ``sadf -c`` (beside it), with a note;
    an error with both of sadf's messages if it cannot be."""
    new = copy.with_name(copy.name + ".new")
    try:
        with new.open("wb") as out:
            done = subprocess.run([sadf, "-c", str(copy)], stdout=out,
                                  stderr=subprocess.PIPE, check=False,
                                  env=_sadf_env(),
                                  timeout=_SADF_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IogaugeError(f"{old}; converting it with 'sadf -c' failed too: {exc}") from old
    said = _quote(done.stderr, str(copy), Path(source.path).name)
    if done.returncode != 0 or new.stat().st_size == 0:
        why = said or f"exit status {done.returncode} and no output"
        raise IogaugeError(f"{old}; converting it with 'sadf -c' failed too: {why}") from old
    source.note(f"the sa file is in an older sysstat format ({old.magic}): converted with "
                f"'sadf -c' before reading" + (f" (sadf: {said})" if said else ""))
    return new


class _ReadAhead:
    """A pipe drained by a thread of its own, ``_AHEAD_CHUNKS`` chunks ahead of
    :meth:`read`: the writer is not held up while the reader works on what it read."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._chunks: queue.Queue[bytes | BaseException | None] = queue.Queue(_AHEAD_CHUNKS)
        self._left = b""
        self._eof = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="sadf-read-ahead",
                                        daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        item: bytes | BaseException | None = None
        try:
            while not self._stop.is_set():
                data = self._raw.read(_AHEAD_CHUNK_BYTES)  # (all of it unless at the end)
                if not data:
                    break
                self._put(data)
        except Exception as exc:  # noqa: BLE001 - handed to the reader, which raises it
            item = exc
        self._put(item)  # (None: the end of the pipe)

    def _put(self, item: bytes | BaseException | None) -> None:
        while not self._stop.is_set():
            try:
                self._chunks.put(item, timeout=0.1)
            except queue.Full:
                continue
            return

    def read(self, n: int = -1) -> bytes:
        """``n`` bytes (all that are left when ``n`` < 0), fewer only at the end."""
        parts, have = [self._left], len(self._left)
        while (n < 0 or have < n) and not self._eof:
            item = self._chunks.get()
            if item is None:
                self._eof = True
            elif isinstance(item, BaseException):
                raise item
            else:
                parts.append(item)
                have += len(item)
        data = b"".join(parts)
        if n < 0 or len(data) <= n:
            self._left = b""
            return data
        self._left = data[n:]
        return data[:n]

    def close(self) -> None:
        """Stop the thread (call once the writer has ended, or the pipe is closed)."""
        self._stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._chunks.get_nowait()
        self._thread.join(timeout=10)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill sadf and whatever it started (a wrapper script's children would keep its pipe
    open)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _quote(raw: bytes, tmp_path: str, name: str) -> str:
    """sadf's message on one line, naming the user's file instead of our temporary copy."""
    text = raw.decode("utf-8", errors="replace").replace(tmp_path, name)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " / ".join(dict.fromkeys(lines))  # sadf may repeat a line per activity


def _sadf_version(sadf: str) -> str:
    try:
        out = subprocess.run([sadf, "-V"], capture_output=True, check=False, timeout=10,
                             env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return "version unknown"
    for line in (out.stdout + out.stderr).decode("utf-8", errors="replace").splitlines():
        if "version" in line:
            return line.strip()
    return "version unknown"


def _note_foreign_host(head: bytes, source: Source) -> None:
    """A note when the file's host (``nodename`` in the head of sadf's JSON) is not this
    machine."""
    hosts = {m.decode("utf-8", errors="replace")
             for m in re.findall(rb'"nodename":\s*"([^"]*)"', head)}
    here = socket.gethostname()
    if hosts and hosts != {here}:
        source.note(f"the file was written on {', '.join(sorted(hosts))}, not here ({here}): "
                    "sadf names devices from this machine's /sys and its ioconf table, so a "
                    "name may not be what that host called the device (the statistics are "
                    "unaffected)")
