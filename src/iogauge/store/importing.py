"""``iogauge import`` into the store: every row or nothing, and never in the readers' way.

DuckDB lets one process hold a database file for writing and no other process open it
meanwhile, so an import that wrote the store in place refused every reader (``analyze``,
``report``, ``export``, ``guarantee show``) for its whole length. An import therefore works
on a side file in the store's directory -- a new store, or a copy of the existing one -- and
renames it over the store once committed. Readers open the store at any moment: before the
rename they read the store as it was, after it the store with the import (a reader that
opened the old file keeps reading it; the rename does not disturb an open file). The choice
and its cost (the copy) are measured in benchmarks/README.md (``store_import.py``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from iogauge.errors import StoreBusyError, StoreError
from iogauge.fsutil import fsync_dir
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WaitEventFrame
from iogauge.store.bulk import BulkAppend
from iogauge.store.connection import WRITE_RETRY_S
from iogauge.store.duckdb_store import Store
from iogauge.store.schema import default_db_path
from iogauge.store.segments import WriterLock, live_dir

#: The lock an import holds (in ``<db>.live/``): one import a store at a time. A live
#: writer takes it for the moment it opens the DuckDB file at start-up
#: (``live._prepare``), so that what it writes there is not lost to the swap.
IMPORT_LOCK = "import"


@dataclass(frozen=True)
class _Stamp:
    """What tells that a store file was written: its inode, size, mtime and a WAL beside it."""

    inode: int
    size: int
    mtime_ns: int
    wal: bool

    @classmethod
    def of(cls, path: Path) -> _Stamp:
        st = path.stat()
        return cls(st.st_ino, st.st_size, st.st_mtime_ns, _wal(path).exists())


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def import_lock(path: Path, *, wait_s: float = WRITE_RETRY_S) -> WriterLock:
    """The import lock of the store ``path``, waited for up to ``wait_s`` (a live writer
    holds it for about 0.1 s while it starts).

    Raises:
        StoreBusyError: another import into this store runs (its PID in the message).
    """
    d = live_dir(path)
    try:
        d.mkdir(exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{d}: cannot create the live directory: "
                         f"{exc.strerror or exc}") from exc
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return WriterLock(d, IMPORT_LOCK, path, what="an import")
        except StoreBusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


class StoreImport:
    """An import into the store file ``path`` that either stores every row or nothing.

    Rows arrive batch by batch (:meth:`add`) into one :class:`BulkAppend` transaction with
    ``replace``, in a side file (see the module docstring): a new store built under a
    temporary name, or a copy of the existing store (a WAL a killed writer left is folded
    into the store first). Only :meth:`commit` puts it in place: a new store is linked to
    ``path``, a copy renamed over it. An import that fails (a bad file, an interrupt)
    leaves ``path`` as it was. Should another process create ``path`` meanwhile, the
    committed rows are copied into that store (:meth:`Store.append_store`, same replace
    rule) instead; should another program write the existing store meanwhile (the store
    changed under the copy), nothing is stored and the commit says so.

    Into an existing store, the import holds :data:`IMPORT_LOCK` from start to end: a
    second import into it is refused with the first one's PID.

    Use as a context manager: leaving it without :meth:`commit` rolls back and removes the
    side file.

    Attributes:
        path: the target store file (``--db``, default :func:`default_db_path`).
    """

    def __init__(self, path: str | Path | None = None, *, replace: bool = True) -> None:
        self.path = (default_db_path() if path is None else Path(path)).expanduser()
        self.replace = replace
        self._tmp: Path | None = None
        #: The existing store's file and its stamp when copied (None: a new store).
        self._base: tuple[Path, _Stamp] | None = None
        #: Directories above a new store that did not exist (created for it, removed with it).
        self._made_dirs: list[Path] = []
        self._lock: WriterLock | None = None
        self._store: Store | None = None
        self._bulk: BulkAppend | None = None

    @property
    def rows(self) -> int:
        """Rows added so far."""
        return self._bulk.rows if self._bulk is not None else 0

    @property
    def replaced_earlier(self) -> int:
        """Rows of earlier files of this import that a later file's rows replaced."""
        return self._bulk.replaced_earlier if self._bulk is not None else 0

    def __enter__(self) -> StoreImport:
        try:
            if self.path.exists():
                tmp = self._copy_existing()
            else:
                self._made_dirs = [d for d in self.path.parents if not d.exists()]
                tmp = self._tmp = self._side_name(self.path)
            try:
                self._store = Store.open(tmp)
            except StoreError as exc:
                # Name the file the user asked for, not the side file.
                raise StoreError(str(exc).replace(str(tmp), str(self.path))) from exc
            self._bulk = self._store.bulk_append(replace=self.replace)
        except BaseException:
            self._discard()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._bulk is not None:
                self._bulk.rollback()
            if self._store is not None:
                self._store.close()
        finally:
            self._discard()

    def add(self, frame: SampleFrame) -> int:
        """Insert one batch (see :meth:`BulkAppend.add`)."""
        if self._bulk is None:
            raise StoreError(f"{self.path}: the import is not open")
        return self._bulk.add(frame)

    def next_source(self) -> None:
        """The next batches come from another file (see :meth:`BulkAppend.next_source`)."""
        if self._bulk is None:
            raise StoreError(f"{self.path}: the import is not open")
        self._bulk.next_source()

    def commit(self, waits: WaitEventFrame | None = None) -> int:
        """Commit the rows, store ``waits`` (replacing same-key rows, as
        :meth:`Store.append_waits`), close, and put the side file in place. Returns the rows
        stored: those added less those a later file of the import replaced.
        """
        if self._bulk is None or self._store is None or self._tmp is None:
            raise StoreError(f"{self.path}: the import is not open")
        rows = self._bulk.commit() - self._bulk.replaced_earlier
        if waits is not None and len(waits):
            self._store.append_waits(waits)
        self._store.checkpoint()
        self._store.close()
        if self._base is None:
            self._publish_new(self._tmp)
        else:
            self._publish_copy(self._tmp, *self._base)
        return rows

    # ---- the side file ----------------------------------------------------------------------
    @staticmethod
    def _side_name(target: Path) -> Path:
        return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.import")

    def _copy_existing(self) -> Path:
        """Take the import lock and copy the store (its file, a symlink followed) to a side
        file; a copy taken while another program wrote the store is taken again."""
        self._lock = import_lock(self.path)
        target = self.path.resolve()
        if _wal(target).exists():
            # Committed rows of a writer killed before its checkpoint live in the WAL: an
            # open for writing replays them into the file, which the copy then carries.
            Store.open(target).close()
        tmp = self._tmp = self._side_name(target)
        for _attempt in range(3):
            stamp = _Stamp.of(target)
            try:
                shutil.copyfile(target, tmp)
            except OSError as exc:
                raise StoreError(f"{self.path}: cannot copy the store for the import: "
                                 f"{exc.strerror or exc}") from exc
            if _Stamp.of(target) == stamp and not stamp.wal:
                break
        else:
            raise StoreError(f"{self.path}: another program keeps writing this store; "
                             "nothing was imported: run the import again when it is done")
        st = target.stat()
        shutil.copymode(target, tmp)
        with contextlib.suppress(OSError):  # keep the owner when root imports a user's store
            os.chown(tmp, st.st_uid, st.st_gid)
        self._base = (target, stamp)
        return tmp

    def _publish_copy(self, tmp: Path, target: Path, stamp: _Stamp) -> None:
        """Rename the committed copy over ``target`` unless ``target`` changed since the copy
        (then the other program's writes would be lost: nothing is stored)."""
        if _Stamp.of(target) != stamp:
            raise StoreError(f"{self.path}: another program wrote this store during the "
                             "import; nothing was imported, so that its writes are kept: run "
                             "the import again")
        try:
            _fsync(tmp)
            tmp.replace(target)
            fsync_dir(target.parent)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot put the imported store in place: "
                             f"{exc.strerror or exc}") from exc

    def _publish_new(self, tmp: Path) -> None:
        try:
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                self._merge(tmp)
            except OSError:
                # No hard links on this filesystem: rename, unless someone created it meanwhile.
                if self.path.exists():
                    self._merge(tmp)
                else:
                    tmp.replace(self.path)
            fsync_dir(self.path.parent)
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot put the new store in place: "
                             f"{exc.strerror or exc}") from exc

    def _merge(self, tmp: Path) -> None:
        with Store.open(self.path) as target:
            target.append_store(tmp, replace=self.replace)

    def _discard(self) -> None:
        lock, self._lock = self._lock, None
        try:
            if self._tmp is not None:
                for p in (self._tmp, _wal(self._tmp)):
                    p.unlink(missing_ok=True)
            if not self.path.exists():
                for d in self._made_dirs:  # deepest first; stops at one that is not empty
                    try:
                        d.rmdir()
                    except OSError:
                        break
        finally:
            if lock is not None:
                lock.release()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
