"""The ``postgres`` backend: LightRAG's own PostgreSQL storages, one workspace per vault.

Why LightRAG's storages and not ours: on a shared server the store must be
readable by stock LightRAG (its server, its WebUI, other teams' tools), and
PGKVStorage / PGDocStatusStorage / PGVectorStorage (pgvector) /
PGTableGraphStorage (plain tables; no Apache AGE needed) are what LightRAG
itself uses there. wikid only feeds them their settings and guards two traps:

- LightRAG reads its connection from ``POSTGRES_*`` variables (or a
  ``config.ini`` in the working directory); wikid sets them from
  ``WIKID_POSTGRES_URL`` and takes the password only from the environment
  (``WIKID_POSTGRES_PASSWORD`` or ``PGPASSWORD``), never from the URL or a file;
- ``POSTGRES_WORKSPACE`` silently overrides the workspace of every PG storage,
  which would put every vault into one workspace. wikid clears it with a
  warning, and refuses to start if a workspace still comes from elsewhere
  (``config.ini``).

The ledger (the mirror, pending keys, embedding and extraction caches, search
index, cost ledger) stays in a SQLite file beside the working dir: LightRAG's PG
storages commit each write on their own pooled connection, so no ledger placement
could make a batch one transaction with them; the ``pending`` protocol (invariant
7) makes batches convergent instead, as with the stock file storages.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

import structlog

CLASS_NAMES = ("PGKVStorage", "PGVectorStorage", "PGTableGraphStorage", "PGDocStatusStorage")
LEDGER_FILE = "wikid-ledger.postgres.sqlite"
URL_ENV = "WIKID_POSTGRES_URL"
PASSWORD_ENV = "WIKID_POSTGRES_PASSWORD"
RETRY_DEFAULTS = {
    "POSTGRES_CONNECTION_RETRIES": "1",
    "POSTGRES_CONNECTION_RETRY_BACKOFF": "0.5",
    "POSTGRES_CONNECTION_RETRY_BACKOFF_MAX": "2",
}

log = structlog.get_logger("wikid.store.postgres")


class PostgresConfigError(ValueError):
    """The postgres backend cannot be used as configured; the message says why."""


def configure(url: str | None) -> dict[str, str]:
    """Point LightRAG's PG storages at ``url``; return the settings (no password)."""
    if not url:
        raise PostgresConfigError(
            f"the postgres backend needs {URL_ENV}=postgresql://USER@HOST:PORT/DATABASE "
            f"(or postgres_url in the config); the password goes in {PASSWORD_ENV} or PGPASSWORD"
        )
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise PostgresConfigError(f"{URL_ENV} must start with postgresql://, not {parts.scheme}://")
    if parts.password:
        raise PostgresConfigError(
            f"{URL_ENV} holds a password; put it in {PASSWORD_ENV} (or PGPASSWORD) instead, "
            "so it never lands in a config file or a log"
        )
    settings = {
        "POSTGRES_HOST": parts.hostname or "localhost",
        "POSTGRES_PORT": str(parts.port or 5432),
        "POSTGRES_USER": urllib.parse.unquote(parts.username or "postgres"),
        "POSTGRES_DATABASE": urllib.parse.unquote(parts.path.lstrip("/")) or "postgres",
    }
    os.environ.update(settings)
    # LightRAG retries a lost connection for minutes (10 attempts, 3-30 s apart) inside
    # one storage call, which would hold a batch, and the daemon's status, hostage.
    # Worse, in 1.5.7 a retry while the pool is being re-created deadlocks:
    # ``_ensure_pool`` holds ``_pool_reconnect_lock`` around ``initdb``, whose retry
    # hook ``_before_sleep`` -> ``_reset_pool`` takes the same lock again. One attempt
    # per call avoids both; wikid retries whole batches itself (with backoff, showing
    # the outage in status). A user's own setting wins.
    for key, value in RETRY_DEFAULTS.items():
        os.environ.setdefault(key, value)
    password = os.environ.get(PASSWORD_ENV) or os.environ.get("PGPASSWORD")
    if password:
        os.environ["POSTGRES_PASSWORD"] = password
    else:  # LightRAG insists the variable exists; with trust or peer auth it is unused
        os.environ.setdefault("POSTGRES_PASSWORD", "")
    stray = os.environ.pop("POSTGRES_WORKSPACE", None)
    if stray:
        log.warning(
            "POSTGRES_WORKSPACE ignored: it would put every vault into one LightRAG "
            "workspace; wikid uses one workspace per vault",
            ignored=stray,
        )
    return settings


def check_workspace(storages: list[Any], wanted: str) -> None:
    """Refuse a store whose PG storages took their workspace from anywhere but wikid."""
    for storage in storages:
        db = getattr(storage, "db", None)
        forced = getattr(db, "workspace", None)
        if forced:
            raise PostgresConfigError(
                f"LightRAG's PostgreSQL workspace is forced to {forced!r} (a [postgres] "
                f"workspace in config.ini?); wikid needs its own workspace {wanted!r} per "
                "vault, or vaults would mix. Remove that setting."
            )


async def ids(storage: Any) -> list[str]:
    """Every id a PG KV, doc-status or vector storage holds in its workspace (LightRAG's
    PG storages have no "all keys" call; ``wikid export`` needs one)."""
    from lightrag.kg.postgres_impl import namespace_to_table_name

    table = getattr(storage, "table_name", None) or namespace_to_table_name(storage.namespace)
    rows = await storage.db.query(
        f"SELECT id FROM {table} WHERE workspace=$1", [storage.workspace], multirows=True
    )
    return sorted(str(r["id"]) for r in rows or [])
