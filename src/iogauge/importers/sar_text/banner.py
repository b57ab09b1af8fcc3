"""The ``Linux <kernel> (<host>) <date>`` banner of sar text, and its date in every locale
spelling."""

from __future__ import annotations

import re
from datetime import date

# ---- the banner ---------------------------------------------------------------------------

_DATE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})"), "ymd"),  # ISO (S_TIME_FORMAT=ISO)
    (re.compile(r"(\d{4})\s*[年년]\s*(\d{1,2})\s*[月월]\s*(\d{1,2})"), "ymd"),  # ja/zh/ko
    (re.compile(r"(\d{4})[./]\s*(\d{1,2})[./]\s*(\d{1,2})"), "ymd"),  # hu, zh_TW ...
    (re.compile(r"(\d{1,2})\.(\d{1,2})\.(\d{2,4})"), "dmy"),  # de, ru, ...
    (re.compile(r"(\d{1,2})/(\d{1,2})/(\d{2,4})"), "mdy"),  # C, en_US (%x); en_GB is d/m
)


def _year(text: str) -> int:
    y = int(text)
    if len(text) <= 2:  # POSIX %y: 69-99 -> 19xx, 00-68 -> 20xx
        y += 1900 if y >= 69 else 2000
    return y


def parse_banner_date(text: str) -> tuple[date, date | None] | None:
    """The banner's date, and the other reading when ``a/b/yy`` could be either order."""
    for pattern, order in _DATE_PATTERNS:
        m = pattern.search(text)
        if not m:
            continue
        a, b, c = m.group(1), m.group(2), m.group(3)
        try:
            if order == "ymd":
                return date(int(a), int(b), int(c)), None
            if order == "dmy":
                return date(_year(c), int(b), int(a)), None
            first, second = int(a), int(b)
            if first > 12:  # cannot be a month: a day/month locale (en_GB, fr ...)
                return date(_year(c), second, first), None
            mdy = date(_year(c), first, second)
            alt = None
            if second <= 12 and first != second:
                alt = date(_year(c), second, first)
        except ValueError:
            return None
        return mdy, alt
    return None
