"""One SQLite connection per database file per process, with nestable transactions.

Why shared: the SQLite storages (KV, doc status, vectors, graph) and wikid's
sync ledger live in one file, and a wikid batch must commit all of them in
one transaction, so a crash leaves the store either before or after the
batch. Everything that writes to the file in this process therefore goes
through the same connection, and ``transaction()`` nests: only the
outermost one issues BEGIN/COMMIT.

Why every call takes a lock: CPython binds parameters and reads result columns
with the GIL held, and SQLite (serialized mode) makes each of those calls wait
for the connection's mutex. So a thread that runs a cached statement while
another thread's statement is still stepping (a cold-disk read can take
seconds) waits for that mutex holding the GIL, and the whole process freezes:
the event loop, ``status`` and the embedding thread. ``Connection`` makes the
second thread wait on a Python lock instead, which releases the GIL.

Why WAL: another process (``wikid export``, LightRAG's WebUI) reads a
consistent snapshot while the daemon writes, and neither blocks the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from wikid.store import lock

IN_BATCH = 400  # ids per "IN (...)" list, under SQLite's bound-variable limit
_open: dict[str, Database] = {}


def like_prefix(prefix: str) -> str:
    """A LIKE pattern (with ``ESCAPE '\\'``) for the texts that start with ``prefix``."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def in_batches(ids: list[str]) -> Iterator[list[str]]:
    """``ids`` (duplicates dropped) in slices small enough for one ``IN (...)`` list."""
    unique = list(dict.fromkeys(ids))
    for i in range(0, len(unique), IN_BATCH):
        yield unique[i : i + IN_BATCH]


_lock = threading.Lock()


def set_aside_if_damaged(path: Path) -> tuple[Path, str] | None:
    """If SQLite cannot read ``path`` as a database (its header garbled, say), move it
    and its ``-wal`` and ``-shm`` files aside to ``<name>.damaged-<UTC time>`` and
    return (where the file went, SQLite's reason); None when it reads, or is absent.
    Never deletes: the user may want it. Only damage counts: a locked or unopenable
    file (``OperationalError``) is raised as it is. Reads the schema only, so a start
    costs milliseconds, not a full integrity check."""
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(str(path), isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
        return None
    except sqlite3.OperationalError:
        raise
    except sqlite3.DatabaseError as exc:
        reason = str(exc)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    moved = path.with_name(f"{path.name}.damaged-{stamp}")
    for suffix in ("", "-wal", "-shm"):
        part = path.with_name(path.name + suffix)
        if part.exists():
            part.rename(moved.with_name(moved.name + suffix))
    return moved, reason


class Cursor:
    """A cursor whose every SQLite call (each step, each row) holds the connection's
    lock. ``rowcount`` and ``lastrowid`` are plain attributes, read without it."""

    def __init__(self, cursor: sqlite3.Cursor, lock: threading.RLock) -> None:
        self._cursor = cursor
        self._lock = lock

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    def fetchone(self) -> Any:
        with self._lock:
            return self._cursor.fetchone()

    def fetchmany(self, size: int) -> list[Any]:
        with self._lock:
            return self._cursor.fetchmany(size)

    def fetchall(self) -> list[Any]:
        with self._lock:
            return self._cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        while rows := self.fetchmany(256):  # a lock per 256 rows, not per row
            yield from rows


class Connection:
    """A ``sqlite3.Connection`` shared by threads, one SQLite call at a time (see the
    module's docstring for the freeze this prevents)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = threading.RLock()

    def execute(self, sql: str, args: Any = ()) -> Cursor:
        with self._lock:
            return Cursor(self._conn.execute(sql, args), self._lock)

    def executemany(self, sql: str, rows: Iterable[Any]) -> Cursor:
        with self._lock:
            return Cursor(self._conn.executemany(sql, rows), self._lock)

    def executescript(self, script: str) -> None:
        with self._lock:
            self._conn.executescript(script)

    def set_trace_callback(self, callback: Callable[[str], object] | None) -> None:
        """Every statement run, as SQLite expands it (tests count them)."""
        with self._lock:
            self._conn.set_trace_callback(callback)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class Database:
    """A connection in autocommit mode; ``transaction()`` groups writes."""

    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        if read_only:  # a reader beside the daemon: SQLite itself refuses every write
            uri = f"file:{quote(str(path.resolve()))}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.conn = Connection(conn)
        if not read_only:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=10000")
        self.users = 0
        self.rollbacks = 0  # in-memory caches over the file reload after one
        # The store's one writer (its lock held): no other connection commits to the
        # file, so ``epoch()`` needs no statement on the shared connection, where it
        # waited behind a query's full-text search (5 ms a vector query at 13k notes).
        self.sole_writer = not read_only and lock.held(path.parent)
        self._depth = 0  # nested write transactions (any thread's)
        self._held: dict[int, int] = {}  # thread -> its nested holds of the transaction
        self._closing = False  # its owner waits for joined threads to leave, to commit
        self._readers: list[int] = []  # threads in a snapshot's read transaction
        self._state = threading.Condition()
        self._search: Connection | None = None

    def search_connection(self) -> Connection:
        """A second, read-only connection to the file for full-text search, which sees
        what is committed. Why: a query's BM25 statement (~10 ms each at 13k notes)
        held the shared connection while the query's vector searches, run beside it,
        waited for it; on a connection of its own SQLite runs both at once (it lets
        the GIL go while a statement steps). A search served during a batch waits for
        the batch anyway, so it never needs the batch's uncommitted rows."""
        with _lock:
            if self._search is None:
                uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA busy_timeout=10000")
                self._search = Connection(conn)
            return self._search

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
                if self._search is not None:
                    self._search.close()

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    # The batch's statements come from the event loop and from worker threads, all in
    # one transaction: its depth and its BEGIN and COMMIT change under ``_state``. A
    # snapshot's read transaction is no write transaction to join: a write waits for
    # it to end (it is short), else the snapshot's COMMIT would commit half a batch.

    def _begin(self) -> bool:
        """Begin a write transaction, or join the open one; True if this began it. While
        an async transaction's owner waits to commit, a thread not already in it waits
        to begin the next one (else the owner might never see everyone leave)."""
        me = threading.get_ident()
        with self._state:
            if self._closing and not self._held.get(me):
                self._state.wait_for(lambda: not self._closing)
            if self._depth == 0:
                if me in self._readers:
                    raise RuntimeError("a write inside this thread's own snapshot")
                self._state.wait_for(lambda: not self._readers)
                self.conn.execute("BEGIN IMMEDIATE")
            self._depth += 1
            self._held[me] = self._held.get(me, 0) + 1
            return self._depth == 1

    def _leave(self, me: int) -> None:
        """One hold of ``me``'s let go (under ``_state``)."""
        self._depth -= 1
        self._held[me] -= 1
        if not self._held[me]:
            del self._held[me]

    def _end(self, commit: bool) -> None:
        """Leave the transaction; the last one out commits (``commit``) or rolls back."""
        with self._state:
            self._leave(threading.get_ident())
            if self._depth == 0:
                if commit:
                    self.conn.execute("COMMIT")
                else:
                    self._rollback()
            self._state.notify_all()  # an owner in ``_close`` waits for the others to leave

    def _close(self, owner: int, commit: bool) -> None:
        """End an async transaction, as its owner, once every thread that joined it has
        left (a writer from another task, such as the embedding cache, may outlive the
        batch's body): their statements belong to it, and it must not commit under them."""
        with self._state:
            self._closing = True
            self._state.wait_for(lambda: self._depth == 1)
        try:
            if commit:
                self.conn.execute("COMMIT")
            else:
                with self._state:
                    self._rollback()
        except BaseException:
            with self._state:
                self._rollback()
            raise
        finally:
            with self._state:
                self._leave(owner)
                self._closing = False
                self._state.notify_all()

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.execute("ROLLBACK")
        self.rollbacks += 1

    @contextmanager
    def _joined(self) -> Iterator[Connection]:
        """The body of a transaction already begun or joined (``_begin``): the last one
        out commits, or rolls back if the body raised."""
        try:
            yield self.conn
        except BaseException:
            self._end(commit=False)
            raise
        self._end(commit=True)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction; inside another one it simply joins it."""
        self._begin()
        with self._joined() as conn:
            yield conn

    @asynccontextmanager
    async def transaction_async(self) -> AsyncIterator[Connection]:
        """``transaction()`` for a batch written from the event loop: its COMMIT (the
        WAL write of everything the batch changed) runs in a worker thread. It counts
        as open until the COMMIT is done, so a write meanwhile joins it."""
        if not self._begin():
            with self._joined() as conn:
                yield conn
            return
        owner = threading.get_ident()
        try:
            yield self.conn
        except BaseException:
            self._close(owner, commit=False)  # a joined write is a statement long
            raise
        await asyncio.to_thread(self._close, owner, True)

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """Reads that all see one committed state, whatever another process writes
        (inside a write transaction: that transaction's state)."""
        me = threading.get_ident()
        with self._state:
            if self._depth:
                joined = True
            else:
                joined = False
                if not self._readers:
                    self.conn.execute("BEGIN")
                    self.conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                self._readers.append(me)
        try:
            yield self.conn
        finally:
            if not joined:
                with self._state:
                    self._readers.remove(me)
                    if not self._readers:
                        self.conn.execute("COMMIT")
                        self._state.notify_all()

    def epoch(self) -> tuple[int, int]:
        """Changes whenever another connection commits to the file, or this one rolls
        back: the moments an in-memory cache of the file may have gone stale."""
        if self.sole_writer:
            return 0, self.rollbacks
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0]), self.rollbacks
