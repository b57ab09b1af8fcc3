"""Remote sources: statistics read from a server that already keeps them (Prometheus,
VictoriaMetrics), turned into SampleFrames like any importer's."""
