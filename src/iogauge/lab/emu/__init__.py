"""The emulated disk server's parts (:mod:`iogauge.lab.emulated` is the daemon)."""
