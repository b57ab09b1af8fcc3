"""IOPS guarantee: keep a protected cgroup's IOPS above a floor by throttling the others.

[Oe]'s guarantee done with the kernel's own throttles. The parts, each testable on
its own:

* :mod:`~iogauge.guarantee.policy` — pure decisions (``paper`` = [Oe] §4 exactly,
  ``adaptive`` = ours); driven identically by the live controller and the lab simulator.
* :mod:`~iogauge.guarantee.monitor` — device counters (the collector) + per-cgroup counters.
* :mod:`~iogauge.guarantee.actuators` — cgroup v2 ``io.max``, v1 ``blkio.throttle.*``, dry run.
* :mod:`~iogauge.guarantee.safety` — the state file: every limit written and the value it
  replaced, restored on SIGTERM/SIGINT, at the next start after a crash, or by ``release``.
* :mod:`~iogauge.guarantee.controller` — the loop monitor → policy → actuator, recording
  every decision as a :class:`~iogauge.model.guaranteeframe.GuaranteeFrame` row.
* :mod:`~iogauge.guarantee.config` — the TOML form of the command line.

This module only defines the error type, so submodules can import it without cycles.
"""

from __future__ import annotations

from iogauge.errors import IogaugeError


class GuaranteeError(IogaugeError):
    """The guarantee controller cannot do what was asked: not root, no io controller, an
    unknown device or cgroup, an infeasible floor (with --on-infeasible refuse), a state file
    held by another controller, or a limit the kernel refused."""


class InfeasibleFloorError(GuaranteeError):
    """The protected floors need more than the device gives (with --on-infeasible refuse)."""


class ProtectedWriteError(GuaranteeError):
    """A limit was about to be written to a protected group (or an ancestor of one): the
    controller refuses and stops, whatever the policy decided."""


__all__ = ["GuaranteeError", "InfeasibleFloorError", "ProtectedWriteError"]
