"""Helpers shared by the graph tests: snapshots, delta replay, vault file operations."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from wikid.testing import Snapshot, assert_same, replay, snapshot

__all__ = ["Snapshot", "assert_same", "replay", "snapshot"]

def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def move(root: Path, src: str, dst: str) -> None:
    (root / dst).parent.mkdir(parents=True, exist_ok=True)
    os.rename(root / src, root / dst)
    prune(root, src)


def delete(root: Path, rel: str) -> None:
    path = root / rel
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    prune(root, rel)


def prune(root: Path, rel: str) -> None:
    """Remove folders left empty, as a file manager would."""
    parent = (root / rel).parent
    while parent != root and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent
