"""An approximate-nearest-neighbour graph over a vector index's rows: the first pass
of a vector query once the rows are many.

Why: a query scored every row of a namespace (three int8 scans, 15-28 ms at 13k notes,
growing linearly with the vault). An HNSW graph (usearch) finds the same candidates in
well under a millisecond. Measured on the vectors of this module's tests: one query
over 20k rows, 2.9 ms by scan against 0.3 ms; 32 queries at once (a note's related
notes) 14 against 9 ms; below ~16k rows the scan of 32 queries wins, so it stays
(``min_rows``).

Why a snapshot and a delta: a graph held in a file and memory-mapped (``view``) sits in
the page cache, not the heap, but cannot change. So the graph is built from a snapshot
of the rows, in a thread, and the rows changed since (``Ann.dirty``: their ids'
hashes) are scanned exactly beside it. A new graph is built once the changes are a
20th of the rows and the rows have been quiet for a while (``IDLE``: a timer builds
it, so that no query has to; a cold start's writes never wait for it), or once the
changes outnumber the graph's own rows, so the scanned part stays small.

Why it may be deleted: the SQLite rows are the truth and the int8 rows their copy; the
graph is only an index over them. A graph file is used only when the rows' stamp names
its digest; else it is built again from the rows.

Keys are the xxh3 of each id: the graph answers with them, and the vector index maps
them back to its rows.
"""

from __future__ import annotations

import atexit
import os
import shutil
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import structlog
import xxhash

if TYPE_CHECKING:
    from usearch.index import Index

log = structlog.get_logger("wikid.store")

# The rows below which one exact scan of 32 queries beats 32 graph searches (measured
# above); ``WIKID_ANN_MIN_ROWS`` lowers it for a test or a benchmark.
MIN_ROWS = 16_384
# Seconds without a change to the rows before a new graph is built, once the changes
# are worth one: at least a 20th of the rows and a 16th of ``min_rows`` (1,024 rows).
# Why not for any change: the changed rows are scanned exactly beside the graph, which
# costs well under a millisecond for a thousand rows, while a new graph of a 13k
# vault's 49k chunks costs ~20 s of a core. Built after every save, that was a laptop's
# battery spent per keystroke pause, and every query meanwhile shared the cores with it
# (bench_scale at 13k: query p50 104 ms after the edits, against 71 ms on a quiet graph).
QUIET = 2.0
WORTH_PART = 20
# Seconds without a change before a timer builds the graph a query would otherwise build
# (``when_quiet``): the user has stopped. Why not ``QUIET``: a cold start writes a batch
# every few seconds, and a timer of 2 s built between the batches, taking a core from the
# embedding (bench_scale at 13k: five chunk graphs built instead of two, fully embedded
# 741 -> 867 s, the steady RSS 377 -> 432 MiB).
IDLE = 30.0
# HNSW's parameters: 16 links a node, 128 candidates while adding, 160 while searching
# (a runtime setting: a viewed file does not keep it). Measured on vaultofknowledge's
# relation vectors, the hardest namespace (many near-alike texts), asked with 300 of its
# chunks, the rescored top 10 held 0.9937 of the exact one at 64, 0.9987 at 200; the
# chunks and entities >= 0.998 either way (the caller asked 4 * k + 32 candidates).
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 160
# A question's few vectors search wider: each query asks usearch for at least ``WIDE``
# matches (its search list is as long) and keeps the best ``count``. Why: a question
# is unlike the rows, and on a generated 13k vault's store (49k chunk rows, 39k relation
# rows; 128 bench questions) the rescored top 8 chunks held 0.907 of the exact scan's
# at the default width and 0.961 at 512, the top 16 relations 0.856 -> 0.943, for
# 1.1 -> 2.5 and 0.7 -> 1.5 ms a search (bench/bench_ann_recall.py). A batch (a note's
# chunks, for related notes) keeps the default: it pays per vector, and a chunk asks
# like a row.
FEW = 4
WIDE = 512
# One graph is built at a time in a process: each holds its rows and links in the heap
# until it is saved (~0.8 KB a row), and three at once would be three such peaks.
_BUILDING = threading.Lock()
# Rows added per call, between which a build looks whether it must stop: ~0.6 s of
# work at 13k notes. Why it must stop: a thread still inside usearch's C++ when the
# interpreter exits is unwound by pthread_exit through a noexcept frame, and the
# process aborts (exit 134, measured: a stop or an exit during a build).
ADD_ROWS = 1024
_LIVE: weakref.WeakSet[Ann] = weakref.WeakSet()  # every Ann with a build running or due


