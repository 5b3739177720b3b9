"""Open a vault's index (graph + store + sink) and run one full sync.

Why one place: ``wikid index``, the daemon and the tests all open an index
the same way, so there is one definition of "the store for this vault".
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from wikid.core.graph import VaultGraph
from wikid.core.vault import VaultOptions
from wikid.store.cost import CostLedger
from wikid.store.embed import Embedder, default_embedder
from wikid.store.migrate import migrate, needs_migration
from wikid.store.rag import DEFAULT_BACKEND, Store, default_workdir, workspace_name
from wikid.sync.extract import ExtractionCache, Extractor, ExtractSettings, Job
from wikid.sync.implicit import ImplicitIndex
from wikid.sync.sink import BatchReport, Sink

log = structlog.get_logger("wikid.sync.index")


@dataclass
class Index:
    vault: Path
    vg: VaultGraph
    store: Store
    sink: Sink
    extractor: Extractor | None = None  # None: extraction is off
    skipped: int = 0  # chunks the salience filter kept from the LLM, last time it looked

    @classmethod
    async def open(
        cls,
        vault: Path,
        workdir: Path | None = None,
        *,
        options: VaultOptions | None = None,
        embedder: Embedder | None = None,
        backend: str = DEFAULT_BACKEND,
        llm_func: Any = None,
        workspace: str | None = None,
        extraction: ExtractSettings | None = None,
        postgres_url: str | None = None,
    ) -> Index:
        """Open (creating if needed) the store of ``vault`` and load its graph.

        LightRAG keeps each workspace's data in process-wide memory, so within one
        process a workspace name must always mean the same working dir."""
        vault = Path(vault)
        workdir = Path(workdir) if workdir else default_workdir(vault)
        workspace = workspace or workspace_name(vault)
        if backend == "sqlite" and needs_migration(workdir / workspace):
            counts = await asyncio.to_thread(migrate, workdir / workspace)
            log.info("store migrated from stock files to sqlite", **counts)
        store = Store(
            workdir,
            workspace,
            embedder or default_embedder(),
            backend=backend,
            llm_func=llm_func,
            postgres_url=postgres_url,
        )
        await store.open()
        vg = VaultGraph.load(vault, options)
        extractor = None
        if extraction is not None:
            db = store.ledger.database
            extractor = Extractor(ExtractionCache(db), CostLedger(db), extraction)
        return cls(vault, vg, store, _sink(vg, store, extractor), extractor)

    def with_graph(self, vg: VaultGraph) -> Index:
        """This index on graph ``vg``, with a fresh sink (its first reconcile rebuilds
        the implicit index from the extraction cache)."""
        sink = _sink(vg, self.store, self.extractor)
        return Index(self.vault, vg, self.store, sink, self.extractor)

    async def extract(self, limit: int | None = None) -> dict[str, Any]:
        """Send the chunks that need it (at most ``limit``) to the LLM, then write what
        came back as one batch. Returns what happened; with extraction off, nothing."""
        if self.extractor is None:
            return {}
        calls = self.extractor.calls
        jobs, more = self.extraction_jobs(limit)
        hashes = await self.extractor.run(jobs)
        report = await self.sink.apply_extracted(hashes)
        return {
            "sent": len(hashes),
            "calls": self.extractor.calls - calls,
            "skipped": self.skipped,
            "failed": len(self.extractor.failures),
            "writes": report.writes,
            "more": more,
        }

    def extraction_jobs(self, limit: int | None = None) -> tuple[list[Job], bool]:
        """Chunks to send now, at most ``limit``, and whether more are due (how many
        the salience filter skips is kept for status)."""
        if self.extractor is None:
            return [], False
        jobs, self.skipped = self.sink.extraction_jobs(self.extractor.settings.threshold)
        due = [j for j in jobs if self.extractor.due(j)]
        if limit is not None and len(due) > limit:
            return due[:limit], True
        return due, False

    def extraction_status(self) -> dict[str, Any]:
        if self.extractor is None:
            return {"enabled": False}
        ex = self.extractor
        llm = ex.settings.llm
        implicit = self.sink.implicit
        return {
            "enabled": True,
            "llm": llm.model if llm else None,
            "extracted_chunks": len(implicit.results),
            "waiting_chunks": len(implicit.missing) - self.skipped,
            "skipped_chunks": self.skipped,
            "failed_chunks": len(ex.failures),
            "last_error": ex.last_error,
            "calls": ex.calls,
            "threshold": ex.settings.threshold,
        }

    async def close(self) -> None:
        await self.store.close()

    async def sync(self) -> dict[str, Any]:
        """Full reconcile: first run indexes everything, later runs only what changed."""
        started = time.perf_counter()
        before = self.store.ledger.digests()
        report: BatchReport = await self.sink.reconcile_all()
        now = {p: n.digest for p, n in self.vg.notes.items()}
        counts = self.store.ledger.counts()
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
        }

    async def reload(self, options: VaultOptions | None = None) -> Index:
        """A fresh graph from the files (a full rebuild), on the same store."""
        vg = await asyncio.to_thread(VaultGraph.load, self.vault, options)
        return self.with_graph(vg)


def _sink(vg: VaultGraph, store: Store, extractor: Extractor | None) -> Sink:
    return Sink(vg, store, implicit=ImplicitIndex(extractor.cache if extractor else None))
