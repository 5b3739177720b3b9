"""Which notes the graph holds in full, and how a lean one gets its body back.

Why: at 13k notes the bodies and payloads (links, properties, headings) are most
of the graph's memory, and once the store and the search index hold a note's
text the graph needs neither. ``release`` keeps a lean copy (no body) or a head
(no payload either); ``with_body``, ``payload`` and ``full`` bring back what a
reader asks for, from the file or the parse cache, without touching the graph.

A mixin of ``VaultGraph``: it reads the graph's ``notes`` and never changes an
edge.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from wikid.core.drawing import is_drawing
from wikid.core.note import Note, cut_body
from wikid.core.payloads import Payloads
from wikid.core.vault import VaultFilter, VaultOptions, is_canvas, read_bytes, read_note


class HeldNotes:
    """The part of ``VaultGraph`` that decides how much of each note is in memory."""

    root: Path
    options: VaultOptions
    filter: VaultFilter
    notes: dict[str, Note]
    payloads: Payloads
    reads: int

    def _read_file(self, path: str) -> Note | None:
        self.reads += 1
        return read_note(self.root, path, self.options, self.filter)

    def payload(self, path: str) -> Note:
        """The note at ``path`` with its payload (links, properties, headings, opening):
        the graph's own, or for a head (``release``) the parse cache's or the file's."""
        note = self.notes[path]
        return note if note.has_payload else self.payloads.of(note)

    def with_body(self, path: str) -> Note:
        """The note at ``path`` as the graph holds it, with its body: the graph's own,
        or, for a lean note or a head (``release``), the file read again; a head stays
        a head (the chunker and a search line need no payload). If the file changed
        meanwhile, its update is on its way (a watcher event, or a restart's stat):
        until then the body is the one read now, or empty if the file cannot be read
        as a note."""
        note = self.notes[path]
        if note.body is not None:
            return note
        body = self._same_body(note)
        if body is None:
            again = self._read_file(path)
            body = again.body if again is not None and again.body else ""
        return replace(note, body=body)

    def full(self, path: str) -> Note:
        """The note at ``path`` with its body and its payload (``with_body``, then
        ``payload``'s parse-cache row for a head)."""
        note = self.with_body(path)
        return note if note.has_payload else self.payloads.of(note)

    def _same_body(self, note: Note) -> str | None:
        """The body of a plain Markdown note whose file still has the note's digest: its
        lines after the frontmatter, with no YAML or Markdown parsed again (a query's
        chunks of ~25 notes cost 1.2 ms a note that way, a third of its time at 13k).
        None when the file changed, or is a drawing or a canvas (bodies made, not cut)."""
        if note.rejected or is_canvas(note.path) or is_drawing(note.path):
            return None
        self.reads += 1
        data = read_bytes(self.root, note.path, self.options, self.filter)
        return None if data is None else cut_body(note, data)

    def release(self, digests: dict[str, str], heads: Iterable[str] = ()) -> None:
        """Keep lean copies (``Note.lean``: no body) of the notes at these paths, if they
        still have these digests: the store and the search index now hold their text;
        and of those in ``heads``, whose parse-cache rows are written too, their heads
        alone (``Note.head``: the payload is read back through ``payloads``)."""
        heads = set(heads)
        for path, held in digests.items():
            note = self.notes.get(path)
            if note is not None and note.digest == held:
                self.notes[path] = note.head() if path in heads else note.lean()
