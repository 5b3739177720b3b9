"""The mapping from the wikilink graph to LightRAG records: a pure function.

Why pure: the store must always equal what a fresh build of the vault would
give. Every record here is computed from the current ``VaultGraph`` (and the
note's chunks) alone, never from what was written before, so writing the
records of the keys a delta touched keeps that equality by construction.

Choices (ARCHITECTURE.md repeats them):
- a note is an entity named by its title (qualified by folder, then by path,
  when names collide); type = frontmatter ``type`` or "note";
- tags are entities "#name" of type "tag"; ghosts are entities of type
  "unresolved"; attachments that something links to are type "attachment".
  These exist only while evidence (a link or tag in some chunk) exists;
- every link becomes evidence on the undirected relation between the two
  entities; all links between one pair merge into one relation whose weight
  is the number of distinct evidence chunks;
- self links give no relation (LightRAG refuses self-loops).
"""

from __future__ import annotations

import bisect
import itertools
import posixpath
from collections.abc import Collection, Iterable
from typing import Any

from lightrag.utils import normalize_entity_name

from wikid.core._groups import Groups
from wikid.core.chunk import Chunk
from wikid.core.graph import BODY_KINDS, GHOST, TAG, VaultGraph
from wikid.core.note import Note
from wikid.core.vault import is_canvas
from wikid.store.ids import SEP

DESCRIPTION_MAX = 600
# A note's chunk ids and their start lines, in order: all that the records of other
# keys need of its chunks (a source id, the chunk holding a link's line).
Spans = tuple[tuple[str, ...], tuple[int, ...]]
# Notes whose chunks stay cached between batches: chunking again costs a millisecond
# or so a note, and every note's chunks held at once cost ~35 MB at 13k notes.
CHUNK_CACHE_NOTES = 2048
Record = dict[str, Any]


def relation_key(a: str, b: str) -> str:
    """Store key of an undirected relation between two entity names."""
    return "\x1f".join(sorted((a, b)))


def pair(u: str, v: str) -> tuple[str, str]:
    return (u, v) if u <= v else (v, u)


# -- names ---------------------------------------------------------------------


def _base_name(node: str, attrs: dict[str, Any]) -> str:
    kind = attrs["kind"]
    if kind == "tag":
        raw = "#" + node[len(TAG) :]
    elif kind == "ghost":
        raw = node[len(GHOST) :]
    elif kind == "attachment":
        raw = node.rsplit("/", 1)[-1]
    else:
        raw = attrs["title"]
    return normalize_entity_name(raw) or normalize_entity_name(f"{raw} ({kind})") or node


def _qualified(node: str, attrs: dict[str, Any], base: str, level: int) -> str:
    kind = attrs["kind"]
    if kind == "ghost":
        tail = "unresolved" if level == 1 else node
    elif level == 1:
        tail = posixpath.dirname(node) or "vault root"
    else:
        tail = node
    return normalize_entity_name(f"{base} ({tail})") or node


class Namer:
    """Stable, unique, readable entity names, with collision groups kept incrementally."""

    def __init__(self) -> None:
        self._base: dict[str, str] = {}  # node -> base name
        # Groups, not dicts of sets: nearly every name has one node, and a set per name
        # twice over was 27 MB of a 50k-note daemon (``core._groups``).
        self._groups = Groups()  # base name -> nodes
        self.names: dict[str, str] = {}  # node -> final name
        self._by_fold = Groups()  # casefolded name -> nodes
        self.refolded: set[str] = set()  # folds whose holder changed; the sink clears it

    def node(self, folded: str) -> str | None:
        """The graph node whose entity name casefolds to ``folded`` (extracted names
        meet the graph here), or None."""
        nodes = self._by_fold.get(folded)
        return min(nodes) if nodes else None

    def _set(self, node: str, name: str | None) -> None:
        old = self.names.pop(node, None)
        if old is not None:
            self._by_fold.discard(old.casefold(), node)
            self.refolded.add(old.casefold())
        if name is not None:
            self.names[node] = name
            self._by_fold.add(name.casefold(), node)
            self.refolded.add(name.casefold())

    def update(self, vg: VaultGraph, nodes: Iterable[str]) -> set[str]:
        """Re-derive names for ``nodes``; return every node whose name changed."""
        touched_groups: set[str] = set()
        for n in nodes:
            old = self._base.pop(n, None)
            if old is not None:
                self._groups.discard(old, n)
                touched_groups.add(old)
            if n in vg.g:
                base = _base_name(n, vg.g.nodes[n])
                self._base[n] = base
                self._groups.add(base, n)
                touched_groups.add(base)
        changed: set[str] = set()
        for base in touched_groups:
            changed |= self._name_group(vg, base, self._groups.get(base))
        for n in nodes:
            if n not in vg.g and n in self.names:
                self._set(n, None)
                changed.add(n)
        return changed

    def _name_group(self, vg: VaultGraph, base: str, members: Collection[str]) -> set[str]:
        if len(members) == 1:
            new = {n: base for n in members}
        else:
            new = {n: _qualified(n, vg.g.nodes[n], base, 1) for n in members}
            if len(set(new.values())) < len(new):
                new = {n: _qualified(n, vg.g.nodes[n], base, 2) for n in members}
        changed = {n for n, name in new.items() if self.names.get(n) != name}
        for n in changed:
            self._set(n, new[n])
        return changed


