"""A restart whose work is proportional to what changed while wikid was away.

Why: a full reconcile re-parses and re-chunks every note and compares every
record with the ledger, minutes on a 13k-note vault, at every login. Instead,
each batch also commits, in the same transaction as the mirror, what parsing
produced for each file it touched (the parse cache: the ``Note``, with the
``(mtime_ns, size)`` it was read at). A restart then rebuilds the graph the
store was built from out of that cache, reading no file; serves it; stats the
vault; and runs one ordinary incremental update over the files whose stat
differs, which appeared or which vanished. The sink applies that delta like any
other batch, so the store equals a fresh build for the same reason it does after
an edit (invariant 6).

At close, the graph itself is saved beside the store (``save``), with each
note's chunk spans and the entity names: a start loads it in one read (0.5 s at
13k notes) instead of rebuilding it from the cache's notes, which resolves every
link again (1.9 s), and naming every node again (0.3 s). It is used only while
it agrees with the ledger, note by note and digest by digest, and with the
cache's paths; else the cache's notes rebuild it. Either way the start then
stats the vault and updates what changed.

When the cache cannot be trusted, the start is a full reconcile, as before: no
cache yet, a full sync that did not finish (stopped or crashed), other vault options or another cache format (``fingerprint``), a
batch left unfinished (``pending``), a cache that disagrees with the ledger's
notes, or extraction on (its index needs every note's chunks).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import structlog

from wikid.core.graph import GHOST, TAG, VaultGraph
from wikid.core.note import Note
from wikid.core.vault import Snapshot, VaultFilter, VaultOptions, is_note, snapshot
from wikid.store.heap import building
from wikid.store.ledger import PARSE_CACHE, FileRow, Ledger
from wikid.sync.records import Namer, Spans

# Bump when what a cached row means changes, or when the records made from the same notes
# change (2: property links are described "A —key→ B"; 3: a row holds the note's chunk
# spans too; 4: a chunk's size is the sum of its pieces' counts, which moves a few
# chunk boundaries under the approximate counter; 5: chunks are sized and their
# ``tokens`` counted with MiniLM's WordPiece, for every embedder, not cl100k; 6: a
# ``Note`` may be a head, its payload in this cache; 7: the search index's ``props``
# rows, which only a full reconcile writes for every note; 8: a type written as a list
# or a link, ``[[Book]]``, is its target's name; 9: the search rows' text form,
# ``search.TEXT_FORM``, CJK characters as tokens), so a restart reconciles every key.
FORMAT = 9
# The saved graph's layout, apart from the parse cache's format: a graph saved in an
# older layout is not loaded (the restart rebuilds it from the cache, 2 s at 13k notes)
# and the cache stays valid. 2: groups of paths as tuples (``core._groups``), edges
# with equal attributes sharing one dict; 3: notes as heads, their payload in the cache;
# 4: a pair's links as one tuple (``core.edges.LinkGraph``), the names' groups as Groups.
GRAPH_LAYOUT = 4
META_KEY = PARSE_CACHE
log = structlog.get_logger("wikid.sync")
SAVED = "wikid-graph.pickle"  # beside the ledger's file
_BAD_PICKLE = (pickle.UnpicklingError, AttributeError, TypeError, ValueError, EOFError)


def fingerprint(files: VaultFilter, extracting: bool) -> str:
    """What the cached state depends on besides the files: the cache format, the
    shape of ``Note``, the vault options (ignore globs, size limit, ...), the ignore
    filters of the vault's ``.obsidian/app.json`` (a file they now leave out must
    leave the store, and an update never reads an ignored path) and whether the store
    holds extracted items (a start with extraction off must remove them)."""
    shape = ",".join(f.name for f in fields(Note))
    text = f"{FORMAT}|{shape}|{files.options!r}|{files.user_filters!r}|{extracting}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def encode(note: Note, spans: Spans) -> bytes:
    """A note's row: the parsed note, lean, and its chunk spans (what the records
    around it need of its chunks), so neither is computed again after a restart."""
    assert note.has_payload, note.path  # a head's row would lose its links
    return pickle.dumps((note.lean(), spans), protocol=pickle.HIGHEST_PROTOCOL)


def cached_note(ledger: Ledger, path: str) -> Note | None:
    """The note at ``path`` as the parse cache holds it (``VaultGraph.payloads``'s
    source), or None: no row, or one that cannot be read."""
    blob = ledger.file_note(path)
    if blob is None:
        return None
    try:
        note = pickle.loads(blob)[0]
    except (*_BAD_PICKLE, IndexError):
        note = None
    if not isinstance(note, Note):  # garbled: the caller reads the file instead
        log.warning("parse cache row unreadable: the note is read from its file", path=path)
        return None
    return note


def file_rows(vg: VaultGraph, paths: set[str], spans: Callable[[str], Spans]) -> dict[str, FileRow]:
    """Parse-cache rows for ``paths`` as the graph now holds them (None: not a file
    of the graph any more). Ghost and tag node ids are not files."""
    rows: dict[str, FileRow] = {}
    for path in paths:
        if path.startswith((GHOST, TAG)):
            continue
        if path in vg.notes:
            rows[path] = ("note", encode(vg.payload(path), spans(path)))
        elif path in vg.attachments:
            rows[path] = ("attachment", None)
        else:
            rows[path] = None
    return rows


@dataclass
class Restart:
    """The graph the store was built from (``changed_since`` says what to update it
    with: after serving starts, since a cold page cache makes the walk seconds)."""

    graph: VaultGraph
    spans: dict[str, tuple[str, Spans]]  # path -> (digest, chunk spans)
    namer: Namer | None  # the graph's entity names, if saved with it


def plan(
    ledger: Ledger, root: Path, options: VaultOptions | None, extracting: bool
) -> tuple[Restart | None, str]:
    """A restart from the parse cache, or None and the reason a full reconcile runs."""
    options = options or VaultOptions()
    if extracting:
        return None, "extraction is on"
    stamp = fingerprint(VaultFilter(root, options), extracting=False)
    found = ledger.meta(META_KEY)
    if found == "":  # what a full reconcile sets until it ends
        return None, "the last full sync did not finish"
    if found != stamp:
        return None, "no parse cache for these options"
    if any(ledger.pending().values()):
        return None, "a batch was left unfinished"
    with building():
        saved = _saved(ledger, root, stamp)
        if saved is not None:
            return Restart(*saved), "parse cache"
        return _from_cache(ledger, root, options)


def save(
    ledger: Ledger, graph: VaultGraph, spans: dict[str, tuple[str, Spans]], namer: Namer
) -> None:
    """Save the graph, the notes' chunk spans and the entity names for the next start
    (see the module's docstring); written whole to a new file, then renamed over the
    old one."""
    file = ledger.path.parent / SAVED
    part = file.with_name(file.name + ".part")
    stamp = f"{fingerprint(graph.filter, extracting=False)}/{GRAPH_LAYOUT}"
    try:
        with open(part, "wb") as fh:
            pickle.dump((stamp, graph, spans, namer), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(part, file)
    finally:
        part.unlink(missing_ok=True)


def _saved(
    ledger: Ledger, root: Path, stamp: str
) -> tuple[VaultGraph, dict[str, tuple[str, Spans]], Namer] | None:
    """The saved graph, if it is the one the store was built from: the same options
    and vault, the cache's attachments, and the ledger's notes, each with the digest
    the ledger holds (a graph saved while a batch was unwritten, or before a crash
    and later batches, is not)."""
    try:
        with open(ledger.path.parent / SAVED, "rb") as fh:
            saved_stamp, graph, spans, namer = pickle.load(fh)
    except (OSError, ImportError, *_BAD_PICKLE):
        return None
    if saved_stamp != f"{stamp}/{GRAPH_LAYOUT}" or not isinstance(graph, VaultGraph):
        return None
    if not isinstance(namer, Namer):
        return None
    if graph.root != root:  # the options are in the stamp
        return None
    if ledger.attachments() != graph.attachments:
        return None
    if {p: n.digest for p, n in graph.notes.items()} != ledger.digests():
        return None
    return graph, spans, namer


def _from_cache(ledger: Ledger, root: Path, options: VaultOptions) -> tuple[Restart | None, str]:
    notes: dict[str, Note] = {}
    spans: dict[str, tuple[str, Spans]] = {}
    attachments: set[str] = set()
    try:
        for path, (kind, blob) in ledger.files().items():
            if kind == "note" and blob is not None:
                note, spans_of = pickle.loads(blob)
                if not isinstance(note, Note):
                    return None, "the parse cache holds something else"
                notes[path], spans[path] = note, (note.digest, spans_of)
            else:
                attachments.add(path)
    except _BAD_PICKLE:
        return None, "the parse cache cannot be read"
    if {p: n.digest for p, n in notes.items()} != ledger.digests():
        return None, "the parse cache disagrees with the ledger"
    graph = VaultGraph.from_notes(root, options, notes, attachments)
    graph.release({p: n.digest for p, n in notes.items()}, heads=notes)  # rows: the cache's
    return Restart(graph, spans, None), "parse cache"


def changed_since(graph: VaultGraph) -> tuple[set[str], Snapshot]:
    """The files that differ from the ones ``graph`` read, and the vault's stat they
    were found in."""
    notes, attachments = graph.notes, graph.attachments
    now = snapshot(graph.root, graph.filter, errors=graph.walk_errors)
    changed = {p for p in notes.keys() | attachments if p not in now}
    for path, stat in now.items():
        if is_note(path):
            cached = notes.get(path)
            if cached is None or cached.stat is None or cached.stat != stat:
                changed.add(path)
        elif path not in attachments:
            changed.add(path)
    return changed, now