def go_on(halt: threading.Event) -> Callable[[int, int], bool]:
    """usearch's progress callback for a graph's save: False, once ``halt`` is set,
    stops it. Why a callback at all: ``save`` is one C call that holds the GIL, and a
    50k vault's chunk graph (185k rows) took 130-200 ms, a stall of the event loop each
    time (run AI). Calling into Python lets the loop take the GIL between steps:
    measured on that graph, the loop's longest wait 196 -> 95 ms, for +15 ms."""

    def step(done: int, total: int) -> bool:
        return not halt.is_set()

    # usearch checks the callback's annotations against the types themselves, and this
    # module's are strings (``from __future__ import annotations``).
    step.__annotations__ = {"done": int, "total": int, "return": bool}
    return step


class _Stopped(Exception):
    """A build was told to stop (the process is closing its store or exiting)."""


@atexit.register
def _stop_all() -> None:
    """Before the interpreter tears threads down: stop and join every running build,
    and cancel every build that waits for quiet rows."""
    for ann in list(_LIVE):
        ann.stop()


def min_rows() -> int:
    try:
        return max(1, int(os.environ.get("WIKID_ANN_MIN_ROWS", MIN_ROWS)))
    except ValueError:
        return MIN_ROWS


def hashes(ids: list[bytes]) -> np.ndarray:
    """Each id's key in the graph."""
    h = xxhash.xxh3_64_intdigest
    return np.fromiter((h(k) for k in ids), np.uint64, len(ids))


def file_digest(path: Path) -> int:
    """xxh3 of a file: a stamp holds it, so a graph garbled on disk is built again."""
    h = xxhash.xxh3_64()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            h.update(block)
    return h.intdigest()


@dataclass
class Graph:
    """A built graph, memory-mapped from ``path``, and the file's digest."""

    index: Index
    path: Path
    digest: int

    @classmethod
    def view(cls, path: Path, digest: int | None = None) -> Graph | None:
        """The graph in ``path`` if it is there and (``digest`` given) still that one."""
        from usearch.index import Index  # only where a graph is: ~40 ms to import

        try:
            found = file_digest(path)
            if digest is not None and found != digest:
                return None
            index = Index.restore(str(path), view=True)
        except (OSError, ValueError, RuntimeError):
            return None
        if index is None:
            return None
        index.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # a setter at run time
        return cls(index, path, found)

    def search(self, queries: np.ndarray, count: int) -> list[np.ndarray]:
        """Each query's ``count`` nearest keys, best first (fewer if the graph holds
        fewer); found by a wider search for a few queries (``WIDE``)."""
        from usearch.index import BatchMatches

        width = max(count, WIDE) if len(queries) <= FEW else count
        found = self.index.search(queries, width, threads=min(2, len(queries)))
        if isinstance(found, BatchMatches):
            counts = np.minimum(found.counts, count)
            return [found.keys[i, : int(counts[i])] for i in range(len(queries))]
        return [found.keys[:count]]  # one query: usearch answers with its matches alone


