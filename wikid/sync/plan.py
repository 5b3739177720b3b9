"""Planning a batch: the records every dirty key should hold, diffed with the ledger's
mirror into the ops to write.

Why apart from the sink: this is pure computation over the graph and ledger
reads (it runs in a worker thread and writes nothing); the sink decides which
keys are dirty and writes the plan. Slices of a reconcile are planned while
others embed, so a plan holds no state between calls: the keys a crash may have
torn (``force``) are a parameter, not an attribute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wikid.core.graph import VaultGraph
from wikid.store.ids import doc_id
from wikid.store.ledger import FileRow, Ledger, Ops, mirror_form
from wikid.sync import restart
from wikid.sync.implicit import IMPLICIT, ImplicitIndex
from wikid.sync.records import Mapper

Record = dict[str, Any]


@dataclass
class Planned:
    """One batch's plan: its ops, the ledger's note rows and parse-cache rows (of the
    files it covers; ``all_files``: they are every file)."""

    ops: Ops
    notes: dict[str, tuple[str, str, list[str]] | None]
    files: dict[str, FileRow] | None
    all_files: bool = False
    forces: bool = False  # it forces keys a crash may have torn, whoever owns them


class Planner:
    """Plans batches from the graph (through the mapper) and the ledger's mirror."""

    def __init__(
        self, vg: VaultGraph, ledger: Ledger, mapper: Mapper, implicit: ImplicitIndex
    ) -> None:
        self.vg, self.ledger, self.mapper, self.implicit = vg, ledger, mapper, implicit

    def plan(
        self,
        nodes: set[str],
        pairs: set[tuple[str, str]],
        notes: set[str],
        force: dict[str, set[str]],
        files: set[str] | None,
        all_files: bool = False,
    ) -> Planned:
        """The batch's ops, note rows and parse-cache rows (of ``files``)."""
        ops = Ops()
        self._entities(ops, nodes, force)
        self._relations(ops, pairs, force)
        note_rows = self._notes(ops, notes, force)
        self._force(ops, force)
        rows = None if files is None else restart.file_rows(self.vg, files, self.mapper.spans)
        return Planned(ops, note_rows, rows, all_files, forces=any(force.values()))

    def _diff(
        self,
        ops: Ops,
        kind: str,
        owner: Any,
        desired: dict[str, Record],
        current: dict[str, Record],
        force: dict[str, set[str]],
    ) -> None:
        target: dict[str, Record | None] = getattr(ops, kind)
        for key in current:
            if key not in desired:
                target.setdefault(key, None)  # a delete never overrides another owner's upsert
        forced = force.get(kind, set())
        for key, rec in desired.items():
            if current.get(key) != mirror_form(rec) or key in forced:
                target[key] = rec
                ops.owner[(kind, key)] = owner

    def _entities(self, ops: Ops, nodes: set[str], force: dict[str, set[str]]) -> None:
        for node in sorted(nodes):
            if node.startswith(IMPLICIT):
                want = self.implicit.entity(node[len(IMPLICIT) :], self.mapper.namer)
            else:
                want = self.mapper.entity(node)
            desired = {want[0]: want[1]} if want else {}
            current = dict(self.ledger.entity_of(node))
            self._diff(ops, "entity", node, desired, current, force)

    def _relations(self, ops: Ops, pairs: set[tuple[str, str]], force: dict[str, set[str]]) -> None:
        for a, b in sorted(pairs):
            if a.startswith(IMPLICIT):
                want = self.implicit.relation(
                    a[len(IMPLICIT) :], b[len(IMPLICIT) :], self.mapper.namer, self._linked
                )
            else:
                want = self.mapper.relation(a, b)
            desired = {want[0]: want[1]} if want else {}
            current = dict(self.ledger.relation_of(a, b))
            self._diff(ops, "relation", (a, b), desired, current, force)

    def _linked(self, u: str, v: str) -> bool:
        """Do links relate graph nodes ``u`` and ``v`` (a structural relation)?"""
        return self.mapper.relation(u, v) is not None

    def _notes(
        self, ops: Ops, notes: set[str], force: dict[str, set[str]]
    ) -> dict[str, tuple[str, str, list[str]] | None]:
        rows: dict[str, tuple[str, str, list[str]] | None] = {}
        for path in sorted(notes):
            note = self.vg.with_body(path) if path in self.vg.notes else None
            if note is None:
                self._diff(ops, "chunk", path, {}, self.ledger.chunks_of(path), force)
                self._diff(ops, "doc", path, {}, self.ledger.docs_of(path), force)
                rows[path] = None
                continue
            chunks = self.mapper.chunks(path, note)  # the note read once, if lean
            did = doc_id(path)
            desired_chunks = {
                c.id: {
                    "content": c.content,
                    "tokens": c.tokens,
                    "chunk_order_index": c.order,
                    "full_doc_id": did,
                    "file_path": path,
                    "source_id": did,
                }
                for c in chunks
            }
            self._diff(ops, "chunk", path, desired_chunks, self.ledger.chunks_of(path), force)
            body = note.body or ""
            doc = {
                "content": body,
                "file_path": path,
                "status": "processed",
                "content_summary": body.strip()[:100],
                "content_length": len(body),
                "chunks_count": len(chunks),
                "chunks_list": [c.id for c in chunks],
                "track_id": "wikid",
                "content_hash": note.digest,
            }
            self._diff(ops, "doc", path, {did: doc}, self.ledger.docs_of(path), force)
            rows[path] = (note.digest, self.mapper.name(path), [c.id for c in chunks])
        return rows

    def _force(self, ops: Ops, force: dict[str, set[str]]) -> None:
        """Keys a crashed batch may have torn. ``_diff`` rewrote those still desired;
        the rest are not part of a fresh build, so they are deleted whatever the mirror says."""
        for kind, keys in force.items():
            target: dict[str, Record | None] = getattr(ops, kind)
            for key in keys:
                target.setdefault(key, None)
