"""Shared fixtures: the shared real vaults, skipped with a reason when absent."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
