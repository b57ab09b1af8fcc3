"""The values of RMF Postprocessor text: page titles, printed numbers, sizes and ratios,
and the line patterns every section reads."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

NAME = "rmf"
DESCRIPTION = ("z/OS RMF Postprocessor reports: Direct Access Device Activity, Cache Subsystem "
               "Activity, ESS Rank Statistics")
EXPECTS = ("RMF Postprocessor report text: a 'z/OS Vn Rn SYSTEM ID' page header and a DIRECT "
           "ACCESS DEVICE ACTIVITY, CACHE SUBSYSTEM ACTIVITY or ESS RANK STATISTICS page title")

# Titles as they read once the letter spacing is removed.
_DASD = "DIRECT ACCESS DEVICE ACTIVITY"
_CACHE = "CACHE SUBSYSTEM ACTIVITY"
_CACHE_DEV = "CACHE DEVICE ACTIVITY"
_ESS_RANK = "ESS RANK STATISTICS"
_KNOWN = (_DASD, _CACHE, _CACHE_DEV, _ESS_RANK)
_SNIFF_TITLES = tuple(t.replace(" ", "") for t in (*_KNOWN, "ESS EXTENT POOL STATISTICS"))

_SYS_RE = re.compile(r"z/OS\s+(V\d+R\d+)\s+SYSTEM ID\s+(\S+)\s+DATE\s+(\d{2}/\d{2}/\d{4})\s+"
                     r"INTERVAL\s+(\d{1,3})\.(\d{2})\.(\d{3})\b")
_TIME_RE = re.compile(r"(?:RPT VERSION|CONVERTED TO)\s.*?\bRMF\s+TIME\s+"
                      r"(\d{2})\.(\d{2})\.(\d{2})\b")
_NA = "N/A"
_HEX4 = re.compile(r"[0-9A-F]{4}")
_DEVNUM = re.compile(r"[0-9A-F]{4,5}")
_PAV = re.compile(r"\d+(?:\.\d+)?H?\*?")
_SUBSYS_RE = re.compile(r"^SUBSYSTEM\s+\S+\s+CU-ID\s+(\S+)\s+SSID\s+([0-9A-F]{4})\b")
_SERIAL_RE = re.compile(r"^TYPE-MODEL\s.*\bSERIAL\s+([0-9A-Z]+)\s*$")
_VOLSER_RE = re.compile(r"^VOLSER\s+(\S+)\s+NUM\s+([0-9A-F]{4,5})"
                        r"(?:\s+(RRID|XTNT POOL|EXTENT POOL)\s+([0-9A-F]{4}))?\s*$")
_ESS_SERIAL_RE = re.compile(r"^SERIAL NUMBER\s+([0-9A-Z]+)\s")
_HR_RE = re.compile(r"^TOTAL H/R\s+(\S+)")
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?|\.\d+)([KMGT]?)")
_BINARY = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_REQ_ROWS = ("NORMAL", "SEQUENTIAL", "CFW DATA", "TOTAL")
#: CACHE SUBSYSTEM DEVICE OVERVIEW value columns after VOLSER, DEV NUM [, XTNT POOL]
#: (RMF Report Analysis, "Cache Subsystem Device Overview"); TOTAL H/R is the 12th.
_OVERVIEW_NVALUES = 15
_OVERVIEW_TOTAL_HR = 11
#: ESS RANK STATISTICS: READ OPS/SEC BYTES/OP BYTES/SEC RTIME/OP, then the same for WRITE.
_RANK_NVALUES = 8

# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------
def _dec(token: str) -> Decimal | None:
    """A printed RMF number (``.000``, ``1.50``, ``1294.126``); None for N/A or not a number."""
    if token in (_NA, "-", ""):
        return None
    try:
        value = Decimal(token)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _num(token: str, line_no: int, what: str) -> float | None:
    """A float from an RMF number; N/A -> None; anything else refuses the line, a negative
    number too (RMF's rates, times and percentages are never below zero; taken, it failed the
    SampleFrame's checks with no line named)."""
    if token == _NA:
        return None
    value = _dec(token)
    if value is None:
        raise _BadLine(line_no, f"{what}: {token!r} is not a number")
    if value < 0:
        raise _BadLine(line_no, f"{what}: {token!r} is negative")
    return float(value)


def _bytes(token: str, line_no: int, what: str) -> Decimal:
    """An ESS byte figure with RMF's K/M/G/T suffix (binary multiples), in bytes."""
    m = _SIZE_RE.fullmatch(token)
    if m is None:
        raise _BadLine(line_no, f"{what}: {token!r} is not a byte count (e.g. 56.0K, 203.8M)")
    return Decimal(m.group(1)) * _BINARY[m.group(2)]


def _kb(value: Decimal) -> float:
    return float(value / 1024)


def _pct_of_ratio(token: str, line_no: int, what: str) -> float | None:
    """A hit ratio printed as 0.998 -> 99.8 (percent); N/A -> None."""
    if token == _NA:
        return None
    value = _dec(token)
    if value is None or value > 1:
        raise _BadLine(line_no, f"{what}: {token!r} is not a hit ratio between 0 and 1")
    return float(value * 100)


def _serial(text: str) -> str:
    return text.lstrip("0") or "0"


def _spaced_title(text: str) -> str | None:
    """``C A C H E   S U B S Y S T E M`` -> ``CACHE SUBSYSTEM``; None if not letter-spaced."""
    s = text.strip()
    words = s.split("   ")
    if len(s) < 5 or not any(len(w) > 1 for w in words):
        return None
    if not all(re.fullmatch(r"\S(?: \S)*", w) for w in words):
        return None
    return " ".join(w.replace(" ", "") for w in words)


class _BadLine(Exception):  # noqa: N818 - internal control flow, converted to source.bad_line
    def __init__(self, line_no: int, reason: str) -> None:
        super().__init__(reason)
        self.line_no = line_no
        self.reason = reason
