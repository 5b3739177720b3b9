"""Shared fixtures: the shared real vaults, skipped with a reason when absent."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from wikid.sync.index import Index

sys.path.insert(0, str(Path(__file__).parent))

SHARED = Path(__file__).resolve().parents[2] / "shared" / "vaults"


def shared_vault(name: str) -> Path:
    path = SHARED / name
    if not path.is_dir():
        pytest.skip(
            f"shared vault {name!r} not found at {path} (it lives in ../shared, beside the checkout)"
        )
    return path


@pytest.fixture
def vaultofknowledge() -> Path:
    return shared_vault("vaultofknowledge")


@pytest.fixture
def tasks_docs() -> Path:
    return shared_vault("tasks-docs")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A real PostgreSQL 16 + pgvector on loopback for the whole session (see
    tests/pgserver.py); the tests that need it skip, with the reason, only when it
    cannot start."""
    from pgserver import start_or_reason

    server, reason = start_or_reason()
    if server is None:
        pytest.skip(reason)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def typed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Index, asyncio.AbstractEventLoop]]:
    """The typed vault (tests/typedvault.py), indexed once for the session."""
    import typedvault
    from storetools import unique_workspace

    from wikid.sync.index import Index

    tmp = tmp_path_factory.mktemp("typed")
    typedvault.generate(tmp / "vault")
    loop = asyncio.new_event_loop()
    idx = loop.run_until_complete(
        Index.open(tmp / "vault", tmp / "wd", workspace=unique_workspace())
    )
    loop.run_until_complete(idx.sync())
    try:
        yield idx, loop
    finally:
        loop.run_until_complete(idx.close())
        pending = asyncio.all_tasks(loop)  # LightRAG's idle workers: end them quietly
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
