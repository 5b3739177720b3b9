"""Which chunks go to the LLM for extraction, and with what header.

Why apart from the sink: this is a question about chunks already in the store (no
cached extraction yet, salient enough), asked by the extraction loop outside every
batch; the sink only tells it which notes changed (``forget``)."""

from __future__ import annotations

from wikid.core.chunk import Chunk
from wikid.core.graph import VaultGraph
from wikid.store.ids import text_hash
from wikid.store.ledger import Ledger
from wikid.sync.extract import Job
from wikid.sync.implicit import ImplicitIndex
from wikid.sync.records import Mapper
from wikid.sync.salience import score


class ExtractionJobs:
    def __init__(
        self, vg: VaultGraph, mapper: Mapper, ledger: Ledger, implicit: ImplicitIndex
    ) -> None:
        self.vg, self.mapper, self.ledger, self.implicit = vg, mapper, ledger, implicit
        self._scored: dict[str, dict[str, float]] = {}  # note -> chunk id -> salience

    def forget(self, path: str) -> None:
        """Note ``path`` changed: its chunks' salience is scored again when asked."""
        self._scored.pop(path, None)

    def forget_all(self) -> None:
        self._scored.clear()

    def pick(self, threshold: float) -> tuple[list[Job], int]:
        """The chunks to send to the LLM (no cached extraction, salient enough), and
        how many the salience filter skips."""
        missing = self.implicit.missing
        by_note: dict[str, list[Chunk]] = {}
        for c in missing.values():
            by_note.setdefault(c.note, []).append(c)
        jobs: list[Job] = []
        skipped = 0
        for path in sorted(by_note):
            if path not in self.vg.notes:
                continue
            scores = self._scored.get(path)
            if scores is None:
                scores = self._scored[path] = self._scores(path, by_note[path])
            for c in sorted(by_note[path], key=lambda c: c.order):
                if scores[c.id] < threshold:
                    skipped += 1
                else:
                    jobs.append(self._job(c))
        return jobs, skipped

    def _scores(self, path: str, chunks: list[Chunk]) -> dict[str, float]:
        """Salience of ``chunks`` of note ``path``, each against its siblings (their
        vectors read from the embedding cache once for the note)."""
        hashes = {s.id: text_hash(s.content) for s in self.mapper.chunks(path)}
        vecs = self.ledger.vectors(hashes.values())
        return {
            c.id: score(
                c.content,
                vecs.get(hashes.get(c.id, "")),
                [vecs[h] for cid, h in hashes.items() if cid != c.id and h in vecs],
            )
            for c in chunks
        }

    def _job(self, c: Chunk) -> Job:
        """The chunk and its structure header: the note's entity, type and tags, and
        the links this chunk states, marked as already known."""
        path = c.note
        note = self.vg.notes[path]
        me = self.mapper.name(path)
        known = sorted(
            {
                self.mapper.name(v)
                for _, v, _, data in self.vg.g.links_out(path)
                if v != path and self.mapper.evidence_id(path, data) == c.id
            }
        )
        tags = f"; tags: {', '.join('#' + t for t in note.tags)}" if note.tags else ""
        header = f'note entity "{me}" (type: {note.type or "note"}{tags}). Known from links: '
        header += "; ".join(f"{me} — {k}" for k in known) if known else "none"
        return Job(text_hash(c.content), c.id, path, c.content, header + ".")
