"""Command queueing (NCQ) in the HDD model: positional reordering beats arrival order on a
queue at mixed distances, aging bounds every wait, the queued RAID issues the same member
I/Os as the synchronous one, the simulator and the emulated device's dispatcher drive the
same decisions, and with NCQ off every result is exactly what it was before queueing
existed (golden numbers recorded from the model before the change)."""

from __future__ import annotations

import hashlib
import heapq
import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iogauge.lab.emulated import Dispatcher
from iogauge.lab.hdd import HddModel, HddParams
from iogauge.lab.profiles import build_model, load_profile
from iogauge.lab.raid import RaidModel, RaidParams
from iogauge.lab.simulator import simulate
from iogauge.lab.workloads import IoSize, Workload, oe_paper

KIB = 1024


def hdd_params(**changes: Any) -> HddParams:
    p = load_profile("hdd-7200").params
    assert isinstance(p, HddParams)
    return replace(p, **changes)


class Clock:
    """A minimal event loop: the clock a queued model is bound to in these tests."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, Callable[[float, Any], None], Any]] = []
        self.seq = 0
        self.now = 0.0
        self.done: dict[Any, float] = {}

    def at(self, t: float, fn: Callable[[float, Any], None], arg: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, fn, arg))

    def complete(self, token: Any, done_s: float) -> None:
        assert token not in self.done, "a request completed twice"
        assert done_s >= self.now
        self.done[token] = done_s

    def run(self) -> None:
        while self.heap:
            t, _s, fn, arg = heapq.heappop(self.heap)
            assert t >= self.now, "events out of order"
            self.now = t
            fn(t, arg)


def run_batch(m: HddModel, cmds: list[tuple[float, bool, int, int]]
              ) -> dict[int, tuple[float, float, float]]:
    """Submit (arrival, is_write, offset, size) commands at their arrival times; return
    index -> (arrival, start, done)."""
    clock = Clock()
    m.reset()
    m.bind(clock.at, clock.complete)
    starts: dict[int, float] = {}

    def known(tag: Any, done: float) -> None:
        starts[tag] = clock.now
        clock.complete(tag, done)

    def arrive(t: float, i: int) -> None:
        _a, w, off, size = cmds[i]
        m.enqueue(w, off, size, t, i, known)

    for i, cmd in enumerate(cmds):
        clock.at(cmd[0], arrive, i)
    clock.run()
    assert sorted(clock.done) == list(range(len(cmds)))
    return {i: (cmds[i][0], starts[i], clock.done[i]) for i in range(len(cmds))}


# ---- NCQ off: exactly the model as it was ---------------------------------------------

def _digest(counters: np.ndarray) -> str:
    return hashlib.sha256(counters.astype(np.int64).tobytes()).hexdigest()[:16]


def _as_recorded(name: str) -> Any:
    """Profile ``name`` with the values it had when the golden values below were recorded:
    members writing back after 70 ms idle, RAID-5 reads of a partial-stripe write in
    parallel (the profiles have since changed: 125 ms, serial)."""
    prof = load_profile(name)
    if prof.member is not None:
        assert isinstance(prof.params, RaidParams)
        return replace(prof, params=replace(prof.params, rmw_reads="parallel"),
                       member=replace(prof.member, destage_idle_ms=70.0))
    assert isinstance(prof.params, HddParams)
    return replace(prof, params=replace(prof.params, destage_idle_ms=70.0))


def test_ncq_off_gives_exactly_the_results_from_before_queueing() -> None:
    """Golden values recorded with the model before command queueing was added
    (final diskstats row and a digest of every row)."""
    assert HddParams.__dataclass_fields__["ncq_depth"].default == 1
    for name in ("hdd-7200", "hdd-7200-400g", "raid5-6x400g"):
        assert not build_model(name).queued  # type: ignore[attr-defined]
    hdd8 = simulate(build_model("hdd-7200"), Workload(
        "r", (IoSize(4096, 1.0),), 1.0, threads=8, align_bytes=4096), 60.0, seed=3)
    assert hdd8.counters[-1].tolist() == [4718, 0, 37744, 479631, 0, 0, 0, 0, 8, 60000,
                                          479631, 0, 0, 0, 0, 0, 0]
    assert _digest(hdd8.counters) == "cad51afec99e6484"
    fs = simulate(build_model(_as_recorded("raid5-6x400g")),
                  oe_paper("file-share", "A+B", rate_iops=150),
                  120.0, interval_s=20.0, seed=4)
    assert fs.counters[-1].tolist() == [14373, 0, 317730, 636470, 3627, 0, 83070, 208339, 0,
                                        88873, 844809, 0, 0, 0, 0, 0, 0]
    assert _digest(fs.counters) == "f696f18d56731648"
    bk = simulate(build_model(_as_recorded("raid5-6x400g")), oe_paper("backup", "A"), 120.0,
                  interval_s=20.0, seed=4)
    assert bk.counters[-1].tolist() == [7105, 0, 1818880, 558185, 6893, 0, 1764608, 641468,
                                        10, 120000, 1199653, 0, 0, 0, 0, 0, 0]
    wc = simulate(build_model(_as_recorded("hdd-7200-400g")), oe_paper("file-share", "A"),
                  60.0, seed=5)
    assert wc.counters[-1].tolist() == [6392, 0, 142276, 487489, 1597, 0, 34282, 112235, 10,
                                        60000, 599724, 0, 0, 0, 0, 0, 0]


def test_ncq_off_dispatcher_schedule_is_unchanged() -> None:
    """The emulated device's FIFO schedule of a random stream, as recorded before."""
    class Fake:
        t = 100.0

        def __call__(self) -> float:
            return self.t

    c = Fake()
    d = Dispatcher(build_model("hdd-7200"), clock=c)
    assert not d.queued
    rng = np.random.default_rng(7)
    out = []
    for _ in range(200):
        c.t += float(rng.exponential(0.004))
        op = "read" if rng.random() < 0.7 else "write"
        tk = d.admit(op, int(rng.integers(0, 10**12 // 4096)) * 4096, 4096)
        out.append((round(tk.start - 100, 9), round(tk.end - 100, 9)))
    assert out[-1] == (2.651184441, 2.660136204)
    assert hashlib.sha256(repr(out).encode()).hexdigest()[:16] == "cbc5061307c44124"


def test_a_queue_served_first_come_first_served_equals_no_queueing() -> None:
    """ncq_age_limit_ms = 0 makes the queue FIFO: the event-driven drive then reproduces
    the synchronous one exactly (every counter of every interval)."""
    w = Workload("r", (IoSize(4096, 0.7), IoSize(65536, 0.3)), 0.8, threads=8,
                 align_bytes=4096)
    off = simulate(HddModel(hdd_params()), w, 60.0, seed=11)
    fifo = HddModel(hdd_params(ncq_depth=32, ncq_age_limit_ms=0.0))
    queued = simulate(fifo, w, 60.0, seed=11)
    assert fifo.queued and fifo.channels == 32
    assert np.array_equal(off.counters, queued.counters)
    assert fifo.ncq_reordered == 0


# ---- reordering --------------------------------------------------------------------------

def test_ncq_serves_a_queue_at_mixed_distances_sooner_than_arrival_order() -> None:
    """16 reads queued at once, alternating between the outer and the inner tenth of the
    disk: arrival order crosses the whole stroke every time, positional order does not."""
    cap = hdd_params().capacity_bytes
    rng = np.random.default_rng(1)
    cmds = []
    for i in range(16):
        zone = 0.05 if i % 2 == 0 else 0.9
        off = int((zone + 0.05 * rng.random()) * cap) // 4096 * 4096
        cmds.append((0.0, False, off, 4096))
    no_reads = {"read_ahead_KiB": 0, "cache_segments": 0}
    fifo = run_batch(HddModel(hdd_params(ncq_depth=32, ncq_age_limit_ms=0.0, **no_reads)),
                     cmds)
    ncq_model = HddModel(hdd_params(ncq_depth=32, **no_reads))
    ncq = run_batch(ncq_model, cmds)
    fifo_end = max(d for _a, _s, d in fifo.values())
    ncq_end = max(d for _a, _s, d in ncq.values())
    # FIFO: 16 long seeks (~12-13 ms + rotation); NCQ: one crossing, short seeks otherwise.
    assert ncq_end < 0.7 * fifo_end
    assert ncq_model.ncq_reordered > 0
    # FIFO starts them in arrival order, NCQ does not.
    assert [i for i, _v in sorted(fifo.items(), key=lambda kv: kv[1][1])] == list(range(16))
    assert [i for i, _v in sorted(ncq.items(), key=lambda kv: kv[1][1])] != list(range(16))


def test_the_chosen_command_is_the_one_reached_soonest() -> None:
    m = HddModel(hdd_params(ncq_depth=32, read_ahead_KiB=0, cache_segments=0))
    clock = Clock()
    m.bind(clock.at, clock.complete)
    cap = m.capacity_bytes
    m.submit("first", False, cap // 2, 4096, 0.0)  # idle drive: starts at once
    assert "first" in clock.done
    offsets = [cap // 10, cap // 2 + 8192 * 7, cap - 10**9, cap // 3]
    for i, off in enumerate(offsets):
        m.submit(i, False, off, 4096, 0.0)
    assert m.queue_length == 4
    t_done = clock.done["first"]
    pos = [m.positioning_s(False, off, 4096, t_done + 0.0002) for off in offsets]
    clock.run()
    order = sorted(range(4), key=lambda i: clock.done[i])
    assert order[0] == int(np.argmin(pos))


def test_qd4_raises_iops_with_ncq_but_not_without() -> None:
    def iops(profile: str, threads: int) -> float:
        w = Workload("r", (IoSize(4096, 1.0),), 1.0, threads=threads, align_bytes=4096)
        return simulate(build_model(profile), w, 60.0, seed=3).steady_iops(10.0)

    assert iops("hdd-7200", 4) == pytest.approx(iops("hdd-7200", 1), rel=0.02)
    q1, q4, q32 = iops("hdd-7200-ncq", 1), iops("hdd-7200-ncq", 4), iops("hdd-7200-ncq", 32)
    assert q1 == pytest.approx(iops("hdd-7200", 1), rel=1e-9)  # nothing to reorder at QD1
    assert q4 > 1.15 * q1
    # Deep queues roughly double a SATA drive's random IOPS ("nearly 100 %", Wikipedia
    # "IOPS", for enterprise SATA drives): 78.6 -> 168 with the 500 ms age limit.
    assert 1.7 * q1 < q32 < 2.6 * q1


# ---- aging -------------------------------------------------------------------------------

def test_a_far_command_starves_without_aging_and_not_with_it() -> None:
    """One command at the inner edge while near commands keep arriving (a closed loop of
    8, for 10 s): pure positional order serves it only when the stream ends; with aging
    it starts within the age limit plus one service (the one in progress when it became
    overdue)."""
    cap = hdd_params().capacity_bytes

    def far_wait(age_ms: float) -> tuple[float, float]:
        m = HddModel(hdd_params(ncq_depth=32, ncq_age_limit_ms=age_ms, read_ahead_KiB=0,
                                cache_segments=0))
        clock = Clock()
        m.bind(clock.at, clock.complete)
        rng = np.random.default_rng(5)
        starts: dict[Any, float] = {}
        longest = [0.0]

        def known(tag: Any, done: float) -> None:
            starts[tag] = clock.now
            longest[0] = max(longest[0], done - clock.now)
            if tag != "far":
                clock.at(done, near, None)  # the near thread issues its next command

        def near(t: float, _arg: Any) -> None:
            if t <= 10.0:
                off = int(rng.random() * 0.01 * cap) // 4096 * 4096
                m.enqueue(False, off, 4096, t, len(starts), known)

        for _ in range(8):
            near(0.0, None)
        m.enqueue(False, cap - 4096 * 10, 4096, 0.0, "far", known)
        clock.run()
        return starts["far"], longest[0]

    waited, _longest = far_wait(1e9)
    assert waited > 9.0  # starved for the whole stream
    waited, longest = far_wait(200.0)
    assert 0.2 <= waited <= 0.2 + longest


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 0.3), st.floats(0.0, 1.0), st.booleans()),
                min_size=2, max_size=24),
       st.sampled_from([0.0, 20.0, 60.0, 500.0]))
def test_aging_rule_and_bound(cmds: list[tuple[float, float, bool]], age_ms: float) -> None:
    """Any arrival stream: every command runs once; whenever the oldest command waiting
    has waited the age limit, it is the one started; and no command waits longer than
    the age limit plus the services of the commands ahead of it when it became overdue
    (those older than it, and the one in progress)."""
    p = hdd_params(ncq_depth=32, ncq_age_limit_ms=age_ms)
    m = HddModel(p)
    cap = p.capacity_bytes
    batch = [(a, w, int(f * (cap - 65536)) // 4096 * 4096, 4096)
             for a, f, w in sorted(cmds)]
    res = run_batch(m, batch)
    assert len(res) == len(batch)
    age = age_ms / 1000.0
    max_service = max(d - s for _a, s, d in res.values())
    order = {i: (a, i) for i, (a, _s, _d) in res.items()}  # queue order: arrival, then index
    for i, (a, s, _d) in res.items():
        assert s >= a
        # The rule at this start: the oldest command that arrived before it and was still
        # waiting goes first once overdue.
        waiting = [j for j, (aj, sj, _dj) in res.items() if j != i and aj < s < sj]
        if waiting:
            oldest = min(waiting, key=order.__getitem__)
            if order[oldest] < order[i] and s - res[oldest][0] >= age:
                pytest.fail(f"command {i} started at {s} ahead of overdue command {oldest}")
        # The bound: once overdue, it waits for the commands older than it that were still
        # waiting then, and the one in progress.
        ahead = sum(1 for j, (_aj, sj, _dj) in res.items()
                    if order[j] < order[i] and sj >= a + age)
        assert s - a <= age + (ahead + 1) * max_service + 1e-9


# ---- RAID with queued members -----------------------------------------------------------

@pytest.mark.parametrize(("is_write", "offset_kib", "size_kib"), [
    (False, 4, 4),             # one chunk
    (False, 32, 128),          # three chunks of one row
    (False, 300, 700),         # several rows
    (True, 4, 4),              # small write: read-modify-write
    (True, 0, 5 * 64),         # a full stripe
    (True, 0, 3 * 64),         # reconstruct-write
    (True, 60, 400),           # partial rows at both ends
])
def test_queued_raid_issues_the_same_member_commands(is_write: bool, offset_kib: int,
                                                     size_kib: int) -> None:
    prof = load_profile("raid5-6x400g")
    assert isinstance(prof.params, RaidParams) and prof.member is not None
    sync = RaidModel(prof.params, prof.member)
    queued = RaidModel(prof.params, replace(prof.member, ncq_depth=32))
    assert queued.queued and not sync.queued
    done_sync = sync.serve(is_write, offset_kib * KIB, size_kib * KIB, 0.0)
    clock = Clock()
    queued.bind(clock.at, clock.complete)
    queued.submit("x", is_write, offset_kib * KIB, size_kib * KIB, 0.0)
    clock.run()
    assert (queued.member_reads, queued.member_writes) == (sync.member_reads,
                                                           sync.member_writes)
    assert [d.media_ops for d in queued.members] == [d.media_ops for d in sync.members]
    # One command on idle members: nothing to reorder, the same completion.
    assert clock.done["x"] == pytest.approx(done_sync, abs=1e-12)


def test_simulator_with_ncq_is_deterministic_for_a_seed() -> None:
    for profile, wls in (("hdd-7200-ncq", oe_paper("file-share", "A", threads=8)),
                         ("raid5-6x400g-ncq", oe_paper("file-share", "A+B", rate_iops=200))):
        a = simulate(build_model(profile), wls, 40.0, interval_s=2.0, seed=5)
        b = simulate(build_model(profile), wls, 40.0, interval_s=2.0, seed=5)
        c = simulate(build_model(profile), wls, 40.0, interval_s=2.0, seed=6)
        assert np.array_equal(a.counters, b.counters)
        assert a.frame.df.equals(b.frame.df)
        assert not np.array_equal(a.counters, c.counters)


def test_ncq_profiles_differ_from_their_bases_only_in_queueing() -> None:
    base, ncq = load_profile("hdd-7200").params, load_profile("hdd-7200-ncq").params
    assert isinstance(base, HddParams) and isinstance(ncq, HddParams)
    differ = {f.name for f in fields(HddParams) if getattr(base, f.name) != getattr(ncq, f.name)}
    assert "ncq_depth" in differ <= {"ncq_depth", "ncq_age_limit_ms"}
    assert (ncq.ncq_depth, ncq.ncq_age_limit_ms) == (32, 500.0)
    rb, rn = load_profile("raid5-6x400g"), load_profile("raid5-6x400g-ncq")
    assert rb.params == rn.params
    assert rb.member is not None and rn.member is not None
    assert replace(rn.member, ncq_depth=1, ncq_age_limit_ms=rb.member.ncq_age_limit_ms) \
        == rb.member
    assert rn.member.ncq_depth == 32


def test_bad_queue_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="ncq_depth"):
        hdd_params(ncq_depth=0)
    with pytest.raises(ValueError, match="ncq_depth"):
        hdd_params(ncq_depth=33)
    with pytest.raises(ValueError, match="ncq_age_limit_ms"):
        hdd_params(ncq_age_limit_ms=-1.0)
    m = HddModel(hdd_params(ncq_depth=4))
    with pytest.raises(RuntimeError, match="bind"):
        m.submit("x", False, 0, 4096, 0.0)


# ---- the emulated device's dispatcher -------------------------------------------------

class FakeClock:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


def test_dispatcher_lets_a_queued_model_choose_and_matches_the_model_alone() -> None:
    """Four reads arrive together at an idle NCQ drive: the first starts at once, the
    others when the drive chooses them, in the order the model alone chooses (same
    arrivals, same times)."""
    clock = FakeClock()
    model = build_model("hdd-7200-ncq")
    d = Dispatcher(model, clock=clock)
    assert d.queued
    cap = model.capacity_bytes
    offs = [cap // 2, cap // 10, cap // 2 + 10**6 * 4096, cap - 10**9, cap // 3]
    pend = [d.submit("read", o, 4096) for o in offs]
    assert pend[0].known.is_set() and not any(p.known.is_set() for p in pend[1:])
    while not all(p.known.is_set() for p in pend):
        nxt = d.next_event_at()
        assert nxt is not None
        clock.t = nxt
        d.run_due()
    starts = [d.ticket(p).start - d.t0 for p in pend]
    ends = [d.ticket(p).end - d.t0 for p in pend]
    # The same arrivals (all at the dispatcher's time 0) on the model alone.
    alone = run_batch(HddModel(hdd_params(ncq_depth=32, ncq_age_limit_ms=500.0)),
                      [(0.0, False, o, 4096) for o in offs])
    assert starts == pytest.approx([alone[i][1] for i in range(5)], abs=1e-9)
    assert ends == pytest.approx([alone[i][2] for i in range(5)], abs=1e-9)
    assert sorted(range(5), key=lambda i: starts[i]) != list(range(5))  # reordered
    for p in pend:
        tk = d.ticket(p)
        d.done(tk, tk.reply_at)
    assert d.snapshot()["queued"] is True


def test_dispatcher_serves_concurrent_requests_in_real_time() -> None:
    """Handler threads on the real clock: each gets its modelled completion, which the
    timer thread's events decide while they wait."""
    model = build_model("hdd-7200-ncq", capacity_bytes=10**10)
    d = Dispatcher(model)
    tickets: list[Any] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        rng = np.random.default_rng(k)
        for _ in range(5):
            tk = d.admit("read", int(rng.integers(0, 10**10 // 4096 - 1)) * 4096, 4096)
            with lock:
                tickets.append(tk)
            d.done(tk, tk.end)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    assert not any(th.is_alive() for th in threads)
    assert len(tickets) == 20
    for tk in tickets:
        assert tk.arrival <= tk.start < tk.end
        assert tk.service_s > 0 and math.isfinite(tk.service_s)
    # One spindle: services never overlap.
    spans = sorted((tk.start, tk.end) for tk in tickets)
    assert all(b[0] >= a[1] - 1e-9 for a, b in itertools.pairwise(spans))
    assert d.snapshot()["reads"] == 20
