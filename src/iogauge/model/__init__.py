"""The canonical data model: SampleFrame (statistics) and DeviceInfo (metadata)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iogauge.model.device import DeviceInfo

if TYPE_CHECKING:
    from iogauge.model.sampleframe import SAMPLE_COLUMNS, SCHEMA, Column, SampleFrame

__all__ = ["SAMPLE_COLUMNS", "SCHEMA", "Column", "DeviceInfo", "SampleFrame"]

_FROM_SAMPLEFRAME = frozenset({"SAMPLE_COLUMNS", "SCHEMA", "Column", "SampleFrame"})


def __getattr__(name: str) -> Any:
    # The SampleFrame names load on first use (PEP 562): importing the light
    # iogauge.model.device (the collector's sysfs reader, the guarantee actuators,
    # `iogauge guarantee release`) runs this package first and must not pull in polars.
    if name in _FROM_SAMPLEFRAME:
        from iogauge.model import sampleframe  # noqa: PLC0415 - lazy on purpose (above)

        return getattr(sampleframe, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
