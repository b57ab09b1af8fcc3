"""The line readers of each RMF section: DIRECT ACCESS DEVICE ACTIVITY, CACHE SUBSYSTEM /
CACHE DEVICE ACTIVITY and ESS RANK STATISTICS, and the rows they add."""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from itertools import repeat
from typing import Any

import numpy as np

from iogauge.importers.rmf.state import _Page, _State
from iogauge.importers.rmf.tokens import (
    _CACHE_DEV,
    _DEVNUM,
    _ESS_SERIAL_RE,
    _HEX4,
    _HR_RE,
    _OVERVIEW_NVALUES,
    _OVERVIEW_TOTAL_HR,
    _PAV,
    _RANK_NVALUES,
    _REQ_ROWS,
    _SERIAL_RE,
    _SUBSYS_RE,
    _VOLSER_RE,
    _BadLine,
    _bytes,
    _kb,
    _num,
    _pct_of_ratio,
    _serial,
)


@lru_cache(maxsize=256)
def _start_time(text: str) -> datetime:
    """A page header's DATE and TIME (``mm/dd/yyyy hh.mm.ss``), parsed once per interval,
    not once per page (strptime took 7 % of the reading time of the benchmark input)."""
    return datetime.strptime(text, "%m/%d/%Y %H.%M.%S")


#: The sections a device line is in (:func:`_row`), as bits: a tabled row keeps those of its
#: device (_sections), so that an interval opened again (:func:`_reopen`) still refuses a
#: device line it had already read.
_SECTION_BITS = {section: 1 << k for k, section in enumerate(
    ("DASD", "cache device overview", "cache device activity", "cache subsystem overview",
     "ESS rank statistics"))}


def _row(st: _State, page: _Page, device: str, kind: str, section: str,
         line_no: int) -> dict[str, Any]:
    if page.key is None:  # pragma: no cover - _page_line reads the header first
        raise _BadLine(line_no, "report line before the page header")
    iv = st.intervals[page.key]
    if (device, section) in iv.seen:
        raise _BadLine(line_no, f"{device} appears twice in the {section} report of the interval "
                       f"starting {iv.start:%m/%d/%Y %H.%M.%S}")
    iv.seen.add((device, section))
    other = iv.kind_of(device)
    if other is not None and other != kind:
        raise _BadLine(line_no, f"{device} is a {other} elsewhere in this interval")
    iv.kinds.setdefault(kind, set()).add(device)
    row = iv.rows.get(device)
    if row is None:
        row = {"device": device, "device_kind": kind}
        iv.rows[device] = row
    return row


def _bulk(st: _State, page: _Page, section: str, devices: np.ndarray,
          by_kind: dict[str, set[str]]) -> bool:
    """Whether a run of data lines, parsed and checked (their ``devices``, and the devices
    of each kind), can go into the page's interval at once: :func:`_row` would find
    nothing wrong with any of them -- no device twice in the section, none of another kind
    -- and it notes them as :func:`_row` does (the caller keeps their rows). Else False:
    the caller reads them one by one, so that the first of them that is wrong is refused
    with its line."""
    if page.key is None:  # pragma: no cover - _page_line reads the header first
        return False
    iv = st.intervals[page.key]
    new = set(zip(devices.tolist(), repeat(section), strict=False))
    if len(new) < devices.size or not new.isdisjoint(iv.seen):
        return False
    for kind, mine in by_kind.items():
        if any(not mine.isdisjoint(theirs) for k, theirs in (*iv.kinds.items(),
                                                             *by_kind.items()) if k != kind):
            return False
    iv.seen |= new
    for kind, mine in by_kind.items():
        iv.kinds.setdefault(kind, set()).update(mine)
    return True


