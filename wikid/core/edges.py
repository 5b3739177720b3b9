"""How the wikilink graph is held: ``LinkGraph``, its links' keys and attributes and
its nodes' attributes, all sparse; and the graph as ``wikid graph --json`` prints it.

Why apart from ``graph``: what the graph holds is its own question (memory: ~150k
links and ~56k nodes at 50k notes), and the graph's incremental logic reads better
without it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
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
    return _without_defaults(attrs, NODE_DEFAULTS)


Link = tuple[str, str, str, EdgeAttrs]  # (source, target, key, attributes)


class LinkGraph(nx.DiGraph):  # type: ignore[misc]
    """A DiGraph whose pair ``(u, v)`` holds all its links as one flat tuple, ``(key,
    attrs, key, attrs, ...)``, in the order they were added: the same object in
    ``_succ[u][v]`` and ``_pred[v][u]``, as networkx keeps an edge's dict.

    Why not a MultiDiGraph: it keeps a dict of keys for every pair, 184 bytes where a
    one-link tuple takes 56, and nearly every pair has one link (146k pairs and 147k
    links in a generated 50k-note vault: 26 MB of key dicts, measured). The pair-level
    API (``succ``, ``pred``, ``in_edges(n)``, ``has_edge(u, v)``, ``remove_node``) is
    networkx's. Links are read with ``links_out``, ``links_in``, ``links``, ``links_of``
    and ``between``, and written with ``add_links``, ``remove_links`` and
    ``remove_links_out`` only (``add_edge`` would store a dict where a tuple belongs, so
    it raises). An attribute dict is never changed in place, so links with equal
    attributes share one (``EdgeAttrs``): the links of one line, every tag edge."""

    node_attr_dict_factory = NodeAttrs

    def add_edge(self, u: str, v: str, **attr: Any) -> None:
        raise TypeError("LinkGraph holds links: use add_links([(u, v, key, attrs)])")

    def _put(self, u: str, v: str, links: tuple[Any, ...]) -> None:
        if links:
            self._succ[u][v] = self._pred[v][u] = links
        elif v in self._succ[u]:
            del self._succ[u][v], self._pred[v][u]

    def add_links(self, links: Iterable[Link]) -> None:
        """Add links, each ``(source, target, key, attrs)`` holding ``attrs`` itself, not
        a copy; every pair's tuple is made once, so a note that links one target 100,000
        times costs linear time, where a tuple made again for each link was quadratic.
        A key given twice, or already there, keeps the last attributes given. Missing
        nodes are added bare, as networkx adds them."""
        new: dict[tuple[str, str], dict[str, EdgeAttrs]] = {}
        for u, v, key, attrs in links:
            new.setdefault((u, v), {})[key] = attrs
        for (u, v), keyed in new.items():
            for n in (u, v):
                if n not in self._node:
                    self.add_node(n)
            kept = [(k, a) for k, a in _pairs(self._succ[u].get(v, ())) if k not in keyed]
            self._put(u, v, _flat([*kept, *keyed.items()]))

    def remove_links(self, links: Iterable[tuple[str, str, str]]) -> None:
        """Remove the links ``(source, target, key)`` that are there, each pair's tuple
        made once (a pair goes with its last link)."""
        for (u, v), keys in _by_pair(links).items():
            if u in self._succ and v in self._succ[u]:
                self._put(u, v, _flat((k, a) for k, a in _pairs(self._succ[u][v]) if k not in keys))

    def remove_links_out(self, u: str, keep: Callable[[EdgeAttrs], bool]) -> None:
        """Remove every link out of ``u`` except those ``keep`` holds."""
        for v, held in list(self._succ[u].items()):
            kept = _flat((k, a) for k, a in _pairs(held) if keep(a))
            if len(kept) != len(held):
                self._put(u, v, kept)

    def links_of(self, links: Iterable[tuple[str, str, str]]) -> Iterator[Link]:
        """Those of the links ``(source, target, key)`` that are there, with their
        attributes: each pair read once."""
        for (u, v), keys in _by_pair(links).items():
            for k, a in _pairs(self._succ.get(u, {}).get(v, ())):
                if k in keys:
                    yield u, v, k, a

    def between(self, u: str, v: str) -> list[EdgeAttrs]:
        """The attributes of every link from ``u`` to ``v``."""
        return list(self._succ.get(u, {}).get(v, ())[1::2])

    def links_out(self, n: str) -> Iterator[Link]:
        for v, held in self._succ[n].items():
            for k, a in _pairs(held):
                yield n, v, k, a

    def links_in(self, n: str) -> Iterator[Link]:
        for u, held in self._pred[n].items():
            for k, a in _pairs(held):
                yield u, n, k, a

    def links(self) -> Iterator[Link]:
        for u in self._succ:
            yield from self.links_out(u)

    def number_of_links(self) -> int:
        return sum(len(held) // 2 for nbrs in self._succ.values() for held in nbrs.values())


def _pairs(held: tuple[Any, ...]) -> Iterator[tuple[str, EdgeAttrs]]:
    """A pair's links, (key, attrs) each, from its flat tuple."""
    return zip(held[::2], held[1::2], strict=True)


def _flat(links: Iterable[tuple[str, EdgeAttrs]]) -> tuple[Any, ...]:
    """A pair's flat tuple from its links, (key, attrs) each."""
    return tuple(itertools.chain.from_iterable(links))


def _by_pair(links: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str], set[str]]:
    pairs: dict[tuple[str, str], set[str]] = {}
    for u, v, key in links:
        pairs.setdefault((u, v), set()).add(key)
    return pairs


TAG_ATTRS = EdgeAttrs(kind="tag")  # every tag edge's


def sparse(attrs: Attrs) -> Attrs:
    """``attrs`` without what ``EDGE_DEFAULTS`` says anyway."""
    return _without_defaults(attrs, EDGE_DEFAULTS)


def _without_defaults(attrs: Attrs, defaults: dict[str, Any]) -> Attrs:
    return {k: v for k, v in attrs.items() if k not in defaults or defaults[k] != v}


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
