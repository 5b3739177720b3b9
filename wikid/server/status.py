"""The ``status`` reply: what the daemon holds and does.

Why apart: it is the one op that must answer at every moment, before the vault
is loaded and while a batch runs, so it reads only counters and the graph's sizes
(the store's counts and cost totals are read after each write, in a thread), never
anything a batch holds.
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

from wikid.config import DEFAULT_EMBEDDING, VaultConfig
from wikid.core.cjk import has_cjk
from wikid.core.graph import VaultGraph
from wikid.server.log import Progress
from wikid.server.watcher import Watcher
from wikid.store.cost import CostLedger
from wikid.sync.index import Index


class Daemon(Protocol):
    """What the reply reads of the daemon (``wikid.server.daemon.Daemon``): a protocol,
    so this module does not import the daemon that imports it."""

    cfg: VaultConfig
    ready: bool
    serving: bool
    meaning_ready: bool
    phase: str
    progress: Progress
    busy: bool
    in_flight: int
    last_sync: float | None
    batches: int
    store_behind: bool
    last_error: str | None
    reindexing: bool
    vault_missing: bool
    embedding_hint: str | None
    started: float
    costs: CostLedger
    counts: dict[str, int]  # the store's, as of its last write
    cost_totals: dict[str, Any] | None  # the cost ledger's, likewise

    @property
    def loaded(self) -> Index | None: ...

    @property
    def watching(self) -> Watcher | None: ...

    def embedding(self) -> bool: ...


NO_COST = {"by_phase": [], "calls": 0, "input_tokens": 0, "output_tokens": 0, "cost": None}


CJK_SHARE = 0.5  # of the notes titled in CJK script, past which the shipped model is a poor fit


def embedding_hint(vg: VaultGraph, embedding: str) -> str | None:
    """A line for a vault mostly titled in Chinese, Japanese or Korean that runs the
    shipped model, which was trained on English (docs/languages.md): what to set.
    Titles stand for the notes' language: they are in memory, and cheap to read."""
    if embedding != DEFAULT_EMBEDDING or not vg.notes:
        return None
    share = sum(1 for n in vg.notes.values() if has_cjk(n.title)) / len(vg.notes)
    if share < CJK_SHARE:
        return None
    return (
        f"{share:.0%} of the notes are titled in Chinese, Japanese or Korean, and the "
        "embedding model understands English: set embedding to a multilingual ONNX model "
        "for meaning search (docs/languages.md)"
    )


MAX_CONFLICTS = 500  # listed in status; a vault with more has a sync problem to fix first


def conflicts(vg: VaultGraph) -> list[dict[str, Any]]:
    """Sync-conflict copies, oldest first (the one to resolve first), with the file
    each copies and whether that file still exists."""
    rows = []
    for path, original in list(vg.conflicts.items())[:MAX_CONFLICTS]:
        try:
            mtime = os.stat(vg.root / path).st_mtime
        except OSError:
            mtime = None
        exists = original in vg.notes or original in vg.attachments
        rows.append({"path": path, "original": original, "original_exists": exists, "mtime": mtime})
    return sorted(rows, key=lambda r: (r["mtime"] is None, r["mtime"] or 0, r["path"]))


def vector_search(idx: Index) -> dict[str, Any]:
    """Per vector namespace (the sqlite backend): its rows, and whether a query asks
    the HNSW graph or scans them (``store/_ann.py``)."""
    rag = idx.store.rag
    out = {}
    for vdb in (rag.chunks_vdb, rag.entities_vdb, rag.relationships_vdb):
        index = getattr(vdb, "_index", None)
        if index is not None and hasattr(index, "state"):
            out[vdb.namespace] = index.state()
    return out


def status_reply(d: Daemon) -> dict[str, Any]:
    """What the daemon holds and does; answered from the first moment (before the
    vault is loaded, with zeros), and never waits for a batch."""
    idx = d.loaded
    counts = d.counts
    return {
        "vault": str(d.cfg.path),
        "ready": d.ready,
        "serving": d.serving,
        "meaning_ready": d.meaning_ready,
        "phase": d.phase + (f": {d.progress.line()}" if d.embedding() and not d.ready else ""),
        "progress": d.progress.as_dict() if d.embedding() else None,
        "notes": len(idx.graph.notes) if idx else 0,
        "entities": counts["entities"],
        "relations": counts["relations"],
        "chunks": counts["chunks"],
        "queue": (d.watching.queued if d.watching else 0) + d.in_flight,
        "busy": d.busy,
        "lag_seconds": round(d.watching.lag, 3) if d.watching else 0.0,
        "last_sync": d.last_sync,
        "batches": d.batches,
        "rejected": idx.graph.problems if idx else {},
        "conflicts": conflicts(idx.graph) if idx else [],
        "store": {
            "backend": d.cfg.store,
            "workdir": str(d.cfg.workdir),
            "behind": d.store_behind,
            "last_error": d.last_error,
            "vector_search": vector_search(idx) if idx else {},
        },
        "embedding_model": idx.model_id if idx else None,
        **({"embedding_hint": d.embedding_hint} if d.embedding_hint else {}),
        "llm_calls": idx.llm_calls if idx else 0,
        "llm": {"configured": d.cfg.llm() is not None, "model": d.cfg.llm_model},
        "extraction": idx.extraction_status() if idx else {"enabled": False},
        "cost": d.cost_totals or NO_COST,
        "reindexing": d.reindexing,
        "vault_missing": d.vault_missing,
        "watcher": {
            "alive": d.watching.alive if d.watching else False,
            "last_event": d.watching.last_event if d.watching else None,
            # the OS dropped events this many times (each one rescanned the vault)
            "overflows": d.watching.overflows if d.watching else 0,
            "last_overflow": d.watching.last_overflow if d.watching else None,
        },
        "uptime_seconds": round(time.time() - d.started, 1),
        "pid": os.getpid(),
    }
