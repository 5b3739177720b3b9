"""The ids and hashes every layer shares: stdlib only, so that reading one never
imports LightRAG.

Why here: the store names its rows by these ids, the sync layer computes them,
the ask layer and ``export`` split LightRAG's joined fields with ``SEP``; a
value needed in three places belongs to none of their heavy modules.
"""

from __future__ import annotations

import hashlib

SEP = "<SEP>"  # lightrag.constants.GRAPH_FIELD_SEP


def text_hash(text: str) -> str:
    """The key of the embedding and extraction caches: a text, not where it stands."""
    return hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()


def doc_id(path: str) -> str:
    return "doc-" + hashlib.md5(path.encode()).hexdigest()


def entity_vdb_id(name: str) -> str:
    return "ent-" + hashlib.md5(name.encode()).hexdigest()


def relation_vdb_id(src: str, tgt: str) -> str:
    return "rel-" + hashlib.md5((src + tgt).encode()).hexdigest()


def split_sources(joined: str | None) -> list[str]:
    """A ``SEP``-joined LightRAG field (source_id, file_path) as its parts."""
    return [s for s in (joined or "").split(SEP) if s]
