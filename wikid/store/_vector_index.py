"""An in-memory index of unit vectors by id: the first pass of a vector query.

Why float16 and a first pass only: a query scores every vector of a namespace,
which must stay in memory to be fast, and at 20k notes there are ~200k of them
(300 MB as float32). Held as float16 they take half that; the caller takes the
best few hundred candidates from here and rescores them exactly with the
float32 vectors it stores, so the answers are those of an exact search.

Rows live in one preallocated matrix that grows by doubling; a deleted row is
filled by the last one. So adding or removing a vector costs O(1), not a copy
of the matrix.
"""

from __future__ import annotations

import numpy as np


def normalized(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray = (m / norms).astype(np.float32)
    return out


BLOCK = 16384  # rows widened to float32 at a time while scoring


class VectorIndex:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self._mat = np.zeros((0, dim), np.float16)

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, key: object) -> bool:
        return key in self.pos

    def _reserve(self, n: int) -> None:
        if n > len(self._mat):
            grown = np.zeros((max(n, 2 * len(self._mat), 1024), self.dim), np.float16)
            grown[: len(self.ids)] = self._mat[: len(self.ids)]
            self._mat = grown

    def put(self, ids: list[str], vectors: np.ndarray) -> None:
        """Add or replace vectors (any scale: they are normalised here)."""
        unit = normalized(np.asarray(vectors, np.float32)).astype(np.float16)
        self._reserve(len(self.ids) + len(ids))
        for key, vec in zip(ids, unit, strict=True):
            i = self.pos.get(key)
            if i is None:
                i = self.pos[key] = len(self.ids)
                self.ids.append(key)
            self._mat[i] = vec

    def drop(self, ids: list[str]) -> None:
        for key in ids:
            i = self.pos.pop(key, None)
            if i is None:
                continue
            last = len(self.ids) - 1
            moved = self.ids.pop()
            if i != last:
                self.ids[i] = moved
                self.pos[moved] = i
                self._mat[i] = self._mat[last]

    def candidates(self, query: np.ndarray, k: int) -> list[str]:
        """The ``k`` ids most similar to ``query`` by the float16 scores."""
        n = len(self.ids)
        if n == 0 or k <= 0:
            return []
        q = normalized(np.asarray(query, np.float32).reshape(1, -1))[0]
        # numpy has no fast float16 product: widen one block at a time.
        scores = np.concatenate(
            [self._mat[i : min(i + BLOCK, n)].astype(np.float32) @ q for i in range(0, n, BLOCK)]
        )
        top = np.argpartition(-scores, k - 1)[:k] if n > k else np.arange(n)
        return [self.ids[i] for i in top.tolist()]
