"""The canonical data model: SampleFrame (statistics) and DeviceInfo (metadata)."""

from iogauge.model.device import DeviceInfo
from iogauge.model.sampleframe import SAMPLE_COLUMNS, SCHEMA, Column, SampleFrame

__all__ = ["SAMPLE_COLUMNS", "SCHEMA", "Column", "DeviceInfo", "SampleFrame"]