# ---- DIRECT ACCESS DEVICE ACTIVITY ----------------------------------------------------------
_DASD_MAP = {
    "ACTIVITY RATE": "iops",
    "RESP TIME": "await_ms",
    "IOSQ TIME": "iosq_ms",
    "PEND TIME": "pend_ms",
    "DISC TIME": "disc_ms",
    "CONN TIME": "conn_ms",
    "DEV UTIL": "util_pct",
}


def _sg_summary(page: _Page, tokens: list[str], n: int) -> bool:
    """Whether a DASD line is the total of the storage group of the device lines above it (a
    report sorted by storage group): the group's name just before ``n`` numbers, and at most
    two fields before the name, not an ``LCU nnnn`` line (the device lines above may be on
    the page before). IBM documents no layout for that line, so its values are not read;
    the group's row is computed from its volumes' lines (:func:`_storage_groups`)."""
    sg = page.dasd_last_sg
    if (sg is None or not n + 1 <= len(tokens) <= n + 3 or tokens[-n - 1] != sg
            or tokens[0] == "LCU"):
        return False
    try:
        for value in tokens[-n:]:
            _num(value, 0, "")
    except _BadLine:
        return False
    return True


def _dasd_line(st: _State, page: _Page, line_no: int, line: str) -> None:
    stripped = line.strip()
    tokens = stripped.split()
    if not tokens or stripped.startswith(("TOTAL SAMPLES", "PAGE")):
        return
    # The three column-heading lines; values are named by pairing line 2 with line 3
    # (ACTIVITY+RATE, RESP+TIME, ..., DEV+UTIL), which holds across RMF releases that add or
    # drop delay columns (CMR/DB/INT).
    if tokens[0] == "DEVICE" or (tokens[0] == "%" and "AVG" in tokens):
        return
    if tokens[0] == "STORAGE" and "LCU" in tokens:
        page.dasd_line2 = tokens[tokens.index("LCU") + 1:]
        return
    if tokens[0] == "GROUP" and "SERIAL" in tokens:
        line3 = tokens[tokens.index("SERIAL") + 1:]
        if not line3:  # (the data lines would then have no values to take from the right)
            raise _BadLine(line_no, "DASD column headings name no value columns after "
                           "VOLUME SERIAL")
        if page.dasd_line2 is None or len(line3) != len(page.dasd_line2):
            raise _BadLine(line_no, "DASD column headings do not pair up (STORAGE ... LCU line "
                           "and GROUP ... SERIAL line differ in length)")
        page.dasd_cols = [f"{a} {b}" for a, b in zip(page.dasd_line2, line3, strict=True)]
        return
    cols = page.dasd_cols
    if cols is None:
        raise _BadLine(line_no, "DASD data line before the column headings")
    n = len(cols)
    if _sg_summary(page, tokens, n):
        st.sg_summaries += 1
        page.dasd_rows += 1  # (a line of the table, as an LCU line is)
        page.dasd_last_lcu = True
        return
    if n + 1 <= len(tokens) <= n + 2 and tokens[0] != "LCU":
        raise _BadLine(line_no, f"DASD summary line {' '.join(tokens[:-n])!r}: only 'LCU nnnn' "
                       "lines and the totals of the storage group of the lines above them "
                       "are known (storage groups are computed from their volumes' lines, "
                       "as rows SG:name); --lenient skips the line")
    if len(tokens) < n + 2:
        raise _BadLine(line_no, f"DASD line has {len(tokens)} fields, expected at least {n + 2}")
    values = tokens[-n:]
    head = tokens[:-n]
    if head[0] == "LCU":
        if len(head) != 2 or not _HEX4.fullmatch(head[1]):
            raise _BadLine(line_no, "LCU summary line: expected 'LCU nnnn', got "
                           f"{' '.join(head)!r}")
        device, kind, lcu, volser, sg = f"LCU:{head[1]}", "lcu", head[1], None, None
    else:
        # [STORAGE GROUP] DEV NUM  DEVICE TYPE  [NUMBER OF CYL]  VOLUME SERIAL  PAV  LCU
        sg = None
        if line[:1] != " ":
            sg, head = head[0], head[1:]  # the storage group (column 1): see _storage_groups
        if len(head) < 4 or not _DEVNUM.fullmatch(head[0]) or not _HEX4.fullmatch(head[-1]):
            raise _BadLine(line_no, "DASD device line: expected DEV NUM, DEVICE TYPE, VOLUME "
                           f"SERIAL, PAV and LCU before {n} values, got {' '.join(head)!r}")
        lcu = head[-1]
        mid = head[2:-1]  # [NUMBER OF CYL] VOLUME SERIAL PAV
        if len(mid) < 2 or not _PAV.fullmatch(mid[-1]):
            raise _BadLine(line_no, f"DASD device {head[0]}: expected VOLUME SERIAL and PAV "
                           f"before LCU {lcu}, got {' '.join(mid)!r}")
        volser = mid[-2]
        device, kind = volser, "volume"
    parsed = {c: _num(v, line_no, c) for c, v in zip(cols, values, strict=True)}
    row = _row(st, page, device, kind, "DASD", line_no)
    for col, name in _DASD_MAP.items():
        if col in parsed:
            row[name] = parsed[col]
    if volser is not None:
        page.dasd_last_sg = sg
        if page.key is not None:
            st.vol_lcu[(*page.key, volser)] = lcu
            if sg is not None:
                st.vol_sg[(*page.key, volser)] = sg
    page.dasd_rows += 1
    page.dasd_last_lcu = kind == "lcu"


