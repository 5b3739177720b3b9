"""Vector retrieval beside LightRAG's ``aquery_data``: its candidates, a fraction of its work.

Why not ``aquery_data`` itself: wikid keeps the first 16 entities, 16 relations and 8
chunks of its answer and picks its own evidence from them (``ask.evidence``), but
``aquery_data`` does much more to produce them. Measured on a generated 13k-note vault
(real MiniLM store, 2 cores), ~185 ms a query:

- ~75 ms in its token truncation, which renders every entity and every relation it
  found (all the edges of each entity found: hundreds) as JSON and tokenizes them all;
- ~45 ms merging chunks, ~11 ms building a context string nobody reads here;
- its ~15 storage calls run one after another.

This module asks the same storages the same questions through their public interface
(``BaseVectorStorage.query``, ``BaseGraphStorage`` batch reads), in LightRAG's order
(local entities and their edges ranked by degree and weight; global relations and their
end entities; chunks by vector, then the chunks the records cite, ranked by similarity
to the question, merged round-robin), but only as far as the pools wikid keeps, and only
the edges that can rank among the kept ones are read. The three vector searches are
started at once, each in its worker thread, then the local and the global records. The
answer has the shape of ``aquery_data``'s ``data``. (numpy and SQLite let go of the GIL;
usearch's graph search holds it, so three graph searches take turns: at 50k, 4-5 ms
each, serial in fact; docs/scale.md, round 11.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from wikid.store.embed import normalized
from wikid.store.ids import split_sources

LOCAL = ("local", "hybrid", "mix")  # modes that search entities by the low-level keywords
GLOBAL = ("global", "hybrid", "mix")  # modes that search relations by the high-level ones
CHUNKS = ("mix", "naive")  # modes that search chunks by the question


async def retrieve(
    rag: Any,
    question: str,
    high: list[str],
    low: list[str],
    mode: str,
    pools: dict[str, int],
    words: Sequence[str] = (),
) -> dict[str, Any]:
    """Entities, relationships and chunks for a question (no LLM: the keywords are
    given), each list in retrieval order and at most its pool long; the question's
    ``question_vector``; and ``word_vectors``, of ``words`` (the ask layer's walk
    wants its question's words by meaning: embedded in this one call, the model's runs
    are spread over the cores together, not in two calls that each leave one idle)."""
    ll, hl = ", ".join(low), ", ".join(high)
    texts = {"question": question}
    if mode in LOCAL and ll:
        texts["ll"] = ll
    if mode in GLOBAL and hl:
        texts["hl"] = hl
    extra = list(dict.fromkeys(words))
    embedded = await rag.embedding_func([*texts.values(), *extra], context="query")
    vectors = dict(zip(texts, embedded[: len(texts)], strict=True))
    word_vectors = dict(zip(extra, embedded[len(texts) :], strict=True))

    async def search(storage: Any, purpose: str, k: int) -> list[dict[str, Any]]:
        if purpose not in vectors or k <= 0:
            return []
        found: list[dict[str, Any]] = await storage.query(
            texts[purpose], top_k=k, query_embedding=vectors[purpose]
        )
        return found

    # The three searches at once, each in its worker thread (an exact scan and SQLite
    # let go of the GIL, a graph search does not), and then the local and the global
    # records at once: each depends only on its own search. LightRAG's own query
    # gathers them the same way.
    wants_chunks = mode in CHUNKS
    ent_hits, rel_hits, chunk_hits = await asyncio.gather(
        search(rag.entities_vdb, "ll", pools["entity"]),
        search(rag.relationships_vdb, "hl", pools["relation"]),
        search(rag.chunks_vdb, "question", pools["chunk"] if wants_chunks else 0),
    )
    graph = rag.chunk_entity_relation_graph

    async def local() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        entities = await _nodes(graph, [h["entity_name"] for h in ent_hits])
        return entities, await _edges_of(graph, [e["entity_name"] for e in entities], pools)

    async def global_() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        relations = await _edges(graph, [(h["src_id"], h["tgt_id"]) for h in rel_hits])
        ends = [n for r in relations for n in (r["src_id"], r["tgt_id"])]
        return await _nodes(graph, list(dict.fromkeys(ends))), relations

    (local_entities, local_relations), (global_entities, global_relations) = await asyncio.gather(
        local(), global_()
    )

    entities = _round_robin([local_entities, global_entities], key=lambda e: e["entity_name"])
    relations = _round_robin(
        [local_relations, global_relations],
        key=lambda r: tuple(sorted((r["src_id"], r["tgt_id"]))),
    )
    entities, relations = entities[: pools["entity"]], relations[: pools["relation"]]
    if mode == "naive":
        entities, relations = [], []
    chunks = await _chunks(rag, vectors["question"], chunk_hits, entities, relations, pools)
    # The question's vector too: the ask layer scores a second hop's chunks by it.
    return {
        "entities": entities,
        "relationships": relations,
        "chunks": chunks,
        "question_vector": np.asarray(vectors["question"], np.float32),
        "word_vectors": word_vectors,
    }


async def _nodes(graph: Any, names: list[str]) -> list[dict[str, Any]]:
    """Entity records for these names, in this order (a name with no node is left out)."""
    if not names:
        return []
    found = await graph.get_nodes_batch(names)
    return [{**found[n], "entity_name": n} for n in names if found.get(n) is not None]


def _relation(pair: tuple[str, str], props: dict[str, Any]) -> dict[str, Any]:
    return {
        **props,
        "src_id": props.get("src_id", pair[0]),
        "tgt_id": props.get("tgt_id", pair[1]),
        "weight": props.get("weight", 1.0),
    }


async def _edges(graph: Any, pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Relation records for these node pairs, in this order (missing ones left out)."""
    if not pairs:
        return []
    found = await graph.get_edges_batch([{"src": a, "tgt": b} for a, b in pairs])
    return [_relation(p, found[p]) for p in pairs if found.get(p) is not None]


