"""Conformance of the SQLite storages: every method, against LightRAG's stock storage.

The contract of a LightRAG storage is its base class plus how the stock
implementation behaves (what a miss returns, merge-on-upsert, undirected
edges, cursor pagination...). So each test drives a stock storage and a
SQLite one through the same calls and requires the same answers, then checks
that every public method of the base classes was called at least once: a
method added upstream and not exercised here fails the suite.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightrag.base import (
    BaseGraphStorage,
    BaseKVStorage,
    BaseVectorStorage,
    DocStatus,
    DocStatusStorage,
    StorageNameSpace,
)
from lightrag.kg.json_doc_status_impl import JsonDocStatusStorage
from lightrag.kg.json_kv_impl import JsonKVStorage
from lightrag.kg.nano_vector_db_impl import NanoVectorDBStorage
from lightrag.kg.networkx_impl import NetworkXStorage
from lightrag.kg.shared_storage import initialize_share_data
from lightrag.utils import EmbeddingFunc

from wikid.store._int8_rows import HeapRows
from wikid.store._sqlite import Database
from wikid.store._vector_index import VectorIndex, normalized, quantized
from wikid.store.embed import default_embedder
from wikid.store.sqlite_backend import DB_FILE, READ_ONLY_ENV
from wikid.store.sqlite_graph import SQLiteGraphStorage
from wikid.store.sqlite_kv import SQLiteDocStatusStorage, SQLiteKVStorage
from wikid.store.sqlite_vector import SQLiteVectorStorage

VOLATILE = {"create_time", "update_time", "created_at", "__created_at__", "_write_seq"}
_ids = itertools.count()


def _plain(x: Any) -> Any:
    """Comparable form: dataclasses and models as dicts, no timestamps, rounded floats."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        x = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
    if hasattr(x, "model_dump"):
        x = x.model_dump()
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, set):
        return sorted(_plain(v) for v in x)
    if isinstance(x, float | np.floating):
        return round(float(x), 6)
    return x


def _sorted(x: Any) -> Any:
    return sorted(x, key=repr) if isinstance(x, list) else x


class Twin:
    """A stock storage and a SQLite one, driven alike; records which methods ran."""

    def __init__(self, stock: Any, ours: Any) -> None:
        self.stock, self.ours = stock, ours
        self.called: set[str] = set()

    async def __call__(self, name: str, *args: Any, unordered: bool = False, **kw: Any) -> Any:
        self.called.add(name)
        a = _plain(await getattr(self.stock, name)(*args, **kw))
        b = _plain(await getattr(self.ours, name)(*args, **kw))
        if unordered:
            a, b = _sorted(a), _sorted(b)
        assert b == a, f"{name}{args}: sqlite {b!r} != stock {a!r}"
        return b

    def check_coverage(self, *bases: type) -> None:
        wanted = {
            n
            for base in bases
            for n, _ in inspect.getmembers(base, inspect.iscoroutinefunction)
            if not n.startswith("_") and n in base.__dict__
        }
        assert wanted <= self.called, f"not exercised: {sorted(wanted - self.called)}"


def _config(tmp_path: Path) -> dict[str, Any]:
    return {
        "working_dir": str(tmp_path),
        "embedding_batch_num": 16,
        "vector_db_storage_cls_kwargs": {"cosine_better_than_threshold": 0.2},
        "max_graph_nodes": 1000,
    }


def _embedding() -> EmbeddingFunc:
    model = default_embedder()

    async def embed(texts: list[str], **_: Any) -> np.ndarray:
        return model.embed(list(texts))

    return EmbeddingFunc(embedding_dim=model.dim, max_token_size=256, func=embed)


def _chunks_vdb(cfg: dict[str, Any], workspace: str) -> SQLiteVectorStorage:
    """A chunks vector storage on the real model, as the store makes one."""
    return SQLiteVectorStorage(
        namespace="chunks",
        workspace=workspace,
        global_config=cfg,
        embedding_func=_embedding(),
        meta_fields={"content"},
    )


def _twin(tmp_path: Path, stock_cls: type, ours_cls: type, namespace: str, **kw: Any) -> Twin:
    initialize_share_data()
    ws = f"conf{next(_ids)}"
    common = {"namespace": namespace, "global_config": _config(tmp_path), **kw}
    return Twin(
        stock_cls(workspace=f"{ws}_stock", **common), ours_cls(workspace=f"{ws}_sqlite", **common)
    )


