"""The in-memory wikilink graph, kept exactly right incrementally.

Why this shape: the graph is a pure function of the files. Each note's
out-edges depend only on that note's links and on the file/alias index, so
an update re-derives the out-edges of exactly the notes that can have
changed (the edited notes, plus those whose links name a file or alias that
appeared or vanished, found through the reverse key index) and diffs that
region before and after. That makes incremental state equal to a rebuild by
construction, and the work proportional to the change.

Nodes: notes and attachments (id = vault path), ghosts (``ghost:<target>``),
tags (``tag:<lowercase name>``). Links (``edges.LinkGraph``): one per link, keyed
by its ordinal in the note, plus one ``tag`` link per distinct tag.

This module links; its two mixins hold the rest: ``_reading`` reads what changed
(off the event loop) and ``_held`` decides how much of each note stays in memory.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from wikid.core._groups import Groups
from wikid.core._held import HeldNotes
from wikid.core._reading import Changes as Changes  # read() returns it; apply() takes it
from wikid.core._reading import Parse, ReadsChanges
from wikid.core.conflicts import conflict_of
from wikid.core.delta import Attrs, Delta, EdgeKey, diff
from wikid.core.edges import (
    TAG_ATTRS,
    EdgeAttrs,
    Link,
    LinkGraph,
    edge_key,
    link_attrs,
    node_attrs,
    sparse,
)
from wikid.core.note import Note
from wikid.core.payloads import Payloads
from wikid.core.resolve import FileIndex, alias_key, file_key, link_keys, resolve
from wikid.core.vault import (
    VaultFilter,
    VaultOptions,
    is_canvas,
    walk,
)

GHOST = "ghost:"
# Edge kinds that state no typed relation: a note's body links, embeds and tags, and
# what a canvas states. Any other kind is a frontmatter property's key.
BODY_KINDS = frozenset(["link", "embed", "tag"])
CANVAS_KINDS = frozenset(["canvas", "canvas-edge"])
TAG = "tag:"


def _note_attrs(note: Note, conflict_of: str | None) -> Attrs:
    """A note's node attributes, sparse (``edges.NODE_DEFAULTS``); its aliases and tags
    are the note's own tuples, not copies."""
    return node_attrs(
        {
            "kind": "canvas" if is_canvas(note.path) else "note",
            "title": note.title,
            "aliases": note.aliases,
            "tags": note.tags,
            "path": note.path,
            "type": note.type,
            "summary": note.summary,
            "error": note.error,
            "conflict_of": conflict_of,
        }
    )


def _plain_attrs(kind: str, title: str, path: str | None) -> Attrs:
    return node_attrs({"kind": kind, "title": title, "path": path})


