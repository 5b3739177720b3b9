"""The index's extraction side: which chunks go to the LLM, sending them, writing what
came back, and what ``status`` says of it.

Why apart: extraction is optional (off unless an LLM is configured) and runs
outside every sync batch, on its own loop (``server/extraction.py``); the sync
loop never calls it. A mixin of ``Index``: it uses the index's sink and
extractor, and with extraction off every method answers "nothing to do".
"""

from __future__ import annotations

from typing import Any

from wikid.sync.extract import Extractor, Job
from wikid.sync.sink import BatchReport, Sink


class Extracting:
    """The part of ``Index`` that drives optional LLM extraction."""

    sink: Sink
    extractor: Extractor | None
    skipped: int

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
        jobs, self.skipped = self.sink.jobs.pick(self.extractor.settings.threshold)
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

    def next_extraction_retry(self) -> float | None:
        return self.extractor.next_retry() if self.extractor else None

    async def run_extraction(self, jobs: list[Job]) -> set[str]:
        """The LLM calls for ``jobs`` (outside any batch); the hashes that came back."""
        return await self.extractor.run(jobs) if self.extractor else set()

    async def write_extracted(self, hashes: set[str]) -> BatchReport:
        """Write what extraction brought for ``hashes``: one batch."""
        return await self.sink.apply_extracted(hashes)
