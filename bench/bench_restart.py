"""Restart benchmark: what a start costs when the store already exists.

Run by hand: ``.venv/bin/python bench/bench_restart.py [--sizes 2000,13000] [--edits 100]``.
For each generated vault (bench/genvault.py): a cold index, then
- a restart with nothing changed (from the parse cache),
- a restart after ``--edits`` offline edits (each appends a sentence with a new link),
- the same restart forced to a full reconcile (what every start cost before the cache),
each timed from ``Index.open`` to the end of the first sync (what the daemon waits
for before READY=1), with the notes each one read from disk. Embedding is done by
a hash embedder (microseconds), so what is timed is wikid's own work; the real
model's cost for the edited texts comes on top (~27 ms per edit here).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from genvault import generate

from wikid.store.sqlite_backend import DB_FILE
from wikid.sync import restart
from wikid.sync.index import Index
from wikid.testing import HashEmbedder


def _age(files: list[Path], hours: float) -> None:
    """Old mtimes, as a real vault's files have (a fresh file is never trusted)."""
    old = time.time() - 3600 * hours
    for p in files:
        os.utime(p, (old, old))


async def _start(vault: Path, wd: Path, fake: HashEmbedder, full: bool = False) -> dict[str, Any]:
    if full:  # what every start did before the parse cache: forget the cache's fingerprint
        (db,) = wd.glob(f"*/{DB_FILE}")
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE meta SET value='' WHERE key=?", (restart.META_KEY,))
    t = time.perf_counter()
    idx = await Index.open(vault, wd, embedder=fake)
    try:
        report = await idx.sync()
    finally:
        await idx.close()
    report["wall"] = time.perf_counter() - t
    return report


async def one(n: int, edits: int) -> list[tuple[str, dict[str, Any]]]:
    with tempfile.TemporaryDirectory() as tmp:
        vault, wd = Path(tmp) / f"gen{n}", Path(tmp) / "wd"
        paths = generate(vault, n)
        _age(list(vault.rglob("*.md")), 2)
        fake = HashEmbedder()
        rows = [("cold index", await _start(vault, wd, fake))]
        rows.append(("restart, nothing changed", await _start(vault, wd, fake)))
        edited = [vault / paths[(i * 7919) % n] for i in range(edits)]
        for i, path in enumerate(edited):
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(f"\nOffline edit {i} mentions [[Bench {i}]].\n")
        _age(edited, 1.5)
        rows.append((f"restart after {edits} offline edits", await _start(vault, wd, fake)))
        for i, path in enumerate(edited):
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(f"\nSecond edit {i}.\n")
        _age(edited, 1)
        rows.append(("same, full reconcile (before)", await _start(vault, wd, fake, full=True)))
        assert rows[1][1]["start"] == "parse cache", rows[1][1]["start"]
        return rows


def main(sizes: list[int], edits: int) -> None:
    print(f"parse cache format {restart.FORMAT}; hash embedder; 2 cores")
    print(
        f"| {'notes':>6} | {'start':<36} | {'seconds':>8} | {'notes read':>10} | {'changed':>8} |"
    )
    print(f"|{'-' * 8}|{'-' * 38}|{'-' * 10}|{'-' * 12}|{'-' * 10}|")
    for n in sizes:
        for name, r in asyncio.run(one(n, edits)):
            notes = r["added"] + r["changed"] + r["removed"]
            print(f"| {n:>6} | {name:<36} | {r['wall']:>8.2f} | {r['read']:>10} | {notes:>8} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="2000,13000")
    ap.add_argument("--edits", type=int, default=100)
    a = ap.parse_args()
    main([int(s) for s in a.sizes.split(",")], a.edits)
