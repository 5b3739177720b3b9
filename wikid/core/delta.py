"""What one batch changed in the wikilink graph.

Why a plain value: it names exactly the nodes, edges and notes that one
``VaultGraph.update`` touched, so the sink re-derives the records of those keys
only (reading their current state from the graph), and a test can replay the
deltas on an old graph to check they give the new one (invariant 1). A crash is
not recovered by replaying deltas: the ledger's ``pending`` keys do that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NodeId = str
EdgeKey = tuple[str, str, str]  # (source node, target node, key)
Attrs = dict[str, Any]


@dataclass
class Delta:
    nodes_added: dict[NodeId, Attrs] = field(default_factory=dict)
    nodes_changed: dict[NodeId, Attrs] = field(default_factory=dict)  # new attributes
    nodes_removed: set[NodeId] = field(default_factory=set)
    edges_added: dict[EdgeKey, Attrs] = field(default_factory=dict)
    edges_changed: dict[EdgeKey, Attrs] = field(default_factory=dict)
    edges_removed: set[EdgeKey] = field(default_factory=set)
    # Notes whose file content changed (their text must be re-chunked downstream),
    # and notes that left the vault.
    notes_changed: set[str] = field(default_factory=set)
    notes_removed: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return any(
            (
                self.nodes_added,
                self.nodes_changed,
                self.nodes_removed,
                self.edges_added,
                self.edges_changed,
                self.edges_removed,
                self.notes_changed,
                self.notes_removed,
            )
        )

    def summary(self) -> dict[str, int]:
        return {
            "nodes_added": len(self.nodes_added),
            "nodes_changed": len(self.nodes_changed),
            "nodes_removed": len(self.nodes_removed),
            "edges_added": len(self.edges_added),
            "edges_changed": len(self.edges_changed),
            "edges_removed": len(self.edges_removed),
            "notes_changed": len(self.notes_changed),
            "notes_removed": len(self.notes_removed),
        }


def diff(
    before_nodes: dict[NodeId, Attrs],
    after_nodes: dict[NodeId, Attrs],
    before_edges: dict[EdgeKey, Attrs],
    after_edges: dict[EdgeKey, Attrs],
) -> Delta:
    """Delta between two snapshots of the same region of the graph."""
    delta = Delta()
    for n, attrs in after_nodes.items():
        if n not in before_nodes:
            delta.nodes_added[n] = attrs
        elif before_nodes[n] != attrs:
            delta.nodes_changed[n] = attrs
    delta.nodes_removed = set(before_nodes) - set(after_nodes)
    for e, attrs in after_edges.items():
        if e not in before_edges:
            delta.edges_added[e] = attrs
        elif before_edges[e] != attrs:
            delta.edges_changed[e] = attrs
    delta.edges_removed = set(before_edges) - set(after_edges)
    return delta
