"""An edge of the wikilink graph: its key and its attributes, sparse; and the graph
as ``wikid graph --json`` prints it.

Why apart from ``graph``: what an edge holds is its own question (memory: ~100k of
them at 13k notes), and the graph's incremental logic reads better without it.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from wikid.core._markdown import RawLink
from wikid.core.delta import Attrs
from wikid.core.resolve import Resolution
from wikid.core.vault import is_note

# What an edge's attribute holds unless it says otherwise. Why sparse: a 13k-note vault
# has ~100k edges, and a dict of 10 keys takes 352 bytes against 224 for up to 5 (9 MB
# at 13k, measured); a tag edge holds only its kind.
EDGE_DEFAULTS: dict[str, Any] = {
    "heading": None,
    "block": None,
    "display": None,
    "ambiguous": False,
    "line": None,
    "section": (),
    "context": "",
    "markdown": False,
    "alias_of": None,
}


class EdgeAttrs(dict[str, Any]):
    """An edge's attributes, holding only what differs from ``EDGE_DEFAULTS``:
    ``d[key]`` reads the default for a key it does not hold (``d.get(key)`` gives
    None, as for any dict)."""

    __slots__ = ()

    def __missing__(self, key: str) -> Any:
        return EDGE_DEFAULTS[key]


class LinkGraph(nx.MultiDiGraph):  # type: ignore[misc]
    """A MultiDiGraph whose edges keep sparse attributes (``EdgeAttrs``)."""

    edge_attr_dict_factory = EdgeAttrs

    def add_shared(self, u: str, v: str, key: str, attrs: EdgeAttrs) -> None:
        """Add the edge ``(u, v, key)`` holding ``attrs`` itself, not a copy, so that
        edges with equal attributes share one dict: the links of one line (a list of
        links is one context), every tag edge. Why: a dict per edge was 18 MB of a
        13k-note graph. Safe because an edge's attributes are never changed in place:
        an update removes a note's out-edges and adds them again."""
        self.add_edge(u, v, key=key)
        self._succ[u][v][key] = attrs  # the same key dict as ``_pred[v][u]``


TAG_ATTRS = EdgeAttrs(kind="tag")  # every tag edge's


def sparse(attrs: Attrs) -> Attrs:
    return {k: v for k, v in attrs.items() if k not in EDGE_DEFAULTS or EDGE_DEFAULTS[k] != v}


_KEYS = tuple(str(i) for i in range(1024))


def edge_key(i: int) -> str:
    """An edge's key (its link's index in the note): one string object per index, not
    one per edge (a 13k-note vault has ~100k edges)."""
    return _KEYS[i] if i < len(_KEYS) else str(i)


def link_attrs(link: RawLink, r: Resolution) -> Attrs:
    to_note = r.path is None or is_note(r.path)
    sub = link.subpath if to_note else ""  # a '#' on a file is a fragment, never a heading
    block = sub[1:] if sub.startswith("^") else None
    return sparse(
        {
            "kind": link.kind,
            "heading": sub if sub and block is None else None,
            "block": block,
            "display": link.display,
            "ambiguous": r.ambiguous,
            "line": link.line,
            "section": link.section,  # the note's own tuple, not a copy per edge
            "context": link.context,
            "markdown": link.markdown,
            "alias_of": r.alias_of,
        }
    )


def to_json(g: nx.MultiDiGraph) -> dict[str, list[dict[str, Any]]]:
    """The graph as ``wikid graph --json`` prints it: sorted, so it diffs cleanly."""
    nodes = [
        {
            "id": n,
            "kind": d["kind"],
            "title": d["title"],
            "aliases": d["aliases"],
            "tags": d["tags"],
            "path": d["path"],
            # The file a sync-conflict copy copies (``core.conflicts``); null for the rest.
            "conflict_of": d.get("conflict_of"),
        }
        for n, d in sorted(g.nodes(data=True))
    ]
    edges = [
        {
            "source": u,
            "target": v,
            "kind": d["kind"],
            "heading": d["heading"],
            "block": d["block"],
            "display": d["display"],
            "ambiguous": d["ambiguous"],
            "line": d["line"],
            "context": d["context"],
            "alias_of": d["alias_of"],
        }
        for u, v, k, d in sorted(g.edges(keys=True, data=True), key=lambda e: (e[0], e[2], e[1]))
    ]
    return {"nodes": nodes, "edges": edges}