@dataclass(eq=False)  # hashable by identity: ``_LIVE`` holds it
class Ann:
    """The graph of a vector index, if one is built, and what changed since.

    Thread-safe under the owner's lock: ``note_changed`` and ``take`` are called with it
    held; the build runs in its own thread and installs its graph through
    ``_install``, which takes the same lock."""

    path: Path  # where the graph's file lives
    lock: threading.RLock
    graph: Graph | None = None
    dirty: set[int] = field(default_factory=set)  # keys changed since the graph's snapshot
    pending: set[int] | None = None  # keys changed since a running build's snapshot
    last_change: float = 0.0
    builds: int = 0  # graphs built by this process (tests read it)
    # The owner's build-when-quiet, called once a build is installed: the changes made
    # while it ran may be worth another. Without it that graph waited for a query to
    # start it, and the queries after ran beside the build (50k: the chunks' last
    # 54k rows scanned by every query, and a benchmark that saw nothing due).
    after_build: Callable[[], None] | None = None
    _halt: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _timer: threading.Timer | None = None

    def __post_init__(self) -> None:
        # What a build killed midway left (its copy of the rows, its unfinished file),
        # named by the process that built it: only the store's writer builds, so a
        # file of another process's is a leftover; one of this process's may be an
        # older index's build still running.
        for leftover in self.path.parent.glob(self.path.name + ".*.part"):
            if not leftover.name.startswith(self._prefix(os.getpid())):
                leftover.unlink(missing_ok=True)

    def _prefix(self, pid: int) -> str:
        return f"{self.path.name}.{pid}-"

    def _part(self, what: str) -> Path:
        """A build's own file beside the graph: ``<graph>.<pid>-<id>.<what>.part``."""
        return self.path.with_name(f"{self._prefix(os.getpid())}{id(self)}.{what}.part")

    def note_changed(self, keys: np.ndarray) -> None:
        """Rows were put or dropped: their keys are no longer the graph's to answer."""
        ks = keys.tolist()
        self.dirty.update(ks)
        if self.pending is not None:
            self.pending.update(ks)
        self.last_change = time.monotonic()

    def worth(self, rows: int) -> bool:
        """A new graph would be worth building: enough rows, none running, and changes
        since the last worth one (``WORTH_PART``)."""
        if self.pending is not None or rows < min_rows() or self._halt.is_set():
            return False
        return self.graph is None or len(self.dirty) >= max(rows // WORTH_PART, min_rows() // 16, 1)

    def due(self, rows: int) -> bool:
        """A new graph is worth building (``worth``), and the rows are quiet or the
        changes as many as the graph's rows."""
        if not self.worth(rows):
            return False
        changed = rows if self.graph is None else len(self.dirty)
        quiet = time.monotonic() - self.last_change >= QUIET
        return quiet or changed >= max(rows - changed, min_rows())

    def when_quiet(self, check: Callable[[], None]) -> None:
        """Call ``check`` (the owner's build-if-due, under the lock) once the rows have
        been quiet for ``IDLE`` seconds. Why: a graph left for the next query to build
        was built while that query ran and the ones after it, which shared the cores
        with it (bench_scale at 13k: query p50 136 ms right after a cold start, against
        68-71 ms on a quiet graph). One timer at a time, re-armed while changes come."""
        if self._timer is None and not self._halt.is_set():
            self._arm(IDLE, check)

    def _arm(self, delay: float, check: Callable[[], None]) -> None:
        def fire() -> None:
            with self.lock:
                left = self.last_change + IDLE - time.monotonic()
                if left > 0 and not self._halt.is_set():  # changed since: wait again
                    self._arm(left, check)
                    return
                try:
                    if not self._halt.is_set():
                        check()
                finally:  # only now: ``wait`` sees the timer or the build, never neither
                    self._timer = None

        self._timer = threading.Timer(max(delay, 0.0) + 0.01, fire)
        self._timer.name, self._timer.daemon = "wikid-ann-quiet", True
        _LIVE.add(self)
        self._timer.start()

    @property
    def armed(self) -> bool:
        """A build waits for the rows to go quiet (``when_quiet``): for ``status``, so a
        benchmark or a user can tell a graph still to come from none at all."""
        return self._timer is not None

    def _disarm(self) -> None:
        """No build waits for quiet rows any more (cancelling the timer that is firing
        now is harmless: it is past its wait)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def start(self, snapshot: Callable[[Path], tuple[np.ndarray, int, int]]) -> None:
        """Build a new graph in a thread from ``snapshot(into)``: it copies the rows to
        ``into`` and returns (their keys, rows, dim), called now, under the lock."""
        into = self._part("rows")
        keys, n, dim = snapshot(into)
        self.pending = set()
        self._disarm()  # a build due on quiet rows: this is it
        self._thread = threading.Thread(
            target=self._build, args=(into, keys, n, dim), name="wikid-ann", daemon=True
        )
        _LIVE.add(self)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop a running build at its next ``ADD_ROWS`` and wait for it: what it had
        done is dropped, and the changes since the graph stand (the next start, or the
        next quiet moment, builds again). Builds no more after."""
        self._halt.set()
        self._disarm()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _build(self, rows_file: Path, keys: np.ndarray, n: int, dim: int) -> None:
        from usearch.index import Index

        t0 = time.monotonic()
        tmp = self._part("graph")
        try:
            with _BUILDING:
                index = Index(
                    ndim=dim,
                    metric="cos",
                    dtype="i8",
                    connectivity=CONNECTIVITY,
                    expansion_add=EXPANSION_ADD,
                    expansion_search=EXPANSION_SEARCH,
                )
                rows = np.memmap(rows_file, np.int8, "r", shape=(n, dim))
                for i in range(0, n, ADD_ROWS):
                    if self._halt.is_set():
                        raise _Stopped
                    # One thread: usearch's parallel add made a graph whose recall@10
                    # varied from run to run (0.98-1.00 on tasks-docs' 252 entities;
                    # one thread: 1.00 in every run), and the other core stays the
                    # daemon's.
                    index.add(keys[i : i + ADD_ROWS], rows[i : i + ADD_ROWS], threads=1)
                del rows
                index.save(str(tmp), progress=go_on(self._halt))
                del index
            os.replace(tmp, self.path)
            graph = Graph.view(self.path)
        except _Stopped:
            graph = None
        except (OSError, ValueError, RuntimeError) as exc:  # a full disk, a stray key
            if not self._halt.is_set():  # else ``go_on`` stopped the save: no fault
                log.warning("vector search graph not built", file=str(self.path), error=str(exc))
            graph = None
        finally:
            rows_file.unlink(missing_ok=True)
            tmp.unlink(missing_ok=True)
        self._install(graph, n, time.monotonic() - t0)

    def _install(self, graph: Graph | None, n: int, took: float) -> None:
        with self.lock:
            assert self.pending is not None
            if graph is not None:
                self.graph, self.dirty = graph, self.pending
                self.builds += 1
            else:  # nothing replaced: the old graph and all changes since still stand
                self.dirty |= self.pending
                self.last_change = time.monotonic() + 60.0  # no retry in a tight loop
            self.pending = None
            if self.after_build is not None and not self._halt.is_set():
                self.after_build()
            if self._timer is None:
                _LIVE.discard(self)
        if graph is not None:
            log.info("vector search graph built", file=str(self.path), rows=n, s=round(took, 1))

    def wait(self, timeout: float = 60.0) -> None:
        """Until no build runs nor waits for quiet rows (tests, benchmarks, and a clean
        stop's stamp)."""
        end = time.monotonic() + timeout
        while (self.pending is not None or self._timer is not None) and time.monotonic() < end:
            time.sleep(0.01)

    def forget(self) -> None:
        """The rows start over: no graph describes them."""
        self.graph = None
        self.dirty = set()
        self.path.unlink(missing_ok=True)


def copy_rows(source: Path, into: Path) -> None:
    """The rows' file as it is now, beside it (in the page cache, never the heap)."""
    shutil.copyfile(source, into)
