"""One SQLite connection per database file per process, with nestable transactions.

Why shared: the SQLite storages (KV, doc status, vectors, graph) and wikid's
sync ledger live in one file, and a wikid batch must commit all of them in
one transaction, so a crash leaves the store either before or after the
batch. Everything that writes to the file in this process therefore goes
through the same connection, and ``transaction()`` nests: only the
outermost one issues BEGIN/COMMIT.

Why WAL: another process (``wikid export``, LightRAG's WebUI) reads a
consistent snapshot while the daemon writes, and neither blocks the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from urllib.parse import quote

IN_BATCH = 400  # ids per "IN (...)" list, under SQLite's bound-variable limit
_open: dict[str, Database] = {}


def in_batches(ids: list[str]) -> Iterator[list[str]]:
    """``ids`` (duplicates dropped) in slices small enough for one ``IN (...)`` list."""
    unique = list(dict.fromkeys(ids))
    for i in range(0, len(unique), IN_BATCH):
        yield unique[i : i + IN_BATCH]


_lock = threading.Lock()


class Database:
    """A connection in autocommit mode; ``transaction()`` groups writes."""

    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        if read_only:  # a reader beside the daemon: SQLite itself refuses every write
            uri = f"file:{quote(str(path.resolve()))}?mode=ro"
            self.conn = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False
            )
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=10000")
        self.users = 0
        self.rollbacks = 0  # in-memory caches over the file reload after one
        self._depth = 0

    @classmethod
    def open(cls, path: Path, read_only: bool = False) -> Database:
        """The process-wide connection for ``path`` (created on first use)."""
        key = str(path.resolve())
        with _lock:
            db = _open.get(key)
            if db is None:
                db = _open[key] = cls(path, read_only)
            db.users += 1
            return db

    def release(self) -> None:
        """Close the connection when its last user lets go."""
        with _lock:
            self.users -= 1
            if self.users <= 0:
                _open.pop(str(self.path.resolve()), None)
                self.conn.close()

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    @contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        """BEGIN (unless joining one), and ROLLBACK if the body raises; no COMMIT."""
        if self._depth == 0:
            self.conn.execute("BEGIN IMMEDIATE")
        self._depth += 1
        try:
            yield self.conn
        except BaseException:
            self._depth -= 1
            if self._depth == 0:
                self.conn.execute("ROLLBACK")
                self.rollbacks += 1
            raise

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; inside another one it simply joins it."""
        with self._open() as conn:
            yield conn
        self._depth -= 1
        if self._depth == 0:
            self.conn.execute("COMMIT")

    @asynccontextmanager
    async def transaction_async(self) -> AsyncIterator[sqlite3.Connection]:
        """``transaction()`` for a batch written from the event loop: its COMMIT (the
        WAL write of everything the batch changed) runs in a worker thread. It counts
        as open until the COMMIT is done, so a write meanwhile joins it."""
        if self._depth:
            with self.transaction() as conn:
                yield conn
            return
        with self._open() as conn:
            yield conn
        try:
            await asyncio.to_thread(conn.execute, "COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            self.rollbacks += 1
            raise
        finally:
            self._depth -= 1

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """Reads that all see one committed state, whatever another process writes."""
        if self._depth:
            yield self.conn
            return
        self.conn.execute("BEGIN")
        self._depth += 1
        try:
            self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            yield self.conn
        finally:
            self._depth -= 1
            self.conn.execute("COMMIT")

    def epoch(self) -> tuple[int, int]:
        """Changes whenever another connection commits to the file, or this one rolls
        back: the moments an in-memory cache of the file may have gone stale."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0]), self.rollbacks