def run(tmp_path: Path, body: Callable[[Twin], Awaitable[None]], twin: Twin) -> None:
    async def main() -> None:
        await twin("initialize")
        try:
            await body(twin)
            await twin("index_done_callback")
            await twin("drop_pending_index_ops")
        finally:
            await twin("finalize")

    asyncio.run(main())


# -- KV ------------------------------------------------------------------------------------


def test_kv_storage_matches_stock(tmp_path: Path) -> None:
    twin = _twin(tmp_path, JsonKVStorage, SQLiteKVStorage, "text_chunks", embedding_func=None)

    async def body(t: Twin) -> None:
        assert await t("is_empty") is True
        await t("upsert", {"a": {"content": "alpha", "n": 1}, "b": {"content": "beta"}})
        await t("upsert", {"a": {"content": "alpha 2"}})  # replace, not merge
        assert (await t("get_by_id", "a"))["content"] == "alpha 2"
        assert await t("get_by_id", "missing") is None
        await t("get_by_id_strict", "b")
        assert (await t("get_by_ids", ["b", "missing", "a"]))[1] is None
        assert await t("filter_keys", {"a", "z"}) == ["z"]
        await t("delete", ["a", "never"])
        assert await t("is_empty") is False
        await t("get_by_ids", ["a", "b"])
        assert (await t("drop"))["status"] == "success"
        assert await t("is_empty") is True

    run(tmp_path, body, twin)
    twin.check_coverage(StorageNameSpace, BaseKVStorage)


# -- doc status ----------------------------------------------------------------------------


def _doc(status: DocStatus, path: str, n: int, track: str = "t1") -> dict[str, Any]:
    return {
        "status": status.value,
        "file_path": path,
        "content_summary": f"doc {n}",
        "content_length": 10 * n,
        "chunks_count": n,
        "chunks_list": [f"chunk-{n}-{i}" for i in range(n)],
        "track_id": track,
        "content_hash": f"hash{n}",
        "created_at": f"2026-01-0{n}T00:00:00+00:00",
        "updated_at": f"2026-02-0{n}T00:00:00+00:00",
    }


def test_doc_status_storage_matches_stock(tmp_path: Path) -> None:
    twin = _twin(
        tmp_path, JsonDocStatusStorage, SQLiteDocStatusStorage, "doc_status", embedding_func=None
    )
    P, F = DocStatus.PROCESSED, DocStatus.FAILED

    async def body(t: Twin) -> None:
        await t(
            "upsert",
            {
                "doc-1": _doc(P, "Notes/a.md", 1),
                "doc-2": _doc(F, "Notes/b.md", 2, "t2"),
                "doc-3": _doc(P, "Other/a.md", 3),
                "doc-4": _doc(P, "Notes/a.md", 4),  # a second row for one source
            },
        )
        await t("get_status_counts")
        await t("get_all_status_counts")
        await t("get_docs_by_statuses", [P])
        await t("get_docs_by_statuses", [P, F], strict=True)
        await t("count_docs_by_statuses", [P])
        await t("get_docs_by_track_id", "t1")
        for direction in ("asc", "desc"):
            await t(
                "get_docs_paginated", status_filter=P, page=1, page_size=2, sort_direction=direction
            )
        await t("get_docs_paginated", status_filters=[P, F], sort_field="created_at")
        page = await t("get_docs_by_statuses_page", [P], limit=2)
        cursor = await t.ours.get_docs_by_statuses_page([P], limit=2)
        await t("get_docs_by_statuses_page", [P], limit=2, position=cursor.next_position)
        assert page
        await t("get_docs_by_ids", ["doc-1", "nope"])
        await t("get_full_docs_by_ids", ["doc-2", "doc-3"])
        await t("get_doc_by_file_path", "Notes/b.md")
        await t("get_doc_by_file_basename", "b.md")
        await t("get_doc_by_content_hash", "hash3")
        await t("get_doc_by_content_hash", "hash3", exclude_doc_id="doc-3")
        await t("update_doc_status_fields", "doc-2", {"status": P.value, "error_msg": None})
        await t("update_doc_status_fields", "ghost", {"status": P.value}, missing_ok=True)
        await t("resolve_doc_source_strict", "Notes/a.md")
        await t("resolve_doc_source_strict", "Notes/b.md")
        conflicts = await t("list_source_conflicts_page", limit=10)
        assert [c["canonical_source_key"] for c in conflicts["conflicts"]] == ["Notes/a.md"]
        (c,) = conflicts["conflicts"]
        fingerprint = JsonDocStatusStorage._conflict_fingerprint(sorted(c["sample_doc_ids"]))
        for dry_run in (True, False):
            await t(
                "repair_source_conflict",
                c["canonical_source_key"],
                primary_doc_id="doc-4",
                expected_candidate_count=c["candidate_count"],
                expected_candidate_fingerprint=fingerprint,
                dry_run=dry_run,
            )
        await t("resolve_doc_source_strict", "Notes/a.md")
        await t("filter_keys", {"doc-1", "doc-9"})
        await t("get_by_id", "doc-1")
        await t("get_by_id_strict", "doc-3")
        await t("get_by_ids", ["doc-3", "doc-9"])
        await t("delete", ["doc-1"])
        await t("is_empty")
        await t("get_status_counts")
        await t("drop")
        await t("is_empty")

    run(tmp_path, body, twin)
    twin.check_coverage(StorageNameSpace, BaseKVStorage, DocStatusStorage)


