"""Helpers for tests and benchmarks, wikid's own and a user's (in the way of
``structlog.testing``): an embedder that costs microseconds, and snapshots of the
wikilink graph to compare an incremental graph with a fresh one.

Why public: the hash embedder was copied into four benchmarks from one of them, each
with a ``type: ignore``; a user testing their own tooling on a wikid store needs it
too. Importing this module loads numpy, never the model."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from wikid.store.embed import MINILM_DIM, MINILM_ID, MINILM_MAX_TOKENS

if TYPE_CHECKING:
    from wikid.core.delta import Delta
    from wikid.core.graph import VaultGraph

__all__ = ["HashEmbedder", "Snapshot", "assert_same", "replay", "snapshot"]

Snapshot = tuple[dict[str, dict[str, Any]], dict[tuple[str, str, str], dict[str, Any]]]


class HashEmbedder:
    """Deterministic unit vectors from the texts' hashes (``store.embed.Embedder``): what
    is timed is the store, not the model. Same id and dimension as MiniLM, so a store
    made with it is opened as MiniLM's; ``texts`` lists every text it was given."""

    model_id = MINILM_ID
    dim = MINILM_DIM
    max_tokens = MINILM_MAX_TOKENS
    per_text = True  # each text's vector is its hash's

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        out = np.empty((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.md5(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


def snapshot(vg: VaultGraph) -> Snapshot:
    """The graph's nodes and edges with their attributes, as plain dicts."""
    nodes = {n: dict(d) for n, d in vg.g.nodes(data=True)}
    edges = {(u, v, k): dict(d) for u, v, k, d in vg.g.links()}
    return nodes, edges


def replay(before: Snapshot, delta: Delta) -> Snapshot:
    """What a consumer that only sees deltas would hold afterwards."""
    nodes = {n: dict(d) for n, d in before[0].items()}
    edges = {k: dict(d) for k, d in before[1].items()}
    for n in delta.nodes_removed:
        nodes.pop(n)
    nodes.update(delta.nodes_added)
    nodes.update(delta.nodes_changed)
    for e in delta.edges_removed:
        edges.pop(e)
    edges.update(delta.edges_added)
    edges.update(delta.edges_changed)
    return nodes, edges


def assert_same(a: Snapshot, b: Snapshot) -> None:
    """Equal node for node and edge for edge, with a readable first difference."""
    for n in sorted(set(a[0]) | set(b[0])):
        assert a[0].get(n) == b[0].get(n), f"node {n!r}: {a[0].get(n)} != {b[0].get(n)}"
    for e in sorted(set(a[1]) | set(b[1])):
        assert a[1].get(e) == b[1].get(e), f"edge {e!r}: {a[1].get(e)} != {b[1].get(e)}"
