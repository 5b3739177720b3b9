"""How the wikilink graph is held: ``LinkGraph``, its links' keys and attributes and
its nodes' attributes, all sparse; and the graph as ``wikid graph --json`` prints it.

Why apart from ``graph``: what the graph holds is its own question (memory: ~150k
links and ~56k nodes at 50k notes), and the graph's incremental logic reads better
without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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


# What a node's attribute holds unless it says otherwise: most notes have no aliases,
# tags, type, summary or error. A note's dict of 9 keys took 272 bytes and its two
# empty lists 112 more; one of up to 5 keys takes 184 (50k notes: ~10 MB, measured).
NODE_DEFAULTS: dict[str, Any] = {
    "aliases": (),
    "tags": (),
    "path": None,
    "type": None,
    "summary": None,
    "error": None,
    "conflict_of": None,
}


class NodeAttrs(dict[str, Any]):
    """A node's attributes, holding only what differs from ``NODE_DEFAULTS`` (``kind``
    and ``title`` always): ``d[key]`` reads the default for a key it does not hold."""

    __slots__ = ()

    def __missing__(self, key: str) -> Any:
        return NODE_DEFAULTS[key]


def node_attrs(attrs: Attrs) -> Attrs:
    """``attrs`` without what ``NODE_DEFAULTS`` says anyway."""
    return {k: v for k, v in attrs.items() if k not in NODE_DEFAULTS or NODE_DEFAULTS[k] != v}


Link = tuple[str, str, str, EdgeAttrs]  # (source, target, key, attributes)


class LinkGraph(nx.DiGraph):  # type: ignore[misc]
    """A DiGraph whose pair ``(u, v)`` holds all its links as one flat tuple, ``(key,
    attrs, key, attrs, ...)``, in the order they were added: the same object in
    ``_succ[u][v]`` and ``_pred[v][u]``, as networkx keeps an edge's dict.

    Why not a MultiDiGraph: it keeps a dict of keys for every pair, 184 bytes where a
    one-link tuple takes 56, and nearly every pair has one link (146k pairs and 147k
    links in a generated 50k-note vault: 26 MB of key dicts, measured). The pair-level
    API (``succ``, ``pred``, ``in_edges(n)``, ``has_edge(u, v)``, ``remove_node``) is
    networkx's; a link is read with ``links_out``, ``links_in``, ``links`` and ``link``,
    and written with ``add_link`` and ``remove_link`` only (``add_edge`` would store a
    dict where a tuple belongs, so it raises). An attribute dict is never changed in
    place, so links with equal attributes share one (``EdgeAttrs``): the links of one
    line, every tag edge."""

    node_attr_dict_factory = NodeAttrs

    def add_edge(self, u: str, v: str, **attr: Any) -> None:
        raise TypeError("LinkGraph holds links: use add_link(u, v, key, attrs)")

    def _put(self, u: str, v: str, links: tuple[Any, ...]) -> None:
        if links:
            self._succ[u][v] = self._pred[v][u] = links
        elif v in self._succ[u]:
            del self._succ[u][v], self._pred[v][u]

    def add_link(self, u: str, v: str, key: str, attrs: EdgeAttrs) -> None:
        """Add the link ``key`` from ``u`` to ``v`` holding ``attrs`` itself, not a copy
        (a link of that key already there is replaced). Missing nodes are added bare,
        as networkx adds them."""
        for n in (u, v):
            if n not in self._node:
                self.add_node(n)
        held = self._succ[u].get(v, ())
        self._put(u, v, (*_without(held, key), key, attrs))

    def remove_link(self, u: str, v: str, key: str) -> None:
        """Remove the link if it is there; the pair goes with its last link."""
        if u in self._succ and v in self._succ[u]:
            self._put(u, v, _without(self._succ[u][v], key))

    def remove_links_out(self, u: str, keep: Callable[[EdgeAttrs], bool]) -> None:
        """Remove every link out of ``u`` except those ``keep`` holds."""
        for v, held in list(self._succ[u].items()):
            kept: tuple[Any, ...] = ()
            for i in range(0, len(held), 2):
                if keep(held[i + 1]):
                    kept += held[i : i + 2]
            if len(kept) != len(held):
                self._put(u, v, kept)

    def link(self, u: str, v: str, key: str) -> EdgeAttrs | None:
        held = self._succ.get(u, {}).get(v, ())
        for i in range(0, len(held), 2):
            if held[i] == key:
                return held[i + 1]  # type: ignore[no-any-return]
        return None

    def between(self, u: str, v: str) -> list[EdgeAttrs]:
        """The attributes of every link from ``u`` to ``v``."""
        return list(self._succ.get(u, {}).get(v, ())[1::2])

    def links_out(self, n: str) -> Iterator[Link]:
        for v, held in self._succ[n].items():
            for i in range(0, len(held), 2):
                yield n, v, held[i], held[i + 1]

    def links_in(self, n: str) -> Iterator[Link]:
        for u, held in self._pred[n].items():
            for i in range(0, len(held), 2):
                yield u, n, held[i], held[i + 1]

    def links(self) -> Iterator[Link]:
        for u in self._succ:
            yield from self.links_out(u)

    def number_of_links(self) -> int:
        return sum(len(held) // 2 for nbrs in self._succ.values() for held in nbrs.values())


def _without(held: tuple[Any, ...], key: str) -> tuple[Any, ...]:
    for i in range(0, len(held), 2):
        if held[i] == key:
            return held[:i] + held[i + 2 :]
    return held


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


def to_json(g: LinkGraph) -> dict[str, list[dict[str, Any]]]:
    """The graph as ``wikid graph --json`` prints it: sorted, so it diffs cleanly."""
    nodes = [
        {
            "id": n,
            "kind": d["kind"],
            "title": d["title"],
            "aliases": list(d["aliases"]),
            "tags": list(d["tags"]),
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
        for u, v, k, d in sorted(g.links(), key=lambda e: (e[0], e[2], e[1]))
    ]
    return {"nodes": nodes, "edges": edges}