# -- vectors -------------------------------------------------------------------------------


def test_vector_storage_matches_stock(tmp_path: Path) -> None:
    twin = _twin(
        tmp_path,
        NanoVectorDBStorage,
        SQLiteVectorStorage,
        "relationships",
        embedding_func=_embedding(),
        meta_fields={"src_id", "tgt_id", "content", "file_path"},
    )
    rows = {
        f"rel-{i}": {
            "src_id": s,
            "tgt_id": o,
            "content": f"{s} relates to {o}",
            "file_path": "x.md",
        }
        for i, (s, o) in enumerate(
            [("Ada", "Babbage"), ("Ada", "Engine"), ("Turing", "Enigma"), ("Babbage", "Engine")]
        )
    }

    async def body(t: Twin) -> None:
        await t("upsert", rows)
        await t("index_done_callback")
        await t("query", "Who designed the engine?", top_k=3)
        await t("query", "codebreaking machine", top_k=10)
        # ``nearest``: one scan for many vectors gives what one query each gives.
        asked = ["Who designed the engine?", "codebreaking machine", "Babbage"]
        qs = np.asarray(await t.ours.embedding_func(asked))
        each = [await t.ours.query("", top_k=3, query_embedding=q) for q in qs]
        assert await t.ours.nearest(qs, 3) == each and all(each)
        await t("get_by_id", "rel-1")
        await t("get_by_id", "rel-9")
        await t("get_by_ids", ["rel-2", "rel-9", "rel-0"])
        vecs = await t("get_vectors_by_ids", ["rel-0", "rel-9"])
        assert list(vecs) == ["rel-0"] and len(vecs["rel-0"]) == 384
        arrays = await t.ours.get_arrays_by_ids(["rel-0", "rel-9", "rel-0"])  # the query's
        exact = await t.ours.get_vectors_by_ids(["rel-0"])
        assert list(arrays) == ["rel-0"] and arrays["rel-0"].tolist() == exact["rel-0"]
        await t("upsert", {"rel-0": {**rows["rel-0"], "content": "Ada worked with Babbage"}})
        await t("delete", ["rel-3"])
        await t("index_done_callback")
        await t("query", "Babbage", top_k=5)
        await t("delete_entity_relation", "Ada")
        await t("index_done_callback")
        await t("get_by_ids", list(rows))
        await t(
            "upsert", {"ent-x": {"content": "X", "src_id": "X", "tgt_id": "Y", "file_path": "y.md"}}
        )
        await t("delete_entity", "Turing")
        await t("index_done_callback")
        await t("query", "anything at all", top_k=10, query_embedding=None)
        await t("drop")
        await t("query", "Babbage", top_k=5)

    run(tmp_path, body, twin)
    twin.check_coverage(StorageNameSpace, BaseVectorStorage)


# -- graph ---------------------------------------------------------------------------------


