"""Prometheus and VictoriaMetrics as a source: node_exporter's ``node_disk_*`` counters
read through the query API, as SampleFrames (see :mod:`.promql` for every expression)."""

from iogauge.sources.prometheus.client import PromClient, parse_headers
from iogauge.sources.prometheus.promql import parse_selector
from iogauge.sources.prometheus.reader import (
    PromRead,
    PromSelection,
    iter_batches,
    read_batch,
    read_infos,
)

__all__ = ["PromClient", "PromRead", "PromSelection", "iter_batches", "parse_headers",
           "parse_selector", "read_batch", "read_infos"]
