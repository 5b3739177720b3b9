"""An in-memory index of unit vectors by id: the first pass of a vector query.

Why int8 and a first pass only: a query scores every vector of a namespace, which
must stay in memory to be fast, and at 13k notes there are ~120k of them (184 MB as
float32). Each row is held as int8 with its own scale (symmetric: the row's largest
component maps to 127), a quarter of float32's memory; the caller takes the best few
hundred candidates from here and rescores them exactly with the float32 vectors it
stores, so the answers are those of an exact search. int8 rather than float16
(half the memory again, and, measured, 3-4x faster to score: numpy widens int8 to
float32 with SIMD, float16 one value at a time; 40k x 384 scored in ~12 ms vs ~44).

The rows live in a file the index alone writes (``_int8_rows.FileRows``: read per
query, held by the kernel's page cache, not by this process), or in the heap for a
process that only reads the store. A file-backed index can be stamped (``save``, in
``_vector_stamp``'s file) and opened again (``read``) with a stamp the caller chooses:
a restart then opens the rows instead of decoding every float32 row (2-3 s at 13k
notes, far more from a cold disk).
The stamp is a cache's, never the truth: one that does not match the rows means the
file is ignored; and the stamp file is removed before the first change to the rows
after it, so a crash can never leave a stamp beside rows it does not describe.

A deleted row is filled by the last one, so adding or removing a vector costs O(1),
not a copy of the matrix.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import structlog

from wikid.store import _vector_stamp
from wikid.store._ann import Ann, Graph, copy_rows, hashes, min_rows
from wikid.store._int8_rows import FileRows, HeapRows
from wikid.store.embed import normalized

log = structlog.get_logger("wikid.store")


# Rows widened to float32 at a time while scoring: 1.5 MB, cache-sized (as fast as 4,096
# rows; 16k rows: ~40% slower).
BLOCK = 1024
_BUFFERS = threading.local()


def _block_buffer(dim: int) -> np.ndarray:
    """This thread's float32 block buffer (one per scoring thread, kept)."""
    buf: np.ndarray | None = getattr(_BUFFERS, "buf", None)
    if buf is None or buf.shape[1] != dim:
        buf = _BUFFERS.buf = np.empty((BLOCK, dim), np.float32)
    return buf