# ---- CACHE SUBSYSTEM ACTIVITY / CACHE DEVICE ACTIVITY -----------------------------------------
def _cache_line(st: _State, page: _Page, line_no: int, s: str) -> None:
    if not s or s.startswith("PAGE"):
        return
    if len(s) >= 40 and set(s) == {"-"}:
        page.after_rule = True
        return
    after_rule, page.after_rule = page.after_rule, False
    if after_rule and not any(map(str.isdigit, s)) and "--" not in s:
        # a sub-section title, printed between two full-width rules
        _finish_requests(st, page, line_no)
        page.subsection, page.table = s, ""
        return
    if page.ssid is None:
        m = _SUBSYS_RE.match(s)
        if m:
            page.ssid = m.group(2)
            return
    m = _SERIAL_RE.match(s)
    if m:
        page.serial = _serial(m.group(1))
        return
    m = _VOLSER_RE.match(s)
    if m and page.title == _CACHE_DEV:
        page.volser = m.group(1)
        if m.group(3):
            page.vol_link = ("RRID" if m.group(3) == "RRID" else "POOL", m.group(4))
        return
    if page.ssid is None or page.serial is None:
        raise _BadLine(line_no, "cache report line before the SUBSYSTEM ... SSID and "
                       "TYPE-MODEL ... SERIAL lines")
    if page.subsection in ("CACHE SUBSYSTEM OVERVIEW", "CACHE DEVICE ACTIVITY"):
        _requests_line(st, page, line_no, s)
    elif page.subsection == "CACHE SUBSYSTEM DEVICE OVERVIEW":
        _overview_line(st, page, line_no, s)