# -- records -------------------------------------------------------------------


class Mapper:
    """Computes LightRAG records from the graph; caches chunks per note content."""

    def __init__(self, vg: VaultGraph, chunker: Any) -> None:
        self.vg = vg
        self.chunker = chunker
        self.namer = Namer()
        self._chunks: dict[str, tuple[str, list[Chunk]]] = {}  # path -> (digest, chunks)
        # path -> (digest, spans): kept for every note (a few MB at 13k notes), and handed
        # over by a restart from the parse cache, so that the records around a changed
        # note never chunk its unchanged neighbours again (a tag touches thousands).
        self._spans: dict[str, tuple[str, Spans]] = {}

    def chunks(self, path: str, full: Note | None = None) -> list[Chunk]:
        """The note's chunks, made again only when its digest is not the cached one's:
        from ``full`` when the caller has the note with its body, else from
        ``VaultGraph.full`` (which reads a lean note's file)."""
        note = self.vg.notes[path]
        cached = self._chunks.pop(path, None)  # re-inserted last: the dict is in LRU order
        if cached is None or cached[0] != note.digest:
            cached = (note.digest, self.chunker(full or self.vg.with_body(path)))
        self._chunks[path] = cached
        return cached[1]

    def spans(self, path: str) -> Spans:
        """The note's chunk ids and start lines, chunking it only when no copy for its
        digest is known."""
        digest = self.vg.notes[path].digest
        known = self._spans.get(path)
        if known is None or known[0] != digest:
            chunks = self.chunks(path)
            known = (digest, (tuple(c.id for c in chunks), tuple(c.start_line for c in chunks)))
            self._spans[path] = known
        return known[1]

    def know_spans(self, spans: dict[str, tuple[str, Spans]]) -> None:
        """Spans read back from the parse cache (each checked against its digest on use)."""
        self._spans.update(spans)

    def known_spans(self) -> dict[str, tuple[str, Spans]]:
        """path -> (digest, spans) of every note chunked or handed over so far."""
        return dict(self._spans)

    def forget(self, path: str) -> None:
        self._chunks.pop(path, None)
        self._spans.pop(path, None)

    def keep(self, n: int | None = None) -> None:
        """Drop all but the ``n`` notes' chunks used last. Called after a batch, not
        per lookup: a batch reads a note's chunks for its chunk records and again for
        its file row. Other records need only spans, kept for every note, so a full
        reconcile's slice chunks its own notes and those whose spans are not known."""
        n = CHUNK_CACHE_NOTES if n is None else n
        for path in list(itertools.islice(self._chunks, max(0, len(self._chunks) - n))):
            del self._chunks[path]

    def name(self, node: str) -> str:
        return self.namer.names[node]

    # Entities

    def entity(self, node: str) -> tuple[str, Record] | None:
        g = self.vg.g
        if node not in g:
            return None
        attrs = g.nodes[node]
        if node in self.vg.notes:  # a note or a canvas
            note = self.vg.payload(node)  # its opening may describe it
            sources = self.spans(node)[0]
            return self.name(node), {
                "entity_type": note.type or "note",
                "description": note_description(note),
                "source_id": SEP.join(sources),
                "file_path": node,
                "title": note.title,  # the entity name may be qualified; exports show both
                "tags": ",".join(note.tags),
            }
        evidence = self._inbound_evidence(node)
        if not evidence:
            return None
        chunks = sorted({c for _, c in evidence})
        files = sorted({p for p, _ in evidence})
        kind = attrs["kind"]
        if kind == "tag":
            etype, desc = "tag", f"Tag {self.name(node)} in the vault."
        elif kind == "ghost":
            etype = "unresolved"
            desc = f"{attrs['title']}: a note that is linked to but not written yet."
        else:
            etype, desc = "attachment", f"Attachment file {node}."
        return self.name(node), {
            "entity_type": etype,
            "description": desc,
            "source_id": SEP.join(chunks),
            "file_path": SEP.join(files),
            "title": str(attrs["title"]),
            "tags": "",
        }

    def _inbound_evidence(self, node: str) -> list[tuple[str, str]]:
        out = []
        for src, _, _, data in self.vg.g.links_in(node):
            out.append((src, self.evidence_id(src, data)))
        return out

    def evidence_id(self, src: str, data: dict[str, Any]) -> str:
        """The id of the chunk of ``src`` that holds the link: chunks are in file order
        and never overlap, so it is the last one starting at or before the link's line
        (the first chunk for frontmatter)."""
        ids, starts = self.spans(src)
        line = data.get("line")
        if not isinstance(line, int):
            return ids[0]
        return ids[max(bisect.bisect_right(starts, line) - 1, 0)]

    # Relations

    def relation(self, a: str, b: str) -> tuple[str, Record] | None:
        g = self.vg.g
        if a == b or a not in g or b not in g:
            return None
        evidence: list[tuple[str, int, dict[str, Any], str]] = []
        for u, v in ((a, b), (b, a)):
            if u in self.vg.notes:
                for link in g.between(u, v):
                    line = link["line"] if isinstance(link["line"], int) else 0
                    evidence.append((u, line, link, self.evidence_id(u, link)))
        if not evidence:
            return None
        evidence.sort(key=lambda e: (e[0], e[1], e[2]["kind"]))
        src, tgt = sorted((self.name(a), self.name(b)))
        sentences: list[str] = []
        keywords: set[str] = set()
        for u, _, data, _ in evidence:
            other = self.name(b if u == a else a)
            if data["kind"] not in BODY_KINDS and "owner" not in data and not is_canvas(u):
                # a property link: say the key and both names (a canvas has no properties)
                text = f"{self.name(u)} —{data['kind']}→ {other}."
            else:
                text = data["context"] or (
                    f"{self.name(u)} is tagged {other}."
                    if data["kind"] == "tag"
                    else f"{self.name(u)} links to {other}."
                )
            if text not in sentences:
                sentences.append(text)
            keywords.add(data["kind"])
            if data["section"]:
                keywords.add(data["section"][-1])
            if data["display"]:
                keywords.add(data["display"])
        chunk_ids = sorted({c for *_, c in evidence})
        description = " ".join(sentences)
        if len(description) > 4 * DESCRIPTION_MAX:
            description = description[: 4 * DESCRIPTION_MAX] + "…"
        return relation_key(src, tgt), {
            "src_id": src,
            "tgt_id": tgt,
            "description": description,
            "keywords": ", ".join(sorted(keywords)),
            "weight": float(len(chunk_ids)),
            "source_id": SEP.join(chunk_ids),
            "file_path": SEP.join(sorted({u for u, *_ in evidence})),
        }

    def pairs_of(self, node: str) -> set[tuple[str, str]]:
        """Every node pair with an edge touching ``node`` (for renames and chunk changes)."""
        g = self.vg.g
        if node not in g:
            return set()
        return {pair(u, v) for u, v in g.in_edges(node)} | {
            pair(u, v) for u, v in g.out_edges(node)
        }


def note_description(note: Note) -> str:
    text = note.summary or note.opening or note.title
    if len(text) > DESCRIPTION_MAX:
        text = text[:DESCRIPTION_MAX].rsplit(" ", 1)[0] + "…"
    parts = [text]
    if note.aliases:
        parts.append("Also known as: " + ", ".join(note.aliases) + ".")
    if note.tags:
        parts.append("Tags: " + ", ".join("#" + t for t in note.tags) + ".")
    if note.error:
        parts.append(f"(Part of this note could not be read: {note.error}.)")
    return " ".join(parts)
