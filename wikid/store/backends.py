"""Which storages each backend is made of, where its ledger lives, and what opening
one loads: the part of the store that names files and classes, apart from the
store's lifecycle (``rag.py``) so that a reader (export, relocation, migration)
finds a store's workspaces and files without LightRAG's constructor.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from lightrag.utils import Tokenizer

from wikid.config import BACKENDS
from wikid.store import postgres, sqlite_backend, tokens
from wikid.store.llm import import_client

sqlite_backend.register()

STORAGE_CLASSES = {
    # backend name (config.BACKENDS): (kv, vector, graph, doc_status)
    "sqlite": sqlite_backend.class_names(),
    "lightrag-files": (
        "JsonKVStorage",
        "NanoVectorDBStorage",
        "NetworkXStorage",
        "JsonDocStatusStorage",
    ),
    "postgres": postgres.CLASS_NAMES,
}
assert tuple(STORAGE_CLASSES) == BACKENDS
LEDGER_FILE = "wikid-ledger.sqlite"  # beside the stock files; the SQLite store holds its own


def ledger_file(backend: str) -> str:
    """The sqlite backend keeps the ledger in the store's own file: one transaction
    covers both."""
    if backend == "postgres":
        return postgres.LEDGER_FILE
    return sqlite_backend.DB_FILE if backend == "sqlite" else LEDGER_FILE


def find_workspaces(workdir: Path) -> dict[str, str]:
    """Workspaces under a working dir, with the backend each was built with."""
    found = {p.parent.name: "lightrag-files" for p in workdir.glob(f"*/{LEDGER_FILE}")}
    found |= {p.parent.name: "sqlite" for p in workdir.glob(f"*/{sqlite_backend.DB_FILE}")}
    found |= {p.parent.name: "postgres" for p in workdir.glob(f"*/{postgres.LEDGER_FILE}")}
    return found


def offline_tokenizer() -> Tokenizer:
    """LightRAG's token counter: MiniLM's WordPiece, not cl100k (``tokens``: 43 MB)."""
    return Tokenizer("minilm-wordpiece", tokens.LightRAGTokenizer())


def warm(backend: str, llm: bool = False) -> None:
    """Load, in the calling thread, what opening a store would otherwise load on the
    event loop: the tokenizer and the backend's storage modules, which
    LightRAG imports in its constructor (a 0.15-0.23 s stall measured), and with
    ``llm`` the HTTP client (0.1 s, else on the first question). One text is encoded
    too, as the first count would. The daemon calls it before it
    listens; ``Index.open`` again, in a worker thread, for every other caller (a
    second call finds all loaded)."""
    from lightrag import kg

    offline_tokenizer().encode("wikid")
    if llm:
        import_client()
    for name in STORAGE_CLASSES[backend]:
        importlib.import_module(kg.STORAGES[name], package="lightrag")
