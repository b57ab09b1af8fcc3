"""What a policy plant observed in one second: A's floor split evenly between reads and
writes, B's reads and writes as its limits let them through, the device's await."""

from __future__ import annotations

from iogauge.guarantee.policy import GroupObservation, Observation


def observed(a_iops: float, b_r: float, b_w: float, await_ms: float) -> Observation:
    """One 1 s interval of A (``a_iops``, half reads) and B (``b_r`` + ``b_w``) with the
    device's ``await_ms``; aqu-sz by Little's law."""
    total = a_iops + b_r + b_w
    return Observation(1.0, None, a_iops / 2 + b_r, a_iops / 2 + b_w,
                       {"A": GroupObservation(a_iops / 2, a_iops / 2),
                        "B": GroupObservation(b_r, b_w)},
                       await_ms=await_ms, aqu_sz=total * await_ms / 1000)
