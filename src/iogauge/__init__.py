"""iogauge: is the disk the bottleneck, which one, why, and how much headroom is left."""

__version__ = "0.1.0"