def quantized(unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 rows, float32 scale per row) with row ≈ int8 * scale."""
    peak = np.abs(unit).max(axis=1)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    rows = np.clip(np.rint(unit / scale[:, None]), -127, 127).astype(np.int8)
    return rows, scale


class VectorIndex:
    """Ids are ASCII (LightRAG's hashes): each row's id is held as bytes in one numpy
    array, found by binary search through ``_order`` (the rows sorted by id). Why not
    a list of ids and a dict of their rows: at 13k notes those were 23 MB of Python
    objects for 143k ids; these arrays are ~7 MB, and a batch's puts or drops cost one
    pass over them (~1 ms).

    ``rows``: the file to hold the rows in (made new, empty); None: the heap."""

    def __init__(self, dim: int, rows: Path | None = None) -> None:
        self.dim = dim
        self._n = 0
        self._keys = np.zeros(0, "S1")  # row -> id
        self._order = np.zeros(0, np.int32)  # the rows, sorted by id
        self._scale = np.zeros(0, np.float32)
        self._mat: HeapRows | FileRows = (
            HeapRows(dim) if rows is None else FileRows(rows, dim, fresh=True)
        )
        self._stamped: Path | None = None  # the stamp file that describes the rows
        # Each row's key in the graph (``_ann``), and the rows sorted by it (None: to sort).
        self._hash = np.zeros(0, np.uint64)
        self._hsort: np.ndarray | None = None
        self._delta: tuple[tuple[int, int], np.ndarray, np.ndarray] | None = None
        self._version = 0  # bumped by every change to the rows
        self._lock = threading.RLock()
        # A graph over the rows, for a writer's rows in a file only: it is built in a
        # thread from a copy of that file (a reader's heap rows are scanned).
        self._ann = self._graph(rows) if rows is not None else None
        if self._ann is not None:
            self._ann.forget()  # new rows: no old graph describes them

    def __len__(self) -> int:
        return self._n

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.row(key) is not None

    @property
    def ids(self) -> list[str]:
        """Every id, in row order."""
        return [k.decode() for k in self._keys[: self._n].tolist()]

    def row(self, key: str) -> int | None:
        """The row holding ``key``'s vector (None: absent)."""
        if not _storable(key):  # it cannot have been put
            return None
        r = int(self._rows(_keys([key]))[0])
        return None if r < 0 else r

    def _rows(self, keys: np.ndarray) -> np.ndarray:
        """The row of each id in ``keys`` (-1: absent)."""
        n = self._n
        if n == 0 or len(keys) == 0:
            return np.full(len(keys), -1, np.int64)
        at = np.searchsorted(self._keys[:n], keys, sorter=self._order)
        rows = self._order[np.minimum(at, n - 1)].astype(np.int64)
        return np.where((at < n) & (self._keys[rows] == keys), rows, -1)

    def _reserve(self, n: int, width: int) -> None:
        if width > self._keys.dtype.itemsize:
            self._keys = self._keys.astype(f"S{width}")
        self._mat.reserve(n, self._n)
        if n > len(self._keys):
            size = max(n, len(self._keys) * 5 // 4, 1024)  # amortised O(1), <= 25% spare
            scale = np.zeros(size, np.float32)
            scale[: self._n] = self._scale[: self._n]
            keys = np.zeros(size, self._keys.dtype)
            keys[: self._n] = self._keys[: self._n]
            hashed = np.zeros(size, np.uint64)
            hashed[: self._n] = self._hash[: self._n]
            self._scale, self._keys, self._hash = scale, keys, hashed

    def _changing(self) -> None:
        """Before the rows change: the stamp that described them goes first."""
        if self._stamped is not None:
            self._stamped.unlink(missing_ok=True)
            self._stamped = None

    def _changed(self, keys: np.ndarray) -> None:
        """After rows changed: the graph no longer answers for them, and a new one may
        be due."""
        self._version += 1
        if self._ann is not None:
            self._ann.note_changed(hashes(keys.tolist()))
            self._maybe_build()
            self._build_when_quiet()

    def _maybe_build(self) -> None:
        if self._ann is not None and isinstance(self._mat, FileRows) and self._ann.due(self._n):
            self._ann.start(self._snapshot)

    def _graph(self, rows: Path) -> Ann:
        """The graph of rows in the file ``rows``: a build that ends with changes enough
        for another is followed by one once the rows go quiet."""
        return Ann(_graph_file(rows), self._lock, after_build=self._build_when_quiet)

    def _build_when_quiet(self) -> None:
        """A graph worth building and not started: built once the rows go quiet, not by
        the next query (``Ann.when_quiet``)."""
        if self._ann is not None and isinstance(self._mat, FileRows) and self._ann.worth(self._n):
            self._ann.when_quiet(self._maybe_build)

    def _snapshot(self, into: Path) -> tuple[np.ndarray, int, int]:
        assert isinstance(self._mat, FileRows)
        copy_rows(self._mat.path, into)
        return self._hash[: self._n].copy(), self._n, self.dim

    def stop_building(self) -> None:
        """No more graphs in this process: a running build stops within ``ADD_ROWS``
        rows and is waited for (a closing store; called without the lock, which the
        build takes to finish)."""
        if self._ann is not None:
            self._ann.stop()

    def wait_for_graph(self, timeout: float = 60.0) -> None:
        """Until no graph is being built (tests and benchmarks)."""
        if self._ann is not None:
            self._ann.wait(timeout)

    @property
    def graph_builds(self) -> int:
        """Graphs this index has built (tests read it)."""
        return self._ann.builds if self._ann is not None else 0

    def state(self) -> dict[str, int | str]:
        """How a query searches these rows, for ``status``: read without the lock (a
        status never waits), so a figure may be one change old."""
        ann = self._ann
        return {
            "rows": self._n,
            "by": "graph" if self.searched_by_graph else "scan",
            "changed_since_graph": len(ann.dirty) if ann is not None and ann.graph else 0,
            "building": int(ann is not None and ann.pending is not None),
            # a graph is due once the rows have been quiet for ``IDLE`` seconds
            "due": int(ann is not None and ann.armed),
        }

    @property
    def graph_digest(self) -> int:
        """The digest of the graph's file that a stamp would name (0: no graph)."""
        graph = self._ann.graph if self._ann is not None else None
        return graph.digest if graph is not None else 0

    @property
    def searched_by_graph(self) -> bool:
        """Whether a query's first pass asks the graph (else it scans every row)."""
        return self._ann is not None and self._ann.graph is not None and self._n >= min_rows()

    def put(self, ids: list[str], vectors: np.ndarray) -> None:
        """Add or replace vectors (any scale: they are normalised here); of an id given
        twice, the last vector counts."""
        if not ids:
            return
        with self._lock:
            self._put(ids, vectors)

    def _put(self, ids: list[str], vectors: np.ndarray) -> None:
        self._changing()
        last = {k: i for i, k in enumerate(ids)}  # an id given twice: its last vector
        pick = np.fromiter(last.values(), np.int64, len(last))
        keys = _keys(list(last))
        rows, scales = quantized(normalized(np.asarray(vectors, np.float32)[pick]))
        found = self._rows(keys)
        old = found >= 0
        self._mat.write(found[old], rows[old])
        self._scale[found[old]] = scales[old]
        new = np.flatnonzero(~old)
        if not len(new):
            self._changed(keys)
            return
        new = new[np.argsort(keys[new], kind="stable")]  # in id order, to insert in order
        n, m = self._n, len(new)
        self._reserve(n + m, keys.dtype.itemsize)
        self._keys[n : n + m] = keys[new]
        self._mat.write(np.arange(n, n + m), rows[new])
        self._scale[n : n + m] = scales[new]
        self._hash[n : n + m] = hashes(keys[new].tolist())
        self._hsort = None
        at = np.searchsorted(self._keys[:n], keys[new], sorter=self._order) if n else 0
        self._order = np.insert(self._order, at, np.arange(n, n + m, dtype=np.int32))
        self._n = n + m
        self._changed(keys)

    def drop(self, ids: list[str]) -> None:
        """Remove vectors (ids never put are ignored); the last rows fill the holes, so
        the rows stay dense."""
        with self._lock:
            self._drop(ids)

    def _drop(self, ids: list[str]) -> None:
        found = self._rows(_keys([k for k in dict.fromkeys(ids) if _storable(k)]))
        found = found[found >= 0]
        if not len(found):
            return
        self._changing()
        n = self._n
        m = n - len(found)
        dropped = np.zeros(n, bool)
        dropped[found] = True
        holes = np.flatnonzero(dropped[:m])
        movers = m + np.flatnonzero(~dropped[m:])  # as many as holes
        self._mat.write(holes, self._mat.read(movers))
        self._mat.shrink(m)
        self._scale[holes] = self._scale[movers]
        gone = self._keys[found].copy()
        self._keys[holes] = self._keys[movers]
        self._keys[m:n] = b""
        self._hash[holes] = self._hash[movers]
        self._hsort = None
        remap = np.arange(n, dtype=np.int32)
        remap[movers] = holes
        self._order = remap[self._order[~dropped[self._order]]]
        self._n = m
        self._changed(gone)

    def candidates(self, queries: np.ndarray, k: int) -> list[list[str]]:
        """For each query (a row of ``queries``, or one vector), the ``k`` ids most
        similar to it by the int8 scores, or (from the graph) at least the ``k`` it
        finds: the caller rescores them exactly. Without a graph, one scan of the rows
        for all queries at once (a note's related notes ask with each of its chunks)."""
        q = normalized(np.asarray(queries, np.float32).reshape(-1, self.dim))
        with self._lock:
            if self._n == 0 or k <= 0:
                return [[] for _ in q]
            self._maybe_build()  # the rows may have gone quiet since they last changed
            if self.searched_by_graph:
                return self._by_graph(q, k)
            top = self._scan(q, k, None)
            return [[key.decode() for key in self._keys[t].tolist()] for t in top]

    def _scan(self, q: np.ndarray, k: int, rows: np.ndarray | None) -> list[np.ndarray]:
        """Each query's best ``k`` rows by int8 score, among ``rows`` (None: every row)."""
        n = self._n if rows is None else len(rows)
        if n == 0:
            return [np.zeros(0, np.int64) for _ in q]
        qt = np.ascontiguousarray(q.T)
        scores = np.empty((n, len(q)), np.float32)
        if rows is None:
            # Widen one block at a time into this thread's block buffer: the float32
            # copy of a block, never of the matrix. A new block each time (``astype``)
            # was a fresh mmap of 6 MB, so every query paid ~40k page faults: 37 of the
            # 46 ms a scan of 104k relation rows took in a VM at 13k notes, 8 ms with
            # the buffer kept.
            buf = _block_buffer(self.dim)
            for i in range(0, n, BLOCK):
                j = min(i + BLOCK, n)
                np.copyto(buf[: j - i], self._mat.block(i, j), casting="unsafe")
                np.matmul(buf[: j - i], qt, out=scores[i:j])
            scores *= self._scale[:n, None]
            at = np.arange(n)
        else:
            at = np.sort(rows)
            np.matmul(self._mat.read(at).astype(np.float32), qt, out=scores)
            scores *= self._scale[at, None]
        return [at[np.argpartition(-column, k - 1)[:k]] if n > k else at for column in scores.T]

    def _by_graph(self, q: np.ndarray, k: int) -> list[list[str]]:
        """The graph's candidates that are still its to give, and the rows changed since
        it was built, scanned exactly."""
        assert self._ann is not None and self._ann.graph is not None
        dirty, delta = self._dirty()
        found = self._ann.graph.search(q, k + min(k, len(dirty)))
        extra = self._scan(q, k, delta) if len(delta) else [None] * len(q)
        out = []
        for keys, more in zip(found, extra, strict=True):
            keys = keys[~np.isin(keys, dirty)] if len(dirty) else keys
            rows = self._rows_by_hash(keys)
            rows = rows[rows >= 0]
            if more is not None:
                rows = np.concatenate([rows, more])
            out.append([key.decode() for key in self._keys[rows].tolist()])
        return out

    def _dirty(self) -> tuple[np.ndarray, np.ndarray]:
        """(the keys changed since the graph's snapshot, the rows now holding them),
        kept until the rows next change."""
        assert self._ann is not None
        version = (self._version, self._ann.builds)  # a new graph: a new delta
        if self._delta is None or self._delta[0] != version:
            keys = np.fromiter(self._ann.dirty, np.uint64, len(self._ann.dirty))
            rows = self._rows_by_hash(keys)
            self._delta = (version, keys, rows[rows >= 0])
        return self._delta[1], self._delta[2]

    def _rows_by_hash(self, keys: np.ndarray) -> np.ndarray:
        """The row holding each key (-1: none)."""
        n = self._n
        if n == 0 or not len(keys):
            return np.full(len(keys), -1, np.int64)
        if self._hsort is None:
            self._hsort = np.argsort(self._hash[:n], kind="stable")
        at = np.searchsorted(self._hash[:n], keys, sorter=self._hsort)
        rows = self._hsort[np.minimum(at, n - 1)].astype(np.int64)
        return np.where((at < n) & (self._hash[rows] == keys), rows, -1)

    def similarity(self, query: np.ndarray, ids: list[str]) -> dict[str, float]:
        """The int8 cosine of ``query`` with each of ``ids`` held here (absent ones left
        out): the rows read by id, no scan. A ranking among known candidates (a
        question's second hop), within ~1% of the exact cosine."""
        keys = [k for k in ids if _storable(k)]
        with self._lock:
            return self._similarity(query, keys)

    def _similarity(self, query: np.ndarray, keys: list[str]) -> dict[str, float]:
        rows = self._rows(_keys(keys))
        at = np.unique(rows[rows >= 0])  # ascending: the file is read per run of rows
        if not len(at):
            return {}
        q = normalized(np.asarray(query, np.float32).reshape(1, self.dim))[0]
        scores = (self._mat.read(at).astype(np.float32) @ q) * self._scale[at]
        by_row = dict(zip(at.tolist(), scores.tolist(), strict=True))
        return {k: by_row[r] for k, r in zip(keys, rows.tolist(), strict=True) if r >= 0}

    def save(self, stamp_file: Path, stamp: tuple[int, ...]) -> None:
        """Stamp the file-backed rows: write ``stamp`` and the ids and scales beside them
        to ``stamp_file`` (atomically, once the rows are durable; ids are LightRAG's
        hashes, so one never holds the newline that separates them)."""
        if not isinstance(self._mat, FileRows):
            raise TypeError("only an index whose rows are in a file can be stamped")
        with self._lock:
            self._save(stamp_file, stamp)

    def _save(self, stamp_file: Path, stamp: tuple[int, ...]) -> None:
        assert isinstance(self._mat, FileRows)
        n = self._n
        ann = self._ann
        assert ann is not None
        graph = ann.graph
        text = b"\n".join(self._keys[:n].tolist())
        if text.count(b"\n") != max(n - 1, 0):  # an id with a newline: not one file can hold
            return
        self._mat.sync()
        dirty = sorted(ann.dirty) if graph else []
        digest = graph.digest if graph else 0
        _vector_stamp.write(stamp_file, stamp, self._mat.path, text, self._scale[:n], digest, dirty)
        self._stamped = stamp_file

    @classmethod
    def read(
        cls, stamp_file: Path, rows: Path, dim: int, stamp: tuple[int, ...], *, writer: bool
    ) -> VectorIndex | None:
        """The index stamped with ``stamp`` at ``stamp_file``, its rows in ``rows``; None
        if either is absent, unreadable, of another dimension or another stamp.
        ``writer``: the index goes on in ``rows``; else it is read into the heap, and
        only if the stamp still stands once it is read (else the writer changed the rows
        meanwhile)."""
        try:
            found = _vector_stamp.read(stamp_file, rows, dim, stamp)
            if found is None:
                return None
            n = len(found.names)
            keys = _keys([k.decode() for k in found.names])
            if writer:
                mat: HeapRows | FileRows = FileRows(rows, dim, fresh=False)
            else:
                mat = HeapRows(dim, np.fromfile(rows, np.int8, n * dim).reshape(n, dim))
                if not _vector_stamp.unchanged(stamp_file, found):
                    return None
        except _vector_stamp.ERRORS:  # a stamp file cut short or garbled is none
            return None
        index = cls(dim)
        index._n, index._keys, index._scale, index._mat = n, keys, found.scale, mat
        index._order = np.argsort(keys, kind="stable").astype(np.int32)
        index._hash = hashes(found.names)
        index._stamped = stamp_file if writer else None
        if writer:
            index._ann = index._graph(rows)
            graph = Graph.view(index._ann.path, found.graph) if found.graph else None
            if graph is not None:
                index._ann.graph, index._ann.dirty = graph, set(found.dirty)
            elif n >= min_rows():
                log.info(  # built again once the rows are quiet
                    "vector search graph to be built again from the rows: its file is "
                    "missing or did not match its stamp",
                    file=str(index._ann.path),
                )
            index._build_when_quiet()
        return index


def _graph_file(rows: Path) -> Path:
    """The graph over the rows in ``rows``: ``wikid-vectors-<ns>.hnsw``."""
    return rows.with_suffix(".hnsw")


def _storable(key: str) -> bool:
    """ASCII without NUL (numpy's bytes drop trailing NULs): LightRAG's ids always are."""
    return key.isascii() and "\x00" not in key


def _keys(ids: list[str]) -> np.ndarray:
    """Ids as a numpy bytes array. Raises ValueError for an id that is not storable."""
    for k in ids:
        if not _storable(k):
            raise ValueError(f"vector id {k!r} is not NUL-free ASCII")
    return np.array([k.encode() for k in ids], dtype=bytes) if ids else np.zeros(0, "S1")