def test_graph_storage_matches_stock(tmp_path: Path) -> None:
    twin = _twin(
        tmp_path, NetworkXStorage, SQLiteGraphStorage, "chunk_entity_relation", embedding_func=None
    )

    def node(kind: str) -> dict[str, str]:
        return {"entity_type": kind, "description": f"a {kind}", "source_id": "c1"}

    def edge(w: str) -> dict[str, str]:
        return {"weight": w, "description": "linked", "keywords": "k", "source_id": "c1"}

    async def body(t: Twin) -> None:
        await t("upsert_node", "Ada", node("person"))
        await t("upsert_nodes_batch", [("Babbage", node("person")), ("Engine", node("machine"))])
        await t("upsert_node", "Ada", {"extra": "merged"})  # merges attributes
        await t("upsert_edge", "Ada", "Babbage", edge("1.0"))
        await t(
            "upsert_edges_batch",
            [("Engine", "Ada", edge("2.0")), ("Babbage", "Engine", edge("1.0"))],
        )
        await t("upsert_edge", "Babbage", "Ada", {"weight": "3.0"})  # the same undirected edge
        await t("upsert_edge", "Ada", "Newcomer", edge("1.0"))  # creates the missing end node
        await t("upsert_edge", "Loop", "Loop", edge("1.0"))
        for n in ("Ada", "Newcomer", "Nobody", "Loop"):
            await t("has_node", n)
            await t("get_node", n)
            await t("node_degree", n)
            await t("get_node_edges", n, unordered=True)
        await t("has_edge", "Babbage", "Ada")
        await t("has_edge", "Ada", "Nobody")
        await t("get_edge", "Ada", "Babbage")
        await t("get_edge", "Babbage", "Ada")
        await t("edge_degree", "Ada", "Engine")
        await t("get_nodes_batch", ["Ada", "Nobody", "Engine"])
        await t("has_nodes_batch", ["Ada", "Nobody"])
        await t("node_degrees_batch", ["Ada", "Engine", "Nobody"])
        await t("edge_degrees_batch", [("Ada", "Engine"), ("Babbage", "Ada")])
        await t("get_edges_batch", [{"src": "Ada", "tgt": "Engine"}, {"src": "X", "tgt": "Ada"}])
        got = await t.ours.get_nodes_edges_batch(["Ada", "Nobody"])
        want = await t.stock.get_nodes_edges_batch(["Ada", "Nobody"])
        t.called.add("get_nodes_edges_batch")
        assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}
        await t("get_all_labels")
        await t("get_popular_labels", 3)
        await t("search_labels", "a")
        await t("search_labels", "")
        await t("get_all_nodes", unordered=True)
        await t("get_all_edges", unordered=True)
        for label, depth, limit in (
            ("*", 3, 2),
            ("*", 3, None),
            ("Ada", 1, 3),
            ("Babbage", 3, 2),
            ("Nobody", 2, 5),
        ):
            a = _plain(await t.stock.get_knowledge_graph(label, depth, limit))
            b = _plain(await t.ours.get_knowledge_graph(label, depth, limit))
            for kg in (a, b):
                kg["nodes"].sort(key=repr)
                kg["edges"].sort(key=repr)
            assert b == a, (label, depth, limit)
        t.called.add("get_knowledge_graph")
        await t("remove_edges", [("Engine", "Babbage"), ("Nobody", "Ada")])
        await t("delete_node", "Engine")
        await t("remove_nodes", ["Newcomer", "Nobody"])
        await t("get_all_nodes", unordered=True)
        await t("get_all_edges", unordered=True)
        await t("drop")
        await t("get_all_labels")

    run(tmp_path, body, twin)
    twin.check_coverage(StorageNameSpace, BaseGraphStorage)


def test_the_graph_reads_of_a_query_look_rows_up_by_key_not_by_scanning(tmp_path: Path) -> None:
    """The batched reads LightRAG's queries make: each must find its rows through an
    index on the looked-up columns. A plan that searches by namespace alone reads every
    edge (the row-value ``(a, b) IN (VALUES ...)`` did: 25 ms for 16 pairs at 10k)."""
    initialize_share_data()
    graph = SQLiteGraphStorage(
        namespace="chunk_entity_relation",
        workspace="plans",
        global_config=_config(tmp_path),
        embedding_func=None,
    )
    said: list[str] = []

    async def main() -> None:
        await graph.initialize()
        try:
            await graph.upsert_edges_batch(
                [(f"n{i}", f"n{i + 1}", {"weight": "1.0", "source_id": "c"}) for i in range(50)]
            )
            graph.db.conn.set_trace_callback(said.append)
            try:
                await graph.get_edges_batch(
                    [{"src": "n3", "tgt": "n2"}, {"src": "n7", "tgt": "n8"}]
                )
                await graph.get_nodes_batch(["n1", "n2"])
                await graph.node_degrees_batch(["n1", "n2"])
                await graph.edge_degrees_batch([("n1", "n2")])
                await graph.get_nodes_edges_batch(["n1", "n2"])
            finally:
                graph.db.conn.set_trace_callback(None)
            plans = {
                sql: [row[3] for row in graph.db.conn.execute("EXPLAIN QUERY PLAN " + sql)]
                for sql in said
                if sql.lstrip().upper().startswith(("SELECT", "WITH"))
            }
        finally:
            await graph.finalize()
        assert len(plans) >= 4
        for sql, plan in plans.items():
            for step in plan:
                assert not step.startswith("SCAN lr_"), (sql, plan)
                assert not step.endswith("(ns=?)"), (sql, plan)

    asyncio.run(main())


