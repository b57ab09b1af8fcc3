"""Fixtures of the guarantee tests (defined in cgroup_fixtures.py, importable by name)."""

from cgroup_fixtures import kernel, mounts_file, v1_root, v2_root

__all__ = ["kernel", "mounts_file", "v1_root", "v2_root"]
