"""``iogauge import`` into the store: every row or nothing."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from iogauge.errors import StoreError
from iogauge.fsutil import fsync_dir
from iogauge.model.sampleframe import SampleFrame
from iogauge.model.waitevents import WaitEventFrame
from iogauge.store.bulk import BulkAppend
from iogauge.store.duckdb_store import Store
from iogauge.store.schema import (
    default_db_path,
)


class StoreImport:
    """An import into the store file ``path`` that either stores every row or nothing.

    Rows arrive batch by batch (:meth:`add`) into one :class:`BulkAppend` transaction with
    ``replace``. Into an existing store that is all. A store that does not exist yet is
    built under a temporary name in the same directory and linked to ``path`` only after
    :meth:`commit`: an import that fails (a bad file, an interrupt) leaves no file at
    ``path``, as when nothing at all was written. Should another process create ``path``
    meanwhile, the committed rows are copied into that store (:meth:`Store.append_store`,
    same replace rule) instead.

    Use as a context manager: leaving it without :meth:`commit` rolls back and removes the
    temporary store.

    Attributes:
        path: the target store file (``--db``, default :func:`default_db_path`).
    """

    def __init__(self, path: str | Path | None = None, *, replace: bool = True) -> None:
        self.path = (default_db_path() if path is None else Path(path)).expanduser()
        self.replace = replace
        self._tmp: Path | None = None
        #: Directories above a new store that did not exist (created for it, removed with it).
        self._made_dirs: list[Path] = []
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
        if not self.path.exists() and not self.path.is_symlink():
            self._tmp = self.path.with_name(
                f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}.import")
            self._made_dirs = [d for d in self.path.parents if not d.exists()]
        try:
            self._store = Store.open(self._tmp or self.path)
        except StoreError as exc:
            self._discard()
            if self._tmp is None:
                raise
            # Name the file the user asked for, not the temporary one.
            raise StoreError(str(exc).replace(str(self._tmp), str(self.path))) from exc
        self._bulk = self._store.bulk_append(replace=self.replace)
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
        :meth:`Store.append_waits`), close, and put a new store in place. Returns the rows
        stored: those added less those a later file of the import replaced.
        """
        if self._bulk is None or self._store is None:
            raise StoreError(f"{self.path}: the import is not open")
        rows = self._bulk.commit() - self._bulk.replaced_earlier
        if waits is not None and len(waits):
            self._store.append_waits(waits)
        self._store.close()
        if self._tmp is not None:
            self._publish(self._tmp)
        return rows

    def _publish(self, tmp: Path) -> None:
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
        if self._tmp is None:
            return
        for p in (self._tmp, self._tmp.with_name(self._tmp.name + ".wal")):
            p.unlink(missing_ok=True)
        if not self.path.exists():
            for d in self._made_dirs:  # deepest first; stops at one that is not empty
                try:
                    d.rmdir()
                except OSError:
                    break


