"""Fixtures for end-to-end tests against real programs (fio, iostat) on loop devices.

They need root and the tools; otherwise every test using them is skipped with the reason
(CI runs as root with fio and sysstat installed).

``IOGAUGE_E2E_BACKING_DIR`` chooses where loop backing files go (default ``/var/tmp``,
which is on a real disk on most systems, unlike a tmpfs ``/tmp``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:  # `pytest` run without `python -m`: make `tests` importable
    sys.path.insert(0, str(_ROOT))

from tests.helpers.system import (  # noqa: E402
    CAPACITY_READ_IOPS,
    CAPACITY_WRITE_IOPS,
    LoopDevice,
    ThrottledLoop,
    iogauge_exe,
    loop_device,
    require_loop_support,
    require_root,
    require_tools,
    throttled_loop_device,
)

#: Size of the loop device of the e2e tests: big enough that a random 256k load is not
#: served from one cache line of the host, small enough to write in ~1 s.
LOOP_SIZE = 256 << 20


@pytest.fixture(scope="session")
def iogauge_bin() -> Path:
    """The venv's ``iogauge`` entry point (next to sys.executable)."""
    return iogauge_exe()


@pytest.fixture(scope="session")
def e2e_tools() -> dict[str, str]:
    """Root, loop support, fio, iostat and losetup, or skip with the reason."""
    require_root()
    require_loop_support()
    return require_tools("fio", "iostat", "losetup")


@pytest.fixture(scope="module")
def backing_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wanted = os.environ.get("IOGAUGE_E2E_BACKING_DIR") or "/var/tmp"
    base = Path(wanted)
    if not base.is_dir():
        return tmp_path_factory.mktemp("loop-backing")
    return base


@pytest.fixture(scope="module")
def loop_dev(e2e_tools: dict[str, str], backing_dir: Path) -> Iterator[LoopDevice]:
    """A direct-I/O loop device over 256 MiB of random data on a real disk (see
    IOGAUGE_E2E_BACKING_DIR); detached and deleted after."""
    with loop_device(LOOP_SIZE, backing_dir, direct_io=True) as dev:
        yield dev


@pytest.fixture(scope="module")
def throttled_loop(e2e_tools: dict[str, str]) -> Iterator[ThrottledLoop]:
    """A loop device the kernel throttles to CAPACITY_READ_IOPS / CAPACITY_WRITE_IOPS, over
    a loop device on a 128 MiB tmpfs file; skip when no kernel I/O throttle is usable."""
    shm = Path("/dev/shm")
    with throttled_loop_device(128 << 20, read_iops=CAPACITY_READ_IOPS,
                               write_iops=CAPACITY_WRITE_IOPS,
                               backing_dir=shm if shm.is_dir() else "/var/tmp") as tl:
        yield tl
