"""The models the emulated disk serves: a profile from the catalog of lab profiles, or a
constant service time (calibration, accuracy measurements).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from iogauge.lab.model import DiskModel, Request
from iogauge.lab.profiles import build_model, load_profile


@dataclass
class ConstantModel:
    """Every request takes ``service_s`` on one of ``channels`` channels.

    Used by the calibration probe and to measure the emulator's timing accuracy (a 10 ms
    service must look like 10 ms to fio and iostat). Model spec: ``constant:10ms``,
    ``constant:500us:4`` (4 channels).
    """

    service_s: float
    capacity_bytes: int
    channels: int = 1
    name: str = "constant"

    def service_time(self, req: Request, start_s: float, channel: int = 0) -> float:
        return self.service_s

    def reset(self) -> None:
        """Stateless: nothing to reset."""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|ms|us|µs)\s*$")


def parse_duration_s(text: str) -> float:
    """``"10ms"`` -> 0.01, ``"500us"`` -> 0.0005, ``"0.2s"`` -> 0.2 (ValueError otherwise)."""
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"bad duration {text!r}: expected a number with s, ms or us "
                         "(e.g. 10ms)")
    value = float(m.group(1))
    return value * {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}[m.group(2)]


def constant_model(spec: str, capacity_bytes: int) -> ConstantModel:
    """The model of a ``constant:<duration>[:<channels>]`` spec."""
    parts = spec.split(":")
    if parts[0] != "constant" or len(parts) not in (2, 3):
        raise ValueError(f"bad constant model {spec!r}: expected constant:<duration>"
                         "[:<channels>], e.g. constant:10ms or constant:1ms:4")
    service_s = parse_duration_s(parts[1])
    channels = int(parts[2]) if len(parts) == 3 and parts[2].isdigit() else 1
    if (len(parts) == 3 and not parts[2].isdigit()) or channels < 1:
        raise ValueError(f"bad channel count in {spec!r}: expected an integer >= 1")
    return ConstantModel(service_s, capacity_bytes, channels, name=spec)


#: Short model names of the CLI (``--model hdd`` is the issue's default, "a 7,200 rpm
#: single spindle") -> bundled profiles of :mod:`iogauge.lab.profiles`.
MODEL_ALIASES = {"hdd": "hdd-7200", "ssd": "ssd-sata", "raid": "raid5-6x400g",
                 "raid5": "raid5-6x400g"}


def profile_name(spec: str) -> str:
    """The profile (bundled name or TOML path) a model spec names (aliases resolved)."""
    return MODEL_ALIASES.get(spec, spec)


def load_model(spec: str, capacity_bytes: int | None) -> DiskModel:
    """The model named by ``spec`` for a device of ``capacity_bytes`` (None: the profile's).

    ``constant:...`` is built here; anything else is a disk profile of
    :mod:`iogauge.lab.profiles` (a bundled name, an alias of :data:`MODEL_ALIASES` or a TOML
    file), rescaled to the device's capacity so the whole stroke maps onto the device.
    """
    if spec.startswith("constant:"):
        if capacity_bytes is None:
            raise ValueError(f"model {spec} has no capacity of its own: give a size")
        return constant_model(spec, capacity_bytes)
    return build_model(profile_name(spec), capacity_bytes=capacity_bytes)


def model_kind(spec: str) -> str:
    """``hdd``, ``ssd``, ``raid`` (the profile's kind) or ``constant``."""
    if spec.startswith("constant:"):
        return "constant"
    return load_profile(profile_name(spec)).kind
