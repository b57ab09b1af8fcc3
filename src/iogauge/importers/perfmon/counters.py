"""The perfmon counters iogauge reads and the SampleFrame columns they become, and the
patterns of a PDH header."""

from __future__ import annotations

import re

NAME = "perfmon"
DESCRIPTION = ("Windows Performance Monitor CSV/TSV (PDH-CSV 4.0 from typeperf, relog, logman): "
               "LogicalDisk and PhysicalDisk counters")
EXPECTS = ('a first cell "(PDH-CSV 4.0) (<time zone>)(<bias>)" (or PDH-TSV 4.0) followed by '
           'counter paths "\\\\HOST\\LogicalDisk(C:)\\Avg. Disk sec/Read"')

#: The format cell: zone name (may itself contain parentheses) and bias in minutes.
_HEADER_RE = re.compile(r"^\(PDH-(?P<kind>CSV|TSV) 4\.0\)\s*"
                        r"(?:\((?P<zone>.*)\)\s*\((?P<bias>[+-]?\d+)\))?\s*$")
#: A counter path; the instance may contain backslashes (mount points) and parentheses.
_PATH_RE = re.compile(r"^(?:\\\\(?P<host>[^\\]+))?\\(?P<object>[^\\(]+)"
                      r"(?:\((?P<instance>.*)\))?\\(?P<counter>[^\\]+)$")

#: PDH timestamp layout (Platform SDK: "MM/DD/YYYY HH:MM:SS.mmm", local time).
_TS_FORMAT = "%m/%d/%Y %H:%M:%S%.f"

#: Conversions: how a counter value becomes a SampleFrame value.
_AS_IS, _MS, _KIB, _IDLE = "as-is", "s->ms", "B->kB", "idle->util"

#: Disk counter (lower case) -> (SampleFrame column, conversion).
DISK_COUNTERS: dict[str, tuple[str, str]] = {
    "avg. disk sec/read": ("r_await_ms", _MS),
    "avg. disk sec/write": ("w_await_ms", _MS),
    "avg. disk sec/transfer": ("await_ms", _MS),
    "disk reads/sec": ("r_iops", _AS_IS),
    "disk writes/sec": ("w_iops", _AS_IS),
    "disk transfers/sec": ("iops", _AS_IS),
    "disk read bytes/sec": ("r_kBps", _KIB),
    "disk write bytes/sec": ("w_kBps", _KIB),
    "disk bytes/sec": ("kBps", _KIB),
    "avg. disk bytes/read": ("r_areq_kB", _KIB),
    "avg. disk bytes/write": ("w_areq_kB", _KIB),
    "avg. disk bytes/transfer": ("areq_kB", _KIB),
    "avg. disk queue length": ("aqu_sz", _AS_IS),
    "current disk queue length": ("inflight", _AS_IS),
    "% idle time": ("util_pct", _IDLE),
    "split io/sec": ("split_iops", _AS_IS),
}
#: Processor(_Total) counter (lower case) -> host CPU column.
CPU_COUNTERS: dict[str, str] = {
    "% user time": "cpu_user_pct",
    "% privileged time": "cpu_system_pct",
    "% idle time": "cpu_idle_pct",
}
_DISK_OBJECTS = {"logicaldisk": "logical_disk", "physicaldisk": "physical_disk"}
_CPU_OBJECTS = ("processor", "processor information")  # preference order
_TOTAL = "_total"
_DRIVE_RE = re.compile(r"^[A-Za-z]:$")
