"""The lab simulator's parts (:mod:`iogauge.lab.simulator` is the entry point)."""
