"""Reading what changed: the files at some paths, parsed, with nothing of the graph
changed, so it can run in a worker thread while the event loop reads the graph.

It also decides what a read is worth: a touched note with the same digest only
renews its stat (``take_restat``), and a note read empty that was not waits for a
second read (``take_recheck``), since a sync tool may be mid-write.

A mixin of ``VaultGraph``; ``apply`` (linking) takes what ``read`` returns.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from wikid.core.note import Note, digest
from wikid.core.payloads import Payloads
from wikid.core.vault import VaultFilter, VaultOptions, file_exists, is_note, read_note, walk

EMPTY = digest(b"")
Changes = tuple[dict[str, Note | None], dict[str, bool]]  # what ``read`` found
# Many notes parsed at once, elsewhere (``sync.parse_pool``: in processes); the notes it
# leaves out of its answer are read in the calling thread.
Parse = Callable[[Sequence[str]], dict[str, Note | None]]


class ReadsChanges:
    """The part of ``VaultGraph`` that reads changed files into ``Changes``."""

    root: Path
    options: VaultOptions
    filter: VaultFilter
    notes: dict[str, Note]
    attachments: set[str]
    payloads: Payloads
    reads: int
    _doubted: set[str]
    _recheck: set[str]
    _restat: dict[str, Note]

    if TYPE_CHECKING:

        def _affected(
            self, notes_new: dict[str, Note | None], attach_new: dict[str, bool]
        ) -> set[str]: ...

    def read(
        self, paths: Iterable[str], confirm_empty: bool = False, parse: Parse | None = None
    ) -> Changes:
        """Read and parse what changed at ``paths``, changing nothing of the graph: the
        slow half of ``update``, safe to run in a worker thread while the graph is only
        read. With ``confirm_empty`` a note newly read empty waits for a second read.
        ``parse``: parses many notes at once (``sync.parse_pool``: a cold start's
        every note); the notes it leaves out are read here."""
        notes_new: dict[str, Note | None] = {}
        attach_new: dict[str, bool] = {}
        files = sorted(self._expand(paths))
        parsed = parse([f for f in files if is_note(f)]) if parse is not None else {}
        for f in files:
            if is_note(f):
                note = parsed[f] if f in parsed else self._read_note(f)
                self.reads += 1
                old = self.notes.get(f)
                if self._doubt(f, note, old, confirm_empty):
                    continue
                if note is not None and old is not None and note.digest == old.digest:
                    # Touched, not changed (or changed too recently to tell: a racy
                    # stat is None): the new stat is kept, and the dates that default
                    # to the mtime are written again (``Sink.restamp``).
                    if note.stat != old.stat or note.stat is None:
                        self._restat[f] = note.lean()  # (the same text: no body to keep)
                    continue
                if note is None and old is None:
                    continue
                notes_new[f] = note
            else:
                exists = file_exists(self.root, f)
                if exists != (f in self.attachments):
                    attach_new[f] = exists
        if notes_new or attach_new:  # the notes ``apply`` will link again, off its loop
            again = self._affected(notes_new, attach_new) - notes_new.keys()
            heads = [self.notes[p] for p in again if p in self.notes]
            self.payloads.pin(n for n in heads if not n.has_payload)
        return notes_new, attach_new

    def _read_note(self, path: str) -> Note | None:
        return read_note(self.root, path, self.options, self.filter)

    def _doubt(self, path: str, note: Note | None, old: Note | None, confirm: bool) -> bool:
        """True when this read emptied a note and is not believed yet (see __init__)."""
        emptied = note is not None and old is not None and note.digest == EMPTY != old.digest
        if not (confirm and emptied):
            self._doubted.discard(path)
            return False
        if path in self._doubted:  # read empty twice: it is empty
            self._doubted.discard(path)
            return False
        self._doubted.add(path)
        self._recheck.add(path)
        return True

    def take_restat(self) -> set[str]:
        """The notes whose stat ``apply`` renewed with no change of content (and forget)."""
        out = {p for p, n in self._restat.items() if self.notes.get(p) is n}
        self._restat.clear()
        return out

    def take_recheck(self) -> set[str]:
        """The notes to read again after the quiet window (and forget them)."""
        out, self._recheck = self._recheck, set()
        return out

    def _expand(self, paths: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for raw in paths:
            p = posixpath.normpath(str(raw)).lstrip("/")  # a "\\" is part of a POSIX name
            if p in (".", "") or p.startswith("../") or self.filter.ignored(p):
                continue
            full = self.root / p
            if full.is_dir() and not full.is_symlink():
                out.update(walk(self.root, self.filter, under=p))
            else:
                out.add(p)
            if p not in self.notes and p not in self.attachments and not file_exists(self.root, p):
                prefix = p + "/"  # maybe a folder that went away: take what we knew under it
                out.update(n for n in self.notes if n.startswith(prefix))
                out.update(a for a in self.attachments if a.startswith(prefix))
        return out
