"""``iogauge exporter``: iogauge's judgement of each disk as Prometheus metrics.

node_exporter publishes the counters (``node_disk_*``, [node_exporter]); what it cannot
publish is a judgement: is the disk the bottleneck, how it serves requests, how many IOPS it
has left. The exporter samples /proc/diskstats itself with the live collector, keeps a
sliding window of its own samples, runs the analysis engine over that window off the scrape
path, and serves the last judgement on ``/metrics`` (and/or writes it for node_exporter's
textfile collector). The parts:

* :mod:`~iogauge.exporter.judgement` -- an :class:`~iogauge.analysis.types.AnalysisResult`
  (and the guarantee's last decisions) to plain per-device figures in base units;
* :mod:`~iogauge.exporter.metrics` -- those figures to Prometheus metric families (the one
  table of what is published);
* :mod:`~iogauge.exporter.guarantee_figures` -- the guarantee's latest decision per device,
  read from its decision store;
* :mod:`~iogauge.exporter.service` -- the sampling loop, the HTTP server, the textfile.
"""
