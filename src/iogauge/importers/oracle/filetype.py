"""AWR's IOStat by Filetype summary (11.2 and later): the average service time of small
and large reads of each kind of file, as the database's I/O layer timed them -- what
iostat cannot split (a data file's single-block reads from its multi-block ones).

The text report prints ``Small Read`` and ``Large Read`` in milliseconds (its note says
so: "Small Read and Large Read are average service times, in milliseconds"); 12c+ and
the HTML report print each time with its unit (``381.89us``, ``244.41ms``). Each file
type with a time becomes a wait row of the section ``iostat by filetype``: the event is
the file type and the size (``Data File small read``), ``avg_wait_ms`` the time; a blank
or ``N/A`` cell (no read of that size; 11.2.0.4 prints N/A) gives no row, nor does the
``TOTAL:`` row (``Total`` in the RAC report: the other rows summed). The other columns (data
and requests per second) are not read.
"""

from __future__ import annotations

import re
from typing import Any

from iogauge.importers.oracle.grammar import (
    NOT_AVAILABLE,
    _BadLine,
    _norm,
    _number,
    _with_unit_ms,
)

#: the text section title
FILETYPE_RE = re.compile(r"^(IOStat by Filetype summary)(?=\s+for DB:|\s{2,}DB/Inst:|\s*$)")
SECTION = "iostat by filetype"
#: the text column of the file type's name
TEXT_NAMES = {"filetypename"}
#: "Data File", "Control File", "Archive Log", "Data Pump Dump File", "Other" (the text
#: cuts names at its column width, so a name may end in a cut word)
_NAME_RE = re.compile(r"[A-Za-z][A-Za-z ]*")
_SIZES = (("smallread", "small read"), ("largeread", "large read"))


def filetype_rows(names: list[str], cells: list[str], line_no: int, title: str,
                  notes: set[str]) -> list[dict[str, Any]]:
    """The small/large read rows of one file type (its cells under ``names``); a '#' cell
    adds a note to ``notes``."""
    keys = [_norm(n) for n in names]
    if "filetypename" not in keys or not {"smallread", "largeread"} & set(keys):
        raise _BadLine(line_no, f"{title}: column headings not recognised "
                       f"({', '.join(names)})")
    name = cells[keys.index("filetypename")].strip()
    if name in ("TOTAL:", "Total"):  # (the sum of the other rows)
        return []
    if not _NAME_RE.fullmatch(name):
        raise _BadLine(line_no, f"{title}: {name!r} is not a file type (a line of another "
                       "block?)")
    out = []
    for key, size in _SIZES:
        if key not in keys:
            continue
        at = keys.index(key)
        cell = cells[at].strip()
        if cell == NOT_AVAILABLE:  # (11.2.0.4: no read of that size, as a blank cell)
            continue
        if cell[-1:].isalpha():  # (12c+, HTML: the unit printed)
            ms = _with_unit_ms(cell, line_no, names[at])
        else:
            ms = _number(cell, line_no, names[at], notes)
        if ms is not None:
            out.append({"event": f"{' '.join(name.split())} {size}",
                        "avg_wait_ms": float(ms), "section": SECTION})
    return out
