"""The LightRAG store: opening it offline and applying one batch of writes.

Why write through the storage interfaces and not ``ainsert_custom_kg``: that
call overwrites shared entities instead of merging them, needs every
source_id to be a chunk in the same call, cuts ``file_path`` to a basename
and gives the data no doc_status, so nothing could ever delete it. wikid
computes complete records itself (``records.py``) and writes them here,
one batch per delta, with exactly one flush per touched storage.

No LLM is ever called from here: the configured LLM function raises, and
``llm_calls`` counts any attempt, so a test can prove there are none.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from lightrag import LightRAG
from lightrag.utils import EmbeddingFunc

from wikid.config import DEFAULT_BACKEND
from wikid.store import postgres, tokens
from wikid.store.backends import STORAGE_CLASSES, ledger_file, offline_tokenizer
from wikid.store.embed import Embedder
from wikid.store.ids import entity_vdb_id, relation_vdb_id, text_hash
from wikid.store.ledger import Ledger, Ops
from wikid.store.vector_texts import VECTOR_TEXTS, vector_rows

# Texts per model call while a batch embeds ahead: an edit waiting behind a cold
# backlog is let in when the call ends (Sink.Live). 64 is ~0.2 s on 2 cores (256
# was ~0.9 s: half of an edit's wait then), at the same texts a second.
EMBED_CALL = 64
# Rows per storage call in a batch's write: the calls run on the event loop, so a
# big batch (a slice of a cold start) is written in parts, with the loop let in
# between (status, links and search answer meanwhile; the transaction stays one).
WRITE_ROWS = 250  # ~50 ms of storage work at 13k (1,000 rows: up to 190 ms measured)
logging.getLogger("lightrag").setLevel(logging.WARNING)
logging.getLogger("nano-vectordb").setLevel(logging.WARNING)


# Every field is written on every upsert: the graph storages merge a node's or an
# edge's fields, so a field left out would survive from the record before ("origin"
# of an extracted entity that a note of the same name took over).
EDGE_FIELDS = ("weight", "description", "keywords", "source_id", "file_path", "origin")
NODE_DEFAULTS = {"origin": "", "title": "", "tags": ""}  # fields not every entity record has


class LLMForbidden(RuntimeError):
    """Raised by the LLM function wikid gives LightRAG while it has no LLM."""


class _Shared:
    """An async callable that LightRAG may deep-copy: copies share the original
    (the embedder holds an ONNX session, which cannot be copied or pickled)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return await self.fn(*args, **kwargs)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Shared:
        return self


class _RecordedModel:
    """Stands for the model a store was built with when it is only read (export):
    its dimension comes from the ledger, and it refuses to embed."""

    max_tokens = 256

    def __init__(self, model_id: str, dim: int) -> None:
        self.model_id, self.dim = model_id, dim

    @classmethod
    def of(cls, ledger: Ledger) -> _RecordedModel:
        recorded = ledger.meta("embedding_model")
        if recorded is None:
            raise ValueError(f"{ledger.path} records no embedding model: not a wikid store")
        model_id, _, dim = recorded.rpartition(":")
        return cls(model_id, int(dim))

    def embed(self, texts: list[str]) -> np.ndarray:
        raise RuntimeError("this store was opened read-only; it embeds nothing")