class VaultGraph(HeldNotes, ReadsChanges):
    """A vault's wikilink graph plus the indexes that keep it incremental."""

    def __init__(self, root: Path | str, options: VaultOptions | None = None) -> None:
        self.root = Path(root)
        self.options = options or VaultOptions()
        self.filter = VaultFilter(self.root, self.options)
        self.g = LinkGraph()
        self.notes: dict[str, Note] = {}
        self.attachments: set[str] = set()
        self.index = FileIndex()
        self.walk_errors: dict[str, str] = {}
        self._errors: dict[str, str] = {}  # note -> why part of it could not be read
        self._deps = Groups()  # key -> notes whose links depend on it
        self._note_keys: dict[str, tuple[str, ...]] = {}
        self._created: set[str] = set()  # ghost/tag nodes created during one update()
        # A canvas's edges between two other files (kind canvas-edge): its own, though
        # not its out-edges; removed and re-derived with the canvas.
        self._owned: dict[str, list[EdgeKey]] = {}
        self.conflicts: dict[str, str] = {}  # sync-conflict copy -> the file it copies
        # A note read empty that was not: a sync tool may be mid-write. Read with
        # ``confirm_empty`` (the daemon does), that read is not believed until a second
        # read says the same; ``take_recheck`` names the notes to read again.
        self._doubted: set[str] = set()
        self._recheck: set[str] = set()
        self.reads = 0  # notes read from disk (a restart from the parse cache reads few)
        # Notes read again with the same content and a new stat (a touch, a checkout):
        # ``apply`` takes them in, and the parse cache must too (``take_restat``), or
        # every restart would read them again.
        self._restat: dict[str, Note] = {}
        # The payloads of head notes (``release``), from the parse cache or the file.
        self.payloads = Payloads(self._read_file)
        self._ghosts: list[tuple[str, str]] | None = None  # ``ghosts()``, until a change

    @classmethod
    def load(
        cls, root: Path | str, options: VaultOptions | None = None, parse: Parse | None = None
    ) -> VaultGraph:
        """A from-scratch build: the reference every incremental state must equal.
        ``parse``: see ``read`` (a cold start parses in processes: ``sync.parse_pool``)."""
        vg = cls(root, options)
        vg._apply(vg.read(walk(vg.root, vg.filter, errors=vg.walk_errors), parse=parse), False)
        return vg

    @classmethod
    def from_notes(
        cls,
        root: Path | str,
        options: VaultOptions | None,
        notes: dict[str, Note],
        attachments: Iterable[str],
    ) -> VaultGraph:
        """The graph of notes parsed before (a restart's parse cache), reading no file:
        equal to ``load()`` of a vault holding exactly these notes and attachments."""
        vg = cls(root, options)
        vg._apply((dict(notes), dict.fromkeys(attachments, True)), False)
        return vg

    def __getstate__(self) -> dict[str, Any]:
        """The graph as ``from_notes`` of its notes would hold it (a restart loads it
        from ``wikid.sync.restart``'s saved copy): none of one session's passing state,
        i.e. the walk's errors (the restart's own walk finds them again), the reads
        counted, notes awaiting a second read or a new stat in the parse cache; nor the
        filter, which is made again on load, as ``from_notes`` makes it (the vault's
        ignore settings may have changed meanwhile)."""
        state = dict(self.__dict__)
        state.update(
            walk_errors={}, _created=set(), _doubted=set(), _recheck=set(), reads=0, _restat={}
        )
        # Heads: a restart takes their payloads from the parse cache (``release``).
        state["notes"] = {p: n.head() for p, n in self.notes.items()}
        del state["filter"], state["payloads"]
        state.pop("_ghosts", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.filter = VaultFilter(self.root, self.options)
        self.payloads = Payloads(self._read_file)
        self._ghosts = None
        if "_errors" not in state:  # saved before the index was kept
            self._errors = {p: n.error for p, n in self.notes.items() if n.error}

    @property
    def problems(self) -> dict[str, str]:
        """Path -> reason, for every file that could not be read fully. Kept as notes
        change, not found by a scan: ``status`` reports it (a scan of 13k notes cost
        1-3 ms of the event loop a reply)."""
        out = dict(self._errors)
        out.update(self.walk_errors)
        return dict(sorted(out.items()))

    def ghosts(self) -> list[tuple[str, str]]:
        """(node, title) of every unwritten link target, in the graph's order: kept
        until the graph next changes. Why: every question looks for their titles in
        itself (``ask.walk.seeds``), and finding them by a scan of every node was
        O(vault) a question (~30k nodes at 13k notes)."""
        if self._ghosts is None:
            nodes = self.g.nodes(data=True)
            self._ghosts = [(n, a["title"]) for n, a in nodes if a["kind"] == "ghost"]
        return self._ghosts

    # -- updating -----------------------------------------------------------

    def update(self, paths: Iterable[str], confirm_empty: bool = False) -> Delta:
        """Bring the graph in line with the files at ``paths`` (files or folders,
        created, modified, deleted, or either end of a move) and return what changed."""
        return self.apply(self.read(paths, confirm_empty))

    def apply(self, changes: Changes) -> Delta:
        """Apply what ``read`` found: new versions of notes (None: gone) and attachments
        (False: gone); returns what changed."""
        return self._apply(changes, True) or Delta()

    def _apply(self, changes: Changes, want_delta: bool) -> Delta | None:
        """``apply``; without ``want_delta`` no delta is computed, which is only right
        for a graph built from nothing (``load``, ``from_notes``), where no edge existed
        before: copying every edge to diff it was ~0.15 s of a 10k-note build."""
        notes_new, attach_new = changes
        for path, note in self._restat.items():
            current = self.notes.get(path)
            if current is not None and current.digest == note.digest:
                if not current.has_payload:  # stays a head (``take_restat`` finds it)
                    note = self._restat[path] = note.head()
                self.notes[path] = note
        if not notes_new and not attach_new:
            return Delta()
        self._ghosts = None
        affected = self._affected(notes_new, attach_new)
        touched = set(notes_new) | set(attach_new)
        before_edges = self._out_edges(affected, touched) if want_delta else {}
        before_nodes = {n: dict(self.g.nodes[n]) for n in touched if n in self.g}

        for s in affected:
            if s in self.g:  # its out-edges, except those a canvas owns
                self.g.remove_links_out(s, keep=lambda d: "owner" in d)
            self.g.remove_links(self._owned.pop(s, ()))
        self._apply_files(notes_new, attach_new)
        for s in affected:
            if s in self.notes:
                self._link(s)
            else:
                self._set_deps(s, set())
        for n in list(touched):
            if n in self.g and n.startswith((GHOST, TAG)) and not self.g.pred[n]:
                self.g.remove_node(n)
        self.payloads.unpin()
        self.payloads.forget(notes_new)
        if not want_delta:
            self._created.clear()
            return None

        seen = set(touched)
        after_edges = self._out_edges(affected, touched)
        # A target first met after the update existed before unchanged, unless it was
        # created now: ghosts and tags are created here, notes and attachments are in
        # ``touched`` from the start.
        after_nodes = {
            n: dict(self.g.nodes[n])
            for n in touched
            if n in self.g and (n in seen or n in self._created)
        }
        self._created.clear()
        delta = diff(before_nodes, after_nodes, before_edges, after_edges)
        delta.notes_changed = {f for f, n in notes_new.items() if n is not None}
        delta.notes_removed = {f for f, n in notes_new.items() if n is None}
        return delta

    def _affected(self, notes_new: dict[str, Note | None], attach_new: dict[str, bool]) -> set[str]:
        """Notes whose out-edges must be re-derived."""
        keys: set[str] = {file_key(f) for f in attach_new}
        for f, note in notes_new.items():
            old = self.notes.get(f)
            if (old is None) != (note is None):
                keys.add(file_key(f))
            old_aliases = {alias_key(a) for a in (old.aliases if old else ())}
            new_aliases = {alias_key(a) for a in (note.aliases if note else ())}
            keys |= old_aliases ^ new_aliases
        affected = set(notes_new)
        for k in keys:
            affected.update(self._deps.get(k))
        return affected

    def _out_edges(self, sources: set[str], touched: set[str]) -> dict[EdgeKey, Attrs]:
        """Snapshot the sources' out-edges; their targets join ``touched``."""
        edges: dict[EdgeKey, Attrs] = {}
        for s in sources:
            if s in self.g:
                for u, v, k, d in self.g.links_out(s):
                    edges[(u, v, k)] = dict(d)
                    touched.add(v)
            for u, v, k, d in self.g.links_of(self._owned.get(s, ())):
                edges[(u, v, k)] = dict(d)
                touched.update((u, v))
        return edges

    def _apply_files(self, notes_new: dict[str, Note | None], attach_new: dict[str, bool]) -> None:
        for f, note in notes_new.items():
            old = self.notes.get(f)
            copy = self._track_conflict(f, note is not None)
            if not copy:
                self.index.set_aliases(f, old.aliases if old else (), note.aliases if note else ())
            self._errors.pop(f, None)
            if note is None:
                del self.notes[f]
                self.index.remove(f)
                self.g.remove_node(f)
                continue
            if old is None and not copy:
                self.index.add(f)
            self.notes[f] = note
            if note.error:
                self._errors[f] = note.error
            self.g.add_node(f)
            self.g.nodes[f].clear()
            self.g.nodes[f].update(_note_attrs(note, self.conflicts.get(f)))
        for f, exists in attach_new.items():
            copy = self._track_conflict(f, exists)
            if exists:
                self.attachments.add(f)
                if not copy:
                    self.index.add(f)
                self.g.add_node(f, **_plain_attrs("attachment", f.rsplit("/", 1)[-1], f))
            else:
                self.attachments.discard(f)
                self.index.remove(f)
                self.g.remove_node(f)

    def _track_conflict(self, path: str, present: bool) -> bool:
        """Whether ``path`` is a sync-conflict copy (which never resolves a link), kept in
        ``conflicts`` while it is present."""
        original = conflict_of(path)
        if original is not None and present:
            self.conflicts[path] = original
        else:
            self.conflicts.pop(path, None)
        return original is not None

    def _link(self, source: str) -> None:
        note = self.payload(source)
        keys: set[str] = set()
        shared: dict[tuple[tuple[str, Any], ...], EdgeAttrs] = {}  # equal attrs, one dict
        out: list[Link] = []  # added at once: ``LinkGraph.add_links``
        for i, link in enumerate(note.links):
            keys |= link_keys(link.target, source)
            r = resolve(self.index, link.target, source)
            if r.path is None:
                target = GHOST + link.target.strip()
                if target not in self.g:
                    self.g.add_node(target, **_plain_attrs("ghost", link.target.strip(), None))
                    self._created.add(target)
            else:
                target = r.path
            attrs = link_attrs(link, r)
            held = shared.setdefault(tuple(attrs.items()), EdgeAttrs(attrs))
            out.append((source, target, edge_key(i), held))
        for tag in note.tags:
            tid = TAG + tag.lower()
            if tid not in self.g:
                self.g.add_node(tid, **_plain_attrs("tag", tag.lower(), None))
                self._created.add(tid)
            out.append((source, tid, tid, TAG_ATTRS))
        self.g.add_links(out)
        keys |= self._join(source, note)
        self._set_deps(source, keys)

    def _join(self, source: str, note: Note) -> set[str]:
        """A canvas's edges between two file cards: one ``canvas-edge`` edge from file to
        file, owned by the canvas, when both resolve to a file. Returns the keys the
        resolutions depend on."""
        keys: set[str] = set()
        joined: list[Link] = []
        title = note.title
        for j, (a, b, label) in enumerate(note.joins):
            keys |= link_keys(a, source) | link_keys(b, source)
            ra, rb = resolve(self.index, a, source), resolve(self.index, b, source)
            if ra.path is None or rb.path is None or ra.path == rb.path:
                continue
            key = f"{source}>{j}"
            context = f"On canvas {title}: {a} → {b}" + (f" ({label})" if label else "")
            attrs = {
                "kind": "canvas-edge",
                "display": label,
                "ambiguous": ra.ambiguous or rb.ambiguous,
                "context": context,
                "owner": source,
            }
            joined.append((ra.path, rb.path, key, EdgeAttrs(sparse(attrs))))
        self.g.add_links(joined)
        if joined:
            self._owned[source] = [(u, v, k) for u, v, k, _ in joined]
        return keys

    def _set_deps(self, source: str, keys: set[str]) -> None:
        old = set(self._note_keys.pop(source, ()))
        for k in old - keys:
            self._deps.discard(k, source)
        for k in keys - old:
            self._deps.add(k, source)
        if keys:
            # A tuple of interned keys, the same string objects as ``_deps``'s: with a
            # set of copies, a 13k-note graph took 171 MB, 17 more than now.
            self._note_keys[source] = tuple(sys.intern(k) for k in keys)
