"""Every text importer, fed its own fixtures with damage a log really suffers (one line cut
short, deleted, doubled, a digit overwritten, two lines swapped, the file cut at a line end):
it imports, or refuses with an InputFormatError that names the file; strict and --lenient,
nothing else escapes.

What this found when it was written: a polars panic in unix-sar (a device line cut short),
bare polars errors in perfmon (a first sample line with too few cells, a quote left open),
a zip() ValueError and a four-billion-report MemoryError in solaris-iostat. The fixtures are
the ones the format tests use (see tests/fixtures/NOTICE).
"""

from __future__ import annotations

import random
import zlib
from datetime import datetime
from pathlib import Path

import pytest
from tests.helpers.importing import FIXTURE_FORMATS

from iogauge.errors import InputFormatError
from iogauge.importers import registry
from iogauge.importers.base import Source

FIX = Path(__file__).resolve().parents[2] / "fixtures"

#: fixture folder -> format; binary sa files (and UTF-16 text, below) are left out: a line
#: of them is not a line of bytes
FORMATS = {k: v for k, v in FIXTURE_FORMATS.items() if k != "sa"}
DAMAGE = ("cut_short", "deleted", "doubled", "digit", "swapped", "file_cut")
PER_FILE = 5


def _fixtures() -> list[tuple[str, Path]]:
    out = []
    for folder, fmt in FORMATS.items():
        for path in sorted((FIX / folder).iterdir()):
            data = path.read_bytes()
            if path.name == "NOTICE" or data[:2] in (b"\xff\xfe", b"\xfe\xff"):
                continue
            out.append((fmt, path))
    return out


def _damaged(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    kind = rng.choice(DAMAGE)
    if kind == "cut_short":
        lines[i] = lines[i][:len(lines[i]) // 2]
    elif kind == "deleted":
        del lines[i]
    elif kind == "doubled":
        lines.insert(i, lines[i])
    elif kind == "digit":
        digits = [k for k, b in enumerate(lines[i]) if 48 <= b <= 57]
        if digits:
            k = rng.choice(digits)
            lines[i] = lines[i][:k] + b"x" + lines[i][k + 1:]
    elif kind == "swapped" and i + 1 < len(lines):
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    elif kind == "file_cut":
        return f"{kind} after line {i}", b"\n".join(lines[:i + 1]) + b"\n"
    return f"{kind} line {i + 1}", b"\n".join(lines)


@pytest.mark.parametrize(("fmt", "path"), _fixtures(),
                         ids=lambda v: v.name if isinstance(v, Path) else v)
def test_damage_is_imported_or_refused_by_name(fmt: str, path: Path) -> None:
    module = registry.load(fmt)
    data = path.read_bytes()
    rng = random.Random(zlib.crc32(path.name.encode()))  # noqa: S311 - reproducible damage
    for _ in range(PER_FILE):
        what, damaged = _damaged(data, rng)
        for lenient in (False, True):
            # --start/--interval for the outputs without dates (a bare Solaris sar -d, AIX
            # iostat -T, untimestamped Solaris iostat); ignored by the others
            source = Source(path=str(path), lenient=lenient, start=datetime(2020, 1, 2),
                            interval_s=5.0)
            refused: InputFormatError | None = None
            try:
                module.parse(damaged, source)
            except InputFormatError as exc:
                refused = exc
            if refused is not None:
                assert str(refused).startswith(str(path)), (what, lenient, refused)