def _requests_line(st: _State, page: _Page, line_no: int, s: str) -> None:
    m = _HR_RE.match(s)
    if m:
        page.total_hr = m.group(1)
        return
    if s.startswith("CACHE I/O") and "READ I/O REQUESTS" in s:
        page.table = "requests"
        return
    if "CACHE MISSES" in s:
        if page.req and "TOTAL" not in page.req:
            raise _BadLine(line_no, "cache READ/WRITE I/O REQUESTS table ends without its TOTAL "
                           "row")
        page.table = "other"
        return
    if page.table != "requests" or s.startswith("REQUESTS"):
        return
    if s.startswith("CACHE I/O"):
        return
    label = next((r for r in _REQ_ROWS if s.startswith(r)), None)
    if label is None:
        raise _BadLine(line_no, "cache READ/WRITE I/O REQUESTS table: expected a NORMAL, "
                       f"SEQUENTIAL, CFW DATA or TOTAL row, got {s.split(maxsplit=1)[0]!r}")
    values = s[len(label):].split()
    if len(values) != 13:
        raise _BadLine(line_no, f"cache {label} row has {len(values)} values, expected 13 "
                       "(read COUNT RATE HITS RATE H/R, write COUNT RATE FAST RATE HITS RATE "
                       "H/R, % READ)")
    for i in (1, 8):  # the read and write RATE
        _num(values[i], line_no, f"{label} RATE")
    page.req[label] = [*values, str(line_no)]
    if label == "TOTAL":
        _finish_requests(st, page, line_no)


def _finish_requests(st: _State, page: _Page, line_no: int) -> None:
    """Turn a complete READ/WRITE I/O REQUESTS table into the SSID or the volume row."""
    if not page.req or "TOTAL" not in page.req or page.key is None:
        return
    tot, seq = page.req["TOTAL"], page.req.get("SEQUENTIAL")
    row_line = int(tot[-1])
    if page.title == _CACHE_DEV:
        if page.volser is None:
            raise _BadLine(row_line, "cache device page without its VOLSER ... NUM line")
        row = _row(st, page, page.volser, "volume", "cache device activity", row_line)
        if page.vol_link is not None and page.serial is not None:
            st.vol_links[(*page.key, page.volser)] = (*page.vol_link, page.serial)
    else:
        row = _row(st, page, f"SSID:{page.ssid}", "lcu", "cache subsystem overview", row_line)
    row["r_iops"] = _num(tot[1], row_line, "TOTAL read RATE")
    row["w_iops"] = _num(tot[8], row_line, "TOTAL write RATE")
    if seq is not None:
        seq_line = int(seq[-1])
        row["seq_read_ps"] = _num(seq[1], seq_line, "SEQUENTIAL read RATE")
        row["seq_write_ps"] = _num(seq[8], seq_line, "SEQUENTIAL write RATE")
    if page.total_hr is not None:
        row["cache_hit_pct"] = _pct_of_ratio(page.total_hr, row_line, "TOTAL H/R")
    page.req = {}
    page.req_done = True
    page.total_hr = None


def _overview_line(st: _State, page: _Page, line_no: int, s: str) -> None:
    tokens = s.split()
    if tokens[0] == "VOLUME":
        return
    if tokens[0] == "SERIAL":
        page.overview_pool = len(tokens) > 2 and tokens[2] == "POOL"
        return
    if tokens[0].startswith("*"):
        return  # *ALL, *CACHE, *CACHE-OFF: the SSID totals, already read from the overview
    lead = 3 if page.overview_pool else 2
    if len(tokens) != lead + _OVERVIEW_NVALUES:
        raise _BadLine(line_no, f"cache device overview line has {len(tokens)} fields, expected "
                       f"{lead + _OVERVIEW_NVALUES} (VOLUME SERIAL, DEV NUM"
                       f"{', XTNT POOL' if page.overview_pool else ''} and 15 values)")
    volser, devnum = tokens[0], tokens[1]
    if not _DEVNUM.fullmatch(devnum):
        raise _BadLine(line_no, f"cache device overview: {devnum!r} is not a device number")
    for tok in tokens[lead:]:
        _num(tok, line_no, "cache device overview value")
    row = _row(st, page, volser, "volume", "cache device overview", line_no)
    page.overview_rows += 1
    hit = _pct_of_ratio(tokens[lead + _OVERVIEW_TOTAL_HR], line_no, "TOTAL H/R")
    row.setdefault("cache_hit_pct", hit)
    if page.overview_pool and page.key is not None and page.serial is not None:
        if not _HEX4.fullmatch(tokens[2]):
            raise _BadLine(line_no, f"cache device overview: XTNT POOL {tokens[2]!r} is not a "
                           "4-digit pool id")
        st.vol_links.setdefault((*page.key, volser), ("POOL", tokens[2], page.serial))


