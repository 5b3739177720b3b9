"""The texts the vector stores embed for a batch: what a question is matched
against. Apart from the store's writes because it is a choice about meaning (and
``VECTOR_TEXTS`` names it: a store built with other texts starts over, keeping its
cached vectors), not about storage.
"""

from __future__ import annotations

from typing import Any

from wikid.store.ids import entity_vdb_id, relation_vdb_id
from wikid.store.ledger import Ops

ENTITY_WORDS = 32  # of an entity's description, in its vector (see vector_rows)
# Which texts the vectors of entities and relations embed: a store built with others
# starts over (its cached vectors kept). "2": the shortened texts of vector_rows.
VECTOR_TEXTS = "2"


def opening(description: str) -> str:
    words = description.split()
    return " ".join(words[:ENTITY_WORDS]) + (" …" if len(words) > ENTITY_WORDS else "")


def vector_rows(ops: Ops) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(entities, relationships, chunks) vector-store rows of a batch's upserts.

    An entity's vector (its ``content``) embeds its name and the first words of
    its description (``ENTITY_WORDS``), not the whole: the description is the
    note's opening, which the note's first chunk embeds already. The graph keeps
    the description whole; LightRAG reads it there, not from the vector rows.
    Measured on a generated 10k-note vault: 94 -> 35 tokens an entity (6.5M ->
    5.7M tokens in all), recall unchanged on the typed vault and on
    vaultofknowledge. Relations keep their context sentences, although chunks
    hold them too: without them (keywords and names only, 39 -> ~15 tokens a
    relation, 3.8M in all) a multi-hop question of vaultofknowledge was lost."""
    ents = {
        entity_vdb_id(n): {
            "content": f"{n}\n{opening(rec['description'])}",
            "entity_name": n,
            **rec,
        }
        for n, rec in ops.entity.items()
        if rec is not None
    }
    rels = {
        relation_vdb_id(rec["src_id"], rec["tgt_id"]): {
            **rec,
            "content": f"{rec['keywords']}\t{rec['src_id']}\n{rec['tgt_id']}\n{rec['description']}",
        }
        for rec in ops.relation.values()
        if rec is not None
    }
    # The whole chunk record, as stock LightRAG gives it: PGVectorStorage stores
    # tokens and order too; the others keep only their meta fields.
    chunks = {k: dict(v) for k, v in ops.chunk.items() if v is not None}
    return ents, rels, chunks
