"""Where a vector index keeps its int8 rows: in the heap, or in a file read per query.

Why a file: the rows are the biggest thing a daemon holds (at 50k notes, 549k rows of
384 bytes: ~210 MB of a ~870 MB heap), and a query reads them once, front to back. In
a file read with ``pread`` they sit in the kernel's page cache, shared and dropped
under memory pressure like SQLite's own pages, and never in the process's resident
memory: ``mmap`` would count every page a scan touched as the process's. The price is
one copy from the page cache per block scanned, into a buffer that stays in the CPU's
cache.

Why the heap too: a process that only reads the store (``lightrag-server`` beside a
running daemon) must never write the daemon's file, so it keeps its own copy.

Both hold the same rows under the same calls; ``VectorIndex`` does not know which.
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path

import numpy as np

_BUFFERS = threading.local()


class HeapRows:
    """Rows in one preallocated matrix that grows by a quarter (amortised O(1) adds)."""

    def __init__(self, dim: int, mat: np.ndarray | None = None) -> None:
        self.dim = dim
        self._mat = np.zeros((0, dim), np.int8) if mat is None else mat

    def reserve(self, n: int, used: int) -> None:
        if n > len(self._mat):
            size = max(n, len(self._mat) * 5 // 4, 1024)  # <= 25% spare
            grown = np.zeros((size, self.dim), np.int8)
            grown[:used] = self._mat[:used]
            self._mat = grown

    def write(self, at: np.ndarray, rows: np.ndarray) -> None:
        self._mat[at] = rows

    def read(self, at: np.ndarray) -> np.ndarray:
        rows: np.ndarray = self._mat[at]
        return rows

    def block(self, i: int, j: int) -> np.ndarray:
        return self._mat[i:j]

    def shrink(self, n: int) -> None:
        """Rows from ``n`` on are no longer used (the matrix keeps its capacity)."""

    def sync(self) -> None:
        """Nothing to make durable: the heap is this process's own."""


class FileRows:
    """Rows in a file, row ``r`` at byte ``r * dim``; the file is exactly as long as the
    rows in use. Only its creator's process writes it (``SQLiteVectorStorage`` in the
    process that holds the store's lock)."""

    def __init__(self, path: Path, dim: int, *, fresh: bool) -> None:
        """``fresh``: a new, empty file in place of any old one (written beside and
        renamed in, so a scan still reading the old one through its descriptor reads
        it whole); else the file as it is."""
        self.dim, self.path = dim, path
        if fresh:
            tmp = path.with_name(path.name + ".tmp")
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            os.replace(tmp, path)
        else:
            fd = os.open(path, os.O_RDWR)
        self._fd = fd
        weakref.finalize(self, os.close, fd)

    def reserve(self, n: int, used: int) -> None:
        """Nothing to reserve: a write past the end grows the file."""

    def write(self, at: np.ndarray, rows: np.ndarray) -> None:
        """Write ``rows[i]`` to row ``at[i]``: one ``pwrite`` per run of consecutive rows
        (a batch's new rows are one run)."""
        order = np.argsort(at, kind="stable")
        rows = np.ascontiguousarray(rows[order])
        for a, b, row in _runs(at[order]):
            os.pwrite(self._fd, rows[a:b].data, row * self.dim)

    def read(self, at: np.ndarray) -> np.ndarray:
        """Rows ``at``, ascending (a drop's movers): one ``pread`` per run of them."""
        out = np.empty((len(at), self.dim), np.int8)
        for a, b, row in _runs(at):
            self._pread(out[a:b], row)
        return out

    def block(self, i: int, j: int) -> np.ndarray:
        """Rows ``i:j`` in this thread's buffer (kept, so no page faults per block)."""
        buf: np.ndarray | None = getattr(_BUFFERS, "rows", None)
        if buf is None or buf.shape[1] != self.dim or len(buf) < j - i:
            buf = _BUFFERS.rows = np.empty((max(j - i, 1024), self.dim), np.int8)
        out = buf[: j - i]
        self._pread(out, i)
        return out

    def _pread(self, out: np.ndarray, row: int) -> None:
        got = os.preadv(self._fd, [out.data], row * self.dim)
        if got != out.nbytes:  # the file was cut short beneath us: never by wikid
            raise OSError(f"{self.path}: {got} of {out.nbytes} bytes at row {row}")

    def shrink(self, n: int) -> None:
        os.ftruncate(self._fd, n * self.dim)

    def sync(self) -> None:
        """Make the rows durable before a stamp says the file holds them."""
        os.fsync(self._fd)


def _runs(at: np.ndarray) -> list[tuple[int, int, int]]:
    """``(a, b, row)`` for each run ``at[a:b]`` of consecutive rows (``at`` ascending)."""
    if not len(at):
        return []
    cuts = (np.flatnonzero(np.diff(at) != 1) + 1).tolist()
    return [(a, b, int(at[a])) for a, b in zip([0, *cuts], [*cuts, len(at)], strict=True)]
