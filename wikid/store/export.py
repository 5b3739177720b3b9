"""Read a store back out: entities, relations (with source_ids), chunks, vector ids.

Why read the store and not the ledger: export is how two stores are compared
(incremental vs fresh, before vs after a crash), so it must show what LightRAG
itself holds, including anything orphaned, not what wikid believes it wrote.
Output is sorted and has no timestamps, so equal stores export equal bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import networkx as nx

from wikid.store import postgres
from wikid.store.backends import find_workspaces
from wikid.store.ids import SEP, split_sources
from wikid.store.rag import Store

VOLATILE = {"created_at", "updated_at", "id", "source", "target"}


async def _kv_keys(storage: Any) -> list[str]:
    data = getattr(storage, "_data", None)
    if data is not None:
        return sorted(data.keys())
    if hasattr(storage, "all_keys"):
        return sorted(await storage.all_keys())
    if type(storage).__name__.startswith("PG"):
        return await postgres.ids(storage)
    raise TypeError(f"cannot list keys of {type(storage).__name__}")


async def _vector_ids(storage: Any) -> list[str]:
    if hasattr(type(storage), "client_storage"):
        client = await storage.client_storage
        return sorted(row["__id__"] for row in client["data"])
    if hasattr(storage, "all_keys"):
        return sorted(await storage.all_keys())
    if type(storage).__name__.startswith("PG"):
        return await postgres.ids(storage)
    raise TypeError(f"cannot list vectors of {type(storage).__name__}")


def _split(value: str | None) -> list[str]:
    return sorted(split_sources(value))


def _origin(item: dict[str, Any]) -> dict[str, str]:
    """Extracted items say so ("llm"); structural ones carry no origin field."""
    return {"origin": item["origin"]} if item.get("origin") else {}


async def export_store(store: Store) -> dict[str, Any]:
    with store.snapshot():
        return await _export(store)


async def _export(store: Store) -> dict[str, Any]:
    r = store.rag
    graph = r.chunk_entity_relation_graph
    entities = []
    for node in await graph.get_all_nodes():
        entities.append(
            {
                "name": node["id"],
                "type": node.get("entity_type"),
                "description": node.get("description"),
                "source_ids": _split(node.get("source_id")),
                "file_paths": _split(node.get("file_path")),
                "title": node.get("title"),
                "tags": [t for t in (node.get("tags") or "").split(",") if t],
                **_origin(node),
            }
        )
    relations = []
    for edge in await graph.get_all_edges():
        src, tgt = sorted((edge["source"], edge["target"]))
        relations.append(
            {
                "src": src,
                "tgt": tgt,
                "description": edge.get("description"),
                "keywords": edge.get("keywords"),
                "weight": float(edge.get("weight", 0)),
                "source_ids": _split(edge.get("source_id")),
                "file_paths": _split(edge.get("file_path")),
                **_origin(edge),
            }
        )
    chunk_ids = await _kv_keys(r.text_chunks)
    chunks = []
    for cid, row in zip(chunk_ids, await r.text_chunks.get_by_ids(chunk_ids), strict=True):
        chunks.append(
            {
                "id": cid,
                "file_path": row.get("file_path"),
                "order": row.get("chunk_order_index"),
                "content": row.get("content"),
            }
        )
    docs = []
    doc_ids = await _kv_keys(r.full_docs)
    for did, row, status in zip(
        doc_ids,
        await r.full_docs.get_by_ids(doc_ids),
        await r.doc_status.get_by_ids(doc_ids),
        strict=True,
    ):
        docs.append(
            {
                "id": did,
                "file_path": row.get("file_path"),
                "status": (status or {}).get("status"),
                "chunks": sorted((status or {}).get("chunks_list") or []),
            }
        )
    return {
        "entities": sorted(entities, key=lambda e: e["name"]),
        "relations": sorted(relations, key=lambda e: (e["src"], e["tgt"])),
        "chunks": chunks,
        "documents": docs,
        "vectors": {
            "entities": await _vector_ids(r.entities_vdb),
            "relationships": await _vector_ids(r.relationships_vdb),
            "chunks": await _vector_ids(r.chunks_vdb),
        },
    }


async def export_workdir(workdir: Path, workspace: str | None = None) -> dict[str, Any]:
    """Open a store read-only (no embedding model needed) and export it.

    LightRAG caches a workspace's data process-wide on first open: call this once per
    workspace per process (``wikid export`` is its own process)."""
    found = find_workspaces(workdir)
    if workspace is None:
        if len(found) != 1:
            raise ValueError(
                f"{workdir} holds workspaces {sorted(found)}; name one with --workspace"
            )
        workspace = next(iter(found))
    if workspace not in found:
        raise ValueError(f"{workdir} holds no wikid store named {workspace!r}")
    store = Store(workdir, workspace, None, backend=found[workspace], read_only=True)
    await store.open()
    try:
        return await export_store(store)
    finally:
        await store.close()


def to_graphml(data: dict[str, Any], path: Path) -> None:
    g = nx.Graph()
    for e in data["entities"]:
        g.add_node(
            e["name"],
            entity_type=e["type"] or "",
            description=e["description"] or "",
            source_id=SEP.join(e["source_ids"]),
            file_path=SEP.join(e["file_paths"]),  # vault paths: a graph tool leads back
            title=e.get("title") or e["name"],
            tags=",".join(e.get("tags") or []),
        )
    for rel in data["relations"]:
        g.add_edge(
            rel["src"],
            rel["tgt"],
            description=rel["description"] or "",
            keywords=rel["keywords"] or "",
            weight=rel["weight"],
            source_id=SEP.join(rel["source_ids"]),
            file_path=SEP.join(rel["file_paths"]),
        )
    nx.write_graphml(g, str(path))


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True)
