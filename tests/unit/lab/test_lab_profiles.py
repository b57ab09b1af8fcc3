"""Profiles: every bundled one loads and builds; bad files are refused with the key named."""

from __future__ import annotations

from pathlib import Path

import pytest

from iogauge.errors import InputFormatError
from iogauge.lab.hdd import HddParams
from iogauge.lab.profiles import build_model, list_profiles, load_profile
from iogauge.lab.raid import RaidParams


def test_bundled_profiles() -> None:
    assert list_profiles() == ["hdd-7200", "hdd-7200-400g", "hdd-7200-ncq", "raid5-6x400g",
                               "raid5-6x400g-ncq", "ssd-sata"]
    for name in list_profiles():
        p = load_profile(name)
        assert p.name == name
        assert p.sources, f"{name} cites no source"
        m = build_model(p)
        assert m.capacity_bytes > 0 and m.channels >= 1
        m.reset()


def test_raid_member_comes_from_the_member_profile_with_overrides(tmp_path: Path) -> None:
    f = tmp_path / "r.toml"
    f.write_text('kind = "raid"\n[raid]\nlevel = 5\ndisks = 4\nstripe_unit_KiB = 128\n'
                 'controller_overhead_ms = 0\nhost_link_MBps = 400\nqueue_depth = 8\n'
                 '[member]\nprofile = "hdd-7200"\ncapacity_GB = 100\nwrite_cache_KiB = 64\n')
    m = build_model(f)
    assert type(m).__name__ == "RaidModel"  # pure or compiled (lab/accel.py)
    assert m.name == "r"
    assert m.members[0].params.write_cache_KiB == 64
    assert m.members[0].params.rpm == 7200
    assert m.capacity_bytes == 3 * (100 * 10**9 // (128 * 1024)) * 128 * 1024


def test_rescaled_model_maps_the_whole_stroke_onto_the_device() -> None:
    m = build_model("hdd-7200", capacity_bytes=2**30)
    assert type(m).__name__ == "HddModel"  # pure or compiled (lab/accel.py)
    assert m.capacity_bytes == 2**30
    assert m.cylinder(2**30) == pytest.approx(1.0)
    r = build_model("raid5-6x400g", capacity_bytes=10 * 2**30)
    assert r.capacity_bytes >= 10 * 2**30


_RAID = ('kind = "raid"\n[raid]\nlevel = 5\ndisks = 4\nstripe_unit_KiB = 64\n'
         'controller_overhead_ms = 0\nhost_link_MBps = 400\nqueue_depth = 8\n')


def test_raid_rmw_reads_comes_from_the_profile(tmp_path: Path) -> None:
    f = tmp_path / "r.toml"
    f.write_text(_RAID + 'rmw_reads = "serial"\n[member]\nprofile = "hdd-7200"\n')
    prof = load_profile(f)
    assert isinstance(prof.params, RaidParams) and prof.params.rmw_reads == "serial"
    f.write_text(_RAID + '[member]\nprofile = "hdd-7200"\n')
    prof = load_profile(f)
    assert isinstance(prof.params, RaidParams) and prof.params.rmw_reads == "parallel"
    assert load_profile("raid5-6x400g").params.rmw_reads == "serial"  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "match"), [
    ('kind = "hdd"\n[hdd]\ncapacity_GB = 1\nrpm = 7200\n', "missing key"),
    ('kind = "tape"\n', "kind 'tape'"),
    ('kind = "hdd"\nextra = 1\n', "unknown key"),
    (('kind = "ssd"\n[ssd]\ncapacity_GB = 1\nchannels = 2\nread_us = 1\nwrite_us = 1\n'
     'controller_us = 1\nlink_MBps = 1\nspeed = 3\n'), r"unknown key\(s\) \[ssd\]\.speed"),
    (('kind = "ssd"\n[ssd]\ncapacity_GB = 1\nchannels = 2.5\nread_us = 1\nwrite_us = 1\n'
     'controller_us = 1\nlink_MBps = 1\n'), "whole number"),
    ('kind = "ssd"\n[ssd]\ncapacity_GB = 1\nchannels = "x"\n', "must be a number"),
    ('kind = "raid"\n[raid]\nlevel = 5\n', "needs a \\[member\\]|missing key"),
    ('kind = = "hdd"\n', "not valid TOML"),
    (_RAID + 'rmw_reads = 1\n[member]\nprofile = "hdd-7200"\n',
     r"\[raid\]\.rmw_reads must be a string"),
    (_RAID + 'rmw_reads = "sorted"\n[member]\nprofile = "hdd-7200"\n',
     "rmw_reads must be one of parallel, serial, not 'sorted'"),
])
def test_bad_profiles_name_the_problem(tmp_path: Path, text: str, match: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(InputFormatError, match=match) as ei:
        load_profile(f)
    assert str(f) in str(ei.value)


def test_unknown_profile_name_lists_the_bundled_ones() -> None:
    with pytest.raises(InputFormatError, match="hdd-7200"):
        load_profile("no-such-disk")


def test_hdd_profile_keys_are_exactly_the_parameters() -> None:
    p = load_profile("hdd-7200").params
    assert isinstance(p, HddParams)
    assert p.write_cache_KiB == 0  # the default single spindle writes through