class Store:
    """One LightRAG instance over a working dir, plus wikid's ledger beside it."""

    def __init__(
        self,
        workdir: Path,
        workspace: str,
        embedder: Embedder | None,
        backend: str = DEFAULT_BACKEND,
        llm_func: Any = None,
        read_only: bool = False,
        postgres_url: str | None = None,
    ) -> None:
        if backend not in STORAGE_CLASSES:
            raise ValueError(
                f"unknown store backend {backend!r}; choose from {sorted(STORAGE_CLASSES)}"
            )
        if backend == "postgres":
            postgres.configure(postgres_url or os.environ.get(postgres.URL_ENV))
        self.workdir = workdir
        self.workspace = workspace
        self.backend = backend
        self.read_only = read_only
        self.llm_calls = 0
        self.embedded = 0  # texts actually sent to the model (cache misses)
        self._caching = False
        # Called with (done, total): texts embedded so far of those a batch must embed
        # (a progress bar in ``wikid index``, the daemon's status and log).
        self.progress: Callable[..., None] | None = None  # (done, total, kinds=...)
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / workspace).mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(workdir / workspace / ledger_file(backend), not read_only)
        self.embedder: Embedder = embedder or _RecordedModel.of(self.ledger)
        self.tokenizer = offline_tokenizer()
        kv, vector, graph, doc_status = STORAGE_CLASSES[backend]
        self.rag = LightRAG(
            working_dir=str(workdir),
            workspace=workspace,
            kv_storage=kv,
            vector_storage=vector,
            graph_storage=graph,
            doc_status_storage=doc_status,
            embedding_func=EmbeddingFunc(
                embedding_dim=self.embedder.dim,
                max_token_size=self.embedder.max_tokens,
                func=_Shared(self._embed),
            ),
            # Hand the embedder big batches, one at a time: it spreads them over every core.
            embedding_batch_num=64,
            embedding_func_max_async=1,
            llm_model_func=_Shared(llm_func or self._no_llm),
            tokenizer=self.tokenizer,
        )

    async def _no_llm(self, *args: Any, **kwargs: Any) -> str:
        self.llm_calls += 1
        raise LLMForbidden("wikid writes the graph directly and makes no LLM calls here")

    async def _embed(self, texts: list[str], **_: Any) -> np.ndarray:
        """LightRAG's embedding function: the cache lookup and the model in a worker
        thread (the lookup waits for the connection while a batch thread uses it)."""
        return await asyncio.to_thread(self._cached_or_embedded, texts, self._caching)

    def _cached_or_embedded(self, texts: list[str], caching: bool) -> np.ndarray:
        hashes = [text_hash(t) for t in texts]
        cached = self.ledger.vectors(hashes)
        missing = sorted(
            {h: t for h, t in zip(hashes, texts, strict=True) if h not in cached}.items()
        )
        if missing:  # cached only for a batch's write, not a query's question
            cached.update(self._embed_new(missing, cache=caching))
        return (
            np.stack([cached[h] for h in hashes])
            if texts
            else np.zeros((0, self.embedder.dim), np.float32)
        )

    def count_tokens(self, text: str) -> int:
        return tokens.count(text)

    def count_all(self, texts: list[str]) -> list[int]:
        return tokens.count_all(texts)

    async def open(self) -> bool:
        """Open the storages; True when the store was started over (another embedding
        model, or a lost ledger): what was read of the ledger before is void."""
        await self.rag.initialize_storages()
        if self.backend == "postgres":
            postgres.check_workspace(self._storages(), self.workspace)
        if self.read_only:
            return False
        model = f"{self.embedder.model_id}:{self.embedder.dim}"
        # The ledger's reads and writes here in a thread: on a restart the parse cache is
        # read on the same connection meanwhile, and the loop would wait for it.
        known, texts = await asyncio.to_thread(
            lambda: (self.ledger.meta("embedding_model"), self.ledger.meta("vector_texts"))
        )
        over = False
        if known is not None and known != model:
            # Never mix vectors of two models: start the store over, cleanly.
            await self._drop()
            self.ledger.wipe()
            over = True
        elif known is not None and texts != VECTOR_TEXTS:
            # Vectors of other texts (an older wikid's): start over, but keep the cache
            # of vectors by text, so what is embedded alike (chunks) is not embedded again.
            await self._drop()
            self.ledger.wipe(keep_vectors=True)
            over = True
        elif known is None and self.backend != "sqlite":
            # A new ledger (lost, or never written) beside storages that may hold data:
            # records it does not know of would never be deleted, so start the store
            # over. (The sqlite backend keeps its ledger in the store's own file.)
            await self._drop()
            over = True
        await asyncio.to_thread(
            self.ledger.set_meta,
            {"embedding_model": model, "backend": self.backend, "vector_texts": VECTOR_TEXTS},
        )
        return over

    async def _drop(self) -> None:
        for storage in self._storages():
            await storage.drop()

    async def close(self) -> None:
        await self.rag.finalize_storages()
        self.ledger.close()

    def _storages(self) -> list[Any]:
        r = self.rag
        return [
            r.full_docs,
            r.text_chunks,
            r.entities_vdb,
            r.relationships_vdb,
            r.chunks_vdb,
            r.chunk_entity_relation_graph,
            r.doc_status,
        ]

    @asynccontextmanager
    async def batch(self) -> AsyncIterator[None]:
        """The transaction one batch's store writes and ledger commit share (the sqlite
        backend), its COMMIT in a worker thread (a cold start's slice commits tens of MB:
        0.4-0.7 s measured at 13k); the stock files cannot join one, so there it is
        empty."""
        if self.backend != "sqlite":
            yield
            return
        async with self.ledger.database.transaction_async():
            yield

    def snapshot(self) -> AbstractContextManager[Any]:
        """Reads that see one committed state while another process writes (sqlite)."""
        if self.backend == "sqlite":
            return self.ledger.database.snapshot()
        return nullcontext()

    async def embed_ahead(
        self,
        ops: Ops,
        interrupt: Callable[[], bool] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int | None:
        """Embed (and cache, committed at once) every text the batch will write, before
        its transaction opens: a crash mid-batch never costs those embeddings again, and
        the transaction itself stays short. Returns how many texts it embedded, or None:
        ``interrupt()`` said stop first. ``progress(done, total)`` after each call.
        Hashing, cache reads and model calls run in a worker thread: on a slice of a
        cold start they are seconds of work, and the loop keeps answering."""
        texts = await asyncio.to_thread(self._uncached, ops)
        if texts and progress is not None:
            progress(0, len(texts))
        for i in range(0, len(texts), EMBED_CALL):
            if i and interrupt is not None and interrupt():
                return None
            await asyncio.to_thread(self._embed_new, texts[i : i + EMBED_CALL], True)
            if progress is not None:
                progress(min(i + EMBED_CALL, len(texts)), len(texts))
        return len(texts)

    def _uncached(self, ops: Ops) -> list[tuple[str, str]]:
        """(hash, text) of a batch's vector rows that have no cached vector yet."""
        by_hash = {
            text_hash(v["content"]): v["content"]
            for rows in vector_rows(ops)
            for v in rows.values()
        }
        cached = self.ledger.cached(set(by_hash))
        return [(h, t) for h, t in by_hash.items() if h not in cached]

    def _embed_new(self, items: list[tuple[str, str]], cache: bool) -> dict[str, np.ndarray]:
        """Embed (hash, text) pairs that have no cached vector; cache them if asked."""
        vectors = self.embedder.embed([t for _, t in items])
        fresh = {h: v for (h, _), v in zip(items, vectors, strict=True)}
        self.embedded += len(items)
        if cache:
            self.ledger.add_vectors(fresh)
        return fresh

    async def write(self, ops: Ops, now: str) -> None:
        """Apply one batch: deletes, then upserts, then one flush of each storage."""
        r = self.rag
        graph = r.chunk_entity_relation_graph
        rel_del = [k for k, v in ops.relation.items() if v is None]
        ent_del = [k for k, v in ops.entity.items() if v is None]
        chunk_del = [k for k, v in ops.chunk.items() if v is None]
        doc_del = [k for k, v in ops.doc.items() if v is None]
        if rel_del:
            pairs = [tuple(k.split("\x1f")) for k in rel_del]
            await graph.remove_edges(pairs)
            ids = [relation_vdb_id(a, b) for a, b in pairs] + [
                relation_vdb_id(b, a) for a, b in pairs
            ]
            await r.relationships_vdb.delete(ids)
        if ent_del:
            await graph.remove_nodes(ent_del)
            await r.entities_vdb.delete([entity_vdb_id(n) for n in ent_del])
        if chunk_del:
            await r.text_chunks.delete(chunk_del)
            await r.chunks_vdb.delete(chunk_del)
        if doc_del:
            await r.full_docs.delete(doc_del)
            await r.doc_status.delete(doc_del)

        self._caching = True
        try:
            # The rows in a worker thread: a cold start's slice of thousands of records
            # held the event loop 140-160 ms building them here.
            rows = await asyncio.to_thread(_upsert_rows, ops, now)
            await _in_parts(graph.upsert_nodes_batch, rows.nodes)
            await _in_parts(r.entities_vdb.upsert, rows.entities, rows=True)
            await _in_parts(graph.upsert_edges_batch, rows.edges)
            await _in_parts(r.relationships_vdb.upsert, rows.relations, rows=True)
            await _in_parts(r.text_chunks.upsert, rows.chunks, rows=True)
            await _in_parts(r.chunks_vdb.upsert, rows.chunk_vectors, rows=True)
            if rows.docs:
                await r.full_docs.upsert(rows.docs)
                await r.doc_status.upsert(rows.doc_status)
            # finalize_storages() does not flush the graph: flush every storage explicitly,
            # once. (Vector stores may embed lazily here, so the cache stays on until done.)
            for storage in self._storages():
                await storage.index_done_callback()
        finally:
            self._caching = False


@dataclass
class _Rows:
    """One batch's upserts, in the form each storage takes them."""

    nodes: list[tuple[str, dict[str, Any]]]
    entities: list[tuple[str, dict[str, Any]]]
    edges: list[tuple[str, str, dict[str, Any]]]
    relations: list[tuple[str, dict[str, Any]]]
    chunks: list[tuple[str, dict[str, Any]]]
    chunk_vectors: list[tuple[str, dict[str, Any]]]
    docs: dict[str, dict[str, Any]]
    doc_status: dict[str, dict[str, Any]]


def _upsert_rows(ops: Ops, now: str) -> _Rows:
    ent_rows, rel_rows, chunk_rows = vector_rows(ops)
    docs = {k: v for k, v in ops.doc.items() if v is not None}
    return _Rows(
        nodes=[
            (n, {**NODE_DEFAULTS, "entity_id": n, **rec, "created_at": now})
            for n, rec in ops.entity.items()
            if rec is not None
        ],
        entities=list(ent_rows.items()),
        edges=[
            (
                rec["src_id"],
                rec["tgt_id"],
                {k: rec.get(k, "") for k in EDGE_FIELDS} | {"created_at": now},
            )
            for rec in ops.relation.values()
            if rec is not None
        ],
        relations=list(rel_rows.items()),
        # LightRAG's KV storages add fields to the dicts they are given: pass copies.
        chunks=[(k, dict(v)) for k, v in ops.chunk.items() if v is not None],
        chunk_vectors=list(chunk_rows.items()),
        docs={k: {"content": v["content"], "file_path": v["file_path"]} for k, v in docs.items()},
        doc_status={
            k: {key: v[key] for key in v if key != "content"}
            | {"created_at": now, "updated_at": now}
            for k, v in docs.items()
        },
    )


async def _in_parts(
    call: Callable[[Any], Awaitable[Any]], items: list[Any], rows: bool = False
) -> None:
    """``call`` over ``items`` in parts of ``WRITE_ROWS``, the event loop let in after
    each (``rows``: the items are (key, row) pairs, passed as a dict)."""
    for i in range(0, len(items), WRITE_ROWS):
        part = items[i : i + WRITE_ROWS]
        await call(dict(part) if rows else part)
        await asyncio.sleep(0)
