"""RAID-0 / RAID-5 of N identical spindles behind one controller.

Layout (Linux md's default for RAID-5, *left-symmetric*): the volume is cut into stripe
units ("chunks", seed 004: 64 KB); row ``r`` holds ``n - 1`` data chunks and one parity chunk
on disk ``p = n - 1 - (r mod n)``, data chunk ``j`` of the row on disk ``(p + 1 + j) mod n``;
a chunk's member offset is ``r * chunk``. RAID-0 has no parity and ``n`` data chunks a row.
Seed 004 §3: each member thus sees the volume's access pattern "condensed into 1/(disks)
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
write cache, delays the next one). The controller takes up to ``queue_depth`` host commands
at once (the dispatcher's ``channels``); commands on different members proceed in parallel.
"""

from __future__ import annotations

from dataclasses import dataclass

from iogauge.lab.hdd import HddModel, HddParams
from iogauge.lab.model import Request


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
    """

    level: int
    disks: int
    stripe_unit_KiB: int
    controller_overhead_ms: float
    host_link_MBps: float
    queue_depth: int

    def __post_init__(self) -> None:
        if self.level not in (0, 5):
            raise ValueError(f"RAID level {self.level} is not modelled (0 or 5)")
        if self.disks < (3 if self.level == 5 else 1):
            raise ValueError(f"RAID-{self.level} needs more than {self.disks} disks")
        if self.stripe_unit_KiB <= 0 or self.queue_depth <= 0 or self.host_link_MBps <= 0:
            raise ValueError("stripe_unit_KiB, queue_depth and host_link_MBps must be > 0")
        if self.controller_overhead_ms < 0:
            raise ValueError("controller_overhead_ms must be >= 0")

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
                r2 = parity.serve(False, moff, size, t1)
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
        i = 0
        while i < len(pieces):
            row = pieces[i][0]
            k = i
            while k < len(pieces) and pieces[k][0] == row:
                k += 1
            d = self._raid5_row_write(row, pieces[i:k], t1)
            done = d if d > done else done
            i = k
        return done

    def _read(self, pieces: list[tuple[int, int, int, int]], t0: float) -> float:
        chunk = self._chunk
        # One member command per run of pieces contiguous on that member (a large read
        # covers consecutive rows; RAID-5 parity chunks break a member's run).
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
        out = [t0]
        for disk, moff, length in runs:
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
        if 2 * (k + 1) <= (nd - k) + (k + 1):
            # Read-modify-write: old data of each touched chunk and the old parity.
            for _r, j, lo, hi in pieces:
                self._member(False, self.disk_of(row, j), base + lo, hi - lo, t1, reads)
            self._member(False, p, base + plo, phi - plo, t1, reads)
        else:
            # Reconstruct-write: the untouched data chunks over the parity range.
            touched = {j for _r, j, _lo, _hi in pieces}
            for j in range(nd):
                if j not in touched:
                    self._member(False, self.disk_of(row, j), base + plo, phi - plo, t1,
                                 reads)
        t2 = reads[0]
        out = [t2]
        for _r, j, lo, hi in pieces:
            self._member(True, self.disk_of(row, j), base + lo, hi - lo, t2, out)
        self._member(True, p, base + plo, phi - plo, t2, out)
        return out[0]