async def _edges_of(graph: Any, names: list[str], pools: dict[str, int]) -> list[dict[str, Any]]:
    """The edges of these entities, best first as LightRAG ranks them (the degrees of
    both ends, then the weight). Only the edges whose degree can still place them among
    the pool are read in full: a hub's thousand edges cost a degree each, not a row."""
    if not names:
        return []
    by_node = await graph.get_nodes_edges_batch(names)
    pairs = list(dict.fromkeys(tuple(sorted(e)) for n in names for e in by_node.get(n) or []))
    if not pairs:
        return []
    degrees = await graph.edge_degrees_batch(pairs)
    ranked = sorted(pairs, key=lambda p: -degrees.get(p, 0))
    keep = pools["relation"]
    if len(ranked) > keep:  # ties at the cut are kept: the weight decides among them
        floor = degrees.get(ranked[keep - 1], 0)
        ranked = [p for p in ranked if degrees.get(p, 0) >= floor]
    edges = await _edges(graph, ranked)
    edges.sort(
        key=lambda r: (-degrees.get(tuple(sorted((r["src_id"], r["tgt_id"]))), 0), -r["weight"])
    )
    return edges


def _round_robin(lists: list[list[dict[str, Any]]], key: Any) -> list[dict[str, Any]]:
    """a[0], b[0], a[1], b[1], ... without repeats: how LightRAG merges local and global
    records, and vector, entity and relation chunks."""
    out, seen = [], set()
    for i in range(max(map(len, lists), default=0)):
        for rows in lists:
            if i < len(rows) and key(rows[i]) not in seen:
                seen.add(key(rows[i]))
                out.append(rows[i])
    return out


async def _chunks(
    rag: Any,
    question: np.ndarray,
    hits: list[dict[str, Any]],
    entities: list[dict[str, Any]],
    relations: list[dict[str, Any]],
    pools: dict[str, int],
) -> list[dict[str, Any]]:
    """The vector hits, then the chunks the entities and relations cite, each source
    ranked by similarity to the question, merged round-robin and cut to the pool."""
    k = pools["chunk"]
    by_vector = [
        {"chunk_id": h["id"], "content": h.get("content", ""), "file_path": h.get("file_path")}
        for h in hits
        if "content" in h
    ]
    cited_e = _cited(entities)
    seen_e = set(cited_e)
    cited_r = [c for c in _cited(relations) if c not in seen_e]
    ranked_e, ranked_r = await _by_similarity(rag.chunks_vdb, question, cited_e, cited_r, k)
    rows = await rag.text_chunks.get_by_ids(ranked_e + ranked_r) if ranked_e or ranked_r else []
    row_of = dict(zip(ranked_e + ranked_r, rows, strict=True))

    def as_chunk(cid: str) -> dict[str, Any] | None:
        row = row_of.get(cid)
        if not row or "content" not in row:
            return None
        return {"chunk_id": cid, "content": row["content"], "file_path": row.get("file_path")}

    from_e = [c for c in map(as_chunk, ranked_e) if c]
    from_r = [c for c in map(as_chunk, ranked_r) if c]
    return _round_robin([by_vector, from_e, from_r], key=lambda c: c["chunk_id"])[:k]


