"""``Index``: a vault's graph, store and sink behind one facade.

Why one place: ``wikid index``, the daemon and the tests all open an index the
same way, so there is one definition of "the store for this vault". Why a
facade: the layers outside (ask, server, cli) call its methods only, never its
attributes' insides (``index.store.ledger``, ``index.sink.search``); what the
store or the sink hold can then change without touching them. Tests may look
inside.
"""

from __future__ import annotations

import asyncio
import pickle
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from wikid.config import DEFAULT_BACKEND, DEFAULT_EMBEDDING, ExtractSettings
from wikid.core.chunk import Chunk
from wikid.core.delta import Delta
from wikid.core.graph import Changes, VaultGraph
from wikid.core.vault import Snapshot, VaultOptions, snapshot, vault_present
from wikid.store.cost import CostLedger
from wikid.store.embed import Embedder
from wikid.store.heap import building
from wikid.store.lock import StoreLock
from wikid.store.rag import Store
from wikid.store.retrieve import chunk_vectors, nearest_chunks, retrieve, similarity
from wikid.sync import restart
from wikid.sync._extracting import Extracting
from wikid.sync.extract import Extractor
from wikid.sync.implicit import ImplicitIndex
from wikid.sync.opening import open_parts
from wikid.sync.parse_pool import parser
from wikid.sync.props import Where
from wikid.sync.search import Hit, exact_names
from wikid.sync.sink import BatchReport, Sink
from wikid.sync.slices import Live

log = structlog.get_logger("wikid.sync.index")


class VaultMissing(RuntimeError):
    """The vault's folder is gone or empty while the store holds its notes."""


