"""Turn graph deltas into store batches: the only writer of the store.

Why "dirty keys, then diff": a delta names the graph nodes, edges and notes
that changed. From those the sink derives every store key whose record may
differ (entities of touched nodes, relations of touched node pairs, chunks
and documents of touched notes, and everything around a node whose *name*
changed), computes those records fresh from the graph (``records.py``),
compares them with the ledger's mirror and writes only the differences, as
one batch with one flush. The same code with "every key" as the dirty set is
the full reconciliation run at start-up, which is how offline edits, a crash
mid-batch (``pending``) and a first index are all handled by one path.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import structlog

from wikid.core.chunk import Chunk, chunk_note
from wikid.core.delta import Delta
from wikid.core.graph import VaultGraph
from wikid.core.note import Note
from wikid.store.heap import building, trim
from wikid.store.rag import Store
from wikid.sync import restart
from wikid.sync.implicit import ImplicitIndex, fold, node_of
from wikid.sync.jobs import ExtractionJobs
from wikid.sync.plan import Planned, Planner
from wikid.sync.records import Mapper, pair
from wikid.sync.search import SearchIndex
from wikid.sync.slices import LINKS, MEANING, Live, Steps, Stopped, Tally, never
from wikid.sync.slices import run as run_slices

log = structlog.get_logger("wikid.sync.sink")

Record = dict[str, Any]
# Entities + relations per batch of a full reconcile. Why 5,000: the pipeline holds
# three slices' records at once, and that peak stays in the heap as pymalloc arenas a
# few survivors pin (6k notes in-process: 10,000 → 5,000 keys, 110 → 99 arenas,
# -20 MB after the sync, no slower).
SLICE_KEYS = 5_000
BULK_SEARCH = 1000  # search rows rewritten at once past which the FTS index is merged


@dataclass
class BatchReport:
    writes: dict[str, int] = field(default_factory=dict)
    embedded: int = 0
    seconds: float = 0.0
    llm_calls: int = 0


_K = TypeVar("_K", str, tuple[str, str])
_SORT_PIECE = 4096


def _sorted(keys: set[_K]) -> list[_K]:
    """``sorted(keys)``, in pieces merged in Python: one ``sorted()`` is a single C call
    that holds the GIL throughout (120 ms for a 13k-note vault's 100k node pairs, in
    a worker thread: the event loop, and ``status``, waited for it). Each piece's sort
    is a few ms, and the merge lets the GIL go between items."""
    items = list(keys)
    pieces = [sorted(items[i : i + _SORT_PIECE]) for i in range(0, len(items), _SORT_PIECE)]
    return list(heapq.merge(*pieces))


class Sink:
    def __init__(
        self,
        vg: VaultGraph,
        store: Store,
        chunker: Callable[..., list[Chunk]] | None = None,
        implicit: ImplicitIndex | None = None,
    ) -> None:
        self.vg = vg
        self.store = store
        self.ledger = store.ledger
        # Chunks are sized with the store's counter, MiniLM's WordPiece, so no chunk is
        # silently truncated by the model; their ``tokens`` are the store's field.
        count = store.count_tokens
        self.mapper = Mapper(vg, chunker or (lambda note: chunk_note(note, count)))
        self.search = SearchIndex(store.ledger.database, vg.root)
        vg.payloads.source = functools.partial(restart.cached_note, store.ledger)
        self.implicit = implicit or ImplicitIndex(None)
        # Called once a full reconcile has written the search index (serving starts),
        # and once it has written every chunk and entity (meaning search is whole).
        self.on_search_ready: Callable[[], None] | None = None
        self.on_meaning_ready: Callable[[], None] | None = None
        # Held while a batch is written: a read that must not see half of one (a query
        # served while the first sync goes on) takes it too.
        self.writing = asyncio.Lock()
        self.live: Live | None = None  # the daemon's edits, let in during a full reconcile
        # The daemon's stop: every batch's embedding ends at its next model call, not
        # minutes later (a branch switch of 3,000 notes), and a full reconcile at its
        # next slice (``Stopped``).
        self.stopping: Callable[[], bool] = never
        self.cut = False  # a batch was cut: the graph is ahead of the store
        self._reconciling = False
        self.jobs = ExtractionJobs(vg, self.mapper, store.ledger, self.implicit)
        self.planner = Planner(vg, store.ledger, self.mapper, self.implicit)

    # -- entry points -----------------------------------------------------------

    async def reconcile_all(self) -> BatchReport:
        """Make the whole store equal a fresh build (start-up, ``wikid index``)."""
        # Every key, in a worker thread: at 13k notes it is a second of CPU work, and
        # nothing changes the graph until the slices start (edits go in between them).
        started = time.perf_counter()
        ns, ps, ts, notes, stale = await asyncio.to_thread(self._all_keys)
        keyed = time.perf_counter()
        # Full-text search first, committed on its own: on a cold start it is ready in
        # seconds while the store embeds (it is a function of the notes alone, and a
        # crash before the store catches up leaves it rewritten on the next start).
        await asyncio.to_thread(lambda: self.search.update(self._texts(stale)))
        if len(stale) > BULK_SEARCH:
            await asyncio.to_thread(self.search.optimize)
        log.info(  # the steps between listening and serving, timed
            "search index written",
            rows=len(stale),
            keys_s=round(keyed - started, 2),
            search_s=round(time.perf_counter() - keyed, 2),
        )
        if self.on_search_ready is not None:
            self.on_search_ready()
        # In slices, each its own batch: memory stays bounded on a cold index of a big
        # vault. They run as a pipeline around the model (``slices``). Meaning first:
        # the first ``meaning`` slices hold the nodes and notes (their entity texts and
        # chunks: what a question is matched against), the rest the links' relation
        # texts, which are as many again and matter less. Any order adds up to the same
        # full reconcile: the slices' owners are disjoint.
        meaning = max(1, -(-(len(ns) + len(ts)) // SLICE_KEYS))
        parts = meaning + -(-len(ps) // SLICE_KEYS)
        # The parse cache is trusted again only once every slice is in (restart.plan).
        self.ledger.set_meta({restart.META_KEY: ""})
        pending = self.ledger.pending()

        attachments = await asyncio.to_thread(_sorted, set(self.vg.attachments))

        def plan(i: int) -> Planned:
            """Slice ``i``: every ``parts``-th key, computed from the whole graph, so the
            slices add up to one full reconcile; keys a crash may have torn are forced
            in the first, which also empties the parse cache. Each slice writes the
            parse-cache rows of the notes whose chunks it writes, chunked once for
            both. Why not all in the first: chunking every note there held the model
            idle and every edit waiting for 13 s at 13k notes, and every note's chunks
            in memory until the end (~60 MB).

            Planned with the cyclic collector paused, then frozen (``building``): a
            slice's records live on until it is written, a minute later, and are freed
            by reference counting. Each full collection walked them for nothing (none
            found garbage), holding the GIL, so the loop stalled: a 13k cold start ran
            22 full collections, 872 ms in all, up to 62 ms each; now 11, 27 ms."""
            with building():
                if i >= meaning:
                    return self.planner.plan(
                        set(), set(ps[i - meaning :: parts - meaning]), set(), {}, None
                    )
                mine = ts[i::meaning]
                return self.planner.plan(
                    set(ns[i::meaning]),
                    set(),
                    {p for p in mine if p in notes},
                    force=pending if i == 0 else {},
                    files={*mine, *attachments[i::meaning]},
                    all_files=i == 0,
                )

        async def embed(
            planned: Planned, stop: Callable[[], bool], report: Callable[[int, int], None]
        ) -> int | None:
            return await self.store.embed_ahead(planned.ops, stop, report)

        written = [0]

        async def write(planned: Planned) -> dict[str, int]:
            await self._write(planned, searched=set())
            written[0] += 1  # slices are written in order
            if written[0] == meaning and self.on_meaning_ready is not None:
                self.on_meaning_ready()
            return planned.ops.counts()

        steps = Steps(plan, embed, write, stale=lambda a, b: a.forces or a.ops.meets(b.ops))
        # An edit's own texts are not the reconcile's progress: while the slices run,
        # a batch's embedding reports nothing unless it is a slice's.
        shown, self.store.progress = self.store.progress, None
        self._reconciling = True
        try:
            kinds = ((MEANING, meaning), (LINKS, parts - meaning))
            tally = Tally(parts, shown, kinds, guesses={LINKS: len(ps)})  # a text a pair
            done = await run_slices(parts, steps, tally, self.live, self.stopping)
        except Stopped:
            self.cut = True
            raise
        finally:
            self.store.progress, self._reconciling = shown, False
            self.mapper.keep()
        fp = restart.fingerprint(self.vg.filter, self.implicit.enabled)
        self.ledger.set_meta({restart.META_KEY: fp})
        return BatchReport(done.writes, done.embedded, done.seconds, self.store.llm_calls)

    def _all_keys(
        self,
    ) -> tuple[list[str], list[tuple[str, str]], list[str], set[str], set[str]]:
        """The keys a full reconcile covers, the graph's and the ledger's: nodes, pairs
        and paths (notes and stale search rows) sorted, the notes, the stale rows."""
        self.prime()
        if self.implicit.enabled:
            gone = {p: None for p in self.implicit.by_note if p not in self.vg.notes}
            self.implicit.set_notes(gone | {p: self.mapper.chunks(p) for p in self.vg.notes})
            self.jobs.forget_all()
        implicit_nodes, implicit_pairs = self.implicit.owners()
        nodes = set(self.vg.g.nodes) | self.ledger.all_nodes() | implicit_nodes
        pairs = {pair(u, v) for u, v in self.vg.g.edges()} | self.ledger.all_pairs()
        pairs |= implicit_pairs
        notes = set(self.vg.notes) | self.ledger.all_notes()
        synced = self.ledger.digests()
        indexed = self.search.indexed()
        stale = {
            p
            for p in notes | indexed
            if p not in indexed
            or p not in self.vg.notes
            or synced.get(p) != self.vg.notes[p].digest
        }
        return _sorted(nodes), _sorted(pairs), _sorted(notes | stale), notes, stale

    def prime(self) -> None:
        """Take the graph as the one the store was built from (a restart from the parse
        cache): the in-memory naming state a full reconcile would set up, no writes."""
        self.mapper.namer.update(self.vg, list(self.vg.g.nodes))
        self.mapper.namer.refolded.clear()

    async def apply(self, delta: Delta) -> BatchReport:
        """Push one graph delta into the store as one batch."""
        if not delta:
            return BatchReport()
        # Chunking (token counts) is the CPU-heavy part of a big note: in a worker
        # thread, so the loop keeps answering; the mapper caches what it computes.
        changed = [p for p in delta.notes_changed if p in self.vg.notes]
        await asyncio.to_thread(lambda: [self.mapper.chunks(p) for p in changed])
        touched = set(delta.nodes_added) | set(delta.nodes_changed) | delta.nodes_removed
        renamed = self.mapper.namer.update(self.vg, touched)
        edges = set(delta.edges_added) | set(delta.edges_changed) | delta.edges_removed
        nodes = touched | renamed | {u for u, _, _ in edges} | {v for _, v, _ in edges}
        pairs = {pair(u, v) for u, v, _ in edges}
        for n in renamed:
            pairs |= self.mapper.pairs_of(n)
        notes = delta.notes_changed | delta.notes_removed
        for path in notes:
            nodes.add(path)
            if path in self.vg.g:  # its chunks changed: so did every record citing them
                for _, v in self.vg.g.out_edges(path):
                    nodes.add(v)
                    pairs.add(pair(path, v))
            else:
                self.mapper.forget(path)
        self._implicit_keys(nodes, pairs, notes)
        return await self._run(nodes, pairs, notes, force={}, searched=notes, files=touched | notes)

    async def restamp(self, paths: set[str]) -> None:
        """Parse-cache rows for notes read again unchanged (``VaultGraph.take_restat``):
        their new stat, so the next restart trusts them without reading them; and their
        property rows, whose dates may be the file's mtime."""
        if paths:
            rows = await asyncio.to_thread(restart.file_rows, self.vg, paths, self.mapper.spans)
            await asyncio.to_thread(self.ledger.put_files, rows)
            await asyncio.to_thread(
                lambda: self.search.restat(
                    {p: self.vg.payload(p) for p in self.vg.notes.keys() & paths}
                )
            )

    async def apply_extracted(self, hashes: set[str]) -> BatchReport:
        """New extractions in the cache: write the implicit records they bring."""
        folds, fold_pairs = self.implicit.learn(hashes)
        nodes = {node_of(f) for f in folds}
        pairs = {pair(node_of(a), node_of(b)) for a, b in fold_pairs}
        if not nodes and not pairs:
            return BatchReport()
        return await self._run(nodes, pairs, set(), force={}, searched=set())

    def _implicit_keys(self, nodes: set[str], pairs: set[tuple[str, str]], notes: set[str]) -> None:
        """Add the implicit keys a batch may change: those of the notes' old and new
        chunks, of names that changed holder, and of pairs a link now states (or no
        longer does)."""
        namer = self.mapper.namer
        folds, fold_pairs = self.implicit.set_notes(
            {p: self.mapper.chunks(p) if p in self.vg.notes else None for p in notes}
        )
        for p in notes:  # a chunk's salience depends on its siblings
            self.jobs.forget(p)
        folds |= namer.refolded
        namer.refolded.clear()
        fold_pairs |= self.implicit.around(folds)
        for a, b in list(pairs):
            fa, fb = namer.names.get(a), namer.names.get(b)
            if fa and fb and self.implicit.is_related(fold(fa), fold(fb)):
                fold_pairs.add(pair(fold(fa), fold(fb)))
        nodes.update(node_of(f) for f in folds)
        pairs.update(pair(node_of(a), node_of(b)) for a, b in fold_pairs)

    # -- the batch ----------------------------------------------------------------

    async def _run(
        self,
        nodes: set[str],
        pairs: set[tuple[str, str]],
        notes: set[str],
        force: dict[str, set[str]],
        searched: set[str],
        files: set[str] | None = None,
    ) -> BatchReport:
        """One batch: plan, embed, write and commit."""
        started = time.perf_counter()
        # The records of every touched key, diffed with the mirror: CPU work over the
        # graph and ledger reads, in a worker thread so that the loop keeps answering
        # (the graph is not changed while a batch runs; SQLite serialises the reads).
        planned = await asyncio.to_thread(self.planner.plan, nodes, pairs, notes, force, files)
        embedded = await self.store.embed_ahead(planned.ops, self.stopping, self.store.progress)
        if embedded is None:  # nothing written: the next start goes on as after a crash
            self.cut = True
            raise Stopped
        await self._write(planned, searched)
        return BatchReport(
            writes=planned.ops.counts(),
            embedded=embedded or 0,
            seconds=time.perf_counter() - started,
            llm_calls=self.store.llm_calls,
        )

    async def _write(self, planned: Planned, searched: set[str]) -> None:
        """Write a planned batch whose texts are embedded: the store, the mirror and the
        search rows of ``searched``, committed together where they can be."""
        async with self.writing:
            await self._write_now(planned, searched)
        # A big batch's records are garbage now: give their pages back, off the loop and
        # after the write lock, so neither `status` nor a read waiting for the batch waits
        # for it. malloc_trim locks each arena in turn, so beside the model's runs it
        # waited: 237 ms on the loop in a 13k cold start (`status` waited 204 ms).
        await asyncio.to_thread(trim)

    async def _write_now(self, planned: Planned, searched: set[str]) -> None:
        ops = planned.ops
        if ops:
            await asyncio.to_thread(self.ledger.set_pending, ops)  # 1.6 s at 13k
        async with self.store.batch():
            if ops:
                await self.store.write(ops, datetime.now(UTC).isoformat())
            # The mirror's rows: a slice of a cold start writes tens of thousands.
            await asyncio.to_thread(
                self.ledger.commit, ops, planned.notes, planned.files, planned.all_files
            )
            if searched:  # its FTS rows: ~0.1 s for one note at 13k, off the loop too
                await asyncio.to_thread(lambda: self.search.update(self._texts(searched)))
        # The store and the search index hold these notes' text now: the graph keeps
        # them lean (a reconcile's search rows were written before its first slice).
        self.vg.release(
            {p: row[0] for p, row in planned.notes.items() if row is not None},
            heads=planned.files or (),  # their parse-cache rows are written: heads alone
        )
        self.mapper.keep()

    def _texts(self, paths: set[str]) -> dict[str, Note | None]:
        """The notes at ``paths`` with their bodies, for the search index (None: gone)."""
        return {p: self.vg.full(p) if p in self.vg.notes else None for p in sorted(paths)}
