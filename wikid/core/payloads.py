"""Where a head's payload comes back from: a small LRU, then the parse cache, then
the file.

Why: once the store holds a note, the graph keeps only its head (``Note.head``):
its parsed links with their sentences, properties, headings and opening are most
of a note's memory (2.4 KB a note at 13k generated notes, ~120 MB at 50k), and
only a few consumers need them, for a few notes at a time: re-deriving the
out-edges of notes whose link targets appeared or vanished, an entity's
description, a query's note cards, a parse-cache row. They get it here. The
parse cache (``source``, given by the sync layer: core knows no SQLite) is
checked by digest; a miss reads the file, as ``VaultGraph.full`` reads a body.

Thread-safe: payloads are asked for from worker threads (record planning, the
query's pick) and pinned by ``VaultGraph.read`` in one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable

from wikid.core.note import Note

RECENT = 2048  # payloads kept (~5 MB at 2.4 KB each)


class Payloads:
    """The payloads of head notes, fetched on demand and kept in a bounded LRU."""

    def __init__(self, read_file: Callable[[str], Note | None], size: int = RECENT) -> None:
        # path -> the note as the parse cache holds it (None: no row); set by the sync layer.
        self.source: Callable[[str], Note | None] | None = None
        self._read_file = read_file
        self._recent: OrderedDict[str, Note] = OrderedDict()
        self._pinned: dict[str, Note] = {}
        self._lock = threading.Lock()
        self.size = size
        self.fetched = 0  # from the parse cache (a miss reads the file: ``read_file``)

    def of(self, head: Note) -> Note:
        """``head`` with its payload."""
        path = head.path
        with self._lock:
            held = self._pinned.get(path) or self._recent.get(path)
            if held is not None and held.digest == head.digest:
                if path in self._recent:
                    self._recent.move_to_end(path)
                return head.with_payload(held)
        held = self._fetch(head)
        with self._lock:
            self._recent[path] = held
            self._recent.move_to_end(path)
            while len(self._recent) > self.size:
                self._recent.popitem(last=False)
        return head.with_payload(held)

    def _fetch(self, head: Note) -> Note:
        held = self.source(head.path) if self.source is not None else None
        if held is not None and held.digest == head.digest:
            self.fetched += 1
            return held.lean()
        # No row of this digest: the file again. If it changed meanwhile, its update is
        # on its way (a watcher event, a restart's stat) and will derive it again.
        again = self._read_file(head.path)
        return again.lean() if again is not None else head

    def pin(self, heads: Iterable[Note]) -> None:
        """Fetch these heads' payloads now, for the next ``VaultGraph.apply``: it runs
        on the event loop, where no SQL or file read may wait (``read`` pins in its
        worker thread the notes the update will link again)."""
        found = {h.path: self._fetch(h) for h in heads}
        with self._lock:
            self._pinned.update(found)

    def unpin(self) -> None:
        with self._lock:
            self._pinned.clear()

    def forget(self, paths: Iterable[str]) -> None:
        """Drop what is kept of these notes (they changed or went away)."""
        with self._lock:
            for path in paths:
                self._recent.pop(path, None)
                self._pinned.pop(path, None)

    def __len__(self) -> int:
        return len(self._recent)
