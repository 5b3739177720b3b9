"""The chunks a query's pick reads, as the store holds them: read in one batch.

Why: the pick needs the text of a few dozen chunks (each of the best notes' chunk that
shares most of the question's words, each second-hop chunk) and, for each chosen item,
the heading and line it sits under. It took them from ``Index.chunks``, which chunks a
note again when its chunks are not among the 2,048 notes' kept in memory: at 13k notes
that was 13 ms of a 55 ms query (the file read again and every paragraph's tokens
counted). The store's chunk rows hold the same text and token count (a chunk's id is
the hash of its note and text), and a note's chunk ids and start lines are known for
every note (``Index.spans``), so one read of the rows serves the whole pick.

A row the store does not have yet (a note saved a moment ago, its write still queued)
is never guessed: that note is chunked again, as before.

A heading is the chunk's own "title › heading › subheading" line, without the title:
the section path under which the chunk starts (None: the note's top).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from wikid.core.chunk import HEADING_SEP, Chunk

if TYPE_CHECKING:
    from wikid.sync.index import Index


class Shelf:
    """Chunks read from the store for one query, by id; notes missing rows are chunked."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._rows: dict[str, dict[str, Any]] = {}
        self._notes: dict[str, list[Chunk]] = {}

    async def read(self, notes: Iterable[str] = (), ids: Iterable[str] = ()) -> None:
        """Fetch every chunk of ``notes`` and the chunks ``ids``, in one read of the rows
        (the ones already on the shelf are not read again)."""
        wanted = [c for p in notes for c in self.index.spans(p)[0]]
        wanted += list(ids)
        wanted = [c for c in dict.fromkeys(wanted) if c not in self._rows]
        if not wanted:
            return
        for cid, row in zip(wanted, await self.index.chunk_rows(wanted), strict=True):
            if row and isinstance(row.get("content"), str):
                self._rows[cid] = row

    def chunks(self, path: str) -> list[Chunk]:
        """The note's chunks (empty: not a note). From the rows when the shelf has every
        one of them; else chunked again (``Index.chunks``). A chunk made from a row has
        no heading tuple and ends where it starts: a row keeps neither (``locate``
        reads the heading from the text)."""
        if path in self._notes:
            return self._notes[path]
        ids, starts = self.index.spans(path)
        if ids and all(c in self._rows for c in ids):
            out = [
                Chunk(
                    c,
                    path,
                    i,
                    self._rows[c]["content"],
                    (),
                    line,
                    line,
                    stored_tokens(self._rows[c]),
                )
                for i, (c, line) in enumerate(zip(ids, starts, strict=True))
            ]
        else:
            out = self.index.chunks(path)
        self._notes[path] = out
        return out

    def locate(
        self, path: str | None, chunk_id: str | None, text: str | None = None
    ) -> dict[str, Any]:
        """The heading path and first line of a note's chunk; the note's top when the
        chunk is not one of the note's. ``text``: the chunk's, when the caller has it
        (a chunk item's own), so that its row need not be read."""
        if not path:
            return {"heading": None, "line": None}
        ids, starts = self.index.spans(path)
        if chunk_id not in ids:
            return {"heading": None, "line": 1 if ids else None}
        line = starts[ids.index(chunk_id)]
        if text is None:
            row = self._rows.get(chunk_id)
            if row is not None:
                text = row["content"]
            else:  # not read: from the note's chunks (kept in memory, or made again)
                text = next((c.content for c in self.chunks(path) if c.id == chunk_id), "")
        return {"heading": heading_of(text, self.index.graph.notes[path].title), "line": line}


def heading_of(content: str, title: str) -> str | None:
    """A chunk's section path, from its first line ("title › heading › ..."): None at
    the note's top."""
    first = content.split("\n", 1)[0]
    if not first.startswith(title + HEADING_SEP):
        return None
    return first[len(title) + len(HEADING_SEP) :] or None


def stored_tokens(row: dict[str, Any]) -> int:
    """A chunk row's token count, as the store counted its content (0: not known)."""
    tokens = row.get("tokens")
    return tokens if isinstance(tokens, int) and tokens > 0 else 0