@dataclass
class Index(Extracting):
    vault: Path
    vg: VaultGraph
    store: Store
    sink: Sink
    extractor: Extractor | None = None  # None: extraction is off
    skipped: int = 0  # chunks the salience filter kept from the LLM, last time it looked
    # A restart from the parse cache: the first sync updates the cached graph with the
    # files that changed (False: the first sync is a full reconcile), and why.
    startup: bool = False
    startup_reason: str = "full"
    # Where the graph came from: "files" (read them all), "parse cache" (rebuilt from
    # the cache's notes) or "saved" (the graph the last close saved, see restart.save).
    graph_from: str = "files"
    # The vault's stat a restart's first sync compared with the cache (None after a full
    # load, and once ``stat()`` handed it over): the daemon's first reconciliation
    # snapshot, so it does not walk the vault again (0.3 s at 10k notes); the watcher
    # was started before it, so no change after it is missed.
    seen: Snapshot | None = None
    lock: StoreLock | None = None  # this process is the store's one writer
    # Many notes read at once are parsed in worker processes (``parse_pool``): a cold
    # start's every note, a restart's thousands changed (a checkout of another branch).
    parse_in_processes: bool = False
    synced: bool = False  # the first sync is done: the graph is the store's
    # Held while the graph changes, and by a query while it walks the graph in a worker
    # thread: the walk never sees a graph halfway through an update.
    graph_still: asyncio.Lock = field(default_factory=asyncio.Lock)

    @classmethod
    async def open(
        cls,
        vault: Path,
        workdir: Path | None = None,
        *,
        options: VaultOptions | None = None,
        embedder: Embedder | None = None,
        embedding: str = DEFAULT_EMBEDDING,
        backend: str = DEFAULT_BACKEND,
        llm_func: Any = None,
        workspace: str | None = None,
        extraction: ExtractSettings | None = None,
        postgres_url: str | None = None,
        adopt_from: Path | None = None,
        parse_in_processes: bool = False,
    ) -> Index:
        """Open (creating if needed) the store of ``vault`` and load its graph
        (``opening.open_parts``, the composition root); ``adopt_from``: a store folder
        under wikid's old naming, moved here if it is this vault's and none is here yet;
        ``parse_in_processes``: a vault read whole (no parse cache), or a restart's
        thousands of changed notes, are parsed in worker processes (``parse_pool``).
        The daemon asks for it; a script importing wikid does not get it unasked, since
        a spawned worker runs the main module again.

        LightRAG keeps each workspace's data in process-wide memory, so within one
        process a workspace name must always mean the same working dir."""
        vault = Path(vault)
        o = await open_parts(
            vault,
            workdir,
            options=options,
            embedder=embedder,
            embedding=embedding,
            backend=backend,
            llm_func=llm_func,
            workspace=workspace,
            extraction=extraction,
            postgres_url=postgres_url,
            adopt_from=adopt_from,
            parse_in_processes=parse_in_processes,
        )
        try:
            sink = _sink(o.vg, o.store, o.extractor)
            index = cls(vault, o.vg, o.store, sink, o.extractor, lock=o.lock)
            plan = o.plan
            if plan is not None:
                index.startup = True
                index.sink.mapper.know_spans(plan.spans)
                index.graph_from = "parse cache"
                if plan.namer is not None:  # saved with the graph: no need to name it again
                    plan.namer.refolded.clear()
                    index.sink.mapper.namer, index.graph_from = plan.namer, "saved"
            index.startup_reason = o.reason
            index.parse_in_processes = parse_in_processes
            return index
        except BaseException:
            o.lock.release()
            raise

    def with_graph(self, vg: VaultGraph) -> Index:
        """This index on graph ``vg``, with a fresh sink (its first reconcile rebuilds
        the implicit index from the extraction cache)."""
        sink = _sink(vg, self.store, self.extractor)
        return Index(self.vault, vg, self.store, sink, self.extractor, lock=self.lock)

    async def stat(self) -> Snapshot:
        """The vault's stat: the first call gets the one a restart compared with the
        parse cache (``seen``, then let go: later it would be stale, and it is ~1 MB
        per 5k files), every other call walks the vault now (in a worker thread)."""
        seen, self.seen = self.seen, None
        if seen is not None:
            return seen
        return await asyncio.to_thread(snapshot, self.vault, self.vg.filter)

    async def close(self) -> None:
        try:
            # Not after a cut batch (``Sink.stopping``): the graph is ahead of the store,
            # and the next start goes on from the parse cache, as after a crash.
            if self.synced and self.extractor is None and not self.sink.cut:
                await asyncio.to_thread(self._save_graph)
            await self.store.close()
        finally:
            if self.lock is not None:
                self.lock.release()

    def _save_graph(self) -> None:
        """The graph for the next start (``restart.save``): never a reason to fail. No
        cyclic collection while it is pickled: the pickler's garbage set one off, which
        walked the whole graph holding the GIL (362 ms of the event loop at 13k)."""
        try:
            mapper = self.sink.mapper
            with building():
                restart.save(self.store.ledger, self.vg, mapper.known_spans(), mapper.namer)
        except (OSError, RuntimeError, AttributeError, TypeError, pickle.PicklingError) as exc:
            log.warning("graph not saved for the next start", error=str(exc))

    # -- the facade: what the daemon, the CLI and the ask layer call ------------------

    @property
    def graph(self) -> VaultGraph:
        """The in-memory wikilink graph (read it; only ``update`` changes it)."""
        return self.vg

    @property
    def extracting(self) -> bool:
        return self.extractor is not None

    @property
    def llm_calls(self) -> int:
        """LLM calls attempted on the structural path (always 0: the function refuses)."""
        return self.store.llm_calls

    @property
    def model_id(self) -> str:
        return self.store.embedder.model_id

    def on_embedded(self, callback: Callable[..., None] | None) -> None:
        """Call ``callback(done, total)`` as a batch embeds its new texts (progress); a
        full reconcile adds ``kinds={name: (done, total)}``, meaning's kinds first."""
        self.store.progress = callback

    def on_meaning_ready(self, callback: Callable[[], None] | None) -> None:
        """Call ``callback()`` once a full reconcile has written every chunk and entity
        with its vector: meaning search is whole, the links' texts still embedding."""
        self.sink.on_meaning_ready = callback

    def between_writes(self) -> asyncio.Lock:
        """Held, no batch is being written: a read served during the first sync sees
        whole batches only."""
        return self.sink.writing

    def on_search_ready(self, callback: Callable[[], None] | None) -> None:
        """Call ``callback()`` when the first sync has made links and search usable, before
        the store is fully embedded (at once when the sync starts from the parse cache)."""
        self.sink.on_search_ready = callback

    def stop_when(self, stopping: Callable[[], bool]) -> None:
        """Cut any batch at its next model call, and a full reconcile at its next slice,
        once ``stopping()`` (the daemon's stop): nothing of the batch is written (its
        texts embedded so far are cached), the graph is not saved, and the next start
        goes on from what was written, as after a crash (``slices.Stopped``)."""
        self.sink.stopping = stopping

    def let_in(self, live: Live | None) -> None:
        """Edits that a full reconcile lets in between (and during) its long batches, so
        that they need not wait for a cold store to be embedded (``Sink.Live``)."""
        self.sink.live = live

    def counts(self) -> dict[str, int]:
        """entities, relations, chunks (and documents) the store holds, from the ledger."""
        return self.store.ledger.counts()

    def cost_ledger(self) -> CostLedger:
        return CostLedger(self.store.ledger.database)

    async def update(
        self, paths: set[str], reconcile: bool = False, confirm_empty: bool = False
    ) -> tuple[Delta, BatchReport]:
        """Re-read ``paths`` into the graph and write what changed: one batch (with
        ``reconcile``, compare every key instead: after a failed batch; with
        ``confirm_empty``, a note newly read empty waits for a second read, see
        ``VaultGraph.take_recheck``). Files are read and parsed in a worker thread, so
        the event loop keeps answering."""
        changes = await asyncio.to_thread(self.vg.read, paths, confirm_empty)
        return await self._apply(changes, reconcile)

    async def _apply(self, changes: Changes, reconcile: bool = False) -> tuple[Delta, BatchReport]:
        """What ``vg.read`` found into the graph (under ``graph_still``) and the store,
        and the parse cache renewed for notes read again unchanged."""
        async with self.graph_still:
            delta = self.vg.apply(changes)
        report = await (self.sink.reconcile_all() if reconcile else self.sink.apply(delta))
        await self.sink.restamp(self.vg.take_restat())
        return delta, report

    async def reconcile(self) -> BatchReport:
        """Compare every key with the ledger and write the difference (after a failure)."""
        report = await self.sink.reconcile_all()
        self.synced = True
        return report

    def search(
        self,
        text: str,
        k: int,
        folder: str | None,
        tag: str | None,
        rare_only: bool = False,
        among: Collection[str] | None = None,
        rarest: int = 0,
    ) -> list[Hit]:
        return self.sink.search.search(text, k, folder, tag, rare_only, among, rarest)

    def passing(self, filters: list[Where]) -> set[str]:
        """The notes that pass every property filter (``props``)."""
        return self.sink.search.passing(filters, self.vg)

    def names_in(self, question: str) -> list[tuple[str, str]]:
        """(name, note path) of each title, alias or tag that the question mentions: from
        the name index, and for names made of words too common there to rank (``Note``
        in a vault of "Note 123"s), by their exact text in the graph."""
        found, common = self.sink.search.names_in(question)
        return found + [n for n in exact_names(self.vg, question, common) if n not in found]

    def entity_name(self, node: str) -> str:
        return self.sink.mapper.name(node)

    def chunks(self, path: str) -> list[Chunk]:
        """The chunks of a note as they are stored (empty for a note not in the graph)."""
        return self.sink.mapper.chunks(path) if path in self.vg.notes else []

    def count_all(self, texts: list[str]) -> list[int]:
        return self.store.count_all(texts)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors of short texts by the store's model, uncached (question words, labels)."""
        return self.store.embedder.embed(texts)

    @property
    def embeds_per_text(self) -> bool:
        """The model's vector of a text never depends on the texts embedded beside it
        (wikid's ONNX models; an HTTP endpoint may batch)."""
        return bool(getattr(self.store.embedder, "per_text", False))

    async def aquery_data(self, question: str, param: Any) -> dict[str, Any]:
        """LightRAG's retrieval on this store (no LLM: keywords come in ``param``)."""
        result: dict[str, Any] = await self.store.rag.aquery_data(question, param)
        return result

    async def retrieve(
        self,
        question: str,
        high: list[str],
        low: list[str],
        mode: str,
        pools: dict[str, int],
        words: Sequence[str] = (),
    ) -> dict[str, Any]:
        """The store's entities, relations and chunks for a question, at most ``pools``
        of each, as ``aquery_data`` would rank them (``store.retrieve``: a third of its
        time); ``words`` are embedded in the same call (``word_vectors``)."""
        return await retrieve(self.store.rag, question, high, low, mode, pools, words)

    def spans(self, path: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """A note's chunk ids and their start lines, as stored (empty: not a note)."""
        return self.sink.mapper.spans(path) if path in self.vg.notes else ((), ())

    async def nearest_chunks(self, ids: list[str], k: int) -> dict[str, list[dict[str, Any]]]:
        """For each stored chunk of ``ids``, the ``k`` stored chunks nearest it by
        meaning, best first, each with its note (``file_path``) and cosine (``distance``)."""
        return await nearest_chunks(self.store.rag, ids, k)

    async def chunk_vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        """The stored vectors of these chunks, as float32 arrays (absent ones left out)."""
        found = await chunk_vectors(self.store.rag.chunks_vdb, ids)
        return {k: np.asarray(v, np.float32) for k, v in found.items()}

    async def similarity(self, vector: np.ndarray, ids: list[str]) -> dict[str, float]:
        """The cosine of ``vector`` with each stored chunk of ``ids`` (absent ones left out)."""
        return await similarity(self.store.rag, vector, ids)

    async def chunk_rows(self, ids: Iterable[str]) -> list[dict[str, Any] | None]:
        rows: list[dict[str, Any] | None] = await self.store.rag.text_chunks.get_by_ids(list(ids))
        return rows

    def _refuse_empty(self, before: dict[str, str], notes: set[str], force: bool) -> None:
        """A store full of notes and a vault with none is a missing folder, an unmounted
        drive or a failed sync tool far more often than a wish to delete everything."""
        if before and not force and (not notes or not vault_present(self.vault)):
            raise VaultMissing(
                f"the vault {self.vault} is missing or has no notes, but its store holds "
                f"{len(before)}: nothing was removed"
            )

    async def sync(self, force: bool = False) -> dict[str, Any]:
        """The first sync: from the parse cache, one update with the files that changed
        since the last run; else a full reconcile (first run, or a cache not trusted)."""
        started = time.perf_counter()
        # Off the loop: 13k rows, and the store's lock may be held by a vector load
        # (a restart's worst status reply, 84-133 ms, waited on it).
        before = await asyncio.to_thread(self.store.ledger.digests)
        report: BatchReport
        if self.startup:  # the graph is the store's: serve it, then bring it up to date
            if self.graph_from != "saved":
                await asyncio.to_thread(self.sink.prime)  # 13k names: 0.3 s of CPU
            if self.sink.on_search_ready is not None:
                self.sink.on_search_ready()  # the search index is the store's too
            # The vault's stat only now: 0.3 s at 13k notes, and seconds of inode reads
            # after a reboot (a login's start); ``stat()`` hands it to the daemon.
            paths, self.seen = await asyncio.to_thread(restart.changed_since, self.vg)
            parse = parser(self.vault, self.vg.options) if self.parse_in_processes else None
            changes = await asyncio.to_thread(self.vg.read, paths, False, parse)
            read = changes[0]  # path -> the note now (None: gone)
            left = {p for p in self.vg.notes if p not in read} | {p for p, n in read.items() if n}
            self._refuse_empty(before, left, force)
            _, report = await self._apply(changes)
            self.startup = False
        else:
            self._refuse_empty(before, set(self.vg.notes), force)
            report = await self.sink.reconcile_all()
        self.synced = True
        now = {p: n.digest for p, n in self.vg.notes.items()}
        counts = await asyncio.to_thread(self.store.ledger.counts)
        return {
            "notes": len(now),
            "entities": counts["entities"],
            "relations": counts["relations"],
            "chunks": counts["chunks"],
            "added": sum(1 for p in now if p not in before),
            "changed": sum(1 for p, d in now.items() if p in before and before[p] != d),
            "removed": sum(1 for p in before if p not in now),
            "embedded": report.embedded,
            "seconds": round(time.perf_counter() - started, 3),
            "llm_calls": self.store.llm_calls,
            "read": self.vg.reads,
            "start": self.startup_reason,
            "graph": self.graph_from,
        }

    async def reload(self, options: VaultOptions | None = None) -> Index:
        """A fresh graph from the files (a full rebuild), on the same store."""
        vg = await asyncio.to_thread(VaultGraph.load, self.vault, options)
        return self.with_graph(vg)


def _sink(vg: VaultGraph, store: Store, extractor: Extractor | None) -> Sink:
    return Sink(vg, store, implicit=ImplicitIndex(extractor.cache if extractor else None))