# ---- ESS RANK STATISTICS --------------------------------------------------------------------
def _ess_line(st: _State, page: _Page, line_no: int, s: str) -> None:
    if not s or s.startswith("PAGE"):
        return
    m = _ESS_SERIAL_RE.match(s)
    if m:
        page.ess_serial, page.ess_pool = _serial(m.group(1)), None
        return
    tokens = s.split()
    if "OPERATIONS" in s or tokens[0].startswith("--") or tokens[0] == "ID":
        return  # column headings
    if page.ess_serial is None:
        raise _BadLine(line_no, "ESS rank line before the SERIAL NUMBER line")
    serial = page.ess_serial
    if tokens[0] == "POOL":
        if page.ess_pool is None:
            raise _BadLine(line_no, "ESS POOL summary line before any rank of the pool")
        values, device, kind, parent = tokens[1:1 + _RANK_NVALUES], \
            f"POOL:{page.ess_pool}@{serial}", "other", None
    else:
        # first rank of a pool: POOL-ID TYPE [EXTENT SIZE] RRID ADAPT-ID ...; later ranks of
        # the same pool leave the pool columns blank.
        if len(tokens) > 2 and tokens[1] in ("CKD", "FB"):
            page.ess_pool = tokens[0]
            rest = tokens[3:] if re.fullmatch(r"\d+[KMG]b", tokens[2]) else tokens[2:]
        else:
            rest = tokens
        if page.ess_pool is None or len(rest) < 2 + _RANK_NVALUES:
            raise _BadLine(line_no, "ESS rank line: expected [EXTENT POOL ID TYPE] RRID ADAPT ID "
                           f"and {_RANK_NVALUES} READ/WRITE values")
        rrid, adapt = rest[0], rest[1]
        if not _HEX4.fullmatch(rrid) or not _HEX4.fullmatch(adapt):
            raise _BadLine(line_no, f"ESS rank line: RRID {rrid!r} / ADAPT ID {adapt!r} are not "
                           "4-digit hex ids")
        values = rest[2:2 + _RANK_NVALUES]
        device, kind = f"RANK:{rrid}@{serial}", "rank"
        parent = f"POOL:{page.ess_pool}@{serial}"
        st.pool_ranks.setdefault((serial, page.ess_pool), set()).add(device)
    if len(values) != _RANK_NVALUES:
        raise _BadLine(line_no, f"ESS line has {len(values)} READ/WRITE values, expected "
                       f"{_RANK_NVALUES}")
    r_ops = _num(values[0], line_no, "READ OPS/SEC")
    w_ops = _num(values[4], line_no, "WRITE OPS/SEC")
    r_rt = _num(values[3], line_no, "READ RTIME/OP")
    w_rt = _num(values[7], line_no, "WRITE RTIME/OP")
    r_bop, r_bsec = (_bytes(values[1], line_no, "READ BYTES/OP"),
                     _bytes(values[2], line_no, "READ BYTES/SEC"))
    w_bop, w_bsec = (_bytes(values[5], line_no, "WRITE BYTES/OP"),
                     _bytes(values[6], line_no, "WRITE BYTES/SEC"))
    row = _row(st, page, device, kind, "ESS rank statistics", line_no)
    row.update(r_iops=r_ops, w_iops=w_ops, r_await_ms=r_rt, w_await_ms=w_rt,
               r_areq_kB=_kb(r_bop), w_areq_kB=_kb(w_bop), r_kBps=_kb(r_bsec),
               w_kBps=_kb(w_bsec))
    if parent is not None:
        st.rank_pool[device] = parent
    page.ess_rows += 1
    page.ess_last_pool = kind == "other"
