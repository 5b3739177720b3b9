"""Implicit (LLM-extracted) entities and relations: an index over the current chunks.

Why an index and not "write what the LLM said": the store must equal a fresh
build. A fresh build with extraction on holds, for every chunk of the vault
whose text is in the extraction cache, that chunk's rows — nothing of chunks
that changed or vanished. So the records here are a pure function of (the
current chunks, the cache, the graph's names), and the sink writes them with
the same dirty-key diff as the structural records:

- an extracted name is *folded* (casefold). When the fold equals a graph
  entity's name, the row refers to that entity (whose record wikid never
  changes: the note's own text already describes it). Otherwise the fold is an
  implicit entity, owned in the ledger by the pseudo node ``implicit:<fold>``,
  with every chunk that mentions it as source_id (reference counting by
  construction: when the last such chunk goes, so does the entity);
- an extracted relation between folds ``a`` and ``b`` is owned by the pseudo
  pair; it is dropped when a link between the two graph entities already
  states the relation (structure is never re-extracted);
- both carry ``origin: "llm"`` so a reader can tell them from the links.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from wikid.core.chunk import Chunk
from wikid.store.ids import SEP, text_hash
from wikid.sync.extract import ExtractionCache, Result
from wikid.sync.records import Namer, Record, pair, relation_key

IMPLICIT = "implicit:"
ORIGIN = "llm"
Touched = tuple[set[str], set[tuple[str, str]]]  # folds, fold pairs


def fold(name: str) -> str:
    return name.casefold()


def node_of(f: str) -> str:
    return IMPLICIT + f


class ImplicitIndex:
    """Which current chunks have an extraction, and which folds and pairs they mention."""

    def __init__(self, cache: ExtractionCache | None) -> None:
        self.cache = cache  # None: extraction is off, the index stays empty
        self.results: dict[str, tuple[str, Result]] = {}  # chunk id -> (note path, rows)
        self.missing: dict[str, Chunk] = {}  # current chunks with no cached extraction
        self.by_note: dict[str, list[str]] = {}  # note -> its current chunk ids
        self.mentions: dict[str, set[str]] = {}  # fold -> chunk ids
        self.related: dict[str, dict[str, set[str]]] = {}  # fold -> fold -> chunk ids

    @property
    def enabled(self) -> bool:
        return self.cache is not None

    # -- keeping up with the chunks ------------------------------------------------

    def set_notes(self, notes: dict[str, list[Chunk] | None]) -> Touched:
        """A note's chunks are now ``chunks`` (None: the note is gone)."""
        touched: Touched = (set(), set())
        if self.cache is None:
            return touched
        fresh = [c for chunks in notes.values() for c in chunks or ()]
        cached = self.cache.get(text_hash(c.content) for c in fresh)
        for path, chunks in notes.items():
            for cid in self.by_note.pop(path, []):
                self.missing.pop(cid, None)
                self._drop(cid, touched)
            if chunks is None:
                continue
            self.by_note[path] = [c.id for c in chunks]
            for c in chunks:
                result = cached.get(text_hash(c.content))
                if result is None:
                    self.missing[c.id] = c
                else:
                    self._add(c.id, path, result, touched)
        return touched

    def learn(self, hashes: set[str]) -> Touched:
        """New cache entries: the missing chunks with those texts now have rows."""
        touched: Touched = (set(), set())
        if self.cache is None:
            return touched
        ready = [c for c in self.missing.values() if text_hash(c.content) in hashes]
        cached = self.cache.get(text_hash(c.content) for c in ready)
        for c in ready:
            result = cached.get(text_hash(c.content))
            if result is not None:
                del self.missing[c.id]
                self._add(c.id, c.note, result, touched)
        return touched

    def _rows(self, result: Result) -> tuple[set[str], set[tuple[str, str]]]:
        folds = {fold(e[0]) for e in result["entities"]}
        pairs = set()
        for r in result["relations"]:
            a, b = fold(r[0]), fold(r[1])
            if a != b:
                folds |= {a, b}
                pairs.add(pair(a, b))
        return folds, pairs

    def _add(self, cid: str, path: str, result: Result, touched: Touched) -> None:
        self.results[cid] = (path, result)
        folds, pairs = self._rows(result)
        for f in folds:
            self.mentions.setdefault(f, set()).add(cid)
        for a, b in pairs:
            self.related.setdefault(a, {}).setdefault(b, set()).add(cid)
            self.related.setdefault(b, {}).setdefault(a, set()).add(cid)
        touched[0].update(folds)
        touched[1].update(pairs)

    def _drop(self, cid: str, touched: Touched) -> None:
        entry = self.results.pop(cid, None)
        if entry is None:
            return
        folds, pairs = self._rows(entry[1])
        for f in folds:
            _discard(self.mentions, f, cid)
        for a, b in pairs:
            for x, y in ((a, b), (b, a)):
                inner = self.related.get(x, {})
                _discard(inner, y, cid)
                if not inner:
                    self.related.pop(x, None)
        touched[0].update(folds)
        touched[1].update(pairs)

    # -- dirty keys ------------------------------------------------------------------

    def around(self, folds: Iterable[str]) -> set[tuple[str, str]]:
        """Every extracted pair touching one of ``folds``."""
        return {pair(f, g) for f in folds for g in self.related.get(f, {})}

    def owners(self) -> tuple[set[str], set[tuple[str, str]]]:
        """Every pseudo node and pair a fresh build would consider."""
        nodes = {node_of(f) for f in self.mentions}
        pairs = {pair(node_of(a), node_of(b)) for a in self.related for b in self.related[a]}
        return nodes, pairs

    def is_related(self, a: str, b: str) -> bool:
        return b in self.related.get(a, {})

    # -- records ---------------------------------------------------------------------

    def _display(self, f: str) -> str:
        """The name of implicit entity ``f``: its most common spelling in the rows."""
        spellings: Counter[str] = Counter()
        for cid in self.mentions[f]:
            result = self.results[cid][1]
            spellings.update(e[0] for e in result["entities"] if fold(e[0]) == f)
            spellings.update(end for r in result["relations"] for end in r[:2] if fold(end) == f)
        return _most_common(spellings)

    def entity(self, f: str, namer: Namer) -> tuple[str, Record] | None:
        """The implicit entity for fold ``f``; None when it names a graph entity."""
        chunks = sorted(self.mentions.get(f, ()))
        if not chunks or namer.node(f) is not None:
            return None
        types: Counter[str] = Counter()
        described: list[str] = []
        related: list[str] = []  # an end named only in relations is described by them
        for cid in chunks:
            result = self.results[cid][1]
            for name, etype, desc in result["entities"]:
                if fold(name) == f:
                    types[etype] += 1
                    described.append(desc)
            for src, tgt, _, desc in result["relations"]:
                related.extend(desc for end in (src, tgt) if fold(end) == f)
        descriptions = list(dict.fromkeys(described or related))
        return self._display(f), {
            "entity_type": _most_common(types) if types else "unknown",
            "description": SEP.join(descriptions),
            "source_id": SEP.join(chunks),
            "file_path": SEP.join(sorted({self.results[c][0] for c in chunks})),
            "origin": ORIGIN,
        }

    def relation(
        self, a: str, b: str, namer: Namer, linked: Callable[[str, str], bool]
    ) -> tuple[str, Record] | None:
        """The implicit relation between folds ``a`` and ``b``; None when a link states
        it (``linked(u, v)``: do links relate graph nodes u and v?)."""
        chunks = sorted(self.related.get(a, {}).get(b, ()))
        if not chunks:
            return None
        ends = []
        for f in (a, b):  # every end of a relation is mentioned, so it has a name
            node = namer.node(f)
            ends.append((self._display(f), None) if node is None else (namer.names[node], node))
        (na, ua), (nb, ub) = ends
        if na == nb or (ua is not None and ub is not None and linked(ua, ub)):
            return None
        keywords: set[str] = set()
        descriptions: list[str] = []
        for cid in chunks:
            for src, tgt, kw, desc in self.results[cid][1]["relations"]:
                if pair(fold(src), fold(tgt)) == pair(a, b):
                    keywords.update(k.strip() for k in kw.split(",") if k.strip())
                    if desc not in descriptions:
                        descriptions.append(desc)
        src, tgt = sorted((na, nb))
        return relation_key(src, tgt), {
            "src_id": src,
            "tgt_id": tgt,
            "description": SEP.join(descriptions),
            "keywords": ", ".join(sorted(keywords)),
            "weight": float(len(chunks)),
            "source_id": SEP.join(chunks),
            "file_path": SEP.join(sorted({self.results[c][0] for c in chunks})),
            "origin": ORIGIN,
        }


def _most_common(counts: Counter[str]) -> str:
    """Deterministic: highest count, then the smallest string."""
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def _discard(table: dict[str, set[str]], key: str, value: str) -> None:
    members = table.get(key)
    if members is not None:
        members.discard(value)
        if not members:
            del table[key]
