"""Shared fixtures: the shared real vaults, skipped with a reason when absent."""

from __future__ import annotations

import sys
from pathlib import Path

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