def _cited(records: Iterable[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(c for r in records for c in split_sources(r.get("source_id"))))


async def _by_similarity(
    chunks_vdb: Any, question: np.ndarray, first: list[str], second: list[str], k: int
) -> tuple[list[str], list[str]]:
    """Each list's chunk ids, most similar to the question first, ``k`` of each."""
    if not first and not second:
        return [], []
    found = await chunk_vectors(chunks_vdb, first + second)
    q = np.asarray(question, np.float32)
    q = q / (np.linalg.norm(q) or 1.0)

    def best(ids: list[str]) -> list[str]:
        scored = []
        for cid in ids:
            if cid in found:
                v = np.asarray(found[cid], np.float32)
                scored.append((-float(v @ q) / (float(np.linalg.norm(v)) or 1.0), cid))
        return [cid for _, cid in sorted(scored)[:k]]

    return best(first), best(second)


async def nearest_chunks(rag: Any, ids: list[str], k: int) -> dict[str, list[dict[str, Any]]]:
    """For each of these stored chunks, the ``k`` stored chunks nearest it by meaning,
    best first (itself among them), as ``query`` returns them (``file_path``,
    ``distance``: the cosine). wikid's SQLite storage scans its rows once for all of
    them (``nearest``); another storage is asked once per chunk."""
    vdb = rag.chunks_vdb
    found = await chunk_vectors(vdb, ids)
    keys = [c for c in dict.fromkeys(ids) if c in found]
    if not keys or k <= 0:
        return {}
    if hasattr(vdb, "nearest"):
        matrix = np.stack([np.asarray(found[c], np.float32) for c in keys])
        return dict(zip(keys, await vdb.nearest(matrix, k), strict=True))
    out = {c: await vdb.query("", top_k=k, query_embedding=found[c]) for c in keys}
    # PostgreSQL's rows come ranked but without their cosine: computed from the vectors.
    unscored = list({h["id"] for hits in out.values() for h in hits if "distance" not in h})
    theirs = await chunk_vectors(vdb, unscored) if unscored else {}
    for c, hits in out.items():
        for h in hits:
            if "distance" not in h and h["id"] in theirs:
                h["distance"] = _cosine(found[c], theirs[h["id"]])
    return out


async def similarity(rag: Any, vector: Any, ids: list[str]) -> dict[str, float]:
    """The cosine of ``vector`` with each stored chunk of ``ids`` (absent ones left out).
    wikid's SQLite storage reads its int8 rows by id; another storage's vectors are
    fetched and scored exactly."""
    vdb = rag.chunks_vdb
    if not ids:
        return {}
    if hasattr(vdb, "similarity"):
        found: dict[str, float] = await vdb.similarity(np.asarray(vector, np.float32), ids)
        return found
    vectors = await chunk_vectors(vdb, ids)
    if not vectors:
        return {}
    keys = list(vectors)
    unit = normalized(np.asarray([vectors[k] for k in keys], np.float32))
    q = normalized(np.asarray(vector, np.float32).reshape(1, -1))[0]
    return dict(zip(keys, (unit @ q).tolist(), strict=True))


def _cosine(a: Any, b: Any) -> float:
    x, y = normalized(np.asarray([a, b], np.float32))
    return float(x @ y)


async def chunk_vectors(chunks_vdb: Any, ids: list[str]) -> dict[str, Any]:
    """The stored vectors of these chunks (absent ones left out). wikid's SQLite storage
    gives float32 arrays; a stock one gives lists of the same numbers."""
    fetch = getattr(chunks_vdb, "get_arrays_by_ids", chunks_vdb.get_vectors_by_ids)
    found: dict[str, Any] = await fetch(ids)
    return found