# -- the shared connection -----------------------------------------------------------------


def _rows(path: Path) -> Iterator[tuple[str, str]]:
    db = Database.open(path)
    try:
        yield from db.conn.execute("SELECT ns, id FROM lr_kv ORDER BY id")
    finally:
        db.release()


def test_rows_read_again_leave_no_graph_build_to_the_index_they_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback reads the vector rows again into a new index: the one it replaces must
    not build a graph later (its timer would write the new index's graph file from rows
    it no longer describes)."""
    monkeypatch.setenv("WIKID_ANN_MIN_ROWS", "8")
    cfg = _config(tmp_path)

    async def main() -> tuple[VectorIndex, VectorIndex]:
        initialize_share_data()
        vdb = _chunks_vdb(cfg, "orphan")
        await vdb.initialize()
        await vdb.upsert({f"c{i}": {"content": f"chunk number {i}"} for i in range(12)})
        await asyncio.to_thread(vdb._index.wait_for_graph)
        before = vdb._index
        with pytest.raises(RuntimeError), vdb._db.transaction():
            await vdb.upsert({"lost": {"content": "lost chunk"}})
            raise RuntimeError("crash mid-batch")
        await vdb.query("chunk", top_k=3)  # reads the rows again
        after = vdb._index
        await vdb.finalize()
        return before, after

    before, after = asyncio.run(main())
    assert before is not after
    assert before._ann is not None and before._ann._halt.is_set()
    assert after._ann is not None and before._ann._timer is None


def test_a_failed_batch_rolls_back_every_storage_and_the_vector_cache(tmp_path: Path) -> None:
    """Storages share one connection: an outer transaction that fails leaves no row of
    any of them, and the in-memory vector matrix forgets what it was told."""
    cfg = _config(tmp_path)

    async def main() -> None:
        initialize_share_data()
        kv = SQLiteKVStorage(
            namespace="full_docs", workspace="rb", global_config=cfg, embedding_func=None
        )
        vdb = _chunks_vdb(cfg, "rb")
        await kv.initialize()
        await vdb.initialize()
        await kv.upsert({"kept": {"content": "kept"}})
        with pytest.raises(RuntimeError), kv._db.transaction():
            await kv.upsert({"lost": {"content": "lost"}})
            await vdb.upsert({"c1": {"content": "lost chunk"}})
            assert await vdb.query("lost chunk", top_k=1)
            raise RuntimeError("crash mid-batch")
        assert await kv.get_by_id("lost") is None and await kv.get_by_id("kept")
        assert await vdb.query("lost chunk", top_k=1) == []
        await kv.finalize()
        await vdb.finalize()

    asyncio.run(main())
    assert [k for _, k in _rows(tmp_path / "rb" / DB_FILE)] == ["kept"]


@pytest.mark.parametrize("in_file", [False, True], ids=["heap", "file"])
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 300), max_size=6)), max_size=30))
def test_vector_index_tracks_puts_and_drops(
    in_file: bool, steps: list[tuple[bool, list[int]]]
) -> None:
    """The index (grow by a quarter, fill holes from the end, ids found by binary
    search) holds exactly the vectors a plain dict would, and ranks an exact match
    first, with its rows in the heap or in a file (which then holds exactly the rows
    in use). Ids of different lengths (k7, k123) widen the ids' array."""
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        rows = Path(tmp) / "rows.i8" if in_file else None
        index, model = VectorIndex(8, rows), {}
        _puts_and_drops(index, model, steps, rng)
        if rows is not None:
            assert rows.stat().st_size == 8 * len(model)


