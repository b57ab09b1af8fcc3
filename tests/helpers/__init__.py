"""Helpers shared by the end-to-end tests and benchmarks (real programs, loop devices)."""
