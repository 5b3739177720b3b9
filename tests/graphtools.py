"""Helpers shared by the graph tests: snapshots, delta replay, vault file operations."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from wikid.core.delta import Delta
from wikid.core.graph import VaultGraph

Snapshot = tuple[dict[str, dict[str, Any]], dict[tuple[str, str, str], dict[str, Any]]]


def snapshot(vg: VaultGraph) -> Snapshot:
    nodes = {n: dict(d) for n, d in vg.g.nodes(data=True)}
    edges = {(u, v, k): dict(d) for u, v, k, d in vg.g.edges(keys=True, data=True)}
    return nodes, edges


def replay(before: Snapshot, delta: Delta) -> Snapshot:
    """What a consumer that only sees deltas would hold afterwards."""
    nodes = {n: dict(d) for n, d in before[0].items()}
    edges = {k: dict(d) for k, d in before[1].items()}
    for n in delta.nodes_removed:
        nodes.pop(n)
    nodes.update(delta.nodes_added)
    nodes.update(delta.nodes_changed)
    for e in delta.edges_removed:
        edges.pop(e)
    edges.update(delta.edges_added)
    edges.update(delta.edges_changed)
    return nodes, edges


def assert_same(a: Snapshot, b: Snapshot) -> None:
    """Equal node for node and edge for edge, with a readable first difference."""
    for n in sorted(set(a[0]) | set(b[0])):
        assert a[0].get(n) == b[0].get(n), f"node {n!r}: {a[0].get(n)} != {b[0].get(n)}"
    for e in sorted(set(a[1]) | set(b[1])):
        assert a[1].get(e) == b[1].get(e), f"edge {e!r}: {a[1].get(e)} != {b[1].get(e)}"


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