def _puts_and_drops(
    index: VectorIndex,
    model: dict[str, np.ndarray],
    steps: list[tuple[bool, list[int]]],
    rng: np.random.Generator,
) -> None:
    for is_put, keys in steps:
        ids = [f"k{k}" for k in dict.fromkeys(keys)]
        if is_put:
            vecs = rng.standard_normal((len(ids), 8)).astype(np.float32)
            index.put(ids, vecs)
            model.update(zip(ids, vecs, strict=True))
        else:
            index.drop(ids)
            for k in ids:
                model.pop(k, None)
        ids = index.ids
        assert sorted(ids) == sorted(model) and len(index) == len(model)
        assert all(index.row(k) == i and k in index for i, k in enumerate(ids))
        assert "absent" not in index and index.row("absent") is None
        assert "é" not in index and "k1\x00" not in index  # never storable: absent
        index.drop(["é"])
    held = index._mat.read(np.arange(len(index)))
    wanted = [model[k] for k in index.ids]
    assert (held == quantized(normalized(np.array(wanted).reshape(-1, 8)))[0]).all()
    for k, v in model.items():
        assert index.candidates(v, 1) == [[k]]
    if model:  # many queries in one scan: each finds its own
        assert index.candidates(np.array(list(model.values())), 1) == [[k] for k in model]
        # Rows read by id (a question's second hop): the int8 cosine, within 2% of the
        # exact one; absent and unstorable ids left out.
        q = rng.standard_normal(8).astype(np.float32)
        asked = [*list(model)[::2], "absent", "é"]
        got = index.similarity(q, asked)
        assert set(got) == set(list(model)[::2])
        unit_q = normalized(q.reshape(1, 8))[0]
        for k, cos in got.items():
            exact = float(normalized(model[k].reshape(1, 8))[0] @ unit_q)
            assert abs(cos - exact) < 0.02, (k, cos, exact)


def test_the_vector_matrix_file_is_read_back_only_while_it_matches_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart reads the saved int8 matrix instead of decoding every float32 row, but
    only the file the last close wrote: a write after it (a crash before the next
    close), or a store deleted and built again, makes the rows the source again."""
    cfg = _config(tmp_path)
    rows = {f"c{i}": {"content": f"note {i} about {w}"} for i, w in enumerate("abcdefgh")}

    def storage() -> SQLiteVectorStorage:
        return _chunks_vdb(cfg, "mx")

    async def opened() -> SQLiteVectorStorage:
        vdb = storage()
        await vdb.initialize()
        return vdb

    async def main() -> None:
        initialize_share_data()
        vdb = await opened()
        assert vdb._saved is None  # no file yet
        await vdb.upsert(rows)
        expected = await vdb.query("note about c", top_k=4)
        await vdb.finalize()
        stamp, held = (tmp_path / "mx" / f"wikid-vectors-chunks{s}" for s in (".npz", ".i8"))
        assert stamp.is_file() and held.stat().st_size == len(rows) * vdb._dim

        with monkeypatch.context() as env:  # a reader beside the daemon: its own copy
            env.setenv(READ_ONLY_ENV, "1")
            reader = await opened()
            assert reader._saved is not None and isinstance(reader._index._mat, HeapRows)
            assert await reader.query("note about c", top_k=4) == expected
            await reader.finalize()

        vdb = await opened()  # from the file, and the same answers as from the rows
        assert vdb._saved is not None and sorted(vdb._index.ids) == sorted(rows)
        assert await vdb.query("note about c", top_k=4) == expected
        await vdb.upsert({"c9": {"content": "a late note about z"}})
        assert not stamp.exists()  # the stamp went before the rows changed
        assert vdb._db is not None
        vdb._db.release()  # a crash: no close, so the file still holds the old matrix
        vdb._db = None

        vdb = await opened()
        assert vdb._saved is None and "c9" in vdb._index
        assert (await vdb.query("a late note about z", top_k=1))[0]["id"] == "c9"
        await vdb.finalize()

        (tmp_path / "mx" / DB_FILE).unlink()  # built again from nothing: the file is stale
        vdb = await opened()  # the same writes, so the same count and number of writes
        await vdb.upsert({k: {"content": f"other {k}"} for k in rows})
        await vdb.upsert({"c9": {"content": "z"}})
        assert vdb._db is not None
        vdb._db.release()
        vdb._db = None
        vdb = await opened()
        assert vdb._saved is None
        assert (await vdb.query("other c3", top_k=1))[0]["content"] == "other c3"
        await vdb.finalize()

    asyncio.run(main())
