"""Every importer fixture is sniffed as exactly its own format, and the registry reports why
each format refused a file nobody recognises."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers.importing import FIXTURE_FORMATS

from iogauge.importers.io import HEAD_BYTES, read_head
from iogauge.importers.registry import FORMATS, UnknownFormatError, available, detect

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
#: fixture folder -> format id (the jc diskstats sample is one snapshot: not sniffable alone)
FOLDERS = {k: v for k, v in FIXTURE_FORMATS.items() if k != "diskstats"}
#: helper files that live beside fixtures and are not inputs (the sa folder's .txt files
#: are the sar -A output sysstat expects of the sa file of the same name)
NOT_INPUTS = {".py", ".json", ".txt"}
#: formats used only when forced: the sadf path reads the files format sa sniffs
FORCED_ONLY = {"sa-sadf"}


def _cases() -> list[tuple[Path, str]]:
    out = []
    for folder, fmt in FOLDERS.items():
        for p in sorted((FIXTURES / folder).glob("*")):
            if p.is_file() and not (folder == "sa" and p.suffix in NOT_INPUTS):
                out.append((p, fmt))
    return out


CASES = _cases()


def test_every_format_is_available_and_has_fixtures() -> None:
    assert available() == list(FORMATS)
    assert {fmt for _p, fmt in CASES} == set(FORMATS) - FORCED_ONLY


@pytest.mark.parametrize(("path", "fmt"), CASES, ids=[f"{f}:{p.name}" for p, f in CASES])
def test_fixture_is_detected_as_its_own_format(path: Path, fmt: str) -> None:
    assert detect(read_head(path, HEAD_BYTES), str(path)) == fmt


def test_unknown_file_lists_every_format_and_why(tmp_path: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("shopping list\neggs\nmilk\n")
    with pytest.raises(UnknownFormatError) as info:
        detect(p.read_bytes(), str(p))
    msg = str(info.value)
    assert msg.startswith(f"{p}: format not recognised; tried:")
    for name in FORMATS:
        assert f"  {name}: expects " in msg
    assert "--format NAME" in msg
