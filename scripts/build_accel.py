#!/usr/bin/env python3
"""Compile the lab's disk models with mypyc into ``iogauge_accel`` (see iogauge/lab/accel.py),
and the iostat importer's C kernels into ``iogauge_native`` (see iogauge/importers/iostat/native.py).

Run with the virtualenv's Python (``make install`` does): copies ``hdd.py``, ``raid.py`` and
``ssd.py`` into a scratch package ``iogauge_accel`` with their imports of each other
rewritten, stamps each with the SHA-256 of its source, compiles them with mypyc and installs
the extension modules into this Python's site-packages. Without a C compiler or mypy it
says so and exits 0: the pure-Python models are then used (slower, same results).

The kernels (``src/iogauge/importers/iostat/kernels.c``, plain C called through ctypes) are
compiled with the C compiler alone, stamped with the source's SHA-256 (``-DIG_SOURCE_SHA256``)
so that an edited source is never run stale; without a compiler the importer uses its numpy
routines (same results, slower).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "src" / "iogauge" / "lab"
NAMES = ("hdd", "raid", "ssd")
PKG = "iogauge_accel"


KERNELS = ROOT / "src" / "iogauge" / "importers" / "iostat" / "kernels.c"
NATIVE_DIR = "iogauge_native"
NATIVE_LIB = "libiogauge_iostat.so"


def build_kernels(cc: str) -> None:
    """Compile the iostat importer's kernels into site-packages/iogauge_native."""
    src = KERNELS.read_bytes()
    sha = hashlib.sha256(src).hexdigest()
    dest = Path(sysconfig.get_paths()["platlib"]) / NATIVE_DIR
    with tempfile.TemporaryDirectory(prefix="iogauge-native-") as tmp:
        out = Path(tmp) / NATIVE_LIB
        # -O2, no -ffast-math: the decoder's one division per value must round as strtod's
        cmd = [cc, "-O2", "-std=gnu99", "-Wall", "-Wextra", "-shared", "-fPIC",
               f'-DIG_SOURCE_SHA256="{sha}"', "-o", str(out), str(KERNELS)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n", file=sys.stderr)
            print("build_accel: the iostat kernels did not compile: the importer uses numpy",
                  file=sys.stderr)
            return
        dest.mkdir(exist_ok=True)
        shutil.copy2(out, dest / NATIVE_LIB)
    print(f"build_accel: compiled {KERNELS.name} into {dest / NATIVE_LIB}")


def main() -> int:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        print("build_accel: no C compiler: the simulator uses the pure-Python disk models "
              "and the iostat importer its numpy routines")
        return 0
    build_kernels(cc)
    try:
        import mypyc  # noqa: F401, PLC0415
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "mypy>=1.8"],
                       check=True)
    site = Path(sysconfig.get_paths()["platlib"])
    with tempfile.TemporaryDirectory(prefix="iogauge-accel-") as tmp:
        work = Path(tmp)
        pkg = work / PKG
        pkg.mkdir()
        (pkg / "__init__.py").write_text('"""mypyc-compiled copies of iogauge.lab disk models '
                                         '(see iogauge.lab.accel)."""\n')
        for name in NAMES:
            src = (LAB / f"{name}.py").read_bytes()
            text = src.decode()
            for other in NAMES:
                text = text.replace(f"from iogauge.lab.{other} import",
                                    f"from {PKG}.{other} import")
            text += f'\nSOURCE_SHA256 = "{hashlib.sha256(src).hexdigest()}"\n'
            (pkg / f"{name}.py").write_text(text)
        env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
        cmd = [sys.executable, "-m", "mypyc", *(f"{PKG}/{n}.py" for n in NAMES)]
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n", file=sys.stderr)
            print("build_accel: mypyc failed: the simulator uses the pure-Python models",
                  file=sys.stderr)
            return 0
        dest = site / PKG
        stamp = dest / "_runtime_name.txt"
        if stamp.exists():
            # The shared runtime library an earlier build installed (mypy's own compiled
            # runtimes live beside it with similar names: remove only the one we named).
            old = site / stamp.read_text().strip()
            if old.name.endswith(".so") and "__mypyc" in old.name:
                old.unlink(missing_ok=True)
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir()
        shutil.copy2(pkg / "__init__.py", dest / "__init__.py")
        for so in pkg.glob("*.so"):
            shutil.copy2(so, dest / so.name)
        for so in work.glob("*__mypyc*.so"):
            shutil.copy2(so, site / so.name)
            (dest / "_runtime_name.txt").write_text(so.name + "\n")
    print(f"build_accel: compiled {', '.join(NAMES)} into {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
