"""RAID-0 / RAID-5 of N identical spindles behind one controller.

Layout (Linux md's default for RAID-5, *left-symmetric*): the volume is cut into stripe
units ("chunks", [Oe]: 64 KB); row ``r`` holds ``n - 1`` data chunks and one parity chunk
on disk ``p = n - 1 - (r mod n)``, data chunk ``j`` of the row on disk ``(p + 1 + j) mod n``;
a chunk's member offset is ``r * chunk``. RAID-0 has no parity and ``n`` data chunks a row.
[Oe] §3: each member thus sees the volume's access pattern "condensed into 1/(disks)
of the area".

A read is split into its chunk pieces, one member command per member (pieces contiguous on
a member are merged); it completes when the slowest member has. A RAID-5 write, per row:

* full-stripe (every data chunk entirely written): ``n`` member writes, no reads;
* otherwise the cheaper of *read-modify-write* (read the old data and old parity, then
  write new data and new parity: ``2 (k + 1)`` member I/Os for ``k`` touched chunks -- the
  classic RAID-5 small-write penalty of 4) and *reconstruct-write* (read the untouched data
  chunks, write the touched ones and parity); the writes start once every read of the row
  has returned, because the new parity depends on them.

Members are :class:`~iogauge.lab.hdd.HddModel` instances, each serving its commands in the
order the controller issues them (a member busy with an earlier command, or destaging its
write cache, delays the next one). The controller issues every member command of a host
command when it takes it, a RAID-5 write's second phase included: on its members that
phase keeps its place and waits for the reads, so a later command's read there waits too
(an in-order controller; members serving in arrival order instead make [Oe]'s array
faster than the paper's, see the ``raid5-6x400g`` profile). The controller takes up to
``queue_depth`` host commands at once (the dispatcher's ``channels``); commands on
different members proceed in parallel -- except, with ``rmw_reads = "serial"``, the reads
of a partial-stripe RAID-5 write: the old data, then the old parity (or the untouched
chunks), each issued once the one before it is back, as a controller that runs the
read-modify-write as a sequence of steps does. [Oe]'s device profile reads that way:
it is what brings the model's maximum IOPS near the paper's (file share 230 vs 239, backup
79 vs 65 on A, against 273 and 115 with the reads in parallel) and every knee of §3 into
the paper's 80-95 % band (``iogauge.lab.experiments``).

**Queued members** (member ``ncq_depth`` > 1): each member reorders the commands it holds
(:mod:`iogauge.lab.hdd`, command queueing), so a member command's completion is known only
once the member starts it, and the volume is event driven like its members (``queued``):
:meth:`RaidModel.bind` hands it the clock, :meth:`RaidModel.submit` takes a host command.
The controller's work is the same as above, in phases: a read's member commands reach
the members after the controller overhead; a write's after the overhead and the data's
transfer over the host link; a RAID-5 row's writes once every read of its first phase has
returned; the host command completes with the last of its member commands (a read plus
its return over the host link), and the clock's ``complete(token, done_s)`` is called as
soon as that time is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iogauge.lab.hdd import (
    At,
    EventFn,
    HddModel,
    HddParams,
    Known,
    unbound_at,
    unbound_known,
)
from iogauge.lab.model import Request

#: One member command of a queued volume: (member, is_write, member offset, length).
MemberCmd = tuple[int, bool, int, int]
#: How a RAID-5 write's first phase issues its reads (:attr:`RaidParams.rmw_reads`).
RMW_READS = ("parallel", "serial")


def _row_spans(pieces: list[tuple[int, int, int, int]]) -> list[tuple[int, int]]:
    """(start, end) index spans of ``pieces`` (row-ordered chunk pieces) by stripe row: a
    RAID-5 write is planned row by row."""
    spans: list[tuple[int, int]] = []
    i = 0
    n = len(pieces)
    while i < n:
        row = pieces[i][0]
        k = i + 1
        while k < n and pieces[k][0] == row:
            k += 1
        spans.append((i, k))
        i = k
    return spans

class _HostCmd:
    """A host command in flight on a volume with queued members."""

    __slots__ = ("last", "rows", "tail_s", "token")

    def __init__(self, token: Any, rows: int, tail_s: float) -> None:
        self.token = token
        self.rows = rows  # rows (independent member-command groups) not yet done
        self.last = 0.0  # latest completion among its finished rows
        self.tail_s = tail_s  # after the last member: read data crossing the host link


class _RowCmd:
    """One stripe row of a host command: its member commands in phases (a RAID-5 partial
    write: the reads, then the writes)."""

    __slots__ = ("host", "last", "pending", "phases")

    def __init__(self, host: _HostCmd, phases: list[list[MemberCmd]]) -> None:
        self.host = host
        self.phases = phases  # phases still to issue, in order (none empty)
        self.pending = 0  # member commands of the issued phase whose start is not known
        self.last = 0.0  # latest known completion of the issued phase


@dataclass(frozen=True)
class RaidParams:
    """Controller parameters (a profile's ``[raid]`` table).

    Attributes:
        level: 0 or 5.
        disks: member count (RAID-5: >= 3, RAID-0: >= 1).
        stripe_unit_KiB: chunk size per member.
        controller_overhead_ms: controller time per host command.
        host_link_MBps: host link rate (1 MB = 10**6 bytes); read data is returned over it.
        queue_depth: host commands the controller accepts at once.
        rmw_reads: how a RAID-5 write that is not a full stripe reads what the new parity
            needs (old data and old parity, or the untouched data): ``parallel``, every
            read at once; ``serial``, one after another, each once the previous is back.
    """

    level: int
    disks: int
    stripe_unit_KiB: int
    controller_overhead_ms: float
    host_link_MBps: float
    queue_depth: int
    rmw_reads: str = "parallel"

    def __post_init__(self) -> None:
        if self.level not in (0, 5):
            raise ValueError(f"RAID level {self.level} is not modelled (0 or 5)")
        if self.disks < (3 if self.level == 5 else 1):
            raise ValueError(f"RAID-{self.level} needs more than {self.disks} disks")
        if self.stripe_unit_KiB <= 0 or self.queue_depth <= 0 or self.host_link_MBps <= 0:
            raise ValueError("stripe_unit_KiB, queue_depth and host_link_MBps must be > 0")
        if self.controller_overhead_ms < 0:
            raise ValueError("controller_overhead_ms must be >= 0")
        if self.rmw_reads not in RMW_READS:
            raise ValueError(f"rmw_reads must be one of {', '.join(RMW_READS)}, "
                             f"not {self.rmw_reads!r}")

    @property
    def data_disks(self) -> int:
        return self.disks - 1 if self.level == 5 else self.disks


class RaidModel:
    """A :class:`~iogauge.lab.model.DiskModel` of a RAID-0/5 volume.

    Attributes:
        members: the member disks (state shared with the model).
        member_reads, member_writes: member commands issued so far (RAID-5 small-write
            penalty: 2 + 2 per small random write).
    """

    def __init__(self, params: RaidParams, member: HddParams, name: str = "raid") -> None:
        self.name = name
        self.params = params
        self.channels = params.queue_depth
        self._chunk = params.stripe_unit_KiB * 1024
        self._n = params.disks
        self._nd = params.data_disks
        self._raid5 = params.level == 5
        # Use whole chunks of each member only.
        member_chunks = member.capacity_bytes // self._chunk
        self.capacity_bytes = member_chunks * self._chunk * self._nd
        self.members = [HddModel(member, name=f"{name}.d{i}") for i in range(self._n)]
        self._overhead_s = params.controller_overhead_ms / 1000.0
        self._link_Bps = params.host_link_MBps * 1e6
        self.member_reads = 0
        self.member_writes = 0
        self.queued = member.ncq_depth > 1
        self._serial_reads = params.rmw_reads == "serial"
        self._at: At = unbound_at
        self._complete: Known = unbound_known
        # Bound methods made once (handed to the clock and the members per command).
        self._issue_fn: EventFn = self._issue
        self._member_known_fn: Known = self._member_known

    def reset(self) -> None:
        for m in self.members:
            m.reset()
        self.member_reads = 0
        self.member_writes = 0

    def service_time(self, req: Request, start_s: float, channel: int = 0) -> float:
        """Seconds until ``req`` completes if the controller takes it at ``start_s``."""
        return self.serve(req.op == "write", req.offset_bytes, req.size_bytes,
                          start_s) - start_s

    # ---- layout -----------------------------------------------------------------------
    def disk_of(self, row: int, j: int) -> int:
        """Member holding data chunk ``j`` of stripe row ``row``."""
        if not self._raid5:
            return j
        p = self._n - 1 - row % self._n
        return (p + 1 + j) % self._n

    def parity_disk(self, row: int) -> int:
        """Member holding the parity of ``row`` (RAID-5 left-symmetric)."""
        return self._n - 1 - row % self._n

    def _pieces(self, offset: int, size: int) -> list[tuple[int, int, int, int]]:
        """(row, j, lo, hi) chunk pieces of a logical range; lo/hi within the chunk."""
        chunk, nd = self._chunk, self._nd
        out: list[tuple[int, int, int, int]] = []
        end = offset + size
        c = offset // chunk
        while c * chunk < end:
            base = c * chunk
            lo = offset - base if offset > base else 0
            hi = end - base if end < base + chunk else chunk
            out.append((c // nd, c % nd, lo, hi))
            c += 1
        return out

    # ---- service ----------------------------------------------------------------------
    def serve(self, is_write: bool, offset: int, size: int, t: float) -> float:
        """Serve one host command taken at ``t``; return its completion time."""
        t0 = t + self._overhead_s
        chunk = self._chunk
        c = offset // chunk
        if (offset + size - 1) // chunk == c:
            # Fast path: the command lies in one chunk (most small random I/O).
            row, j = divmod(c, self._nd)
            lo = offset - c * chunk
            if not is_write:
                self.member_reads += 1
                # disk_of(row, j), inlined (hot path)
                disk = (self._n - row % self._n + j) % self._n if self._raid5 else j
                return (self.members[disk].serve(False, row * chunk + lo, size, t0)
                        + size / self._link_Bps)
            t1 = t0 + size / self._link_Bps
            if not self._raid5:
                self.member_writes += 1
                return self.members[j].serve(True, row * chunk + lo, size, t1)
            if self._nd >= 3:
                # Small write: read-modify-write (4 member I/Os, cheaper than reconstructing
                # from nd - 1 >= 2 other chunks), the writes once both reads are back.
                data = self.members[self.disk_of(row, j)]
                parity = self.members[self.parity_disk(row)]
                moff = row * chunk + lo
                r1 = data.serve(False, moff, size, t1)
                r2 = parity.serve(False, moff, size, r1 if self._serial_reads else t1)
                t2 = r1 if r1 > r2 else r2
                w1 = data.serve(True, moff, size, t2)
                w2 = parity.serve(True, moff, size, t2)
                self.member_reads += 2
                self.member_writes += 2
                return w1 if w1 > w2 else w2
            return self._raid5_row_write(row, [(row, j, lo, lo + size)], t1)
        pieces = self._pieces(offset, size)
        if not is_write:
            return self._read(pieces, t0) + size / self._link_Bps
        # Write data crosses the host link before the members can be written.
        t1 = t0 + size / self._link_Bps
        if not self._raid5:
            return self._raid0_write(pieces, t1)
        done = t1
        for i, k in _row_spans(pieces):
            d = self._raid5_row_write(pieces[i][0], pieces[i:k], t1)
            done = d if d > done else done
        return done

    def _read_runs(self, pieces: list[tuple[int, int, int, int]]) -> list[list[int]]:
        """[member, member offset, length] of a read: one member command per run of
        pieces contiguous on that member (a large read covers consecutive rows; RAID-5
        parity chunks break a member's run)."""
        chunk = self._chunk
        runs: list[list[int]] = []
        last: dict[int, list[int]] = {}
        for row, j, lo, hi in pieces:
            disk = self.disk_of(row, j)
            moff = row * chunk + lo
            run = last.get(disk)
            if run is not None and run[1] + run[2] == moff:
                run[2] += hi - lo
            else:
                run = [disk, moff, hi - lo]
                runs.append(run)
                last[disk] = run
        return runs

    def _read(self, pieces: list[tuple[int, int, int, int]], t0: float) -> float:
        out = [t0]
        for disk, moff, length in self._read_runs(pieces):
            self._member(False, disk, moff, length, t0, out)
        return out[0]

    def _member(self, is_write: bool, disk: int, moff: int, length: int, t: float,
                out: list[float]) -> None:
        d = self.members[disk].serve(is_write, moff, length, t)
        if is_write:
            self.member_writes += 1
        else:
            self.member_reads += 1
        if d > out[0]:  # noqa: PLR1730 - hot path
            out[0] = d

    def _raid0_write(self, pieces: list[tuple[int, int, int, int]], t1: float) -> float:
        out = [t1]
        for row, j, lo, hi in pieces:
            self._member(True, j, row * self._chunk + lo, hi - lo, t1, out)
        return out[0]

    def _raid5_row_write(self, row: int, pieces: list[tuple[int, int, int, int]],
                         t1: float) -> float:
        chunk, nd = self._chunk, self._nd
        base = row * chunk
        p = self.parity_disk(row)
        k = len(pieces)
        full = k == nd and all(lo == 0 and hi == chunk for _r, _j, lo, hi in pieces)
        if full:
            out = [t1]
            for _r, j, _lo, _hi in pieces:
                self._member(True, self.disk_of(row, j), base, chunk, t1, out)
            self._member(True, p, base, chunk, t1, out)
            return out[0]
        plo = min(lo for _r, _j, lo, _hi in pieces)
        phi = max(hi for _r, _j, _lo, hi in pieces)
        reads = [t1]
        # Serial reads: each is issued when the one before it is back (reads[0] holds the
        # latest completion so far).
        serial = self._serial_reads
        if 2 * (k + 1) <= (nd - k) + (k + 1):
            # Read-modify-write: old data of each touched chunk and the old parity.
            for _r, j, lo, hi in pieces:
                self._member(False, self.disk_of(row, j), base + lo, hi - lo,
                             reads[0] if serial else t1, reads)
            self._member(False, p, base + plo, phi - plo, reads[0] if serial else t1, reads)
        else:
            # Reconstruct-write: the untouched data chunks over the parity range.
            touched = {j for _r, j, _lo, _hi in pieces}
            for j in range(nd):
                if j not in touched:
                    self._member(False, self.disk_of(row, j), base + plo, phi - plo,
                                 reads[0] if serial else t1, reads)
        t2 = reads[0]
        out = [t2]
        for _r, j, lo, hi in pieces:
            self._member(True, self.disk_of(row, j), base + lo, hi - lo, t2, out)
        self._member(True, p, base + plo, phi - plo, t2, out)
        return out[0]

    # ---- queued members (event driven) ---------------------------------------------------
    def bind(self, at: At, complete: Known) -> None:
        """Hand the volume (and its queued members) the clock: ``at`` schedules events,
        ``complete(token, done_s)`` learns when each host command completes."""
        self._at = at
        self._complete = complete
        for m in self.members:
            m.bind(at, unbound_known)  # member commands come with their own callback

    def submit(self, token: Any, is_write: bool, offset: int, size: int, t: float) -> None:
        """A host command reaches the controller at ``t`` (now, on the bound clock)."""
        t0 = t + self._overhead_s
        chunk = self._chunk
        c = offset // chunk
        if (offset + size - 1) // chunk == c and (not is_write or self._nd >= 3):
            # Fast path: one chunk (most small random I/O), as in serve().
            row, j = divmod(c, self._nd)
            moff = row * chunk + offset - c * chunk
            disk = (self._n - row % self._n + j) % self._n if self._raid5 else j
            if not is_write:
                self._at(t0, self._issue_fn, _RowCmd(_HostCmd(token, 1, size / self._link_Bps),
                                                  [[(disk, False, moff, size)]]))
                return
            phases: list[list[MemberCmd]]
            if self._raid5:
                # Read-modify-write (see serve()): old data and parity, then both written.
                p = self.parity_disk(row)
                old: list[MemberCmd] = [(disk, False, moff, size), (p, False, moff, size)]
                new: list[MemberCmd] = [(disk, True, moff, size), (p, True, moff, size)]
                phases = [old[:1], old[1:], new] if self._serial_reads else [old, new]
            else:
                phases = [[(disk, True, moff, size)]]
            self._at(t0 + size / self._link_Bps, self._issue_fn,
                     _RowCmd(_HostCmd(token, 1, 0.0), phases))
            return
        pieces = self._pieces(offset, size)
        if not is_write:
            host = _HostCmd(token, 1, size / self._link_Bps)
            cmds: list[MemberCmd] = [(r[0], False, r[1], r[2])
                                     for r in self._read_runs(pieces)]
            self._at(t0, self._issue_fn, _RowCmd(host, [cmds]))
            return
        # Write data crosses the host link before the members can be written.
        t1 = t0 + size / self._link_Bps
        plans: list[list[list[MemberCmd]]] = []
        if not self._raid5:
            plans.append([[(j, True, row * self._chunk + lo, hi - lo)
                           for row, j, lo, hi in pieces]])
        else:
            for i, k in _row_spans(pieces):
                plans.append(self._row_plan(pieces[i][0], pieces[i:k]))
        host = _HostCmd(token, len(plans), 0.0)
        for phases in plans:
            self._at(t1, self._issue_fn, _RowCmd(host, phases))

    def _row_plan(self, row: int, pieces: list[tuple[int, int, int, int]]
                  ) -> list[list[MemberCmd]]:
        """A RAID-5 row write's member commands in phases: the same choices as
        :meth:`_raid5_row_write` (full stripe; else read-modify-write or
        reconstruct-write, whichever needs fewer member I/Os)."""
        chunk, nd = self._chunk, self._nd
        base = row * chunk
        p = self.parity_disk(row)
        k = len(pieces)
        if k == nd and all(lo == 0 and hi == chunk for _r, _j, lo, hi in pieces):
            full: list[MemberCmd] = [(self.disk_of(row, j), True, base, chunk)
                                     for _r, j, _lo, _hi in pieces]
            full.append((p, True, base, chunk))
            return [full]
        plo = min(lo for _r, _j, lo, _hi in pieces)
        phi = max(hi for _r, _j, _lo, hi in pieces)
        reads: list[MemberCmd]
        if 2 * (k + 1) <= (nd - k) + (k + 1):
            reads = [(self.disk_of(row, j), False, base + lo, hi - lo)
                     for _r, j, lo, hi in pieces]
            reads.append((p, False, base + plo, phi - plo))
        else:
            touched = {j for _r, j, _lo, _hi in pieces}
            reads = [(self.disk_of(row, j), False, base + plo, phi - plo)
                     for j in range(nd) if j not in touched]
        writes: list[MemberCmd] = [(self.disk_of(row, j), True, base + lo, hi - lo)
                                   for _r, j, lo, hi in pieces]
        writes.append((p, True, base + plo, phi - plo))
        if not reads:
            return [writes]
        if self._serial_reads:
            return [*([r] for r in reads), writes]
        return [reads, writes]

    def _issue(self, t: float, arg: Any) -> None:
        """Event: the next phase of a row's member commands reaches the members."""
        rc: _RowCmd = arg
        cmds = rc.phases.pop(0)
        rc.pending = len(cmds)
        rc.last = t
        for disk, is_write, moff, length in cmds:
            if is_write:
                self.member_writes += 1
            else:
                self.member_reads += 1
            self.members[disk].enqueue(is_write, moff, length, t, rc,
                                      self._member_known_fn)

    def _member_known(self, tag: Any, done_s: float) -> None:
        """A member started one of a row's commands; it completes at ``done_s``."""
        rc: _RowCmd = tag
        rc.pending -= 1
        rc.last = max(rc.last, done_s)
        if rc.pending:
            return
        if rc.phases:
            # The next phase (a RAID-5 write's writes) starts when the last read returns.
            self._at(rc.last, self._issue_fn, rc)
            return
        host = rc.host
        host.rows -= 1
        host.last = max(host.last, rc.last)
        if host.rows == 0:
            self._complete(host.token, host.last + host.tail_s)
