"""LightRAG's vector storage on SQLite: float32 blobs in rows, searched in memory.

Why in memory: a query scores every vector of a namespace, and a numpy matrix
product over ~100k x 384 floats takes milliseconds, while reading them from
SQLite each time would not. The matrix is the only thing held in memory
(metadata stays in rows and is read for the hits only), it is updated in
place by this process's writes, and it is reloaded when another process has
committed to the file or a batch rolled back (``Database.epoch``).

The SQL (and the matrix work) runs in a worker thread, so the event loop answers
while a big batch writes or a query scores; loading the matrix when the store
opens (a second at 13k notes) does too.

The int8 rows live in a file beside the store (``wikid-vectors-<ns>.i8``, read per
query: the page cache holds it, not this process's heap); a process that only reads
the store keeps its own copy in the heap. A restart opens that file again, instead of
decoding every float32 row, when ``wikid-vectors-<ns>.npz`` stamps it: written when
the storage closes, with the namespace's write generation (``lr_vector_gen``, bumped
in every write's own transaction) and row count, and removed before the rows next
change. A stamp that does not match the rows means the file is built again from the
rows. So the rows stay the truth, and both files can be deleted at any time.

Vectors are embedded on ``upsert`` (not deferred to the flush as NanoVectorDB
does), so a row is never written without its vector.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import structlog
from lightrag.base import BaseVectorStorage
from lightrag.utils import compute_mdhash_id, validate_workspace

from wikid.store._sqlite import Connection, in_batches
from wikid.store._vector_index import VectorIndex
from wikid.store.embed import normalized
from wikid.store.sqlite_backend import Connected

# Candidates beyond ``top_k`` that are rescored with their float32 rows: the int8 order
# is near enough that 8 more find the exact top k. Measured on a generated 13k store
# (64 questions and 300 chunks as queries; chunks top 8 and 24, relations and entities
# top 16): the rescored top k of k + 8 int8 candidates held 0.9999-1.0 of the float32
# top k, as 4k + 32 did; a graph's k + 8 best held what its 4k + 32 did. Each candidate
# is a row read from SQLite: a note's related notes read ~380 rows at 4k + 32.
RESCORED = 8

log = structlog.get_logger("wikid.store")


@dataclass
class SQLiteVectorStorage(Connected, BaseVectorStorage):  # type: ignore[misc]
    """Rows ``(ns, id, vec, data, created_at)`` in ``lr_vectors``; cosine similarity."""

    def __post_init__(self) -> None:
        validate_workspace(self.workspace)  # type: ignore[has-type]
        self._validate_embedding_func()
        self.workspace = self.workspace or ""  # type: ignore[has-type]
        kwargs = self.global_config.get("vector_db_storage_cls_kwargs", {})
        threshold = kwargs.get("cosine_better_than_threshold")
        if threshold is None:
            raise ValueError(
                "cosine_better_than_threshold must be set in vector_db_storage_cls_kwargs"
            )
        self.cosine_better_than_threshold = threshold
        self._batch = int(self.global_config.get("embedding_batch_num", 32))
        self._db = None
        self._epoch: tuple[int, int] | None = None
        self._index = VectorIndex(self._dim)
        # The stamp the file holds, if known, and the graph it names (its digest, 0: none).
        self._saved: tuple[tuple[int, int], int] | None = None

    @property
    def _dim(self) -> int:
        return int(self.embedding_func.embedding_dim) if self.embedding_func else 0

    # -- lifecycle --------------------------------------------------------------------

    def _opened(self) -> None:
        self._load()

    async def finalize(self) -> None:
        if self._index is not None:  # no build may outlive the store (nor the process)
            await asyncio.to_thread(self._index.stop_building)
        if self._db is not None and not self.db.read_only and not self.db.in_transaction:
            await asyncio.to_thread(self._save)
        await super().finalize()

    async def drop(self) -> dict[str, str]:
        try:
            with self.db.transaction() as conn:
                conn.execute("DELETE FROM lr_vectors WHERE ns=?", (self.namespace,))
                self._bump(conn)
            self._load()
            return {"status": "success", "message": "data dropped"}
        except Exception as e:  # the base contract reports, not raises
            return {"status": "error", "message": str(e)}

    # -- the in-memory index ---------------------------------------------------------------

    def _file(self, suffix: str) -> Path:
        """``.npz``: the stamp; ``.i8``: the rows."""
        return self.db.path.parent / f"wikid-vectors-{self.namespace}{suffix}"

    def _stamp(self, conn: Connection) -> tuple[int, int]:
        """(write generation, rows) of this namespace: what the saved matrix must match."""
        try:
            row = conn.execute(
                "SELECT gen FROM lr_vector_gen WHERE ns=?", (self.namespace,)
            ).fetchone()
        except sqlite3.OperationalError:  # a store an older wikid wrote, opened read-only
            row = None
        (count,) = conn.execute(
            "SELECT count(*) FROM lr_vectors WHERE ns=?", (self.namespace,)
        ).fetchone()
        return (int(row[0]) if row else 0, int(count))

    def _bump(self, conn: Connection) -> None:
        """A new generation, in the write's own transaction. The first one is random, so
        a store deleted and built again never reaches a stamp an old file holds."""
        conn.execute(
            "INSERT INTO lr_vector_gen VALUES (?, abs(random() % 1000000000000)) "
            "ON CONFLICT(ns) DO UPDATE SET gen = gen + 1",
            (self.namespace,),
        )

    def _load(self) -> None:
        with self.db.snapshot() as conn:
            stamp = self._stamp(conn)
            writer = not self.db.read_only
            stamp_file, held = self._file(".npz"), self._file(".i8")
            index = VectorIndex.read(stamp_file, held, self._dim, stamp, writer=writer)
            self._saved = (stamp, index.graph_digest) if index is not None else None
            if index is None and writer and stamp_file.exists() and self._epoch is None:
                log.info(  # at open: a stamp that no longer describes the rows
                    "vector rows rebuilt from the store: their file did not match its stamp",
                    file=str(held),
                )
            if index is None:
                if writer:
                    stamp_file.unlink(missing_ok=True)  # it describes no rows from here on
                try:
                    index = self._filled(conn, held if writer else None)
                except OSError as exc:  # a full disk: answer from the heap meanwhile
                    log.warning(
                        "vector rows kept in memory: their file cannot be written",
                        file=str(held),
                        error=str(exc),
                    )
                    index = self._filled(conn, None)
        old, self._index = self._index, index
        if old is not None and old is not index:  # its timer and build: the rows moved on
            old.stop_building()
        self._epoch = self.db.epoch()

    def _filled(self, conn: Connection, rows_file: Path | None) -> VectorIndex:
        """A new index of every row of this namespace (``rows_file``: where its int8
        rows live; None: the heap)."""
        index = VectorIndex(self._dim, rows_file)
        cur = conn.execute("SELECT id, vec FROM lr_vectors WHERE ns=?", (self.namespace,))
        while rows := cur.fetchmany(4096):
            blob = b"".join(r[1] for r in rows)  # one buffer, not a view per row
            vectors = np.frombuffer(blob, np.float32).reshape(len(rows), -1)
            index.put([r[0] for r in rows], vectors)
        return index

    def _save(self) -> None:
        """Stamp the rows' file for the next start, unless the stamp already stands: the
        same rows and the same graph. (A graph built since the rows were stamped, as a
        start builds one its stamp did not name, counts: else every start of a 13k
        vault built its relations' graph again, ~12 s of a core.)"""
        self._fresh()
        with self.db.snapshot() as conn:
            stamp = self._stamp(conn)
        saved = (stamp, self._index.graph_digest)
        if saved != self._saved and stamp[1] == len(self._index):
            self._index.save(self._file(".npz"), stamp)
            self._saved = saved

    def _fresh(self) -> None:
        if self._epoch != self.db.epoch():
            self._load()

    # -- writes -------------------------------------------------------------------------

    async def upsert(self, data: dict[str, dict[str, Any]]) -> None:
        if not data:
            return
        await asyncio.to_thread(self._fresh)
        ids = list(data)
        contents = [data[k]["content"] for k in ids]
        parts = [
            await self.embedding_func(contents[i : i + self._batch], context="document")
            for i in range(0, len(contents), self._batch)
        ]
        vectors = np.concatenate(parts).astype(np.float32)
        if len(vectors) != len(ids):
            raise RuntimeError(f"{self.namespace}: {len(vectors)} vectors for {len(ids)} texts")
        await asyncio.to_thread(self._put, data, ids, vectors)

    def _put(self, data: dict[str, dict[str, Any]], ids: list[str], vectors: np.ndarray) -> None:
        now = int(time.time())
        with self.db.transaction() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO lr_vectors VALUES (?, ?, ?, ?, ?)",
                (
                    (
                        self.namespace,
                        k,
                        v.tobytes(),
                        json.dumps(
                            {f: x for f, x in data[k].items() if f in self.meta_fields},
                            ensure_ascii=False,
                        ),
                        now,
                    )
                    for k, v in zip(ids, vectors, strict=True)
                ),
            )
            self._bump(conn)
        self._index.put(ids, vectors)
        self._epoch = self.db.epoch()

    async def delete(self, ids: list[str]) -> None:
        if ids:
            await asyncio.to_thread(self._delete, ids)

    def _delete(self, ids: list[str]) -> None:
        self._fresh()
        with self.db.transaction() as conn:
            conn.executemany(
                "DELETE FROM lr_vectors WHERE ns=? AND id=?", ((self.namespace, k) for k in ids)
            )
            self._bump(conn)
        self._index.drop(list(ids))
        self._epoch = self.db.epoch()

    async def delete_entity(self, entity_name: str) -> None:
        await self.delete([compute_mdhash_id(entity_name, prefix="ent-")])

    async def delete_entity_relation(self, entity_name: str) -> None:
        await self.delete(await asyncio.to_thread(self._relation_ids, entity_name))

    def _relation_ids(self, entity_name: str) -> list[str]:
        rows = self.db.conn.execute(
            "SELECT id FROM lr_vectors WHERE ns=? AND "
            "(json_extract(data, '$.src_id')=? OR json_extract(data, '$.tgt_id')=?)",
            (self.namespace, entity_name, entity_name),
        ).fetchall()
        return [r[0] for r in rows]

    # -- reads --------------------------------------------------------------------------

    def _select(self, columns: str, ids: list[str]) -> list[Any]:
        out: list[Any] = []
        for part in in_batches(ids):
            marks = ",".join("?" * len(part))
            out += self.db.conn.execute(
                f"SELECT {columns} FROM lr_vectors WHERE ns=? AND id IN ({marks})",
                (self.namespace, *part),
            ).fetchall()
        return out

    @staticmethod
    def _record(k: str, data: str, created: int) -> dict[str, Any]:
        return {
            **json.loads(data),
            "__id__": k,
            "__created_at__": created,
            "id": k,
            "created_at": created,
        }

    def _rows(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        return {k: self._record(k, d, c) for k, d, c in self._select("id, data, created_at", ids)}

    async def query(
        self, query: str, top_k: int, query_embedding: list[float] | None = None
    ) -> list[dict[str, Any]]:
        """Cosine top-k above the threshold, exact: int8 candidates from memory,
        rescored with the stored float32 vectors."""
        if query_embedding is None:
            query_embedding = (await self.embedding_func([query], context="query"))[0]
        if top_k <= 0:
            return []
        return await asyncio.to_thread(self._top, query_embedding, top_k)

    def _top(self, query_embedding: Any, top_k: int) -> list[dict[str, Any]]:
        return self._nearest(np.asarray(query_embedding, np.float32).reshape(1, -1), top_k)[0]

    async def nearest(self, vectors: np.ndarray, top_k: int) -> list[list[dict[str, Any]]]:
        """``query`` for each row of ``vectors`` at once: one scan of the int8 rows for
        all of them, and one read of the candidates' rows (a note's related notes are
        asked with each of its chunks; one query each cost a scan each)."""
        if top_k <= 0 or not len(vectors):
            return [[] for _ in vectors]
        return await asyncio.to_thread(self._nearest, vectors, top_k)

    def _nearest(self, vectors: np.ndarray, top_k: int) -> list[list[dict[str, Any]]]:
        self._fresh()
        qs = normalized(np.asarray(vectors, np.float32).reshape(len(vectors), -1))
        picks = self._index.candidates(qs, top_k + RESCORED)
        found = self._select(
            "id, vec, data, created_at", list(dict.fromkeys(k for p in picks for k in p))
        )
        at = {r[0]: i for i, r in enumerate(found)}
        # The candidates' float32 rows as one matrix, normalized at once: one numpy call
        # per query rather than one per candidate (a note's 32 chunks ask for ~4k rows).
        blob = b"".join(r[1] for r in found)
        unit = normalized(np.frombuffer(blob, np.float32).reshape(len(found), self._dim))
        out = []
        for q, ids in zip(qs, picks, strict=True):
            rows = [at[k] for k in ids if k in at]
            scores = unit[rows] @ q if rows else np.zeros(0, np.float32)
            scored = sorted((-float(x), found[r][0]) for x, r in zip(scores, rows, strict=True))
            out.append(
                [
                    {**self._record(k, *found[at[k]][2:]), "__metrics__": -neg, "distance": -neg}
                    for neg, k in scored[:top_k]
                    if -neg >= self.cosine_better_than_threshold
                ]
            )
        return out

    async def similarity(self, vector: np.ndarray, ids: list[str]) -> dict[str, float]:
        """The cosine of ``vector`` with each stored vector of ``ids``, from the int8
        rows (no SQL): to rank a few hundred known candidates against a question."""
        return await asyncio.to_thread(self._similarity, vector, ids)

    def _similarity(self, vector: np.ndarray, ids: list[str]) -> dict[str, float]:
        self._fresh()
        return self._index.similarity(vector, ids)

    async def get_by_id(self, id: str) -> dict[str, Any] | None:
        return self._rows([id]).get(id)

    async def get_by_ids(self, ids: list[str]) -> list[dict[str, Any]]:
        rows = await asyncio.to_thread(self._rows, list(ids))
        return [rows.get(k) for k in ids]  # type: ignore[misc]  # None where absent, as stock

    async def get_vectors_by_ids(self, ids: list[str]) -> dict[str, list[float]]:
        """Vectors as stock NanoVectorDB returns them: rounded through float16 (how it
        stores them). LightRAG ranks chunks by these, so rounding alike keeps near-ties
        in the same order and the answers equal to stock; ``query`` uses full float32."""
        return await asyncio.to_thread(self._vectors, ids)

    def _vectors(self, ids: list[str]) -> dict[str, list[float]]:
        return {k: v.tolist() for k, v in self._arrays(ids).items()}

    async def get_arrays_by_ids(self, ids: list[str]) -> dict[str, np.ndarray]:
        """``get_vectors_by_ids`` as float32 arrays holding the same numbers: what the
        query ranks chunks by (``store.retrieve``), without making 384 Python floats
        per vector and reading them back (7 of a query's 11 ms for 200 chunks)."""
        return await asyncio.to_thread(self._arrays, ids)

    def _arrays(self, ids: list[str]) -> dict[str, np.ndarray]:
        found = dict(self._select("id, vec", list(ids)))  # one query per 400 ids
        return {
            k: np.frombuffer(found[k], np.float32).astype(np.float16).astype(np.float32)
            for k in dict.fromkeys(ids)
            if k in found
        }

    async def all_keys(self) -> list[str]:
        """Every vector id (wikid's export and migration list them)."""
        return [
            r[0]
            for r in self.db.conn.execute(
                "SELECT id FROM lr_vectors WHERE ns=?", (self.namespace,)
            ).fetchall()
        ]
